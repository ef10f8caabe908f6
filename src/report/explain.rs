//! `traceaudit explain CORPUS RUN_ID`: one run told as a story, the offline counterpart of a
//! framework's trace tools. The run's place (conversation, turn), each iteration, each tool call
//! (name, argument fingerprint and a bounded preview, result preview, error, duration), the
//! answer, and every finding placed where it fired, with its reason and witnesses; then each
//! check's disposition. Recorded text is bounded and the output says what it cut.

use crate::corpus::CHECK_COLUMN;
use crate::passes::repeated_call::arguments_text;
use crate::report::corpus::{
    columns, counts, f64s, one_of, pl, rows_where, strings, strs, u64s, CorpusDir,
};
use crate::report::text::{bounded, Preview};
use polars::prelude::*;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::io;

/// Bounds of an explanation.
#[derive(Debug, Clone, Copy)]
pub struct ExplainOptions {
    /// Characters of each recorded text shown.
    pub preview: usize,
    /// Steps shown; past it the middle is cut (steps that carry findings are always kept).
    pub max_steps: usize,
}

impl Default for ExplainOptions {
    fn default() -> Self {
        ExplainOptions {
            preview: 200,
            max_steps: 60,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct WitnessView {
    pub subject_kind: String,
    pub subject_id: String,
    pub predicate: String,
    /// JSON text, bounded.
    pub value: Preview,
    pub provenance: String,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FindingView {
    pub finding_id: String,
    pub check: String,
    pub kind: String,
    pub seam: String,
    pub advisory: bool,
    pub iteration: Option<u64>,
    pub message: Preview,
    pub witnesses: Vec<WitnessView>,
}

/// One line of the story.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "step", rename_all = "snake_case")]
pub enum Step {
    Iteration {
        iteration: u64,
    },
    ToolCall {
        seq: u64,
        iteration: Option<u64>,
        tool: String,
        call_id: Option<String>,
        args_fingerprint: String,
        arguments: Preview,
        result: Option<Preview>,
        error: bool,
        duration_ms: Option<f64>,
        /// Landing flags in words (`unanswered`, `arguments-rewritten`, ...).
        flags: Vec<String>,
        findings: Vec<FindingView>,
    },
    Message {
        seq: u64,
        role: String,
        text: Preview,
    },
    Verdict {
        seq: u64,
        name: String,
        tool: Option<String>,
    },
    Answer {
        seq: Option<u64>,
        text: Preview,
        findings: Vec<FindingView>,
    },
    /// Steps left out to bound the output.
    Omitted {
        steps: u64,
    },
}

impl Step {
    fn findings_mut(&mut self) -> Option<&mut Vec<FindingView>> {
        match self {
            Step::ToolCall { findings, .. } | Step::Answer { findings, .. } => Some(findings),
            _ => None,
        }
    }

    fn has_findings(&self) -> bool {
        matches!(self, Step::ToolCall { findings, .. } | Step::Answer { findings, .. } if !findings.is_empty())
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DispositionView {
    pub check: String,
    pub disposition: String,
    pub reason: String,
}

/// One run, told.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Explanation {
    pub run_id: String,
    pub conversation_id: String,
    pub turn: u64,
    /// Runs of the conversation in the store, and this run's position among them (1-based).
    pub conversation_runs: u64,
    pub position: u64,
    pub format: String,
    pub source: String,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub started_at: Option<String>,
    pub duration_ms: Option<f64>,
    pub events: u64,
    pub landings: u64,
    pub user_message: Option<Preview>,
    pub steps: Vec<Step>,
    /// Findings that name no event of the run.
    pub unplaced: Vec<FindingView>,
    pub dispositions: Vec<DispositionView>,
    /// Events not told as steps, by kind (context rows, model calls, ...).
    pub not_shown: Vec<(String, u64)>,
    /// What was cut to bound the output, in words.
    pub cut: Vec<String>,
}

fn flag_words(flags: u64) -> Vec<String> {
    use crate::model::LandingFlags as F;
    let mut out = Vec::new();
    for (bit, word) in [
        (F::UNANSWERED, "unanswered"),
        (F::ARGS_REWRITTEN, "arguments-rewritten"),
        (F::MODEL_RESULT, "model-channel-result"),
        (F::CONTENT_OMITTED, "content-omitted"),
    ] {
        if flags & bit as u64 != 0 {
            out.push(word.to_string());
        }
    }
    out
}

/// A finding of one of the runs, with its witnesses and the columns used to place it.
struct Placed {
    run_id: String,
    view: FindingView,
    tool: Option<String>,
    call_id: Option<String>,
    args_fp: Option<String>,
}

/// The findings of `run_ids`, in table order.
fn findings_of(
    corpus: &CorpusDir,
    run_ids: &[String],
    opts: ExplainOptions,
) -> io::Result<Vec<Placed>> {
    let mut lf = corpus.table("findings")?;
    let names = columns(&mut lf)?;
    let pick = |n: &str| {
        if names.iter().any(|x| x == n) {
            col(n)
        } else {
            lit(NULL).cast(DataType::String).alias(n)
        }
    };
    let lf = lf.filter(one_of("run_id", run_ids));
    let df = lf
        .clone()
        .select([
            col("run_id"),
            col("finding_id"),
            col(CHECK_COLUMN),
            col("kind"),
            col("seam"),
            col("advisory"),
            col("iteration"),
            col("message"),
            pick("tool_name"),
            pick("tool_call_id"),
            pick("args_fingerprint"),
        ])
        .collect()
        .map_err(pl)?;
    let wit = lf
        .select([col("finding_id"), col("witnesses")])
        .explode(
            cols(["witnesses"]),
            ExplodeOptions {
                empty_as_null: false,
                keep_nulls: false,
            },
        )
        .select([
            col("finding_id"),
            col("witnesses")
                .struct_()
                .field_by_name("subject")
                .struct_()
                .field_by_name("kind")
                .alias("subject_kind"),
            col("witnesses")
                .struct_()
                .field_by_name("subject")
                .struct_()
                .field_by_name("id")
                .alias("subject_id"),
            col("witnesses")
                .struct_()
                .field_by_name("predicate")
                .alias("predicate"),
            col("witnesses")
                .struct_()
                .field_by_name("value")
                .alias("value"),
            col("witnesses")
                .struct_()
                .field_by_name("provenance")
                .alias("provenance"),
        ])
        .collect()
        .map_err(pl)?;
    let w_id = strings(&wit, "finding_id")?;
    let w_kind = strings(&wit, "subject_kind")?;
    let w_sid = strings(&wit, "subject_id")?;
    let w_pred = strings(&wit, "predicate")?;
    let w_val = strings(&wit, "value")?;
    let w_prov = strings(&wit, "provenance")?;
    let mut witnesses_of: HashMap<&str, Vec<usize>> = HashMap::new();
    for (j, id) in w_id.iter().enumerate() {
        witnesses_of.entry(id.as_str()).or_default().push(j);
    }

    let run = strings(&df, "run_id")?;
    let id = strings(&df, "finding_id")?;
    let check = strings(&df, CHECK_COLUMN)?;
    let kind = strings(&df, "kind")?;
    let seam = strings(&df, "seam")?;
    let advisory = counts(
        &df.clone()
            .lazy()
            .select([col("advisory").cast(DataType::UInt64)])
            .collect()
            .map_err(pl)?,
        "advisory",
    )?;
    let iteration = u64s(&df, "iteration")?;
    let message = strings(&df, "message")?;
    let tool = strs(&df, "tool_name")?;
    let call = strs(&df, "tool_call_id")?;
    let args = strs(&df, "args_fingerprint")?;
    Ok((0..df.height())
        .map(|i| Placed {
            run_id: run[i].clone(),
            view: FindingView {
                finding_id: id[i].clone(),
                check: check[i].clone(),
                kind: kind[i].clone(),
                seam: seam[i].clone(),
                advisory: advisory[i] != 0,
                iteration: iteration[i],
                message: Preview::of(&message[i], opts.preview.max(1000)),
                witnesses: witnesses_of
                    .get(id[i].as_str())
                    .map(|js| {
                        js.iter()
                            .map(|&j| WitnessView {
                                subject_kind: w_kind[j].clone(),
                                subject_id: w_sid[j].clone(),
                                predicate: w_pred[j].clone(),
                                value: Preview::of(&w_val[j], 120),
                                provenance: w_prov[j].clone(),
                            })
                            .collect()
                    })
                    .unwrap_or_default(),
            },
            tool: tool[i].clone(),
            call_id: call[i].clone(),
            args_fp: args[i].clone(),
        })
        .collect())
}

/// Explain `run_id` of `corpus`.
pub fn build(corpus: &CorpusDir, run_id: &str, opts: ExplainOptions) -> io::Result<Explanation> {
    build_many(corpus, &[run_id.to_string()], opts)?
        .pop()
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("run {} is not in this corpus's store", bounded(run_id, 120)),
            )
        })
}

/// Explain each of `run_ids` (in that order, each once) with one scan of every table, so a page
/// that tells many runs reads the events once; runs not in the store are left out.
pub fn build_many(
    corpus: &CorpusDir,
    run_ids: &[String],
    opts: ExplainOptions,
) -> io::Result<Vec<Explanation>> {
    if run_ids.is_empty() {
        return Ok(Vec::new());
    }
    let runs = corpus.runs()?;
    let run_rows = runs
        .clone()
        .filter(one_of("run_id", run_ids))
        .select([
            col("run_id"),
            col("conversation_id"),
            col("turn"),
            col("format"),
            col("source"),
            col("agent"),
            col("model"),
            col("started_at")
                .dt()
                .strftime("%Y-%m-%dT%H:%M:%S%.3fZ")
                .alias("started_at"),
            col("duration_ms"),
            col("user_message"),
            col("answer"),
            col("landings"),
            col("events"),
        ])
        .collect()
        .map_err(pl)?;
    let conversations: Vec<String> = strings(&run_rows, "conversation_id")?
        .into_iter()
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let siblings = runs
        .filter(one_of("conversation_id", &conversations))
        .select([col("conversation_id"), col("run_id"), col("turn")])
        .collect()
        .map_err(pl)?;
    let events = corpus
        .events()?
        .filter(one_of("run_id", run_ids))
        .select([
            col("run_id"),
            col("seq"),
            col("kind"),
            col("role"),
            col("tool_name"),
            col("call_id"),
            col("arguments"),
            // A tool result's text, and a message's, are kept in columns of their own.
            col("text")
                .fill_null(col("result_text"))
                .fill_null(col("message_text"))
                .alias("text"),
            col("error").cast(DataType::UInt64),
            col("flags"),
            col("iteration"),
            col("duration_ms"),
        ])
        .sort(["run_id", "seq"], SortMultipleOptions::default())
        .collect()
        .map_err(pl)?;
    let mut findings: HashMap<String, Vec<Placed>> = HashMap::new();
    for f in findings_of(corpus, run_ids, opts)? {
        findings.entry(f.run_id.clone()).or_default().push(f);
    }
    let dispositions = corpus
        .table("dispositions")?
        .filter(one_of("run_id", run_ids))
        .select([
            col("run_id"),
            col(CHECK_COLUMN),
            col("disposition"),
            col("reason"),
        ])
        .collect()
        .map_err(pl)?;
    let checks = corpus.checks();
    let mut told = BTreeSet::new();
    let mut out = Vec::new();
    for id in run_ids {
        if !told.insert(id.as_str()) {
            continue;
        }
        let run = rows_where(&run_rows, "run_id", id)?;
        if run.height() == 0 {
            continue;
        }
        let conversation = strings(&run, "conversation_id")?[0].clone();
        out.push(tell(
            Rows {
                run,
                siblings: rows_where(&siblings, "conversation_id", &conversation)?,
                events: rows_where(&events, "run_id", id)?,
                dispositions: rows_where(&dispositions, "run_id", id)?,
            },
            id,
            findings.remove(id).unwrap_or_default(),
            &checks,
            opts,
        )?);
    }
    Ok(out)
}

/// One run's rows of each table.
struct Rows {
    run: DataFrame,
    siblings: DataFrame,
    events: DataFrame,
    dispositions: DataFrame,
}

/// Tell one run from its rows.
fn tell(
    rows: Rows,
    run_id: &str,
    findings: Vec<Placed>,
    checks: &[String],
    opts: ExplainOptions,
) -> io::Result<Explanation> {
    let Rows {
        run,
        siblings,
        events: ev,
        dispositions: disp,
    } = rows;
    let conversation_id = strings(&run, "conversation_id")?[0].clone();
    let turn = counts(&run, "turn")?[0];
    let mut sib: Vec<(u64, String)> = counts(&siblings, "turn")?
        .into_iter()
        .zip(strings(&siblings, "run_id")?)
        .collect();
    sib.sort();
    let position = sib.iter().position(|(_, r)| r == run_id).unwrap_or(0) as u64 + 1;

    let answer_text = strs(&run, "answer")?[0].clone();
    let Told {
        mut steps,
        not_shown,
        landing_fps,
    } = steps_of(&ev, &answer_text, opts)?;

    // Place each finding where it fired.
    let mut unplaced = Vec::new();
    for f in findings {
        let at = place(&f, &steps, &landing_fps);
        match at.and_then(|i| steps[i].findings_mut()) {
            Some(list) => list.push(f.view),
            None => unplaced.push(f.view),
        }
    }

    let mut dispositions: Vec<DispositionView> = strings(&disp, CHECK_COLUMN)?
        .into_iter()
        .zip(strings(&disp, "disposition")?)
        .zip(strings(&disp, "reason")?)
        .map(|((check, disposition), reason)| DispositionView {
            check,
            disposition,
            reason,
        })
        .collect();
    dispositions.sort_by_key(|d| checks.iter().position(|c| *c == d.check));

    let mut cut = Vec::new();
    let steps = bound_steps(steps, opts.max_steps, &mut cut);
    let long = steps.iter().any(|s| match s {
        Step::ToolCall {
            arguments, result, ..
        } => arguments.cut_chars > 0 || result.as_ref().is_some_and(|r| r.cut_chars > 0),
        Step::Message { text, .. } | Step::Answer { text, .. } => text.cut_chars > 0,
        _ => false,
    });
    let user_message = strs(&run, "user_message")?[0]
        .as_deref()
        .map(|t| Preview::of(t, opts.preview));
    if long || user_message.as_ref().is_some_and(|u| u.cut_chars > 0) {
        cut.push(format!(
            "recorded texts longer than {} characters are cut where shown (--preview)",
            opts.preview
        ));
    }
    Ok(Explanation {
        run_id: run_id.to_string(),
        conversation_id,
        turn,
        conversation_runs: sib.len() as u64,
        position,
        format: strings(&run, "format")?[0].clone(),
        source: strings(&run, "source")?[0].clone(),
        agent: strs(&run, "agent")?[0].clone(),
        model: strs(&run, "model")?[0].clone(),
        started_at: strs(&run, "started_at")?[0].clone(),
        duration_ms: f64s(&run, "duration_ms")?[0],
        events: counts(&run, "events")?[0],
        landings: counts(&run, "landings")?[0],
        user_message,
        steps,
        unplaced,
        dispositions,
        not_shown: not_shown.into_iter().collect(),
        cut,
    })
}

/// What `explain` tells of a run's events: its steps (each iteration, tool call, answer,
/// verdict and assistant message), the landings' fingerprints for placing findings, and how
/// many rows of each other kind were not shown.
struct Told {
    steps: Vec<Step>,
    not_shown: std::collections::BTreeMap<String, u64>,
    landing_fps: Vec<LandingRef>,
}

/// The steps of a run from its events, `answer_text` the run's answer (told at the end when no
/// answer event carries it).
fn steps_of(
    ev: &DataFrame,
    answer_text: &Option<String>,
    opts: ExplainOptions,
) -> io::Result<Told> {
    let seq = counts(ev, "seq")?;
    let kind = strings(ev, "kind")?;
    let role = strs(ev, "role")?;
    let tool = strs(ev, "tool_name")?;
    let call = strs(ev, "call_id")?;
    let arguments = strs(ev, "arguments")?;
    let text = strs(ev, "text")?;
    let error = counts(ev, "error")?;
    let flags = counts(ev, "flags")?;
    let iteration = u64s(ev, "iteration")?;
    let duration = f64s(ev, "duration_ms")?;

    let mut steps: Vec<Step> = Vec::new();
    let mut not_shown: std::collections::BTreeMap<String, u64> = Default::default();
    let mut current_iteration = None;
    let mut answered = false;
    let mut landing_fps: Vec<LandingRef> = Vec::new();
    for i in 0..ev.height() {
        let p = |t: &Option<String>| Preview::of(t.as_deref().unwrap_or(""), opts.preview);
        match kind[i].as_str() {
            "landing" => {
                if iteration[i].is_some() && iteration[i] != current_iteration {
                    current_iteration = iteration[i];
                    steps.push(Step::Iteration {
                        iteration: iteration[i].unwrap_or(0),
                    });
                }
                let fp = crate::js::fingerprint(&arguments_text(arguments[i].as_deref()));
                let name = tool[i].clone().unwrap_or_default();
                landing_fps.push(LandingRef {
                    step: steps.len(),
                    tool: name.clone(),
                    fp: fp.clone(),
                    call_id: call[i].clone(),
                    iteration: iteration[i],
                });
                let unanswered = flags[i] & crate::model::LandingFlags::UNANSWERED as u64 != 0;
                steps.push(Step::ToolCall {
                    seq: seq[i],
                    iteration: iteration[i],
                    tool: name,
                    call_id: call[i].clone(),
                    args_fingerprint: fp,
                    arguments: p(&arguments[i]),
                    result: (!unanswered).then(|| p(&text[i])),
                    error: error[i] != 0,
                    duration_ms: duration[i],
                    flags: flag_words(flags[i]),
                    findings: Vec::new(),
                });
            }
            "answer" => {
                answered = true;
                steps.push(Step::Answer {
                    seq: Some(seq[i]),
                    text: p(&text[i]),
                    findings: Vec::new(),
                });
            }
            "verdict" => steps.push(Step::Verdict {
                seq: seq[i],
                name: text[i].clone().unwrap_or_default(),
                tool: tool[i].clone(),
            }),
            "message"
                if role[i].as_deref() == Some("assistant")
                    && text[i].as_deref().is_some_and(|t| !t.trim().is_empty())
                    && text[i] != *answer_text =>
            {
                steps.push(Step::Message {
                    seq: seq[i],
                    role: "assistant".into(),
                    text: p(&text[i]),
                })
            }
            other => {
                let label = match (other, role[i].as_deref()) {
                    ("message", Some(r)) => format!("{r} message"),
                    ("context", _) => "context row".to_string(),
                    ("model_call", _) => "model call".to_string(),
                    (k, _) => format!("{k} event"),
                };
                *not_shown.entry(label).or_default() += 1;
            }
        }
    }
    if !answered {
        if let Some(a) = &answer_text {
            steps.push(Step::Answer {
                seq: None,
                text: Preview::of(a, opts.preview),
                findings: Vec::new(),
            });
        }
    }
    Ok(Told {
        steps,
        not_shown,
        landing_fps,
    })
}

/// A landing's step and what places a finding on it.
struct LandingRef {
    step: usize,
    tool: String,
    fp: String,
    call_id: Option<String>,
    iteration: Option<u64>,
}

/// The step a finding belongs to: for a finding about a tool call, the landing it fired on (the
/// second landing of its tool and argument fingerprint, else the landing with its call id);
/// for a finding about the answer (`claim` seam), the answer; else the last tool call of its
/// iteration.
fn place(f: &Placed, steps: &[Step], landings: &[LandingRef]) -> Option<usize> {
    if let (Some(tool), Some(fp)) = (&f.tool, &f.args_fp) {
        let same: Vec<usize> = landings
            .iter()
            .filter(|l| &l.tool == tool && &l.fp == fp)
            .map(|l| l.step)
            .collect();
        if same.len() >= 2 {
            return Some(same[1]);
        }
    }
    if let Some(id) = &f.call_id {
        if let Some(l) = landings.iter().find(|l| l.call_id.as_ref() == Some(id)) {
            return Some(l.step);
        }
    }
    if f.view.seam == "claim" {
        if let Some(i) = steps.iter().rposition(|s| matches!(s, Step::Answer { .. })) {
            return Some(i);
        }
    }
    if let Some(it) = f.view.iteration {
        if let Some(l) = landings.iter().rev().find(|l| l.iteration == Some(it)) {
            return Some(l.step);
        }
    }
    None
}

/// Keep at most `max` steps: the first and last halves, plus every step that carries a finding;
/// the rest become `Omitted` markers.
fn bound_steps(steps: Vec<Step>, max: usize, cut: &mut Vec<String>) -> Vec<Step> {
    if steps.len() <= max {
        return steps;
    }
    let head = max / 2;
    let tail = max - head;
    let n = steps.len();
    let total = n;
    let mut out = Vec::new();
    let mut dropped = 0u64;
    let mut omitted_total = 0u64;
    for (i, s) in steps.into_iter().enumerate() {
        let keep = i < head || i >= n - tail || s.has_findings();
        if keep {
            if dropped > 0 {
                out.push(Step::Omitted { steps: dropped });
                omitted_total += dropped;
                dropped = 0;
            }
            out.push(s);
        } else {
            dropped += 1;
        }
    }
    if dropped > 0 {
        out.push(Step::Omitted { steps: dropped });
        omitted_total += dropped;
    }
    cut.push(format!(
        "{omitted_total} of {total} steps not shown (first {head} and last {tail} kept, and every \
         step with a finding; --max-steps)"
    ));
    out
}
