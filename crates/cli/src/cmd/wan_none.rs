//! `landspeed wan` where the WAN emulator is not built (it needs Linux's network namespaces, TUN
//! devices and traffic control): the command is still listed, and refused with one line naming the
//! alternative, whatever its arguments.

use landspeed_engine::platform::require;

/// Whatever `landspeed wan` was given.
#[derive(clap::Args, Debug)]
pub struct WanArgs {
    /// The subcommand and its options, as on Linux (refused here).
    #[arg(trailing_var_arg = true, allow_hyphen_values = true, num_args = 0..)]
    pub args: Vec<String>,
}

/// Refuses: no emulator on this platform.
pub fn wan(_a: WanArgs) -> anyhow::Result<bool> {
    require("WAN emulator")?;
    Ok(true)
}
