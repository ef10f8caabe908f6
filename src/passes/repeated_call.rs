//! `repeated-call`: a tool called again with identical arguments and an identical result inside
//! one run.
//!
//! Each landing gets a key `tool:argsFp:resultFp` (or `tool:argsFp:*` for a tool the
//! configuration declares `repeated_when = "arguments"`): the fingerprints are FNV-1a over the
//! UTF-16 code units of the arguments text (keys sorted, JavaScript scalars) and of the result
//! the model read, before any note the framework appended. The framework files its note once
//! per key, on exactly the second landing; offline we see the whole run, so the finding is filed
//! where the second landing happened and reports how often the key landed in all.
//!
//! The finding never carries argument or result values: fingerprints say "same" without them.

use crate::config::RepeatedWhen;
use crate::corpus::{Agreement, Disposition, Draft, FindingColumns, Subject, Witness};
use crate::js;
use crate::model::digest::{Digest, DigestKind, DigestValue};
use crate::model::{Conversation, Event, EventKind, LandingFlags, Run};
use crate::passes::{Pass, PassContext, RunOutcome};
use serde_json::{json, Value};
use std::borrow::Cow;
// foldhash (seeded per process), not SipHash: a part has a call map for every run.
use hashbrown::HashMap;

pub struct RepeatedCall;

/// Where the framework's appended note starts in a decorated result.
const NOTE_MARKER: &str = "\n\n[identical call: '";

/// The fingerprints and key of one landing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallKey {
    pub key: String,
    pub args_fingerprint: String,
    pub result_fingerprint: String,
}

/// The arguments text the framework hashes. Arguments that are not JSON are hashed as the JSON
/// string holding their text; absent arguments as `undefined` (what the framework writes for a
/// value `JSON.stringify` cannot represent).
pub fn arguments_text(arguments: Option<&str>) -> String {
    match arguments {
        None => "undefined".to_string(),
        Some(text) => match js::parse_json(text) {
            Ok(v) => js::stable_string(&v),
            Err(_) => js::stable_string(&Value::String(text.to_string())),
        },
    }
}

/// The result the model read, without a note the framework appended.
pub fn undecorated_result(text: &str) -> &str {
    match text.find(NOTE_MARKER) {
        Some(i) => &text[..i],
        None => text,
    }
}

/// The fingerprint of a recorded result: of the result the model read, without a note the
/// framework appended.
pub fn result_fingerprint(result: &str) -> String {
    js::fingerprint(undecorated_result(result))
}

pub fn call_key(tool: &str, arguments: Option<&str>, result: &str, mode: RepeatedWhen) -> CallKey {
    keyed(
        tool,
        js::fingerprint(&arguments_text(arguments)),
        result_fingerprint(result),
        mode,
    )
}

/// [`call_key`] with the arguments and the result already fingerprinted.
fn keyed(
    tool: &str,
    args_fingerprint: String,
    result_fingerprint: String,
    mode: RepeatedWhen,
) -> CallKey {
    let key = match mode {
        RepeatedWhen::Arguments => format!("{tool}:{args_fingerprint}:*"),
        RepeatedWhen::ArgumentsAndResult => {
            format!("{tool}:{args_fingerprint}:{result_fingerprint}")
        }
    };
    CallKey {
        key,
        args_fingerprint,
        result_fingerprint,
    }
}

struct KeyState<'a> {
    count: u32,
    first: &'a Event,
    fired_at: Option<&'a Event>,
    fingerprints: CallKey,
    mode: RepeatedWhen,
    wasted_ms: f64,
    wasted_timed: bool,
}

/// A verdict the framework recorded for this check.
#[derive(Debug, Clone)]
struct Recorded {
    key: String,
    call_id: Option<String>,
    args_fingerprint: String,
    result_fingerprint: String,
}

