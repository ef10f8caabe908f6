//! The command line: clap definitions, and one function per subcommand that calls into the
//! library. Exit status: 0 when the job completed (quarantined records included, unless
//! `--strict`), 1 for a failed check where a command defines one, 2 when nothing could be read or
//! the output could not be written.

use crate::ingest::Format;
use crate::pipeline::ingest::{ingest, IngestOptions};
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
    /// Rewrite a store's generations into one: superseded rows gone, parts near the part size.
    Compact(CompactArgs),
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
    /// Follow corpora night by night: each check's fail rate with its interval, and the nights
    /// the diff's --fail-on rules would have flagged; exit 1 when the last night is flagged.
    #[cfg(feature = "reports")]
    Trend(TrendArgs),
}

/// Flags shared by every command that reads raw inputs.
#[derive(Debug, Args)]
pub struct ReadArgs {
    /// Read every input as this format instead of detecting it from content.
    #[arg(long, value_enum)]
    pub format: Option<Format>,
    /// Worker threads (default and most: the cores available).
    #[arg(long)]
    pub threads: Option<usize>,
    /// Exit non-zero when any record was quarantined.
    #[arg(long)]
    pub strict: bool,
    /// No progress bar.
    #[arg(long, short)]
    pub quiet: bool,
    /// The largest record (a line, a simulation, a sample, a file read whole) held at once, in
    /// MiB; a larger one is quarantined with this limit named. No real recording comes near the
    /// default; memory at the limit is about ten times the record.
    #[arg(long, value_name = "MIB", default_value_t = crate::ingest::Limits::DEFAULT_RECORD_BYTES >> 20,
          value_parser = clap::value_parser!(u64).range(1..=4096))]
    pub max_record_mib: u64,
    /// The most rows (runs plus their events) one conversation may store; the runs past it are
    /// left out with a note in quarantine.jsonl. The audit holds a conversation whole, at about
    /// 1.2 KB a row.
    #[arg(long, value_name = "ROWS", default_value_t = crate::ingest::Limits::DEFAULT_CONVERSATION_ROWS,
          value_parser = clap::value_parser!(u64).range(1..))]
    pub max_conversation_rows: u64,
    /// The most a compressed input (gzip, zstd) is decompressed to, in GiB. The copy is
    /// written to the output's staging folder while the file is read, then removed; what is past
    /// the limit is not read, with a note in quarantine.jsonl.
    #[arg(long, value_name = "GIB", default_value_t = crate::ingest::Limits::DEFAULT_DECOMPRESSED_BYTES >> 30,
          value_parser = clap::value_parser!(u64).range(1..=1 << 20))]
    pub max_decompressed_gib: u64,
}

impl ReadArgs {
    fn limits(&self) -> crate::ingest::Limits {
        crate::ingest::Limits {
            record_bytes: self.max_record_mib << 20,
            conversation_rows: self.max_conversation_rows,
            decompressed_bytes: self.max_decompressed_gib << 30,
        }
    }
}

#[derive(Debug, Args)]
pub struct IngestArgs {
    /// Input files or directories (read recursively); `-` for standard input.
    #[arg(required = true)]
    pub inputs: Vec<PathBuf>,
    /// The store directory to write, or a prefix in object storage (`s3://bucket/store/`).
    #[arg(long, short)]
    pub out: PathBuf,
    /// Add the inputs to the store as a new generation (the store is created when absent, or
    /// its prefix empty): inputs it holds already are skipped, and a conversation it holds
    /// that gains runs is stored again whole, superseding its earlier rows.
    #[arg(long)]
    pub append: bool,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[derive(Debug, Args)]
pub struct CompactArgs {
    /// A store written by `ingest` (grown by `ingest --append`).
    pub store: PathBuf,
    /// No progress output.
    #[arg(long, short)]
    pub quiet: bool,
}

#[derive(Debug, Args)]
pub struct AuditArgs {
    /// A store written by `ingest`, or raw input files and directories (`-` for standard
    /// input).
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
    /// Audit only this generation of the store (`last`, or its number): the conversations that
    /// `ingest --append` wrote or continued then.
    #[arg(long, value_name = "N|last", value_parser = crate::store::generations::Pick::parse)]
    pub generation: Option<crate::store::generations::Pick>,
    #[command(flatten)]
    pub read: ReadArgs,
}

#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A corpus directory written by `audit`.
    pub corpus: PathBuf,
    /// Also break the rates down per group of runs: by agent, model, input file (source), UTC
    /// day of the run's start, tool, or a partition value of the input paths
    /// (`partition:day` for `.../day=2026-12-01/...`).
    #[arg(long, value_name = "agent|model|source|day|tool|partition:KEY", value_parser = group_by)]
    pub by: Option<crate::report::groups::GroupBy>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::report::ReportFormat,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
    /// Rows of each top-findings table.
    #[arg(long, default_value_t = 10)]
    pub top: usize,
    /// HTML: findings listed per check and kind (each with its run told below).
    #[arg(long, value_name = "N", default_value_t = 20)]
    pub findings: usize,
}

