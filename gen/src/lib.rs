//! traceaudit-gen: reproducible corpora shaped like real recordings, with the expected
//! findings written beside them.
//!
//! A generated corpus is a directory:
//!
//! ```text
//! DIR/input/          the recordings (agentfootprint NDJSON shards, or tau2 results documents)
//! DIR/traceaudit.toml the configuration to audit them with (the tool judged on arguments)
//! DIR/expected.json   what the injected behaviour must produce, run by run
//! ```
//!
//! Conversations are planned format-neutrally ([`plan`]) and written by one module per format
//! ([`agentfootprint`], [`tau2`]), which also derive the expected findings from what they wrote
//! (repeated-call keys through [`traceaudit::fingerprint::call_key`], the framework's own
//! fingerprints). [`verify`] compares a corpus with `expected.json`.
//!
//! The same options and seed give a byte-identical directory: every conversation draws from
//! its own stream ([`rng::Rng::derive`]), nothing reads the clock, and files are written in
//! order.

pub mod agentfootprint;
pub mod plan;
pub mod replicate;
pub mod rng;
pub mod tau2;
pub mod verify;

use plan::AnswerKind;
use serde::{Deserialize, Serialize};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;
use traceaudit::output::{write_file, AtomicDir};

/// Bump when the same options would produce different bytes (cached corpora are keyed on it).
pub const GENERATOR_VERSION: u32 = 1;

/// The sub-directory of a corpus holding the recordings.
pub const INPUT_DIR: &str = "input";
pub const EXPECTED_FILE: &str = "expected.json";
pub const CONFIG_FILE: &str = "traceaudit.toml";

/// The generated configuration: the one tool judged on arguments alone.
pub const CONFIG_TEXT: &str =
    "# Written by `traceaudit gen`. render_view stamps a new version into every result,\n\
# so its repeats are judged on arguments alone.\n\
[tools.render_view]\n\
repeated_when = \"arguments\"\n";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GenFormat {
    /// agentfootprint NDJSON (firehose tier): one event envelope per line, several sessions
    /// interleaved in each shard.
    Agentfootprint,
    /// tau2-bench results documents `{timestamp, info, tasks, simulations}`.
    Tau2,
}

impl GenFormat {
    pub fn name(self) -> &'static str {
        match self {
            GenFormat::Agentfootprint => "agentfootprint",
            GenFormat::Tau2 => "tau2",
        }
    }

    /// Default shard size: production NDJSON logs rotate; tau2 result files run to hundreds of
    /// MB upstream.
    pub fn default_shard_bytes(self) -> u64 {
        match self {
            GenFormat::Agentfootprint => 64_000_000,
            GenFormat::Tau2 => 256_000_000,
        }
    }
}

/// The injection rates and shape parameters. Probabilities are per run unless said otherwise.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Rates {
    /// Relative weights of 1, 2, ... user turns per conversation.
    pub turn_weights: Vec<u32>,
    /// A run makes no tool call.
    pub zero_landings: f64,
    /// A run makes 15 to 30 calls (otherwise a geometric count, mean about 3.5, at most 14).
    pub heavy_run: f64,
    /// Per iteration with two calls or more left: the next batch is parallel (2 to 4 calls).
    pub parallel: f64,
    /// A run with at least two batches repeats one call (same tool, arguments and result).
    pub repeat: f64,
    /// Given a repeat: a third occurrence.
    pub third_occurrence: f64,
    /// Given a repeat: a second repeated key.
    pub second_key: f64,
    /// Per repeat: the arguments' keys come in another order (still the same call).
    pub key_order_shuffle: f64,
    /// A polled job (same arguments, new result; not a repeat).
    pub poll: f64,
    /// `render_view` rendered again (same arguments, new version; a repeat in arguments mode).
    pub arguments_mode_repeat: f64,
    /// Per fresh call: the tool throws.
    pub error: f64,
    /// Tool results are drawn log-uniformly between these sizes (JSON bytes), until a
    /// conversation has been served 384 KB; later results stay below 600 bytes.
    pub result_bytes_min: u64,
    pub result_bytes_max: u64,
    /// From the second turn: the turn calls no tool and restates earlier values.
    pub stale: f64,
    /// A turn that called tools still restates only earlier values.
    pub stale_after_calls: f64,
    /// A turn that called tools answers without values.
    pub no_values: f64,
    /// Per agentfootprint conversation: runs are configured with an output schema.
    pub schema: f64,
    /// Per tau2 turn: the simulated user acts on its own device afterwards.
    pub device: f64,
    /// Per tau2 call: the call id repeats an earlier call's id (as some real files do).
    pub id_reuse: f64,
}