fn recorded_verdicts(run: &Run) -> Vec<Recorded> {
    run.events_of(EventKind::Verdict)
        .filter(|e| e.text.as_deref() == Some("repeated-call"))
        .filter_map(|e| {
            let envelope = js::parse_json(e.payload.as_deref()?).ok()?;
            let p = envelope.get("payload")?;
            let tool = p.get("toolName")?.as_str()?;
            let args = p.get("argsFingerprint")?.as_str()?.to_string();
            let result = p.get("resultFingerprint")?.as_str()?.to_string();
            let arguments_mode = p.get("mode").and_then(Value::as_str) == Some("arguments");
            Some(Recorded {
                key: if arguments_mode {
                    format!("{tool}:{args}:*")
                } else {
                    format!("{tool}:{args}:{result}")
                },
                call_id: p
                    .get("toolCallId")
                    .and_then(Value::as_str)
                    .map(str::to_string),
                args_fingerprint: args,
                result_fingerprint: result,
            })
        })
        .collect()
}

impl Pass for RepeatedCall {
    fn name(&self) -> &'static str {
        "repeated-call"
    }

    fn seam(&self) -> &'static str {
        "tool-result"
    }

    fn check(&self, conversation: &Conversation, ctx: &PassContext) -> Vec<RunOutcome> {
        conversation
            .runs
            .iter()
            .map(|run| check_run(run, ctx))
            .collect()
    }

    fn digests(&self) -> &'static [&'static dyn Digest] {
        // Arguments first: the result digest picks its landings by their arguments fingerprint.
        &[&ArgumentsFingerprint, &ResultFingerprint]
    }

    fn check_digested(
        &self,
        conversation: &Conversation,
        ctx: &PassContext,
    ) -> Option<Vec<RunOutcome>> {
        (!conversation.runs.iter().any(needs_result_text)).then(|| self.check(conversation, ctx))
    }
}

/// The arguments fingerprint of every answered landing. With it stored, an audit of the store
/// leaves the arguments undecoded (no check reads more of them), and neither it nor the checks
/// of an audit of raw inputs parse and sort the arguments JSON again.
pub struct ArgumentsFingerprint;

/// The name [`ArgumentsFingerprint`] is stored and read under.
const ARGUMENTS_FINGERPRINT: &str = "arguments-fingerprint";

impl Digest for ArgumentsFingerprint {
    fn name(&self) -> &'static str {
        ARGUMENTS_FINGERPRINT
    }

    fn version(&self) -> u32 {
        1
    }

    fn kind(&self) -> DigestKind {
        DigestKind::ArgumentsFingerprint
    }

    fn compute(&self, run: &Run) -> Vec<(usize, DigestValue)> {
        answered_at(run)
            .map(|(i, e)| {
                let fingerprint = js::fingerprint(&arguments_text(e.arguments.as_deref()));
                (i, DigestValue::ArgumentsFingerprint(fingerprint))
            })
            .collect()
    }
}

/// The result fingerprint of every answered landing that shares its tool and arguments with
/// another answered landing of its run: the landings whose result [`judge`] compares (the
/// same rule, [`calls_of`] and [`call_counts`]).
pub struct ResultFingerprint;

/// The name [`ResultFingerprint`] is stored and read under.
const RESULT_FINGERPRINT: &str = "result-fingerprint";

impl Digest for ResultFingerprint {
    fn name(&self) -> &'static str {
        RESULT_FINGERPRINT
    }

    fn version(&self) -> u32 {
        1
    }

    fn kind(&self) -> DigestKind {
        DigestKind::Fingerprint
    }

    fn compute(&self, run: &Run) -> Vec<(usize, DigestValue)> {
        let (at, landed): (Vec<usize>, Vec<&Event>) = answered_at(run).unzip();
        let calls = calls_of(&landed);
        let same_call = call_counts(&calls);
        at.iter()
            .zip(&landed)
            .zip(&calls)
            .filter(|(_, call)| same_call[call] > 1)
            .map(|((&i, l), _)| {
                (
                    i,
                    DigestValue::Fingerprint(result_fingerprint(l.text_or_empty())),
                )
            })
            .collect()
    }
}

/// Does a run need a result text it does not hold? Only a landing that shares its tool and
/// arguments with another needs its result, and only its fingerprint.
fn needs_result_text(run: &Run) -> bool {
    let landed = answered_landings(run);
    // Runs `check_run` does not judge fingerprint nothing.
    let unjudged = LandingFlags::ARGS_REWRITTEN | LandingFlags::CONTENT_OMITTED;
    if landed.iter().any(|e| e.has_flag(unjudged)) {
        return false;
    }
    let calls = calls_of(&landed);
    let same_call = call_counts(&calls);
    landed
        .iter()
        .zip(&calls)
        .any(|(l, call)| same_call[call] > 1 && l.digests.fingerprint(RESULT_FINGERPRINT).is_none())
}

