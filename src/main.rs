use std::process::ExitCode;

use clap::Parser;

fn main() -> ExitCode {
    loadmgr::cli::run(loadmgr::cli::Cli::parse())
}
