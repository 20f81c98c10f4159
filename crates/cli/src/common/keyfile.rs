//! Reading a key file for `serve --auth-keys` and `run --auth`: a missing file is a usage error with the
//! path in it, and a file that others may read is accepted with a warning, since a leaked secret is the
//! one way around the challenge-response.

use crate::common::UsageError;
use anyhow::Result;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub fn read(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read key file {}: {e}", path.display())))?;
    if let Ok(meta) = std::fs::metadata(path) {
        if meta.permissions().mode() & 0o077 != 0 {
            eprintln!(
                "landspeed: warning: key file {} can be read by other users; `chmod 600` it",
                path.display()
            );
        }
    }
    Ok(text)
}