fn check_run(run: &Run, ctx: &PassContext) -> RunOutcome {
    let landed = answered_landings(run);
    if landed
        .iter()
        .any(|e| e.has_flag(LandingFlags::ARGS_REWRITTEN))
    {
        return RunOutcome::new(
            Disposition::NotApplicable,
            "middleware rewrote tool arguments (changedArgKeys): the arguments that ran were \
             not recorded",
        );
    }
    if landed
        .iter()
        .any(|e| e.has_flag(LandingFlags::CONTENT_OMITTED))
    {
        return RunOutcome::new(
            Disposition::NotApplicable,
            "the recording omitted tool arguments or results",
        );
    }
    let mut outcome = if landed.is_empty() {
        RunOutcome::new(Disposition::Unreachable, "no tool landed in this run")
    } else {
        judge(&landed, ctx)
    };
    // Agreement with the framework, when it was watching this run: it filed a repeated-call
    // verdict, or its per-run disposition ledger (which it writes for every run it audits).
    let watched = run
        .events_of(EventKind::Verdict)
        .any(|e| matches!(e.text.as_deref(), Some("repeated-call" | "disposition")));
    if watched {
        outcome.agreement = agreement(run, &outcome.findings);
    }
    outcome
}

/// The landings a run judges: the answered ones.
fn answered_landings(run: &Run) -> Vec<&Event> {
    answered_at(run).map(|(_, e)| e).collect()
}

/// [`answered_landings`] with their indices in `run.events`, where digests are filed.
fn answered_at(run: &Run) -> impl Iterator<Item = (usize, &Event)> {
    run.events
        .iter()
        .enumerate()
        .filter(|(_, e)| e.kind() == EventKind::Landing && !e.has_flag(LandingFlags::UNANSWERED))
}

/// Each landing's tool and arguments fingerprint, and how many landings share each pair.
/// A landing can only repeat one of the same tool with the same arguments (a key is the tool,
/// then fixed-width fingerprints, so equal keys mean an equal tool and equal arguments), and a
/// landing that repeats nothing is never reported, so only landings that share their pair with
/// another have their result fingerprinted: that pass over the whole result text was most of
/// this check's cost on large results.
/// The arguments fingerprint is the stored digest when the landing carries it (an audit of a
/// store reads landings without their arguments then).
type Calls<'a> = Vec<(&'a str, Cow<'a, str>)>;

fn calls_of<'a>(landed: &[&'a Event]) -> Calls<'a> {
    landed
        .iter()
        .map(|l| {
            let tool = l.tool_name.as_deref().unwrap_or("");
            let arguments = match l.digests.arguments_fingerprint(ARGUMENTS_FINGERPRINT) {
                Some(stored) => Cow::Borrowed(stored),
                None => Cow::Owned(js::fingerprint(&arguments_text(l.arguments.as_deref()))),
            };
            (tool, arguments)
        })
        .collect()
}

fn call_counts<'c, 'a>(calls: &'c Calls<'a>) -> HashMap<&'c (&'a str, Cow<'a, str>), u32> {
    let mut same_call: HashMap<&(&str, Cow<str>), u32> = HashMap::new();
    for call in calls {
        *same_call.entry(call).or_default() += 1;
    }
    same_call
}