/// The nightly gate's rules, shared by `diff` and `trend`.
#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct GateArgs {
    /// Regression rules: `rate=PP` (a check's fail rate up by more than PP percentage points,
    /// 95% interval above zero), `new-keys=N` (N or more finding keys only in the candidate),
    /// comma-separated; `none` for no rule.
    #[arg(long, default_value = crate::report::diff::DEFAULT_RULES)]
    pub fail_on: String,
}

#[cfg(feature = "reports")]
impl GateArgs {
    fn rules(&self) -> crate::Result<crate::report::diff::Rules> {
        crate::report::diff::Rules::parse(&self.fail_on)
            .map_err(|e| crate::Error::Config(format!("--fail-on: {e}")))
    }
}

#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct DiffArgs {
    /// The corpus to compare against (for example last night's or the release's).
    pub baseline: PathBuf,
    /// The corpus under test.
    pub candidate: PathBuf,
    /// Also compare the rates per group of runs (as `report --by`).
    #[arg(long, value_name = "agent|model|source|day|tool|partition:KEY", value_parser = group_by)]
    pub by: Option<crate::report::groups::GroupBy>,
    #[command(flatten)]
    pub gate: GateArgs,
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

#[cfg(feature = "reports")]
#[derive(Debug, Args)]
pub struct TrendArgs {
    /// Corpora in night order, or folders of them (a folder's corpora are taken in name
    /// order, so name nights by date: 2025-06-01, 2025-06-02, ...).
    #[arg(required = true)]
    pub corpora: Vec<PathBuf>,
    /// A night is flagged when `diff` against the night before fires one of these rules.
    #[command(flatten)]
    pub gate: GateArgs,
    #[arg(long, value_enum, default_value = "table")]
    pub format: crate::report::TrendFormat,
    /// Write to this file instead of stdout.
    #[arg(long, short)]
    pub out: Option<PathBuf>,
}

/// `--format` takes the registered formats' names.
impl clap::ValueEnum for Format {
    fn value_variants<'a>() -> &'a [Self] {
        Format::ALL
    }

    fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
        Some(clap::builder::PossibleValue::new(self.name()).help(self.adapter().about()))
    }
}

/// The threads asked for, resolved as every front door resolves them; a cap is told here.
fn threads(requested: Option<usize>) -> usize {
    let (threads, note) = crate::pipeline::options::threads(requested);
    tell_notes(note);
    threads
}

fn tell_notes(notes: impl IntoIterator<Item = String>) {
    for note in notes {
        eprintln!("traceaudit: note: {note}");
    }
}

/// Longest error line printed: a message can quote recorded text or a file name.
const MAX_ERROR_CHARS: usize = 2000;

/// End a command on an error: print it on one line (escaped for the terminal, bounded) and give
/// exit status 2. `out` is the output the command writes, if any: a failure of the file system
/// that does not say where it happened (a full disk, a read-only or busy mount, a quota) is
/// about it, and the line says so.
pub fn fail(context: &str, e: impl Into<crate::Error>, out: Option<&std::path::Path>) -> ExitCode {
    eprintln!(
        "traceaudit {context}: {}",
        crate::terminal::line(&error_line(e.into(), out), MAX_ERROR_CHARS)
    );
    ExitCode::from(2)
}

