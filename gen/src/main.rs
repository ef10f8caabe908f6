//! `traceaudit-gen`: write a reproducible synthetic corpus with its expected findings (for
//! benchmarks and the correctness-at-scale tests).

use clap::{Parser, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use traceaudit_gen::{generate, parse_size, summary_text, GenFormat, GenOptions};

#[derive(Debug, Parser)]
#[command(
    name = "traceaudit-gen",
    version,
    about = "Generate a reproducible synthetic corpus with its expected findings (for benchmarks)."
)]
struct GenArgs {
    /// The recording format to write.
    #[arg(long, value_enum)]
    format: Shape,
    /// Stop once this many runs were written (as the engine counts runs).
    #[arg(long)]
    runs: Option<u64>,
    /// Stop once this much was written (for example 100MB or 1GB).
    #[arg(long, value_parser = parse_size)]
    size: Option<u64>,
    /// The seed: the same seed and options give a byte-identical corpus.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// Start a new input file past this size (default: 64MB for agentfootprint, 256MB for tau2).
    #[arg(long, value_parser = parse_size)]
    shard_size: Option<u64>,
    /// The corpus directory to write (input/, traceaudit.toml, expected.json).
    #[arg(long, short)]
    out: PathBuf,
}

/// The formats, as the command line names them.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Shape {
    /// agentfootprint NDJSON (firehose tier): one event envelope per line, several sessions
    /// interleaved in each shard.
    Agentfootprint,
    /// tau2-bench results documents `{timestamp, info, tasks, simulations}`.
    Tau2,
}

fn main() -> ExitCode {
    let args = GenArgs::parse();
    let format = match args.format {
        Shape::Agentfootprint => GenFormat::Agentfootprint,
        Shape::Tau2 => GenFormat::Tau2,
    };
    let mut opts = GenOptions::new(format, args.seed);
    opts.runs = args.runs;
    opts.bytes = args.size;
    if opts.runs.is_none() && opts.bytes.is_none() {
        opts.runs = Some(1_000);
    }
    if let Some(s) = args.shard_size {
        opts.shard_bytes = s.max(1);
    }
    match generate(&opts, &args.out) {
        Ok(summary) => {
            println!("{}", summary_text(&summary));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "traceaudit-gen: {}",
                traceaudit::terminal::line(&e.to_string(), 2000)
            );
            ExitCode::from(2)
        }
    }
}
