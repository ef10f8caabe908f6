//! The command line: clap definitions, and one function per subcommand that calls into the
//! library. Exit status: 0 when the job completed (quarantined records included, unless
//! `--strict`), 1 for a failed check where a command defines one, 2 when nothing could be read or
//! the output could not be written.

use crate::ingest::driver::{ingest, IngestOptions};
use crate::ingest::Format;
use clap::{Args, Parser, Subcommand};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Debug, Parser)]
#[command(
    name = "traceaudit",
    version,
    about = "Audit recorded AI-agent runs offline, in batch: repeated calls, stale evidence, \
             schema attempts."
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Read recorded runs (files or directories) into a columnar store.
    Ingest(IngestArgs),
    /// Run every check over a store or raw inputs and write a finding corpus.
    Audit(AuditArgs),
    /// Summarise a corpus: dispositions and fail rates per check, top findings, agreement.
    #[cfg(feature = "reports")]
    Report(ReportArgs),
    /// Compare two corpora: rate changes, finding keys that appear or vanish (exit 1 on a
    /// regression past --fail-on).
    #[cfg(feature = "reports")]
    Diff(DiffArgs),
    /// Tell one run as a story: its tool calls, its answer, and every finding where it fired.
    #[cfg(feature = "reports")]
    Explain(ExplainArgs),
    /// Generate a reproducible synthetic corpus with its expected findings (for benchmarks).
    Gen(crate::gen::GenArgs),
}

/// Flags shared by every command that reads raw inputs.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Read every input as this format instead of detecting it from content.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Worker threads (default: all cores).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Exit non-zero when any record was quarantined.
    #[arg(long)]
    pub strict: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Input files or directories (read recursively).
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The store directory to write.
    #[arg(long, short)]
    pub out: PathBuf,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A store written by `ingest`, or raw input files and directories.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The corpus directory to write.
    #[arg(long, short)]
    pub out: PathBuf,
    /// Configuration file (TOML).
    #[arg(long)]
    pub config: Option<PathBuf>,
    /// Run only these checks (comma-separated names).
    #[arg(long, value_delimiter = ',')]
    pub checks: Option<Vec<String>>,
    /// List data values (such as grounded values) in findings; off by default because they
    /// are data from tool results.
    #[arg(long)]
    pub include_values: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A corpus directory written by `audit`.
    pub corpus: PathBuf,
    /// Also break the rates down per group of runs.
    #[arg(long, value_enum)]
    pub by: Option<crate::report::groups::GroupBy>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::report::ReportFormat,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Rows of each top-findings table.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
}

#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The corpus to compare against (for example last night's or the release's).
    pub baseline: PathBuf,
    /// The corpus under test.
    pub candidate: PathBuf,
    /// Also compare the rates per group of runs.
    #[arg(long, value_enum)]
    pub by: Option<crate::report::groups::GroupBy>,
    /// Regression rules: `rate=PP` (a check's fail rate up by more than PP percentage points,
    /// 95% interval above zero), `new-keys=N` (N or more finding keys only in the candidate),
    /// comma-separated; `none` for no rule.
    #[arg(long, default_value = crate::report::diff::DEFAULT_RULES)]
    pub fail_on: String,
    #[arg(long, value_enum, default_value = "markdown")]
    pub format: crate::report::DiffFormat,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Finding keys listed in each direction.
    #[arg(long, default_value_t = 20)]
    pub top: usize,
}

#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct ExplainArgs {
    /// A corpus directory written by `audit`.
    pub corpus: PathBuf,
    /// The run to explain (`run_id` in the corpus tables).
    pub run_id: String,
    #[arg(long, value_enum, default_value = "text")]
    pub format: crate::report::ExplainFormat,
    /// Characters of each recorded text (arguments, results, messages) shown.
    #[arg(long, default_value_t = 200)]
    pub preview: usize,
    /// Steps shown; past it the middle is cut (steps with findings are kept).
    #[arg(long, default_value_t = 60)]
    pub max_steps: usize,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

pub fn threads(requested: Option<usize>) -> usize {
    requested.filter(|&n| n > 0).unwrap_or_else(|| {
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    })
}

/// Print an error on one line and give exit status 2.
pub fn fail(context: &str, e: impl std::fmt::Display) -> ExitCode {
    eprintln!("traceaudit {context}: {e}");
    ExitCode::from(2)
}

pub fn run(cli: Cli) -> ExitCode {
    match cli.command {
        Command::Ingest(args) => run_ingest(args),
        Command::Audit(args) => crate::audit::cli_audit(args),
        #[cfg(feature = "reports")]
        Command::Report(args) => crate::report::cli_report(args),
        #[cfg(feature = "reports")]
        Command::Diff(args) => crate::report::cli_diff(args),
        #[cfg(feature = "reports")]
        Command::Explain(args) => crate::report::cli_explain(args),
        Command::Gen(args) => crate::gen::cli_gen(args),
    }
}

fn run_ingest(args: IngestArgs) -> ExitCode {
    let opts = IngestOptions {
        format: args.read.format,
        threads: threads(args.read.threads),
        progress: !args.read.quiet,
    };
    match ingest(&args.inputs, &args.out, &opts) {
        Ok(summary) => {
            let c = &summary.manifest.counts;
            print!("{}", ingest_summary_text(&summary.manifest));
            if c.records_read == c.records_quarantined {
                eprintln!("traceaudit ingest: no record could be read");
                return ExitCode::from(2);
            }
            if args.read.strict && c.records_quarantined > 0 {
                eprintln!(
                    "traceaudit ingest: {} record(s) quarantined (--strict)",
                    c.records_quarantined
                );
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("ingest", e),
    }
}

/// The end-of-ingest summary, one fact per line.
pub fn ingest_summary_text(m: &crate::store::StoreManifest) -> String {
    let c = &m.counts;
    let mb = c.bytes as f64 / 1e6;
    let rate = if m.seconds > 0.0 { mb / m.seconds } else { 0.0 };
    format!(
        "files            {}\n\
         bytes            {} ({mb:.1} MB)\n\
         conversations    {}\n\
         runs             {} ({} answering a user turn)\n\
         events           {}\n\
         landings         {}\n\
         records          {} read = {} stored + {} quarantined\n\
         partial notes    {}\n\
         duplicate runs   {}\n\
         seconds          {:.2} ({rate:.1} MB/s)\n",
        c.files,
        c.bytes,
        c.conversations,
        c.runs,
        c.user_turn_runs,
        c.events,
        c.landings,
        c.records_read,
        c.records_stored,
        c.records_quarantined,
        c.partial_notes,
        c.duplicate_runs,
        m.seconds,
    )
}
