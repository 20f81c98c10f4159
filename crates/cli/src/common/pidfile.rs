//! A pid file, as daemons and iperf3 (`-I`) keep one: the process id written when the program is up,
//! the file removed when it ends, and a second instance refused while the first still runs, so that a
//! script's `kill $(cat FILE)` reaches the right process and never a stranger.

use anyhow::Result;
use std::path::{Path, PathBuf};

/// The file holding this process's id; removed when dropped.
pub struct PidFile(PathBuf);

/// Why a pid file was not written.
#[derive(Debug, thiserror::Error)]
pub enum PidFileError {
    /// The file names a process that is still running.
    #[error("{path}: another instance appears to be running (process {pid})")]
    Running {
        /// The file.
        path: String,
        /// The process it names.
        pid: i32,
    },
    /// The file cannot be written.
    #[error("{path}: {err}")]
    Write {
        /// The file.
        path: String,
        /// The system's reason.
        err: std::io::Error,
    },
}

impl PidFile {
    /// Writes this process's id to `path` (no newline, as iperf3 writes it), unless the file names
    /// another process that is alive.
    pub fn write(path: &Path) -> Result<PidFile, PidFileError> {
        let shown = path.display().to_string();
        let me = std::process::id() as i32;
        let old = std::fs::read_to_string(path).ok();
        if let Some(pid) = old.and_then(|t| t.trim().parse::<i32>().ok()) {
            if pid > 0 && pid != me && alive(pid) {
                return Err(PidFileError::Running { path: shown, pid });
            }
        }
        std::fs::write(path, me.to_string()).map_err(|err| PidFileError::Write { path: shown, err })?;
        Ok(PidFile(path.to_path_buf()))
    }
}

use crate::common::sys::alive;

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn written_refused_while_its_process_lives_and_removed_when_dropped() {
        let dir = std::env::temp_dir().join(format!("landspeed-pidfile-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("p.pid");
        // A file naming a process that is gone is replaced.
        std::fs::write(&path, "2147483646").unwrap();
        let p = PidFile::write(&path).unwrap();
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            std::process::id().to_string()
        );
        drop(p);
        assert!(!path.exists());
        // One naming a live process (pid 1) is not touched.
        std::fs::write(&path, "1").unwrap();
        let e = PidFile::write(&path).err().expect("refused");
        assert!(e.to_string().contains("another instance"), "{e}");
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "1");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
