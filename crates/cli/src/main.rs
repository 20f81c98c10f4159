//! The `landspeed` binary: parses the command line, runs the command, renders the result with the
//! report crate, and maps failures to exit codes (0 ok, 1 runtime failure, 2 usage error). Errors are
//! printed once, as one line with their chain of causes.

// The argument structs' doc comments are clap's help text, written for a terminal (`[,X]` means an
// optional part there), not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links)]
// Output goes through stdio.rs's macros, which survive a closed pipe; `println!` would panic.
#![deny(clippy::print_stdout, clippy::print_stderr)]

#[macro_use]
mod stdio;
mod cli;
mod cmd;
mod common;

use clap::CommandFactory;
use clap::Parser;
use cli::Command;
use common::UsageError;
use std::process::ExitCode;

fn main() -> ExitCode {
    let argv: Vec<std::ffi::OsString> = std::env::args_os().collect();
    let name = argv.first().map(std::path::Path::new).and_then(|p| p.file_name());
    if name.is_some_and(|n| n == "iperf3") {
        landspeed_engine::rlimit::raise_fd_limit();
        return exit_code(cmd::iperf3::main(argv));
    }
    if name.is_some_and(|n| n == "iperf") {
        landspeed_engine::rlimit::raise_fd_limit();
        return exit_code(cmd::iperf2::main(argv));
    }
    if cmd::version::asked(&std::env::args().collect::<Vec<_>>()) {
        outln!("{}", cmd::version::line());
        return ExitCode::SUCCESS;
    }
    let cli = cli::Cli::parse();
    landspeed_engine::rlimit::raise_fd_limit();
    landspeed_engine::host::set_command_line(landspeed_engine::host::command_line(
        std::env::args(),
        &common::flags::SECRET_ARGUMENTS,
    ));
    let outcome = match cli.command {
        Command::Serve(a) => cmd::serve::serve(a),
        Command::Run(a) => cmd::run::run(a),
        Command::Demo(a) => cmd::run::demo(a),
        Command::Mesh(a) => cmd::mesh::mesh(a),
        Command::Path(a) => cmd::path::path(a),
        Command::Multicast(a) => cmd::multicast::multicast(a),
        Command::Latency(a) => cmd::latency::latency(a),
        Command::Rpm(a) => cmd::rpm::rpm(a),
        Command::History(a) => cmd::archive::history(a),
        Command::Show(a) => cmd::archive::show(a),
        Command::Sweep(a) => cmd::sweep::sweep(a),
        Command::Report(a) => cmd::report::report(a),
        Command::Model(a) => cmd::model::model(a),
        Command::Tune(a) => cmd::model::tune(a),
        Command::Record(a) => cmd::record::record(a),
        Command::Wan(a) => cmd::wan::wan(a),
        Command::Keygen(a) => cmd::keygen::keygen(a),
        Command::Pscheduler(a) => cmd::pscheduler::pscheduler(a),
        Command::Iperf3(a) => cmd::iperf3::iperf3(a),
        Command::Iperf2(a) => cmd::iperf2::iperf2(a),
        Command::Exporter(a) => cmd::exporter::exporter(a),
        Command::Completions(a) => cmd::version::completions(a, cli::Cli::command()),
        Command::Man(a) => cmd::version::man(a, cli::Cli::command()),
    };
    exit_code(outcome)
}

/// 0 ok, 1 runtime failure, 2 usage error; errors printed once, with their chain of causes.
fn exit_code(outcome: anyhow::Result<bool>) -> ExitCode {
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            errln!("landspeed: error: {}", chain.join(": "));
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
