//! Reading a key file for `serve --auth-keys` and `run --auth` (and iperf3's RSA private key): a missing
//! file is a usage error with the path in it, and so is a file that its group or others may read (as
//! OpenSSH refuses such a private key), since a leaked secret is the one way around the
//! authentication; the error gives the `chmod` that fixes it. "May read" counts the directories on
//! the way: a file with group or other bits in a directory they cannot pass (pScheduler's iperf3
//! tool writes its key 644 into its runner's private 700 directory) is private all the same. A weak
//! secret is refused with the command that makes a good one.

use crate::common::UsageError;
use anyhow::Result;
use std::path::Path;

pub fn read(path: &Path) -> Result<String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| UsageError(format!("cannot read key file {}: {e}", path.display())))?;
    if let Some(mode) = exposed(path) {
        return Err(UsageError(format!(
            "key file {} can be read by its group or others (mode {mode:03o}, in directories they \
             can pass); `chmod 600 {}` and try again",
            path.display(),
            path.display()
        ))
        .into());
    }
    Ok(text)
}

/// The file's mode when its group or others have any access to it and can reach it: every directory
/// above it lets them pass (the group through its group or other bit, others through the other bit).
fn exposed(path: &Path) -> Option<u32> {
    let mode = crate::common::sys::mode(path)? & 0o777;
    let full = std::fs::canonicalize(path).ok()?;
    let dirs: Vec<u32> = full
        .ancestors()
        .skip(1)
        .filter_map(crate::common::sys::mode)
        .collect();
    let group = mode & 0o070 != 0 && dirs.iter().all(|d| d & 0o011 != 0);
    let others = mode & 0o007 != 0 && dirs.iter().all(|d| d & 0o001 != 0);
    (group || others).then_some(mode)
}

/// A key file's error in the command line's words (`flag` is what comes before the path, e.g.
/// "--auth NAME:"): a weak secret names `landspeed keygen`.
pub fn error(flag: &str, path: &Path, e: &landspeed_proto::AuthError) -> UsageError {
    let hint = match e {
        landspeed_proto::AuthError::WeakSecret { name, .. } => {
            format!("; `landspeed keygen {name}` makes a good one")
        }
        _ => String::new(),
    };
    UsageError(format!("{flag}{}: {e}{hint}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn chmod(p: &Path, mode: u32) {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
    }

    #[test]
    fn a_key_others_can_reach_and_read_is_refused_one_in_a_private_directory_is_not() {
        let top = std::env::temp_dir().join(format!("landspeed-keyfile-{}", std::process::id()));
        let dir = top.join("runner");
        std::fs::create_dir_all(&dir).unwrap();
        chmod(&top, 0o755);
        let key = dir.join("private-key");
        std::fs::write(&key, "secret").unwrap();
        for (dir_mode, key_mode, refused) in [
            (0o755, 0o644, true),
            (0o755, 0o640, true),
            (0o755, 0o600, false),
            // pScheduler's iperf3 tool: the key 644 in its runner's 700 temporary directory.
            (0o700, 0o644, false),
            // The group may pass (g+x) and read (g+r).
            (0o710, 0o640, true),
            // Only the group may read; a member of it outside the directory's group passes by the
            // other bit: counted as exposed (the check leans to refusing).
            (0o701, 0o640, true),
        ] {
            chmod(&dir, dir_mode);
            chmod(&key, key_mode);
            assert_eq!(read(&key).is_err(), refused, "dir {dir_mode:o}, key {key_mode:o}");
        }
        let _ = std::fs::remove_dir_all(&top);
    }
}
