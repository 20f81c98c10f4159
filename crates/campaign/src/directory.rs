//! Sending a directory (`run --send-file DIR`): every regular file of the directory (not its
//! subdirectories), in name order, one disk-to-disk test each; a file that fails does not stop the
//! others, and the campaign ends with each file's verdict.

use std::fmt::Display;
use std::path::{Path, PathBuf};

/// Why a directory cannot be sent.
#[derive(Debug, thiserror::Error)]
pub enum DirectoryError {
    /// The directory could not be listed.
    #[error("{dir}: {err}")]
    Read {
        /// The directory, as given.
        dir: String,
        /// Why not.
        err: std::io::Error,
    },
    /// The directory holds no regular file.
    #[error("{dir}: no regular files in it")]
    Empty {
        /// The directory, as given.
        dir: String,
    },
}

/// The regular files of `dir`, in name order.
pub fn files(dir: &Path) -> Result<Vec<PathBuf>, DirectoryError> {
    let shown = || dir.display().to_string();
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map_err(|err| DirectoryError::Read { dir: shown(), err })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_file())
        .collect();
    files.sort();
    if files.is_empty() {
        return Err(DirectoryError::Empty { dir: shown() });
    }
    Ok(files)
}

/// What became of one file.
#[derive(Debug, Clone, PartialEq)]
pub struct FileVerdict {
    /// The file.
    pub path: PathBuf,
    /// True when the file arrived and was verified; an error's words when its test failed.
    pub outcome: Result<bool, String>,
}

impl FileVerdict {
    /// The file arrived, verified.
    pub fn ok(&self) -> bool {
        self.outcome == Ok(true)
    }
}

/// Sends every file with `send` (one test each, true when its result is trusted), telling `observe`
/// each verdict as it comes; returns them all in order.
pub fn send_each<E: Display>(
    files: &[PathBuf],
    send: &mut dyn FnMut(&Path) -> Result<bool, E>,
    observe: &mut dyn FnMut(&FileVerdict),
) -> Vec<FileVerdict> {
    files
        .iter()
        .map(|f| {
            let v = FileVerdict {
                path: f.clone(),
                outcome: send(f).map_err(|e| e.to_string()),
            };
            observe(&v);
            v
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_regular_file_in_name_order_and_a_failure_does_not_stop_the_rest() {
        let dir = std::env::temp_dir().join(format!("landspeed-campaign-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("sub")).unwrap();
        assert!(matches!(files(&dir), Err(DirectoryError::Empty { .. })));
        for name in ["b", "a", "c"] {
            std::fs::write(dir.join(name), name).unwrap();
        }
        let list = files(&dir).unwrap();
        let names: Vec<_> = list.iter().map(|p| p.file_name().unwrap().to_owned()).collect();
        assert_eq!(names, ["a", "b", "c"]);
        let mut heard = vec![];
        let verdicts = send_each(
            &list,
            &mut |p| match p.file_name().unwrap().to_str().unwrap() {
                "a" => Err("refused"),
                "b" => Ok(false),
                _ => Ok(true),
            },
            &mut |v| heard.push(v.clone()),
        );
        assert_eq!(heard, verdicts);
        let outcomes: Vec<_> = verdicts.iter().map(|v| v.outcome.clone()).collect();
        assert_eq!(outcomes, [Err("refused".to_string()), Ok(false), Ok(true)]);
        assert_eq!(verdicts.iter().filter(|v| v.ok()).count(), 1);
        assert!(matches!(
            files(&dir.join("missing")),
            Err(DirectoryError::Read { .. })
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