impl Default for Rates {
    fn default() -> Self {
        Rates {
            turn_weights: vec![30, 25, 18, 12, 8, 7],
            zero_landings: 0.2,
            heavy_run: 0.04,
            parallel: 0.25,
            repeat: 0.12,
            third_occurrence: 0.25,
            second_key: 0.15,
            key_order_shuffle: 0.3,
            poll: 0.06,
            arguments_mode_repeat: 0.04,
            error: 0.04,
            result_bytes_min: 100,
            result_bytes_max: 20_000,
            stale: 0.3,
            stale_after_calls: 0.05,
            no_values: 0.1,
            schema: 0.15,
            device: 0.15,
            id_reuse: 0.03,
        }
    }
}

#[derive(Debug, Clone)]
pub struct GenOptions {
    pub format: GenFormat,
    /// Stop once this many runs (as the engine counts them) were written.
    pub runs: Option<u64>,
    /// Stop once this many bytes were written.
    pub bytes: Option<u64>,
    pub seed: u64,
    /// Start a new file past this many bytes.
    pub shard_bytes: u64,
    pub rates: Rates,
}

impl GenOptions {
    pub fn new(format: GenFormat, seed: u64) -> GenOptions {
        GenOptions {
            format,
            runs: None,
            bytes: None,
            seed,
            shard_bytes: format.default_shard_bytes(),
            rates: Rates::default(),
        }
    }
}

/// One expected repeated-call finding.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedRepeat {
    pub key: String,
    pub tool: String,
    /// The call where the second landing happened (where the finding is filed).
    pub tool_call_id: String,
    /// Landings of the key in the run.
    pub occurrences: u32,
    /// The iteration of the second landing, when the format records iterations.
    pub iteration: Option<u32>,
    /// `arguments` for a tool judged on arguments alone.
    pub mode: Option<String>,
}

/// One row of the output-schema attempt ledger.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpectedAttempt {
    pub attempt: u32,
    pub iteration: u32,
    /// `passed`, `retried` or `exhausted`.
    pub outcome: String,
    pub stage: Option<String>,
    pub error: Option<String>,
    pub path: Option<String>,
    /// Retried rows: FNV-1a (unpadded hex) of the correction message.
    pub corrective_message_hash: Option<String>,
}

/// What the engine must conclude for one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ExpectedRun {
    pub conversation_id: String,
    pub run_id: String,
    pub turn: u32,
    pub landings: u32,
    /// The repeated-call disposition.
    pub repeated_call: String,
    pub repeats: Vec<ExpectedRepeat>,
    /// The prior-turn-evidence disposition.
    pub prior_turn_evidence: String,
    pub answer: AnswerKind,
    /// For a checked-fail: the finding's columns.
    pub grounded_count: Option<u32>,
    pub latest_prior_turn: Option<u32>,
    pub tool_results_this_turn: Option<u32>,
    /// The output-schema attempt ledger (empty when no schema is configured).
    pub schema_attempts: Vec<ExpectedAttempt>,
}