fn judge(landed: &[&Event], ctx: &PassContext) -> RunOutcome {
    let calls = calls_of(landed);
    let same_call = call_counts(&calls);
    let mut order: Vec<String> = Vec::new();
    let mut keys: HashMap<String, KeyState<'_>> = HashMap::new();
    for (&landing, call) in landed.iter().zip(&calls) {
        if same_call[call] < 2 {
            continue;
        }
        let &(tool, ref args_fingerprint) = call;
        let mode = ctx.config.repeated_when(tool);
        let result = match landing.digests.fingerprint(RESULT_FINGERPRINT) {
            Some(stored) => stored.to_string(),
            None => result_fingerprint(landing.text_or_empty()),
        };
        let fp = keyed(tool, args_fingerprint.to_string(), result, mode);
        match keys.get_mut(&fp.key) {
            Some(state) => {
                state.count += 1;
                if state.count == 2 {
                    // The framework reports the fingerprints of the landing it fired on (in
                    // arguments mode its result may differ from the first one's).
                    state.fired_at = Some(landing);
                    order.push(fp.key.clone());
                    state.fingerprints = fp;
                }
                match landing.duration_ms {
                    Some(ms) => state.wasted_ms += ms,
                    None => state.wasted_timed = false,
                }
            }
            None => {
                keys.insert(
                    fp.key.clone(),
                    KeyState {
                        count: 1,
                        first: landing,
                        fired_at: None,
                        fingerprints: fp,
                        mode,
                        wasted_ms: 0.0,
                        wasted_timed: true,
                    },
                );
            }
        }
    }
    if order.is_empty() {
        return RunOutcome::new(
            Disposition::CheckedPass,
            format!("{} landing(s), no identical repeat", landed.len()),
        );
    }
    let findings: Vec<Draft> = order.iter().map(|key| draft(&keys[key])).collect();
    let mut outcome = RunOutcome::new(
        Disposition::CheckedFail,
        format!(
            "{} call(s) repeated with identical arguments{}",
            findings.len(),
            if findings
                .iter()
                .all(|f| f.columns.mode.as_deref() == Some("arguments"))
            {
                ""
            } else {
                " and result"
            }
        ),
    );
    outcome.findings = findings;
    outcome
}

fn draft(state: &KeyState<'_>) -> Draft {
    let fired = state.fired_at.expect("fired keys have a second landing");
    let tool = fired.tool_name.clone().unwrap_or_default();
    let call_id = fired.call_id.clone();
    let fp = &state.fingerprints;
    let arguments_mode = state.mode == RepeatedWhen::Arguments;
    let call_subject = Subject::new("tool-call", call_id.clone().unwrap_or_default());
    let wasted = state.count - 1;
    let wasted_ms = state.wasted_timed.then_some(state.wasted_ms);
    let message = format!(
        "'{tool}' landed {count} times in this run with identical arguments{same_result}; the \
         first landing already had what the later {wasted} could give. Filed where the second \
         landing happened{first}. A repeat can be deliberate (polling), so this is advisory.",
        count = state.count,
        same_result = if arguments_mode {
            " (this tool is judged on arguments alone)"
        } else {
            " and an identical result"
        },
        first = match &state.first.call_id {
            Some(id) => format!(", after the first as call {id:?}"),
            None => String::new(),
        },
    );
    Draft {
        kind: "repeated-call".into(),
        seam: "tool-result".into(),
        predicate: "identical-call".into(),
        advisory: true,
        iteration: fired.iteration,
        subjects: vec![
            Subject::new("tool", tool.clone()),
            Subject::new("call-key", fp.key.clone()),
        ],
        witnesses: vec![
            Witness::asserted(
                call_subject.clone(),
                "arguments-fingerprint",
                json!(fp.args_fingerprint),
                "FNV-1a (UTF-16 code units) of the arguments text, keys sorted at every depth",
            ),
            Witness::asserted(
                call_subject.clone(),
                "result-fingerprint",
                json!(fp.result_fingerprint),
                if arguments_mode {
                    "FNV-1a of the result the model read; not part of the key for this tool"
                } else {
                    "FNV-1a (UTF-16 code units) of the result the model read, before any \
                     framework note"
                },
            ),
            Witness::asserted(
                call_subject,
                "occurrences",
                json!(state.count),
                "landings of this key in the whole run",
            ),
        ],
        message,
        columns: FindingColumns {
            tool_name: Some(tool),
            tool_call_id: call_id,
            key: Some(fp.key.clone()),
            args_fingerprint: Some(fp.args_fingerprint.clone()),
            result_fingerprint: Some(fp.result_fingerprint.clone()),
            mode: arguments_mode.then(|| "arguments".to_string()),
            occurrences: Some(state.count),
            wasted_landings: Some(wasted),
            wasted_ms,
            ..FindingColumns::default()
        },
    }
}

