//! `landspeed --version`, `completions` and the man pages: what a user pastes into a bug report (the
//! version, the commit, the target it was built for, the kernel, the features built in and which data
//! paths it offers), and the shell completions and man
//! pages generated from the same clap definitions as `--help`.

use anyhow::{Context, Result};
use clap::Args;
use std::path::PathBuf;

/// One line: version, commit, the target built for, the kernel, the features built in, and the data
/// paths this kernel offers.
pub fn line() -> String {
    use landspeed_engine::platform;
    let caps: Vec<String> = landspeed_engine::capabilities::probe()
        .iter()
        .map(|c| format!("{} {}", c.name, if c.available { "yes" } else { "no" }))
        .collect();
    let (_, system, release) = landspeed_engine::os::uname();
    let paths = if caps.is_empty() {
        String::new()
    } else {
        format!("; data paths: {}", caps.join(", "))
    };
    format!(
        "landspeed {} ({}; built for {}{}; {system} {release} {}); built in: {}{paths}",
        landspeed_core::SOFTWARE_VERSION,
        env!("LANDSPEED_COMMIT"),
        platform::TARGET,
        if platform::STATIC { ", static" } else { "" },
        std::env::consts::ARCH,
        platform::built_in().join(", "),
    )
}

/// True when the command line is only `--version` or `-V`.
pub fn asked(args: &[String]) -> bool {
    args.len() == 2 && matches!(args[1].as_str(), "--version" | "-V")
}

#[derive(Args, Debug)]
pub struct CompletionsArgs {
    /// The shell to complete for.
    #[arg(value_enum)]
    pub shell: clap_complete::Shell,
}

/// `landspeed completions SHELL`: the completion script on stdout.
/// `cmd` is the whole command line's definition, handed in by `main`.
pub fn completions(a: CompletionsArgs, mut cmd: clap::Command) -> Result<bool> {
    clap_complete::generate(a.shell, &mut cmd, "landspeed", &mut std::io::stdout());
    Ok(true)
}

#[derive(Args, Debug)]
pub struct ManArgs {
    /// Directory to write landspeed.1 and one landspeed-COMMAND.1 per command into.
    pub dir: PathBuf,
}

/// `landspeed man DIR`: the man pages, one per command and subcommand (landspeed-wan-up.1).
/// `cmd` is the whole command line's definition, handed in by `main`.
pub fn man(a: ManArgs, cmd: clap::Command) -> Result<bool> {
    std::fs::create_dir_all(&a.dir).with_context(|| format!("cannot create {}", a.dir.display()))?;
    let cmd = cmd.version(landspeed_core::SOFTWARE_VERSION);
    write_pages(&a.dir, "landspeed", &cmd)?;
    Ok(true)
}

/// The page of `cmd` under `name`, then one per visible subcommand, depth first.
fn write_pages(dir: &std::path::Path, name: &str, cmd: &clap::Command) -> Result<()> {
    let page = cmd
        .clone()
        .name(name.to_string())
        .version(landspeed_core::SOFTWARE_VERSION);
    write_page(dir, name, page)?;
    for sub in cmd.get_subcommands().filter(|s| !s.is_hide_set()) {
        write_pages(dir, &format!("{name}-{}", sub.get_name()), sub)?;
    }
    Ok(())
}

fn write_page(dir: &std::path::Path, name: &str, cmd: clap::Command) -> Result<()> {
    let mut buf = Vec::new();
    clap_mangen::Man::new(cmd).render(&mut buf)?;
    let path = dir.join(format!("{name}.1"));
    std::fs::write(&path, buf).with_context(|| format!("cannot write {}", path.display()))
}