/// What [`fail`] prints of `e`, before escaping.
fn error_line(e: crate::Error, out: Option<&std::path::Path>) -> String {
    use std::io::ErrorKind::*;
    let text = e.to_string();
    match &e {
        crate::Error::Io(io) => match (crate::error::io_kind_within(io), out) {
            (
                StorageFull | ReadOnlyFilesystem | ResourceBusy | QuotaExceeded | FileTooLarge
                | PermissionDenied,
                Some(out),
            ) => {
                // An output URL is shown without the credentials or query it may carry.
                let shown = match crate::pipeline::remote::is_url(out) {
                    true => crate::source::object::redacted(&out.to_string_lossy()),
                    false => out.display().to_string(),
                };
                match text.contains(&shown) {
                    true => text,
                    false => format!("writing {shown}: {text}"),
                }
            }
            _ => text,
        },
        crate::Error::Config(_) | crate::Error::Malformed(_) | crate::Error::Refused(_) => text,
    }
}

/// A report reads Parquet through Polars, which panics on some corrupt pages; the report
/// catches the panic and names the file (see `report::corpus::guarded`). The panic's own
/// message, raised inside Polars or the parquet crates, is not printed; any other panic is.
#[cfg(feature = "reports")]
fn quiet_reader_panics() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let in_reader = info.location().is_some_and(|at| {
                let file = at.file().replace('\\', "/");
                file.contains("/registry/src/")
                    && ["/polars", "/parquet-", "/arrow-"]
                        .iter()
                        .any(|name| file.contains(name))
            });
            if !in_reader {
                previous(info);
            }
        }));
    });
}

/// Parse `args` as the binary does and run the command; clap's usage errors (and `--help`,
/// `--version`) are printed by clap, with its exit status.
pub fn run_args<I, T>(args: I) -> ExitCode
where
    I: IntoIterator<Item = T>,
    T: Into<std::ffi::OsString> + Clone,
{
    match Cli::try_parse_from(args) {
        Ok(cli) => run(cli),
        Err(e) => {
            let _ = e.print();
            ExitCode::from(e.exit_code().clamp(0, 255) as u8)
        }
    }
}

pub fn run(cli: Cli) -> ExitCode {
    if matches!(
        cli.command,
        Command::Ingest(_) | Command::Audit(_) | Command::Compact(_)
    ) {
        crate::allocator::for_batch();
    } else {
        #[cfg(feature = "reports")]
        {
            quiet_reader_panics();
            crate::allocator::for_reports();
        }
    }
    match cli.command {
        Command::Ingest(args) => run_ingest(args),
        Command::Audit(args) => run_audit(args),
        Command::Compact(args) => run_compact(args),
        #[cfg(feature = "reports")]
        Command::Report(args) => run_report(args),
        #[cfg(feature = "reports")]
        Command::Diff(args) => run_diff(args),
        #[cfg(feature = "reports")]
        Command::Explain(args) => run_explain(args),
        #[cfg(feature = "reports")]
        Command::Trend(args) => run_trend(args),
    }
}