fn agreement(run: &Run, findings: &[Draft]) -> Vec<(String, Agreement, Option<String>)> {
    let recorded = recorded_verdicts(run);
    let mut rows = Vec::new();
    for f in findings {
        let key = f.columns.key.clone().unwrap_or_default();
        match recorded.iter().find(|r| r.key == key) {
            Some(r) => {
                let mut differences = Vec::new();
                if r.call_id != f.columns.tool_call_id {
                    differences.push(format!(
                        "recorded on call {:?}, engine on {:?}",
                        r.call_id, f.columns.tool_call_id
                    ));
                }
                if Some(&r.result_fingerprint) != f.columns.result_fingerprint.as_ref() {
                    differences.push(format!(
                        "result fingerprint recorded {}, engine {}",
                        r.result_fingerprint,
                        f.columns.result_fingerprint.as_deref().unwrap_or("")
                    ));
                }
                if Some(&r.args_fingerprint) != f.columns.args_fingerprint.as_ref() {
                    differences.push("arguments fingerprint differs".to_string());
                }
                if differences.is_empty() {
                    rows.push((key, Agreement::Agrees, None));
                } else {
                    rows.push((key, Agreement::Differs, Some(differences.join("; "))));
                }
            }
            None => rows.push((key, Agreement::EngineOnly, None)),
        }
    }
    for r in &recorded {
        if !findings
            .iter()
            .any(|f| f.columns.key.as_deref() == Some(r.key.as_str()))
        {
            let detail = r.key.ends_with(":*").then(|| {
                "recorded in arguments mode: declare the tool with repeated_when = \
                 \"arguments\" in the configuration"
                    .to_string()
            });
            rows.push((r.key.clone(), Agreement::RecordedOnly, detail));
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;
    use crate::model::{Event, Role};

    fn landing(tool: &str, args: &str, result: &str, id: &str) -> Event {
        let mut e = Event::new(EventKind::Landing);
        e.role = Some(Role::Assistant);
        e.tool_name = Some(tool.into());
        e.arguments = Some(args.into());
        e.text = Some(result.into());
        e.call_id = Some(id.into());
        e.duration_ms = Some(10.0);
        e
    }

    fn run_of(events: Vec<Event>) -> Conversation {
        let mut run = Run {
            run_id: "r".into(),
            conversation_id: "c".into(),
            turn: 1,
            events,
            ..Run::default()
        };
        run.renumber();
        Conversation {
            id: "c".into(),
            runs: vec![run],
        }
    }

    fn check(conv: &Conversation, config: Config) -> Vec<RunOutcome> {
        RepeatedCall.check(
            conv,
            &PassContext {
                config,
                ..PassContext::default()
            },
        )
    }

    /// The result-fingerprint digest goes to exactly the landings the check compares: answered
    /// ones sharing tool and arguments fingerprint (arguments that differ only in key order
    /// share it). The arguments-fingerprint digest goes to every answered landing. So a
    /// conversation read without result text and arguments but with the digests is checked,
    /// not declined, and the same as with its text and arguments.
    #[test]
    fn the_digest_fingerprints_the_landings_the_check_compares() {
        let mut unanswered = landing("t", r#"{"q":1}"#, "", "c9");
        unanswered.flags |= LandingFlags::UNANSWERED;
        let mut conv = run_of(vec![
            landing("t", r#"{"a":1,"b":2}"#, "same", "c1"),
            landing("t", r#"{"b":2,"a":1}"#, "same", "c2"),
            landing("t", r#"{"q":1}"#, "once", "c3"),
            unanswered,
            landing("u", r#"{"a":1,"b":2}"#, "other tool", "c4"),
        ]);
        let given: Vec<usize> = ResultFingerprint
            .compute(&conv.runs[0])
            .into_iter()
            .map(|(i, _)| i)
            .collect();
        assert_eq!(given, [0, 1]);
        let argued: Vec<(usize, String)> = ArgumentsFingerprint
            .compute(&conv.runs[0])
            .into_iter()
            .map(|(i, v)| match v {
                DigestValue::ArgumentsFingerprint(f) => (i, f),
                other => panic!("{other:?}"),
            })
            .collect();
        let sorted_ab = js::fingerprint(r#"{"a":1,"b":2}"#);
        assert_eq!(
            argued,
            [
                (0, sorted_ab.clone()),
                (1, sorted_ab.clone()),
                (2, js::fingerprint(r#"{"q":1}"#)),
                (4, sorted_ab)
            ]
        );
        let whole = check(&conv, Config::default());
        assert_eq!(whole[0].disposition, Disposition::CheckedFail);
        crate::model::digest::fill(&mut conv.runs[0], RepeatedCall.digests());
        for e in &mut conv.runs[0].events {
            e.text = None;
            e.arguments = None;
        }
        let ctx = PassContext::default();
        let digested = RepeatedCall.check_digested(&conv, &ctx);
        assert_eq!(digested, Some(whole));
    }

    #[test]
    fn spec_keys() {
        let k = call_key(
            "lookup",
            Some(r#"{"q":"Q3","n":1}"#),
            "rows",
            RepeatedWhen::ArgumentsAndResult,
        );
        assert_eq!(k.key, "lookup:c4eac9d1:2a37b398");
        let k = call_key(
            "lookup",
            Some(r#"{"n":1,"q":"Q3"}"#),
            "rows",
            RepeatedWhen::ArgumentsAndResult,
        );
        assert_eq!(k.key, "lookup:c4eac9d1:2a37b398");
        let k = call_key(
            "render_screen",
            Some(r#"{"view":"home"}"#),
            "rendered home @v2",
            RepeatedWhen::Arguments,
        );
        assert_eq!(k.key, "render_screen:2a1ba70f:*");
        assert_eq!(k.result_fingerprint, "0d91c3e7");
        let k = call_key(
            "x",
            Some(r#"{"b":null}"#),
            "",
            RepeatedWhen::ArgumentsAndResult,
        );
        assert_eq!(
            (k.args_fingerprint.as_str(), k.result_fingerprint.as_str()),
            ("307f4b12", "811c9dc5")
        );
        // The framework's note is not part of the result.
        let decorated =
            "rows\n\n[identical call: 'lookup' has now returned exactly this result 2 times";
        assert_eq!(
            call_key(
                "lookup",
                Some("{}"),
                decorated,
                RepeatedWhen::ArgumentsAndResult
            )
            .result_fingerprint,
            "2a37b398"
        );
    }

    #[test]
    fn third_and_fourth_landing_add_nothing() {
        let conv = run_of(vec![
            landing("lookup", r#"{"q":"Q3"}"#, "the same 40 rows", "c1"),
            landing("lookup", r#"{"q":"Q3"}"#, "the same 40 rows", "c2"),
            landing("lookup", r#"{"q":"Q3"}"#, "the same 40 rows", "c3"),
            landing("lookup", r#"{"q":"Q3"}"#, "the same 40 rows", "c4"),
        ]);
        let out = &check(&conv, Config::default())[0];
        assert_eq!(out.disposition, Disposition::CheckedFail);
        assert_eq!(out.findings.len(), 1);
        let f = &out.findings[0];
        assert_eq!(f.columns.key.as_deref(), Some("lookup:73aa928e:e922c5fb"));
        assert_eq!(f.columns.tool_call_id.as_deref(), Some("c2"));
        assert_eq!(f.columns.occurrences, Some(4));
        assert_eq!(f.columns.wasted_landings, Some(3));
        assert_eq!(f.columns.wasted_ms, Some(30.0));
        // No argument value leaks into the finding.
        let text = format!("{f:?}");
        assert!(!text.contains("Q3"), "{text}");
    }

    #[test]
    fn progress_is_not_a_repeat_and_arguments_mode_is() {
        let polling = run_of(vec![
            landing("status", r#"{"q":"Q3","n":1}"#, "running", "c1"),
            landing("status", r#"{"q":"Q3","n":1}"#, "done", "c2"),
        ]);
        let out = &check(&polling, Config::default())[0];
        assert_eq!(out.disposition, Disposition::CheckedPass);

        let render = run_of(vec![
            landing(
                "render_screen",
                r#"{"view":"home"}"#,
                "rendered home @v1",
                "c1",
            ),
            landing(
                "render_screen",
                r#"{"view":"home"}"#,
                "rendered home @v2",
                "c2",
            ),
        ]);
        assert_eq!(
            check(&render, Config::default())[0].disposition,
            Disposition::CheckedPass
        );
        let config =
            Config::from_toml("[tools.render_screen]\nrepeated_when = \"arguments\"\n").unwrap();
        let out = &check(&render, config)[0];
        assert_eq!(out.disposition, Disposition::CheckedFail);
        let f = &out.findings[0];
        assert_eq!(f.columns.key.as_deref(), Some("render_screen:2a1ba70f:*"));
        assert_eq!(f.columns.result_fingerprint.as_deref(), Some("0d91c3e7"));
        assert_eq!(f.columns.mode.as_deref(), Some("arguments"));
    }

    #[test]
    fn only_the_same_tool_with_the_same_arguments_repeats() {
        let run = run_of(vec![
            landing("lookup", r#"{"q":1}"#, "rows", "c1"),
            landing("search", r#"{"q":1}"#, "rows", "c2"),
            landing("lookup", r#"{"q":2}"#, "rows", "c3"),
            landing("lookup", r#"{"q":1}"#, "other rows", "c4"),
            landing("lookup", r#"{"q":1}"#, "rows", "c5"),
        ]);
        let out = &check(&run, Config::default())[0];
        assert_eq!(out.disposition, Disposition::CheckedFail);
        assert_eq!(out.findings.len(), 1);
        let f = &out.findings[0];
        let expected = call_key(
            "lookup",
            Some(r#"{"q":1}"#),
            "rows",
            RepeatedWhen::ArgumentsAndResult,
        );
        assert_eq!(f.columns.key.as_deref(), Some(expected.key.as_str()));
        assert_eq!(
            f.columns.result_fingerprint.as_deref(),
            Some(expected.result_fingerprint.as_str())
        );
        assert_eq!(f.columns.tool_call_id.as_deref(), Some("c5"));
        assert_eq!(f.columns.occurrences, Some(2));
        assert_eq!(
            out.reason,
            "1 call(s) repeated with identical arguments and result"
        );
    }

    #[test]
    fn array_order_matters_and_key_order_does_not() {
        let conv = run_of(vec![
            landing("t", r#"{"list":[1,2]}"#, "r", "c1"),
            landing("t", r#"{"list":[2,1]}"#, "r", "c2"),
            landing("t", r#"{"f":{"x":1,"y":2}}"#, "r", "c3"),
            landing("t", r#"{"f":{"y":2,"x":1}}"#, "r", "c4"),
        ]);
        let out = &check(&conv, Config::default())[0];
        assert_eq!(out.findings.len(), 1);
        assert_eq!(
            out.findings[0].columns.key.as_deref(),
            Some("t:f3af8fb7:f70c4715")
        );
    }

    #[test]
    fn dispositions_for_empty_unanswered_and_rewritten() {
        assert_eq!(
            check(&run_of(vec![]), Config::default())[0].disposition,
            Disposition::Unreachable
        );
        let mut unanswered = landing("t", "{}", "", "c1");
        unanswered.flags = LandingFlags::UNANSWERED;
        assert_eq!(
            check(&run_of(vec![unanswered]), Config::default())[0].disposition,
            Disposition::Unreachable
        );
        let mut rewritten = landing("t", "{}", "x", "c1");
        rewritten.flags = LandingFlags::ARGS_REWRITTEN;
        assert_eq!(
            check(&run_of(vec![rewritten]), Config::default())[0].disposition,
            Disposition::NotApplicable
        );
    }

    #[test]
    fn each_run_starts_from_zero() {
        let mut conv = run_of(vec![landing("lookup", r#"{"q":"Q3"}"#, "rows", "c1")]);
        let mut second = conv.runs[0].clone();
        second.run_id = "r2".into();
        second.turn = 2;
        conv.runs.push(second);
        let out = check(&conv, Config::default());
        assert!(out
            .iter()
            .all(|o| o.disposition == Disposition::CheckedPass));
    }
}
