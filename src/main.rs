use clap::Parser;
use std::process::ExitCode;

fn main() -> ExitCode {
    traceaudit::cli::run(traceaudit::cli::Cli::parse())
}
