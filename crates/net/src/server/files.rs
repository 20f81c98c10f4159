//! The server's side of disk-to-disk tests: only with `serve --files DIR`, only plain names inside DIR.
//! An upload is written to DIR/NAME (replacing it); a download is read and hashed first, and the test's
//! byte count becomes the file's size on this end. After the transfer the receiving server fsyncs and
//! reads its copy back; the report goes to the client with the results.

use landspeed_core::config::{Direction, EndCondition, TestSpec};
use landspeed_core::files::{check_name, FileReport, FileSpec};
use std::path::PathBuf;
use std::sync::Arc;

pub(super) struct ServerFile {
    pub handle: Arc<std::fs::File>,
    path: PathBuf,
    /// Download: the read-and-hash pass; upload: None until received.
    sent: Option<FileReport>,
}

impl ServerFile {
    /// This end's report once the streams are done.
    pub fn report(self) -> Result<FileReport, String> {
        match self.sent {
            Some(r) => Ok(r),
            None => crate::files::receiver_report(&self.path, &self.handle)
                .map_err(|e| format!("file {}: {e}", self.path.display())),
        }
    }
}

/// Opens the test's file, or says why not (sent to the client as the refusal).
pub(super) fn open(
    f: &FileSpec,
    spec: &mut TestSpec,
    o: &super::ServerOptions,
) -> Result<ServerFile, String> {
    let dir = o
        .files_dir
        .as_ref()
        .ok_or("this server takes no file transfers (it needs serve --files DIR)")?;
    check_name(&f.name)?;
    let path = dir.join(&f.name);
    if spec.direction == Direction::Reverse {
        let sent = crate::files::sender_report(&path).map_err(|e| format!("file {}: {e}", f.name))?;
        if sent.size_bytes == 0 {
            return Err(format!("file {} is empty", f.name));
        }
        if let Some(max) = o.limits.max_bytes {
            if sent.size_bytes > max {
                return Err(format!(
                    "file {} is {} bytes, more than this server's --max-bytes ({max})",
                    f.name, sent.size_bytes
                ));
            }
        }
        let handle = std::fs::File::open(&path).map_err(|e| format!("file {}: {e}", f.name))?;
        spec.end = EndCondition::Bytes(sent.size_bytes);
        return Ok(ServerFile {
            handle: Arc::new(handle),
            path,
            sent: Some(sent),
        });
    }
    let handle = crate::files::create(&path).map_err(|e| format!("file {}: {e}", f.name))?;
    Ok(ServerFile {
        handle: Arc::new(handle),
        path,
        sent: None,
    })
}
