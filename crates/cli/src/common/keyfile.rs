//! Reading a key file for `serve --auth-keys` and `run --auth`: a missing file is a usage error with the
//! path in it, and so is a file that its group or others may read (as OpenSSH refuses such a private
//! key), since a leaked secret is the one way around the authentication; the error gives the `chmod`
//! that fixes it. A weak secret is refused with the command that makes a good one.

use crate::common::UsageError;
use anyhow::Result;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

pub fn read(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read key file {}: {e}", path.display())))?;
    if let Ok(meta) = std::fs::metadata(path) {
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 != 0 {
            return Err(UsageError(format!(
                "key file {} can be read by its group or others (mode {mode:03o}); `chmod 600 {}` and \
                 try again",
                path.display(),
                path.display()
            ))
            .into());
        }
    }
    Ok(text)
}

/// A key file's error in the command line's words (`flag` is what comes before the path, e.g.
/// "--auth NAME:"): a weak secret names `landspeed keygen`.
pub fn error(flag: &str, path: &Path, e: &landspeed_core::protocol::AuthError) -> UsageError {
    let hint = match e {
        landspeed_core::protocol::AuthError::WeakSecret { name, .. } => {
            format!("; `landspeed keygen {name}` makes a good one")
        }
        _ => String::new(),
    };
    UsageError(format!("{flag}{}: {e}{hint}", path.display()))
}
