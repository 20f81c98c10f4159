//! The `landspeed` binary: parses the command line, runs the command, renders the result with the
//! report crate, and maps failures to exit codes (0 ok, 1 runtime failure, 2 usage error). Errors are
//! printed once, as one line with their chain of causes.

// The argument structs' doc comments are clap's help text, written for a terminal (`[,X]` means an
// optional part there), not rustdoc links.
#![allow(rustdoc::broken_intra_doc_links)]

mod archive;
mod args;
mod exporter;
mod flags;
mod http;
mod keyfile;
mod mesh;
mod model;
mod output;
mod path;
mod pscheduler;
mod record;
mod report;
mod run;
mod serve;
mod sweep;
mod values;
mod version;
mod wan;

use clap::Parser;
use std::process::ExitCode;

/// An error that is the user's to fix (exit code 2), as opposed to a runtime failure (exit code 1).
#[derive(Debug)]
pub struct UsageError(pub String);

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}
impl std::error::Error for UsageError {}

/// Exit code for a completed test whose figures cannot be trusted (errors, interruption).
pub struct Failed;

fn main() -> ExitCode {
    if version::asked(&std::env::args().collect::<Vec<_>>()) {
        println!("{}", version::line());
        return ExitCode::SUCCESS;
    }
    let cli = args::Cli::parse();
    landspeed_engine::rlimit::raise_fd_limit();
    landspeed_engine::host::set_command_line(landspeed_engine::host::command_line(
        std::env::args(),
        &flags::SECRET_ARGUMENTS,
    ));
    let outcome = match cli.command {
        args::Command::Serve(a) => serve::serve(a),
        args::Command::Run(a) => run::run(a),
        args::Command::Demo(a) => run::demo(a),
        args::Command::Mesh(a) => mesh::mesh(a),
        args::Command::Path(a) => path::path(a),
        args::Command::History(a) => archive::history(a),
        args::Command::Show(a) => archive::show(a),
        args::Command::Sweep(a) => sweep::sweep(a),
        args::Command::Report(a) => report::report(a),
        args::Command::Model(a) => model::model(a),
        args::Command::Tune(a) => model::tune(a),
        args::Command::Record(a) => record::record(a),
        args::Command::Wan(a) => wan::wan(a),
        args::Command::Pscheduler(a) => pscheduler::pscheduler(a),
        args::Command::Exporter(a) => exporter::exporter(a),
        args::Command::Completions(a) => version::completions(a),
        args::Command::Man(a) => version::man(a),
    };
    match outcome {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => ExitCode::from(1),
        Err(e) => {
            let chain: Vec<String> = e.chain().map(|c| c.to_string()).collect();
            eprintln!("landspeed: error: {}", chain.join(": "));
            if e.downcast_ref::<UsageError>().is_some() {
                ExitCode::from(2)
            } else {
                ExitCode::from(1)
            }
        }
    }
}
