//! `landspeed keygen NAME`: a key for `serve --auth-keys` and `run --auth`, made from the operating
//! system's random source, so that nobody has to invent a secret (a weak one is refused when a key
//! file is read). It prints the key file line, or appends it to a file it creates readable by its owner
//! only.

use crate::common::UsageError;
use anyhow::{Context, Result};
use clap::Args;
use std::io::Write;
use std::path::PathBuf;

#[derive(Args, Debug)]
pub struct KeygenArgs {
    /// The key's name: the server's log names it, and clients say it (`run --auth NAME:FILE`).
    pub name: String,
    /// Append the line to FILE (created with mode 600; refused if others can read it) instead of
    /// printing it.
    #[arg(long, value_name = "FILE")]
    pub append: Option<PathBuf>,
}

/// Random bytes in a key: 256 bits, written as 64 hex digits.
const KEY_BYTES: usize = 32;

pub fn keygen(a: KeygenArgs) -> Result<bool> {
    let mut secret = [0u8; KEY_BYTES];
    getrandom::fill(&mut secret).map_err(|e| anyhow::anyhow!("the random source failed: {e}"))?;
    let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
    let line = format!("{} {hex}\n", a.name);
    // The same checks a key file's line gets when it is read.
    landspeed_proto::KeyRing::parse(&line).map_err(|e| UsageError(format!("keygen {}: {e}", a.name)))?;
    match &a.append {
        None => out!("{line}"),
        Some(path) => append(path, &line)?,
    }
    Ok(true)
}

fn append(path: &std::path::Path, line: &str) -> Result<()> {
    if let Some(mode) = crate::common::sys::mode(path) {
        if mode & 0o077 != 0 {
            return Err(UsageError(format!(
                "{} can be read by other users; `chmod 600 {}` first",
                path.display(),
                path.display()
            ))
            .into());
        }
    }
    let mut f = crate::common::sys::append_private(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    f.write_all(line.as_bytes())
        .with_context(|| format!("cannot write {}", path.display()))?;
    errln!(
        "landspeed: key '{}' appended to {}",
        line.split(' ').next().unwrap_or_default(),
        path.display()
    );
    Ok(())
}
