//! The server's side of disk-to-disk tests: only with `serve --files DIR`, only plain names inside DIR.
//! An upload is written to DIR/NAME (replacing it); a download is read and hashed first, and the test's
//! byte count becomes the file's size on this end. After the transfer the receiving server fsyncs and
//! reads its copy back; the report goes to the client with the results.

use landspeed_core::config::{Direction, EndCondition, Test};
use landspeed_core::files::{check_name, FileReport, FileSpec};
use std::sync::Arc;

pub(crate) struct ServerFile {
    pub handle: Arc<std::fs::File>,
    /// Download: the read-and-hash pass.
    sent: Option<FileReport>,
    /// Upload: the file being received (renamed into place when it matches the client's digest).
    incoming: Option<landspeed_engine::files::Incoming>,
}

impl ServerFile {
    /// This end's report once the streams are done and the client's report (with its digest) is in,
    /// and a warning when the received copy was kept aside.
    pub(crate) fn report(self, client: Option<&FileReport>) -> Result<(FileReport, Option<String>), String> {
        match (self.sent, self.incoming) {
            (Some(r), _) => Ok((r, None)),
            (None, Some(mut inc)) => {
                let r = inc
                    .report()
                    .map_err(|e| format!("file {}: {e}", inc.dest.display()))?;
                let kept = inc.settle(&r, client).err();
                Ok((r, kept))
            }
            (None, None) => Err("no file".into()),
        }
    }
}

/// Opens the test's file, or says why not (sent to the client as the refusal).
pub(crate) fn open(
    f: &FileSpec,
    spec: &mut Test,
    o: &crate::host::ServerOptions,
) -> Result<ServerFile, String> {
    let dir = o
        .files_dir
        .as_ref()
        .ok_or("this server takes no file transfers (it has no file directory)")?;
    check_name(&f.name)?;
    let path = dir.join(&f.name);
    if spec.direction == Direction::Reverse {
        let sent =
            landspeed_engine::files::sender_report(&path).map_err(|e| format!("file {}: {e}", f.name))?;
        if sent.size_bytes == 0 {
            return Err(format!("file {} is empty", f.name));
        }
        if let Some(max) = o.limits.max_bytes {
            if sent.size_bytes > max {
                return Err(format!(
                    "file {} is {} bytes, more than this server's byte limit ({max})",
                    f.name, sent.size_bytes
                ));
            }
        }
        let handle = std::fs::File::open(&path).map_err(|e| format!("file {}: {e}", f.name))?;
        *spec = spec
            .changed(|s| s.end = EndCondition::Bytes(sent.size_bytes))
            .map_err(|e| format!("file {}: {e}", f.name))?;
        return Ok(ServerFile {
            handle: Arc::new(handle),
            sent: Some(sent),
            incoming: None,
        });
    }
    let inc =
        landspeed_engine::files::Incoming::create(&path).map_err(|e| format!("file {}: {e}", f.name))?;
    Ok(ServerFile {
        handle: inc.handle.clone(),
        sent: None,
        incoming: Some(inc),
    })
}