fn run_ingest(args: IngestArgs) -> ExitCode {
    let opts = IngestOptions {
        format: args.read.format,
        threads: threads(args.read.threads),
        progress: !args.read.quiet,
        limits: args.read.limits(),
        ..IngestOptions::default()
    };
    if args.append {
        return run_append(&args, &opts);
    }
    match ingest(&args.inputs, &args.out, &opts) {
        Ok(summary) => {
            let c = &summary.manifest.counts;
            print!("{}", ingest_summary_text(&summary.manifest));
            if args.read.strict && c.records_quarantined > 0 {
                eprintln!(
                    "traceaudit ingest: {} record(s) quarantined (--strict)",
                    c.records_quarantined
                );
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("ingest", e, Some(&args.out)),
    }
}

fn run_audit(args: AuditArgs) -> ExitCode {
    let resolved = crate::pipeline::options::audit_options(
        args.config.as_deref(),
        args.checks.clone(),
        args.read.threads,
    );
    let (opts, notes) = match resolved {
        Ok(r) => r,
        Err(e) => return fail("audit", e, None),
    };
    tell_notes(notes);
    let opts = crate::pipeline::audit::AuditOptions {
        format: args.read.format,
        progress: !args.read.quiet,
        include_values: args.include_values,
        limits: args.read.limits(),
        generation: args.generation,
        ..opts
    };
    match crate::pipeline::audit::audit(&args.inputs, &args.out, &opts) {
        Ok(summary) => {
            let m = &summary.manifest;
            let s = &m.store_manifest.counts;
            if let Some(secs) = m.ingest_seconds {
                print!("{}", ingest_summary_text(&m.store_manifest));
                println!("ingested in {secs:.2}s");
            }
            print!("{}", crate::pipeline::audit::disposition_table(&m.counts));
            println!(
                "{} conversations, {} runs, {} findings -> {} ({:.2}s)",
                m.conversations,
                m.runs,
                m.findings,
                summary.corpus.display(),
                m.seconds
            );
            if args.read.strict && s.records_quarantined > 0 {
                eprintln!(
                    "traceaudit audit: {} record(s) quarantined (--strict)",
                    s.records_quarantined
                );
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("audit", e, Some(&args.out)),
    }
}

fn run_append(args: &IngestArgs, opts: &IngestOptions) -> ExitCode {
    match crate::pipeline::append::append(&args.inputs, &args.out, opts) {
        Ok(summary) => {
            print!("{}", append_summary_text(&summary));
            let quarantined = summary
                .generation
                .as_ref()
                .map_or(0, |g| g.counts.records_quarantined);
            if args.read.strict && quarantined > 0 {
                eprintln!("traceaudit ingest: {quarantined} record(s) quarantined (--strict)");
                return ExitCode::from(1);
            }
            ExitCode::SUCCESS
        }
        Err(e) => fail("ingest", e, Some(&args.out)),
    }
}

/// What an append did: the new generation's own counts, what it continued, and the store's
/// totals after it.
pub fn append_summary_text(summary: &crate::pipeline::append::AppendSummary) -> String {
    let m = &summary.manifest;
    let generations = crate::store::generations::entries(m).len();
    let totals = format!(
        "store            {} conversations, {} runs, {} generation(s) -> {}\n",
        m.counts.conversations,
        m.counts.runs,
        generations,
        summary.store.display()
    );
    let skipped = if summary.skipped_as_ingested > 0 {
        format!(
            "already ingested {} input(s) skipped (the store holds them: same SHA-256, or for \
             an object the same URL, size and ETag)\n",
            summary.skipped_as_ingested
        )
    } else {
        String::new()
    };
    let skipped = match summary.parts_fetched {
        Some((fetched, of)) => format!(
            "{skipped}bucket           {fetched} of the store's {of} events part(s) fetched \
             (those holding conversations this night continues)\n"
        ),
        None => skipped,
    };
    let Some(g) = &summary.generation else {
        return format!(
            "{skipped}nothing to add: every input is in the store already (generation {} is \
             the last)\n{totals}",
            crate::store::generations::entries(m)
                .last()
                .map_or(0, |g| g.number)
        );
    };
    if summary.created {
        return format!(
            "{}generation       0 (the store was created)\n{totals}",
            ingest_summary_text(m)
        );
    }
    let own = crate::store::StoreManifest {
        counts: g.counts.clone(),
        seconds: g.seconds,
        ..m.clone()
    };
    let replaced = match g.replaced_runs {
        0 => String::new(),
        n => format!("; {n} run(s) stored cut off replaced by longer copies"),
    };
    format!(
        "{}{skipped}generation       {}: {} new conversation(s), {} continued from earlier \
         generations ({} runs copied with them, superseding their earlier rows{replaced})\n\
         {totals}",
        ingest_summary_text(&own),
        g.number,
        g.new_conversations,
        g.superseded_conversations,
        g.copied_runs,
    )
}

fn run_compact(args: CompactArgs) -> ExitCode {
    let opts = IngestOptions {
        progress: !args.quiet,
        ..IngestOptions::default()
    };
    match crate::pipeline::append::compact(&args.store, &opts) {
        Ok(s) => {
            println!(
                "compacted {} generation(s), {} part(s) into generation {} of {} part(s); \
                 {} superseded conversation version(s) dropped; {} conversations, {} runs -> {}",
                s.generations_before,
                s.parts_before,
                crate::store::generations::entries(&s.manifest)
                    .last()
                    .map_or(0, |g| g.number),
                s.parts_after,
                s.superseded_dropped,
                s.manifest.counts.conversations,
                s.manifest.counts.runs,
                s.store.display()
            );
            ExitCode::SUCCESS
        }
        Err(e) => fail("compact", e, None),
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
         duplicate runs   {}\n{}{}\
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
        if c.skipped_inputs > 0 {
            format!(
                "skipped inputs   {} (not regular files, dangling links or loops; see \
                 quarantine.jsonl)\n",
                c.skipped_inputs
            )
        } else {
            String::new()
        },
        if c.unrecognised_files > 0 {
            format!(
                "not recognised   {} file(s) (no format matched their content; not records; \
                 see quarantine.jsonl)\n",
                c.unrecognised_files
            )
        } else {
            String::new()
        },
        m.seconds,
    )
}

#[cfg(feature = "reports")]
fn run_report(args: ReportArgs) -> ExitCode {
    use crate::report::corpus::{self, CorpusDir};
    use crate::report::{emit, findings, render_report, summary};
    let run = || -> std::io::Result<()> {
        let (local, _copy) = crate::pipeline::remote::readable(&args.corpus)?;
        let corpus = CorpusDir::open(&local)?;
        let named = |e| corpus::name_the_unreadable(&[&corpus], e);
        let report = corpus::guarded(|| {
            summary::build(
                &corpus,
                summary::ReportOptions {
                    by: args.by,
                    top: args.top,
                },
            )
        })
        .map_err(named)?;
        let listed = match args.format {
            crate::report::ReportFormat::Html => Some(
                corpus::guarded(|| {
                    findings::build(
                        &corpus,
                        findings::FindingsOptions {
                            per_kind: args.findings,
                            ..Default::default()
                        },
                    )
                })
                .map_err(named)?,
            ),
            _ => None,
        };
        emit(
            &render_report(&report, listed.as_ref(), args.format)?,
            args.out.as_deref(),
        )
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("report", e, None),
    }
}

#[cfg(feature = "reports")]
fn run_diff(args: DiffArgs) -> ExitCode {
    use crate::report::corpus::{self, CorpusDir};
    use crate::report::{diff, emit, render_diff};
    let rules = match args.gate.rules() {
        Ok(r) => r,
        Err(e) => return fail("diff", e, None),
    };
    let run = || -> std::io::Result<diff::Diff> {
        let (base_local, _base_copy) = crate::pipeline::remote::readable(&args.baseline)?;
        let (cand_local, _cand_copy) = crate::pipeline::remote::readable(&args.candidate)?;
        let base = CorpusDir::open(&base_local)?;
        let cand = CorpusDir::open(&cand_local)?;
        let d = corpus::guarded(|| {
            diff::build(
                &base,
                &cand,
                &diff::DiffOptions {
                    by: args.by,
                    rules: rules.clone(),
                    top: args.top,
                },
            )
        })
        .map_err(|e| corpus::name_the_unreadable(&[&base, &cand], e))?;
        emit(&render_diff(&d, args.format)?, args.out.as_deref())?;
        Ok(d)
    };
    match run() {
        Ok(d) => {
            eprintln!("{}", diff::verdict_line(&d));
            if d.is_regression() {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => fail("diff", e, None),
    }
}

#[cfg(feature = "reports")]
fn run_explain(args: ExplainArgs) -> ExitCode {
    use crate::report::corpus::{self, CorpusDir};
    use crate::report::{emit, explain, render_explain};
    let run = || -> std::io::Result<()> {
        let (local, _copy) = crate::pipeline::remote::readable(&args.corpus)?;
        let corpus = CorpusDir::open(&local)?;
        let e = corpus::guarded(|| {
            explain::build(
                &corpus,
                &args.run_id,
                explain::ExplainOptions {
                    preview: args.preview,
                    max_steps: args.max_steps.max(2),
                },
            )
        })
        .map_err(|e| corpus::name_the_unreadable(&[&corpus], e))?;
        emit(&render_explain(&e, args.format)?, args.out.as_deref())
    };
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail("explain", e, None),
    }
}

#[cfg(feature = "reports")]
fn run_trend(args: TrendArgs) -> ExitCode {
    use crate::report::{emit, render_trend, trend};
    let rules = match args.gate.rules() {
        Ok(r) => r,
        Err(e) => return fail("trend", e, None),
    };
    let run = || -> std::io::Result<trend::Trend> {
        let mut copies = Vec::new();
        let mut local = Vec::with_capacity(args.corpora.len());
        for given in &args.corpora {
            let (path, copy) = crate::pipeline::remote::readable(given)?;
            local.push(path);
            copies.extend(copy);
        }
        let nights = trend::nights(&local)?;
        let t = trend::build(&nights, &rules)?;
        emit(&render_trend(&t, args.format)?, args.out.as_deref())?;
        Ok(t)
    };
    match run() {
        Ok(t) => {
            let last_flagged = t.nights.last().is_some_and(|n| n.flagged);
            eprintln!(
                "traceaudit trend: {} night(s), {} flagged{}",
                t.nights.len(),
                t.flagged(),
                if last_flagged {
                    "; the last night is flagged (exit 1)"
                } else {
                    ""
                }
            );
            // A nightly gate on the trend stops on tonight's regression, as `diff` of last
            // night against tonight would; earlier flagged nights are history.
            if last_flagged {
                ExitCode::from(1)
            } else {
                ExitCode::SUCCESS
            }
        }
        Err(e) => fail("trend", e, None),
    }
}

/// A clap value list for an enum of a lower layer (only this module knows clap): each variant
/// with the name the command line takes and its help.
#[cfg(feature = "reports")]
macro_rules! value_enum {
    ($ty:ty { $($variant:expr => $name:literal: $help:literal),+ $(,)? }) => {
        impl clap::ValueEnum for $ty {
            fn value_variants<'a>() -> &'a [Self] {
                &[$($variant),+]
            }
            fn to_possible_value(&self) -> Option<clap::builder::PossibleValue> {
                let (name, help) = match *self {
                    $(v if v == $variant => ($name, $help),)+
                    _ => unreachable!(),
                };
                let value = clap::builder::PossibleValue::new(name);
                Some(if help.is_empty() { value } else { value.help(help) })
            }
        }
    };
}

#[cfg(feature = "reports")]
value_enum!(crate::report::ReportFormat {
    crate::report::ReportFormat::Table => "table": "",
    crate::report::ReportFormat::Markdown => "markdown": "",
    crate::report::ReportFormat::Json => "json": "",
    crate::report::ReportFormat::Html => "html": "",
});

#[cfg(feature = "reports")]
value_enum!(crate::report::DiffFormat {
    crate::report::DiffFormat::Markdown => "markdown": "",
    crate::report::DiffFormat::Json => "json": "",
    crate::report::DiffFormat::Html => "html": "",
});

#[cfg(feature = "reports")]
value_enum!(crate::report::TrendFormat {
    crate::report::TrendFormat::Table => "table": "",
    crate::report::TrendFormat::Json => "json": "",
    crate::report::TrendFormat::Html => "html": "",
});

#[cfg(feature = "reports")]
value_enum!(crate::report::ExplainFormat {
    crate::report::ExplainFormat::Text => "text": "",
    crate::report::ExplainFormat::Json => "json": "",
});

/// A `--by` value: a grouping's name, or `partition:KEY`.
#[cfg(feature = "reports")]
fn group_by(text: &str) -> crate::Result<crate::report::groups::GroupBy> {
    crate::report::groups::GroupBy::parse(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_errors_name_the_output() {
        let out = std::path::Path::new("/data/nightly/corpus");
        let line = |e: std::io::Error| error_line(e.into(), Some(out));
        for code in [28, 30, 16] {
            // ENOSPC, EROFS, EBUSY as the OS gives them, and as Parquet passes them on.
            let msg = line(std::io::Error::from_raw_os_error(code));
            assert!(msg.starts_with("writing /data/nightly/corpus: "), "{msg}");
            let wrapped = crate::store::write::to_io(parquet::errors::ParquetError::External(
                Box::new(std::io::Error::from_raw_os_error(code)),
            ));
            let msg = line(wrapped);
            assert!(
                msg.starts_with("writing /data/nightly/corpus: External: "),
                "{msg}"
            );
        }
        // Already named, about something else, or a command without an output: unchanged.
        let named = std::io::Error::new(
            std::io::ErrorKind::StorageFull,
            "cannot write /data/nightly/corpus.tmp-1/x: full",
        );
        assert!(!line(named).starts_with("writing"));
        let other = std::io::Error::other("no input files found");
        assert_eq!(line(other), "no input files found");
        let full = std::io::Error::from(std::io::ErrorKind::StorageFull);
        assert!(!error_line(full.into(), None).starts_with("writing"));
    }
}