impl ExpectedRun {
    /// The repeated-call disposition and prior-turn fields that follow from the rest.
    pub(crate) fn settle(&mut self, facts: &[plan::Fact]) {
        self.repeated_call = if !self.repeats.is_empty() {
            "checked-fail"
        } else if self.landings > 0 {
            "checked-pass"
        } else {
            "unreachable"
        }
        .to_string();
        // An answer that exhausted the output schema's attempts is never judged by the evidence
        // gate, so the check gives no grounding verdict for it.
        let unmet = self
            .schema_attempts
            .last()
            .is_some_and(|a| a.outcome == "exhausted");
        self.prior_turn_evidence = match self.answer {
            _ if unmet => "not-applicable",
            AnswerKind::Fresh => "checked-pass",
            AnswerKind::Stale | AnswerKind::StaleAfterCalls => "checked-fail",
            AnswerKind::NoValues | AnswerKind::NoAnswer => "unreachable",
        }
        .to_string();
        if self.prior_turn_evidence == "checked-fail" {
            self.grounded_count = Some(facts.len() as u32);
            self.latest_prior_turn = facts.iter().map(|f| f.turn).max();
            self.tool_results_this_turn = Some(self.landings);
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExpectedFile {
    /// Relative to the corpus directory.
    pub path: String,
    pub bytes: u64,
    pub conversations: u64,
    pub runs: u64,
}

/// Counts over the whole corpus.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Totals {
    pub files: u64,
    pub bytes: u64,
    pub conversations: u64,
    pub runs: u64,
    pub landings: u64,
    pub parallel_batches: u64,
    pub tool_errors: u64,
    pub repeated_call_findings: u64,
    pub repeated_call: DispositionCounts,
    pub prior_turn_evidence: DispositionCounts,
    pub answers: AnswerCounts,
    pub injected: InjectedCounts,
    pub schema: SchemaCounts,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DispositionCounts {
    pub checked_pass: u64,
    pub checked_fail: u64,
    pub not_applicable: u64,
    pub unreachable: u64,
}

impl DispositionCounts {
    fn add(&mut self, disposition: &str) {
        match disposition {
            "checked-pass" => self.checked_pass += 1,
            "checked-fail" => self.checked_fail += 1,
            "not-applicable" => self.not_applicable += 1,
            _ => self.unreachable += 1,
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct AnswerCounts {
    pub fresh: u64,
    pub stale: u64,
    pub stale_after_calls: u64,
    pub no_values: u64,
    pub no_answer: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct InjectedCounts {
    /// Landings that copy an earlier landing (second and later occurrences).
    pub repeat_landings: u64,
    pub key_order_shuffled: u64,
    pub polls: u64,
    pub rerenders: u64,
    pub device_calls: u64,
    pub reused_call_ids: u64,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct SchemaCounts {
    pub runs: u64,
    pub attempts: u64,
    pub passed: u64,
    pub retried: u64,
    pub exhausted: u64,
    /// `agent.output_schema_retry` events written.
    pub retry_events: u64,
    /// `agent.output_contract_unmet` events written.
    pub contract_unmet_events: u64,
}

/// `expected.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Expected {
    pub generator: String,
    pub generator_version: u32,
    pub format: GenFormat,
    pub seed: u64,
    pub shard_bytes: u64,
    pub rates: Rates,
    /// The configuration file to audit with, relative to the corpus directory.
    pub config: String,
    pub files: Vec<ExpectedFile>,
    pub totals: Totals,
    pub runs: Vec<ExpectedRun>,
}

impl Expected {
    pub fn load(corpus: &Path) -> io::Result<Expected> {
        let text = std::fs::read_to_string(corpus.join(EXPECTED_FILE))?;
        serde_json::from_str(&text).map_err(io::Error::other)
    }
}

/// What a format module hands back for one unit it wrote (a group of interleaved sessions, or
/// one simulation).
pub(crate) struct Unit {
    pub bytes: Vec<u8>,
    pub conversations: u64,
    pub runs: Vec<ExpectedRun>,
    pub stats: Stats,
}

/// Counts a format module gathers while writing.
#[derive(Debug, Default, Clone)]
pub(crate) struct Stats {
    pub landings: u64,
    pub parallel_batches: u64,
    pub tool_errors: u64,
    pub injected: InjectedCounts,
    pub retry_events: u64,
    pub contract_unmet_events: u64,
}

impl Stats {
    pub fn add(&mut self, o: &Stats) {
        self.landings += o.landings;
        self.parallel_batches += o.parallel_batches;
        self.tool_errors += o.tool_errors;
        self.injected.repeat_landings += o.injected.repeat_landings;
        self.injected.key_order_shuffled += o.injected.key_order_shuffled;
        self.injected.polls += o.injected.polls;
        self.injected.rerenders += o.injected.rerenders;
        self.injected.device_calls += o.injected.device_calls;
        self.injected.reused_call_ids += o.injected.reused_call_ids;
        self.retry_events += o.retry_events;
        self.contract_unmet_events += o.contract_unmet_events;
    }
}

/// A format's file framing and unit writer.
pub(crate) trait Writer {
    fn file_name(&self, shard: usize) -> String;
    fn header(&mut self, shard: usize) -> Vec<u8>;
    fn separator(&self) -> &'static [u8];
    fn footer(&self) -> &'static [u8];
    /// Write the next unit; `ordinal` counts conversations so far.
    fn unit(&mut self, ordinal: u64) -> Unit;
}

/// The summary `gen` prints.
#[derive(Debug, Clone)]
pub struct GenSummary {
    pub dir: PathBuf,
    pub expected: Expected,
    pub seconds: f64,
}

/// A generated corpus as an output directory: `expected.json` written by the generator, its
/// configuration, and the generated input files.
fn layout() -> traceaudit::output::Layout {
    traceaudit::output::Layout {
        what: "generated corpus",
        manifest: EXPECTED_FILE,
        claims: |m| {
            m.get("generator")
                .and_then(serde_json::Value::as_str)
                .is_some_and(|g| g.starts_with("traceaudit"))
        },
        entries: vec![
            EXPECTED_FILE.into(),
            CONFIG_FILE.into(),
            format!("{INPUT_DIR}/"),
            format!("{INPUT_DIR}/agentfootprint-*.ndjson"),
            format!("{INPUT_DIR}/tau2-*.json"),
        ],
    }
}

/// Generate a corpus into `out` (replacing an earlier generated corpus there).
pub fn generate(opts: &GenOptions, out: &Path) -> io::Result<GenSummary> {
    let started = Instant::now();
    if opts.runs.is_none() && opts.bytes.is_none() {
        return Err(io::Error::other("say how much to generate: runs or bytes"));
    }
    let staging = AtomicDir::create(out, &layout())?;
    let input = staging.path().join(INPUT_DIR);
    std::fs::create_dir_all(&input)?;
    let mut writer: Box<dyn Writer> = match opts.format {
        GenFormat::Agentfootprint => Box::new(agentfootprint::AfWriter::new(opts)),
        GenFormat::Tau2 => Box::new(tau2::Tau2Writer::new(opts)),
    };
    let mut files: Vec<ExpectedFile> = Vec::new();
    let mut runs: Vec<ExpectedRun> = Vec::new();
    let mut stats = Stats::default();
    let mut conversations = 0u64;
    let mut total_bytes = 0u64;
    let mut current: Option<(io::BufWriter<std::fs::File>, ExpectedFile, bool)> = None;
    let done = |runs: u64, bytes: u64| {
        opts.runs.is_some_and(|n| runs >= n) || opts.bytes.is_some_and(|b| bytes >= b)
    };
    while !done(runs.len() as u64, total_bytes) {
        if current
            .as_ref()
            .is_none_or(|(_, f, _)| f.bytes >= opts.shard_bytes)
        {
            if let Some((mut w, mut f, _)) = current.take() {
                let footer = writer.footer();
                w.write_all(footer)?;
                w.flush()?;
                f.bytes += footer.len() as u64;
                total_bytes += footer.len() as u64;
                files.push(f);
            }
            let shard = files.len();
            let name = writer.file_name(shard);
            let mut w =
                io::BufWriter::with_capacity(1 << 20, std::fs::File::create(input.join(&name))?);
            let header = writer.header(shard);
            w.write_all(&header)?;
            total_bytes += header.len() as u64;
            let f = ExpectedFile {
                path: format!("{INPUT_DIR}/{name}"),
                bytes: header.len() as u64,
                ..ExpectedFile::default()
            };
            current = Some((w, f, true));
        }
        let unit = writer.unit(conversations);
        let (w, f, first) = current.as_mut().expect("an open file");
        if !*first {
            let sep = writer.separator();
            w.write_all(sep)?;
            f.bytes += sep.len() as u64;
            total_bytes += sep.len() as u64;
        }
        *first = false;
        w.write_all(&unit.bytes)?;
        f.bytes += unit.bytes.len() as u64;
        f.conversations += unit.conversations;
        f.runs += unit.runs.len() as u64;
        total_bytes += unit.bytes.len() as u64;
        conversations += unit.conversations;
        stats.add(&unit.stats);
        runs.extend(unit.runs);
    }
    if let Some((mut w, mut f, _)) = current.take() {
        let footer = writer.footer();
        w.write_all(footer)?;
        w.flush()?;
        f.bytes += footer.len() as u64;
        files.push(f);
    }
    let totals = totals(&files, conversations, &runs, &stats);
    let expected = Expected {
        generator: "traceaudit gen".into(),
        generator_version: GENERATOR_VERSION,
        format: opts.format,
        seed: opts.seed,
        shard_bytes: opts.shard_bytes,
        rates: opts.rates.clone(),
        config: CONFIG_FILE.into(),
        files,
        totals,
        runs,
    };
    write_file(&staging.path().join(CONFIG_FILE), CONFIG_TEXT.as_bytes())?;
    let text = serde_json::to_string_pretty(&expected).map_err(io::Error::other)?;
    // Written last: its presence marks a complete corpus.
    write_file(&staging.path().join(EXPECTED_FILE), text.as_bytes())?;
    let dir = staging.commit()?;
    Ok(GenSummary {
        dir,
        expected,
        seconds: started.elapsed().as_secs_f64(),
    })
}

fn totals(files: &[ExpectedFile], conversations: u64, runs: &[ExpectedRun], s: &Stats) -> Totals {
    let mut t = Totals {
        files: files.len() as u64,
        bytes: files.iter().map(|f| f.bytes).sum(),
        conversations,
        runs: runs.len() as u64,
        landings: s.landings,
        parallel_batches: s.parallel_batches,
        tool_errors: s.tool_errors,
        injected: s.injected.clone(),
        ..Totals::default()
    };
    t.schema.retry_events = s.retry_events;
    t.schema.contract_unmet_events = s.contract_unmet_events;
    for r in runs {
        t.repeated_call_findings += r.repeats.len() as u64;
        t.repeated_call.add(&r.repeated_call);
        t.prior_turn_evidence.add(&r.prior_turn_evidence);
        match r.answer {
            AnswerKind::Fresh => t.answers.fresh += 1,
            AnswerKind::Stale => t.answers.stale += 1,
            AnswerKind::StaleAfterCalls => t.answers.stale_after_calls += 1,
            AnswerKind::NoValues => t.answers.no_values += 1,
            AnswerKind::NoAnswer => t.answers.no_answer += 1,
        }
        if !r.schema_attempts.is_empty() {
            t.schema.runs += 1;
        }
        for a in &r.schema_attempts {
            t.schema.attempts += 1;
            match a.outcome.as_str() {
                "passed" => t.schema.passed += 1,
                "retried" => t.schema.retried += 1,
                _ => t.schema.exhausted += 1,
            }
        }
    }
    t
}

/// Parse a size such as `100MB`, `1GB`, `512KiB` or `1500000` (bytes). Decimal units are
/// powers of 1,000, binary units (`KiB`, `MiB`, `GiB`) powers of 1,024.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (number, unit) = t.split_at(split);
    let n: f64 = number
        .parse()
        .map_err(|_| format!("not a size: {text:?} (try 100MB or 1GB)"))?;
    let scale: f64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" => 1e3,
        "m" | "mb" => 1e6,
        "g" | "gb" => 1e9,
        "kib" => 1024.0,
        "mib" => 1024.0 * 1024.0,
        "gib" => 1024.0 * 1024.0 * 1024.0,
        other => return Err(format!("unknown size unit {other:?} in {text:?}")),
    };
    Ok((n * scale).round() as u64)
}

/// The summary `gen` prints, one fact per line.
pub fn summary_text(summary: &GenSummary) -> String {
    let t = &summary.expected.totals;
    format!(
        "files            {}\n\
         bytes            {} ({:.1} MB)\n\
         conversations    {}\n\
         runs             {}\n\
         landings         {}\n\
         repeated-call    {} finding(s) in {} run(s)\n\
         prior-turn       {} fail, {} pass, {} unreachable\n\
         schema attempts  {} ({} retried, {} exhausted)\n\
         seconds          {:.2}\n\
         wrote {}",
        t.files,
        t.bytes,
        t.bytes as f64 / 1e6,
        t.conversations,
        t.runs,
        t.landings,
        t.repeated_call_findings,
        t.repeated_call.checked_fail,
        t.prior_turn_evidence.checked_fail,
        t.prior_turn_evidence.checked_pass,
        t.prior_turn_evidence.unreachable,
        t.schema.attempts,
        t.schema.retried,
        t.schema.exhausted,
        summary.seconds,
        summary.dir.display()
    )
}

/// Milliseconds since the epoch as `YYYY-MM-DDTHH:MM:SS.ffffff` (UTC, microseconds from `us`).
pub(crate) fn iso_time(ms: u64, us: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:06}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60,
        (ms % 1000) * 1000 + us % 1000
    )
}

/// The start of generated time: 2026-03-02T09:00:00Z.
pub(crate) const EPOCH_MS: u64 = 1_772_442_000_000;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes() {
        assert_eq!(parse_size("100MB"), Ok(100_000_000));
        assert_eq!(parse_size("1GB"), Ok(1_000_000_000));
        assert_eq!(parse_size("1.5 kb"), Ok(1_500));
        assert_eq!(parse_size("2MiB"), Ok(2 * 1024 * 1024));
        assert_eq!(parse_size("42"), Ok(42));
        assert!(parse_size("12 parsecs").is_err());
    }

    #[test]
    fn iso_times() {
        assert_eq!(iso_time(0, 0), "1970-01-01T00:00:00.000000");
        assert_eq!(iso_time(EPOCH_MS, 0), "2026-03-02T09:00:00.000000");
        assert_eq!(iso_time(951_782_400_123, 456), "2000-02-29T00:00:00.123456");
        assert_eq!(iso_time(EPOCH_MS + 1_234, 5), "2026-03-02T09:00:01.234005");
    }
}
