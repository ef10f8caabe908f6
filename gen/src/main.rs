//! `traceaudit-gen`: write a reproducible synthetic corpus with its expected findings (for
//! benchmarks and the correctness-at-scale tests).

use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;
use traceaudit_gen::replicate::{replicate, RealShape, ReplicateOptions};
use traceaudit_gen::{generate, parse_size, summary_text, GenFormat, GenOptions};

#[derive(Debug, Parser)]
#[command(
    name = "traceaudit-gen",
    version,
    about = "Generate a reproducible synthetic corpus with its expected findings (for benchmarks).",
    args_conflicts_with_subcommands = true,
    subcommand_negates_reqs = true
)]
struct GenArgs {
    #[command(subcommand)]
    command: Option<Command>,
    /// The recording format to write.
    #[arg(long, value_enum, required = true)]
    format: Option<Shape>,
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
    #[arg(long, short, required = true)]
    out: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Copy real recordings with fresh conversation ids until a size is reached (a real-shaped
    /// corpus for the benches; no expected findings).
    Replicate(ReplicateArgs),
}

#[derive(Debug, Args)]
struct ReplicateArgs {
    /// The shape of the recordings given with --from.
    #[arg(long, value_enum)]
    shape: RealShapeArg,
    /// Files or folders of real recordings (folders are read recursively).
    #[arg(long, required = true, num_args = 1..)]
    from: Vec<PathBuf>,
    /// About how much to write (for example 512MB).
    #[arg(long, value_parser = parse_size)]
    size: u64,
    /// How many input files to spread it over.
    #[arg(long, default_value_t = 8)]
    files: usize,
    /// The corpus directory to write (input/, replicated.json).
    #[arg(long, short)]
    out: PathBuf,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
enum RealShapeArg {
    Tau2,
    TauBench,
    Agentfootprint,
    Otel,
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

fn fail(e: &std::io::Error) -> ExitCode {
    eprintln!(
        "traceaudit-gen: {}",
        traceaudit::front_door::terminal_line(&e.to_string(), 2000)
    );
    ExitCode::from(2)
}

fn main() -> ExitCode {
    let args = GenArgs::parse();
    if let Some(Command::Replicate(r)) = args.command {
        let opts = ReplicateOptions {
            shape: match r.shape {
                RealShapeArg::Tau2 => RealShape::Tau2,
                RealShapeArg::TauBench => RealShape::TauBench,
                RealShapeArg::Agentfootprint => RealShape::Agentfootprint,
                RealShapeArg::Otel => RealShape::Otel,
            },
            sources: r.from,
            bytes: r.size,
            files: r.files,
        };
        return match replicate(&opts, &r.out) {
            Ok((summary, seconds)) => {
                println!(
                    "{}: {} unit(s) copied {} time(s) at most, {} written, {:.1} MB in {} file(s), {seconds:.1}s",
                    r.out.display(),
                    summary.units,
                    summary.copies_per_unit,
                    summary.copies_written,
                    summary.bytes as f64 / 1e6,
                    summary.files.len()
                );
                ExitCode::SUCCESS
            }
            Err(e) => fail(&e),
        };
    }
    // clap requires both when no subcommand is given.
    let (Some(shape), Some(out)) = (args.format, args.out) else {
        unreachable!("--format and --out are required without a subcommand")
    };
    let format = match shape {
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
    match generate(&opts, &out) {
        Ok(summary) => {
            println!("{}", summary_text(&summary));
            ExitCode::SUCCESS
        }
        Err(e) => fail(&e),
    }
}
