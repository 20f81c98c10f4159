//! The disk side of disk-to-disk tests, on Linux's copy-free paths: the sender's data goes from the
//! page cache to the socket with sendfile(2), the receiver's from the socket through a pipe into its file
//! with splice(2), so neither end copies the file through user space. Before sending, the sender reads
//! and hashes the whole file with O_DIRECT (its disk's read rate, not the page cache's, where the file
//! system allows it); after the last byte, the receiver fsyncs and reads its copy back the same way to
//! hash what really landed. The digests are compared in the result (landspeed-core's files module).

use landspeed_core::files::FileReport;
use sha2::{Digest, Sha256};
use std::fs::{File, OpenOptions};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// Reads in 4 MiB aligned blocks (O_DIRECT needs the buffer, offset and length aligned).
const BLOCK: usize = 4 << 20;
const ALIGN: usize = 4096;

/// A buffer aligned for O_DIRECT.
struct Aligned {
    raw: Vec<u8>,
    start: usize,
}

impl Aligned {
    fn new(len: usize) -> Aligned {
        let raw = vec![0u8; len + ALIGN];
        let start = raw.as_ptr().align_offset(ALIGN);
        Aligned { raw, start }
    }
    fn buf(&mut self) -> &mut [u8] {
        let s = self.start;
        &mut self.raw[s..s + BLOCK]
    }
}

use crate::os::open_direct;

/// The file's size and SHA-256, read from disk; with the seconds it took and whether it was O_DIRECT.
pub fn hash_file(path: &Path) -> std::io::Result<(u64, String, f64, bool)> {
    let t = Instant::now();
    let (mut f, direct) = open_direct(path)?;
    let mut buf = Aligned::new(BLOCK);
    let mut h = Sha256::new();
    let mut size = 0u64;
    loop {
        let n = match f.read(buf.buf()) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        h.update(&buf.buf()[..n]);
        size += n as u64;
    }
    Ok((size, hex::encode(h.finalize()), t.elapsed().as_secs_f64(), direct))
}

/// The sender's report, from its read-and-hash pass.
pub fn sender_report(path: &Path) -> std::io::Result<FileReport> {
    let (size, sha, secs, direct) = hash_file(path)?;
    Ok(FileReport {
        path: path.display().to_string(),
        size_bytes: size,
        sha256_hex: sha,
        read_s: secs,
        fsync_s: None,
        verify_read_s: None,
        direct_io: direct,
    })
}

/// One sendfile(2) of up to `n` bytes of `file` from `offset` into the (non-blocking) socket (on
/// Windows: read and written).
pub use crate::os::send_chunk;

/// socket -> pipe -> file with splice(2): the receiver's copy-free path (on Windows: a buffer).
pub use crate::os::Splicer;

/// A file being received: written under a temporary name beside its destination (`.NAME.landspeed-part`)
/// and renamed into place only when its digest matches the sender's, so a failed or corrupted transfer
/// never replaces an existing file. Removed when the test fails before the verdict.
pub struct Incoming {
    /// Where the file goes once its digest matches.
    pub dest: PathBuf,
    /// The temporary file written meanwhile (`.NAME.landspeed-part` beside it).
    pub part: PathBuf,
    /// The open temporary file, shared with the stream that writes it.
    pub handle: Arc<File>,
    settled: bool,
}

impl Incoming {
    /// Opens the temporary file beside `dest` (its directory must exist).
    pub fn create(dest: &Path) -> std::io::Result<Incoming> {
        let name = dest
            .file_name()
            .ok_or_else(|| std::io::Error::other("no file name"))?
            .to_string_lossy();
        let part = dest.with_file_name(format!(".{name}.landspeed-part"));
        let handle = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&part)?;
        Ok(Incoming {
            dest: dest.to_path_buf(),
            part,
            handle: Arc::new(handle),
            settled: false,
        })
    }

    /// This end's report (fsync, read back, hash), naming the destination.
    pub fn report(&self) -> std::io::Result<FileReport> {
        let mut r = receiver_report(&self.part, &self.handle)?;
        r.path = self.dest.display().to_string();
        Ok(r)
    }

    /// The sender's report is known: the copy takes its name when the digests and sizes agree; otherwise
    /// it stays aside and the answer says where.
    pub fn settle(&mut self, mine: &FileReport, sender: Option<&FileReport>) -> Result<(), String> {
        self.settled = true;
        let same = sender.is_some_and(|s| s.sha256_hex == mine.sha256_hex && s.size_bytes == mine.size_bytes);
        if same {
            std::fs::rename(&self.part, &self.dest)
                .map_err(|e| format!("cannot move the received file into place: {e}"))
        } else {
            Err(format!(
                "the received copy does not match the sender's; it is kept as {} and {} was not touched",
                self.part.display(),
                self.dest.display()
            ))
        }
    }
}

impl Drop for Incoming {
    fn drop(&mut self) {
        if !self.settled {
            let _ = std::fs::remove_file(&self.part);
        }
    }
}

/// After the last byte: fsync, then read the copy back from disk and hash it.
pub fn receiver_report(path: &Path, file: &File) -> std::io::Result<FileReport> {
    let t = Instant::now();
    file.sync_all()?;
    let fsync_s = t.elapsed().as_secs_f64();
    #[cfg(feature = "fault-injection")]
    fault::corrupt(file)?;
    // Drop the cached pages so the read-back comes from the disk (advice only; ignored by tmpfs).
    crate::os::drop_cache(file);
    let (size, sha, secs, direct) = hash_file(path)?;
    Ok(FileReport {
        path: path.display().to_string(),
        size_bytes: size,
        sha256_hex: sha,
        read_s: 0.0,
        fsync_s: Some(fsync_s),
        verify_read_s: Some(secs),
        direct_io: direct,
    })
}

#[cfg(feature = "fault-injection")]
mod fault {
    use std::os::unix::fs::FileExt;

    /// Test-only: `LANDSPEED_FAULT_FILE_FLIP=OFFSET` flips one byte of the received file on disk after
    /// the fsync, as a failing disk would, so the tests can prove the read-back check catches it.
    pub(super) fn corrupt(file: &std::fs::File) -> std::io::Result<()> {
        let Some(off) = std::env::var("LANDSPEED_FAULT_FILE_FLIP")
            .ok()
            .and_then(|v| v.parse::<u64>().ok())
        else {
            return Ok(());
        };
        let mut b = [0u8; 1];
        if file.read_at(&mut b, off)? == 1 {
            b[0] ^= 0x5a;
            file.write_at(&b, off)?;
            file.sync_all()?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashing_matches_a_plain_digest_for_sizes_around_the_block() {
        let dir = std::env::temp_dir().join(format!("landspeed-files-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for size in [0usize, 1, 4095, 4096, BLOCK + 7] {
            let p = dir.join(format!("f{size}"));
            let data: Vec<u8> = (0..size).map(|i| (i * 7 + 3) as u8).collect();
            std::fs::write(&p, &data).unwrap();
            let (n, sha, _, _) = hash_file(&p).unwrap();
            assert_eq!(n, size as u64);
            assert_eq!(sha, hex::encode(Sha256::digest(&data)));
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
