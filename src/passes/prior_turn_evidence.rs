//! `prior-turn-evidence`: the answer is grounded, and every value in it was served before the
//! turn being answered.
//!
//! The run is judged against the message list the model saw when it wrote the answer
//! ([`Conversation::history_for`]): the evidence index is built from its tool results, each
//! form stamped with the latest turn that served it (`crate::evidence`), and the answer's values
//! are looked up in it. One value from this turn is enough to pass. When every grounded value
//! is older, one advisory finding is filed at the claim seam: referring back can be a
//! legitimate follow-up, and nothing here can tell the two apart.
//!
//! A run whose output contract was not met (its recording says so: a `contract-unmet` verdict,
//! or a ledger of output attempts ending `exhausted`) is not judged: the framework's evidence
//! gate never judges an answer that exhausted its attempts, so there is no verdict to reproduce.
//! What the schema-attempt check infers by validating answers itself is not consulted here.
//!
//! The grounded values are data from tool results: a finding lists them only when the audit
//! was asked to (`--include-values`); otherwise it says how many there were.

use crate::corpus::{Agreement, Disposition, Draft, FindingColumns, Subject, Witness};
use crate::evidence::index::is_framework_frame;
use crate::evidence::{
    answer_values, answer_values_from_digest, build_index, build_watching_index, disposition,
    read_values, Candidate, EvidenceIndex, Reading,
};
use crate::js;
use crate::model::digest::{Digest, DigestKind, DigestValue};
use crate::model::{vocab, Conversation, EventKind, Role, Run};
use crate::passes::{Pass, PassContext, RunOutcome};
use serde_json::{json, Value};

pub struct PriorTurnEvidence;

/// The evidence digests of what the index reads of a run and what it looks up: every tool
/// message ([`crate::evidence::digest_result`]), every person's user or system message, and
/// the answer ([`crate::evidence::digest_text`]). A watching index and the answer's values
/// take them instead of the text.
pub struct EvidenceForms;

/// The name [`EvidenceForms`] is stored and read under.
const EVIDENCE: &str = "evidence";

impl Digest for EvidenceForms {
    fn name(&self) -> &'static str {
        EVIDENCE
    }

    /// 1: tool messages only. 2: user and system messages and the answer too.
    fn version(&self) -> u32 {
        2
    }

    fn kind(&self) -> DigestKind {
        DigestKind::Evidence
    }

    fn compute(&self, run: &Run) -> Vec<(usize, DigestValue)> {
        run.events
            .iter()
            .enumerate()
            .filter(|(_, e)| e.kind() == EventKind::Message)
            .filter_map(|(i, e)| {
                let digest = match e.role? {
                    Role::Tool => crate::evidence::digest_result(e.text_or_empty()),
                    Role::User | Role::System if !is_framework_frame(e.text_or_empty()) => {
                        crate::evidence::digest_text(e.text_or_empty())
                    }
                    _ => return None,
                };
                Some((i, DigestValue::Evidence(digest)))
            })
            .collect()
    }

    /// Only a non-blank answer is judged, so only it gets a digest: a run without one has no
    /// answer to judge.
    fn compute_answer(&self, run: &Run) -> Option<DigestValue> {
        let answer = run.answer.as_deref()?;
        (!answer.trim().is_empty())
            .then(|| DigestValue::Evidence(crate::evidence::digest_text(answer)))
    }
}

/// The check's name, as the framework records it in its findings and disposition rows.
const CHECK: &str = "prior-turn-evidence";

impl Pass for PriorTurnEvidence {
    fn name(&self) -> &'static str {
        CHECK
    }

    fn seam(&self) -> &'static str {
        "claim"
    }

    fn check(&self, conversation: &Conversation, ctx: &PassContext) -> Vec<RunOutcome> {
        // Indexes that keep only the forms the answers look up first, fed from the results'
        // digests where they stand for the text; in the rare conversation whose tool results
        // offer more forms than the budget, full indexes.
        // Answers from their digests, or from their text where a digest does not stand for it
        // (or does not match it: a table of the store handed in by another program).
        let values = answers(conversation, ctx, true)
            .unwrap_or_else(|| answers(conversation, ctx, false).expect("answers from text"));
        match judge(conversation, ctx, &values, true, false) {
            Judged::Outcomes(outcomes) => outcomes,
            Judged::Overflowed | Judged::NeedsText => {
                match judge(conversation, ctx, &values, false, false) {
                    Judged::Outcomes(outcomes) => outcomes,
                    _ => unreachable!("a full index reads text and does not overflow"),
                }
            }
        }
    }

    fn digests(&self) -> &'static [&'static dyn Digest] {
        &[&EvidenceForms]
    }

    fn check_digested(
        &self,
        conversation: &Conversation,
        ctx: &PassContext,
    ) -> Option<Vec<RunOutcome>> {
        let values = answers(conversation, ctx, true)?;
        match judge(conversation, ctx, &values, true, true) {
            Judged::Outcomes(outcomes) => Some(outcomes),
            Judged::Overflowed | Judged::NeedsText => None,
        }
    }
}

/// What [`judge`] made of a conversation.
enum Judged {
    /// One outcome per run.
    Outcomes(Vec<RunOutcome>),
    /// A watching index overflowed: judge with full indexes.
    Overflowed,
    /// A message's digest could not stand for its text, and the text was not read.
    NeedsText,
}

/// The values each run's answer states ([`answer_values`]), extracted once, or `None` for a run
/// with no answer to judge (none, or a blank one): a watching index is built around them, and
/// the reading looks them up.
///
/// With `digested`, from the answer's digest when it stands for the text; an answer has one
/// exactly when it is not blank, so a run read without its answer's text (an audit of a store)
/// is judged from the digest alone. `None` when such a run's digest does not stand for the
/// text (a declared shape, or more tokens than are read): the text is needed.
fn answers(
    conversation: &Conversation,
    ctx: &PassContext,
    digested: bool,
) -> Option<Vec<Option<Vec<Candidate>>>> {
    let from_text = |answer: Option<&str>| {
        answer
            .filter(|a| !a.trim().is_empty())
            .map(|a| answer_values(a, &ctx.evidence))
    };
    conversation
        .runs
        .iter()
        .map(|run| {
            let text = run.answer.as_deref();
            match run.answer_digests.evidence(EVIDENCE).filter(|_| digested) {
                Some(digest) => match answer_values_from_digest(digest, &ctx.evidence) {
                    Some(values) => Some(Some(values)),
                    None => text.map(|t| from_text(Some(t))),
                },
                None => Some(from_text(text)),
            }
        })
        .collect()
}

/// Judge every run of the conversation, with [watching](EvidenceIndex::watching) indexes when
/// `watching` is set or full ones otherwise; `values` are the runs' [`answers`]. `elided`: the
/// conversation was read without the text of its tool results and other messages.
///
/// Runs without recorded context judge the conversation's messages so far: each run's history
/// extends the previous one, so one index is grown run by run instead of being rebuilt from
/// the start for every turn. A watching index takes a message from its digest when it can
/// ([`EvidenceIndex::push_digest`]), from its text otherwise.
fn judge(
    conversation: &Conversation,
    ctx: &PassContext,
    values: &[Option<Vec<Candidate>>],
    watching: bool,
    elided: bool,
) -> Judged {
    let cfg = &ctx.evidence;
    let has_context = |run: &Run| run.events_of(EventKind::Context).next().is_some();
    let mut shared = if watching {
        let judged_on_shared = conversation.runs.iter().zip(values);
        EvidenceIndex::watching(
            cfg,
            judged_on_shared
                .filter(|(run, _)| !has_context(run))
                .flat_map(|(_, v)| v.iter().flatten().map(|c| c.value.as_str())),
        )
    } else {
        EvidenceIndex::new(cfg)
    };
    let mut outcomes = Vec::with_capacity(conversation.runs.len());
    for (i, run) in conversation.runs.iter().enumerate() {
        let outcome = if has_context(run) {
            let history = conversation.history_for(i);
            let own = if watching {
                build_watching_index(
                    &history,
                    &[],
                    cfg,
                    values[i].iter().flatten().map(|c| c.value.as_str()),
                )
            } else {
                build_index(&history, &[], cfg)
            };
            if own.overflowed() {
                return Judged::Overflowed;
            }
            check_run(run, values[i].as_deref(), &own, ctx)
        } else {
            for e in run.events_of(EventKind::Message) {
                let Some(msg) = e.as_history_message() else {
                    continue;
                };
                let digested = match e.digests.evidence(EVIDENCE) {
                    Some(digest) => shared.push_digest(msg.role, digest),
                    None => false,
                };
                if digested || msg.role == Role::Assistant {
                    continue;
                }
                if elided {
                    // Read without message text: a framework frame or a digest refused.
                    return Judged::NeedsText;
                }
                shared.push(&msg);
            }
            if shared.overflowed() {
                return Judged::Overflowed;
            }
            check_run(run, values[i].as_deref(), &shared, ctx)
        };
        outcomes.push(outcome);
    }
    Judged::Outcomes(outcomes)
}

/// Judge one run; `values` are its answer's ([`answers`]), `None` when it has none to judge.
fn check_run(
    run: &Run,
    values: Option<&[Candidate]>,
    evidence_index: &EvidenceIndex,
    ctx: &PassContext,
) -> RunOutcome {
    // Absence of content is not a clean run: a source that dropped tool results or the answer
    // text cannot be judged either way.
    let omitted = run
        .events
        .iter()
        .filter(|e| matches!(e.kind(), EventKind::Landing | EventKind::Answer))
        .any(|e| e.has_flag(crate::model::LandingFlags::CONTENT_OMITTED));
    if omitted {
        return RunOutcome::new(
            Disposition::NotApplicable,
            "the recording omitted tool results or the answer, so grounding cannot be judged",
        );
    }
    // The framework's evidence gate judges only an answer the run delivers. When the output
    // contract was not met (every attempt failed its schema), the run ends on the last failed
    // attempt and the gate never judged it: there is no grounding verdict to reproduce.
    if contract_unmet(run) {
        return RunOutcome::new(
            Disposition::NotApplicable,
            "the output contract was not met (every attempt failed its schema), so the evidence \
             gate never judged the answer",
        );
    }
    let Some(values) = values else {
        return RunOutcome::new(Disposition::Unreachable, "the run gave no answer to judge");
    };
    let reading = read_values(values, evidence_index);
    let (verdict, reason) = disposition(&reading);
    let mut outcome = RunOutcome::new(verdict, reason);
    if outcome.disposition == Disposition::CheckedFail {
        outcome
            .findings
            .push(finding(run, &reading, ctx.include_values));
    }
    if run.events_of(EventKind::Verdict).next().is_some() {
        outcome.agreement = agreement(run, &reading, outcome.disposition);
    }
    outcome
}

/// Did the run end with its output contract unmet, by what it recorded: a `contract-unmet`
/// verdict, or a recorded ledger of output attempts whose last row is `exhausted`.
fn contract_unmet(run: &Run) -> bool {
    run.events_of(EventKind::Verdict)
        .any(|e| match e.text.as_deref() {
            Some(vocab::CONTRACT_UNMET) => true,
            Some(vocab::OUTPUT_ATTEMPTS) => e
                .payload
                .as_deref()
                .and_then(|p| serde_json::from_str::<Value>(p).ok())
                .and_then(|p| {
                    p.get("payload")
                        .and_then(Value::as_array)
                        .and_then(|rows| rows.last())
                        .and_then(|row| row.get("outcome"))
                        .and_then(Value::as_str)
                        .map(|outcome| outcome == "exhausted")
                })
                .unwrap_or(false),
            _ => false,
        })
}

fn finding(run: &Run, reading: &Reading, include_values: bool) -> Draft {
    let answer = Subject::new("answer", "final");
    let total = reading.from_prior_turns;
    let from = reading.latest_prior_turn;
    let back = reading.turns_back();
    let from_text = from.map_or("an earlier turn".to_string(), |t| format!("turn {t}"));
    let back_text = back.map_or(String::new(), |b| format!(", at least {b} turn(s) back"));
    let fetched_nothing = reading.tool_results_this_turn == 0;
    let epoch = run
        .events_of(EventKind::Answer)
        .last()
        .and_then(|e| e.iteration);
    let message = format!(
        "All {total} value(s) in the answer that a tool result grounds were last served in \
         {from_text}{back_text}; turn {current}, the one being answered, supplied none of them. \
         {this_turn} An answer that deliberately refers back looks exactly like a stale one from \
         the evidence alone, and the distance counts only the turns still in the history the \
         model saw, so it is a lower bound. A place to look, not a verdict.",
        current = reading.current_turn,
        this_turn = if fetched_nothing {
            "No tool result arrived in this turn, so the answer was put together from the \
             conversation."
                .to_string()
        } else {
            format!(
                "This turn's {} tool result(s) carried none of the values the answer states.",
                reading.tool_results_this_turn
            )
        },
    );
    Draft {
        kind: "prior-turn-evidence".into(),
        seam: "claim".into(),
        predicate: "grounding".into(),
        advisory: true,
        iteration: epoch,
        subjects: vec![answer.clone()],
        witnesses: vec![
            Witness::asserted(
                answer.clone(),
                "grounding",
                json!(format!(
                    "{total} grounded value(s), none served in this turn"
                )),
                "the evidence index of the history's tool results, each form stamped with the \
                 latest turn that served it",
            ),
            Witness::asserted(
                Subject::new(
                    "turn",
                    from.map_or("unknown".to_string(), |t| t.to_string()),
                ),
                "grounding",
                json!("served the newest result the answer drew on"),
                match back {
                    Some(b) => format!(
                        "{from_text} of the turns still in the history, at least {b} turn(s) \
                         before the one being answered"
                    ),
                    None => "no earlier turn could be named".to_string(),
                },
            ),
            Witness::asserted(
                answer,
                "tool-results-this-turn",
                json!(reading.tool_results_this_turn),
                if fetched_nothing {
                    "no tool result arrived in this turn: every value came from history"
                } else {
                    "tool results arrived in this turn, none carrying a value the answer states"
                },
            ),
        ],
        message,
        columns: FindingColumns {
            grounded_count: Some(total as u32),
            grounded_values: include_values
                .then(|| reading.grounded.iter().map(|g| g.value.clone()).collect()),
            latest_prior_turn: from,
            current_turn: Some(reading.current_turn),
            turns_back: back,
            tool_results_this_turn: Some(reading.tool_results_this_turn),
            ..FindingColumns::default()
        },
    }
}

/// The recorded verdict payloads of one canonical name, in order, each parsed only when asked
/// for (the agreement reads the last evidence judgement, and stops at the first disposition
/// that names this check), and only of envelopes that may hold the string `needle`
/// ([`js::may_hold_string`]; none: all of them). Of an envelope only its payload is built
/// ([`js::parse_members`]).
fn recorded<'a>(
    run: &'a Run,
    name: &'a str,
    needle: Option<&'a str>,
) -> impl DoubleEndedIterator<Item = Value> + 'a {
    run.events_of(EventKind::Verdict)
        .filter(move |e| e.text.as_deref() == Some(name))
        .filter_map(|e| e.payload.as_deref())
        .filter(move |text| needle.is_none_or(|s| js::may_hold_string(text, s)))
        .filter_map(|text| js::parse_members(text, &["payload"]))
        .filter_map(|mut envelope| envelope.swap_remove("payload"))
}

/// Compare with what the framework recorded: the evidence gate's last judgement of the answer
/// (candidate count and unsupported values), its prior-turn-evidence findings and its
/// disposition row, when present.
fn agreement(
    run: &Run,
    reading: &Reading,
    disposition: Disposition,
) -> Vec<(String, Agreement, Option<String>)> {
    let mut rows = Vec::new();
    if let Some(gate) = recorded(run, "evidence-checked", None).next_back() {
        let candidates = gate.get("candidates").and_then(Value::as_u64);
        let mut recorded_unsupported: Vec<String> = gate
            .get("unsupported")
            .and_then(Value::as_array)
            .map(|items| {
                items
                    .iter()
                    .filter_map(|u| u.get("value").and_then(Value::as_str).map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let mut ours: Vec<String> = reading
            .unsupported
            .iter()
            .map(|c| crate::evidence::reported_value(&c.value))
            .collect();
        recorded_unsupported.sort();
        ours.sort();
        let mut differences = Vec::new();
        if candidates != Some(reading.candidates() as u64) {
            differences.push(format!(
                "candidates recorded {}, engine {}",
                candidates.map_or("none".to_string(), |c| c.to_string()),
                reading.candidates()
            ));
        }
        if recorded_unsupported != ours {
            differences.push(format!(
                "unsupported values recorded {}, engine {}",
                recorded_unsupported.len(),
                ours.len()
            ));
        }
        rows.push(if differences.is_empty() {
            ("evidence-checked".to_string(), Agreement::Agrees, None)
        } else {
            (
                "evidence-checked".to_string(),
                Agreement::Differs,
                Some(differences.join("; ")),
            )
        });
    }
    let recorded_finding = recorded(run, "context-error", Some(CHECK))
        .any(|f| f.get("kind").and_then(Value::as_str) == Some(CHECK));
    let recorded_row = recorded(run, "disposition", Some(CHECK)).find_map(|d| {
        d.get("rows")?.as_array()?.iter().find_map(|row| {
            (row.get("check").and_then(Value::as_str) == Some(CHECK))
                .then(|| row_disposition(row))
                .flatten()
        })
    });
    if let Some(recorded) = recorded_row {
        rows.push(if recorded == disposition {
            ("disposition".to_string(), Agreement::Agrees, None)
        } else {
            (
                "disposition".to_string(),
                Agreement::Differs,
                Some(format!(
                    "recorded {}, engine {}",
                    recorded.as_str(),
                    disposition.as_str()
                )),
            )
        });
    }
    let ours = disposition == Disposition::CheckedFail;
    match (recorded_finding, ours) {
        (true, true) => rows.push(("finding".to_string(), Agreement::Agrees, None)),
        (true, false) => rows.push(("finding".to_string(), Agreement::RecordedOnly, None)),
        (false, true) if recorded_row.is_some() => {
            rows.push(("finding".to_string(), Agreement::EngineOnly, None))
        }
        _ => {}
    }
    rows
}

/// The disposition a recorded ledger row stands for.
fn row_disposition(row: &Value) -> Option<Disposition> {
    let n = |k: &str| row.get(k).and_then(Value::as_u64).unwrap_or(0);
    if n("findings") > 0 {
        Some(Disposition::CheckedFail)
    } else if n("checked") > 0 {
        Some(Disposition::CheckedPass)
    } else if n("notApplicable") > 0 {
        Some(Disposition::NotApplicable)
    } else if n("unreachable") > 0 {
        Some(Disposition::Unreachable)
    } else {
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, Role};

    fn msg(role: Role, text: &str) -> Event {
        let mut e = Event::new(EventKind::Message);
        e.role = Some(role);
        e.text = Some(text.into());
        e
    }

    fn conversation(messages: Vec<Event>, answer: &str) -> Conversation {
        let mut run = Run {
            run_id: "r".into(),
            conversation_id: "c".into(),
            turn: 2,
            answer: Some(answer.into()),
            events: messages,
            ..Run::default()
        };
        run.renumber();
        Conversation {
            id: "c".into(),
            runs: vec![run],
        }
    }

    fn judge(conv: &Conversation, include_values: bool) -> RunOutcome {
        let ctx = PassContext {
            include_values,
            ..PassContext::default()
        };
        PriorTurnEvidence.check(conv, &ctx).remove(0)
    }

    /// `conv` as an audit of its store reads it without text: digests worked out as the ingest
    /// does, then the text of every message left out (answers keep theirs).
    fn elided(conv: &Conversation) -> Conversation {
        let mut conv = conv.clone();
        crate::pipeline::fill_digests(&mut conv);
        for e in conv.runs.iter_mut().flat_map(|r| r.events.iter_mut()) {
            e.text = None;
        }
        conv
    }

    /// Read without message text, the check judges from the digests as it judges the text,
    /// and its values come from the answer's digest; a framework frame, which has no digest,
    /// sends the conversation back to be read whole.
    #[test]
    fn a_conversation_read_without_text_is_judged_from_its_digests() {
        let ctx = PassContext::default();
        let history = |second_user: &str| {
            vec![
                msg(Role::System, "You are the storage desk. Site code 7781."),
                msg(Role::User, "What arrays do we have?"),
                msg(
                    Role::Tool,
                    r#"{"arrays":[{"name":"SHPMAXDLVAP001","capacity_gb":41200}]}"#,
                ),
                msg(Role::Assistant, "One array."),
                msg(Role::User, second_user),
            ]
        };
        let answer = "SHPMAXDLVAP001 is at 41200 GB at site 7781";
        let plain = conversation(history("How full is it?"), answer);
        let whole = PriorTurnEvidence.check(&plain, &ctx);
        assert_eq!(whole[0].disposition, Disposition::CheckedFail);
        let digested = PriorTurnEvidence.check_digested(&elided(&plain), &ctx);
        assert_eq!(digested, Some(whole));
        // The answer's values come from its digest even when its text is gone; without a
        // digest it has none to judge (the ingest digests every answer that is not blank).
        let mut no_answer_text = elided(&plain);
        no_answer_text.runs[0].answer = None;
        let values = answers(&no_answer_text, &ctx, true).unwrap();
        let names: Vec<&str> = values[0]
            .iter()
            .flatten()
            .map(|c| c.value.as_str())
            .collect();
        assert_eq!(names, ["shpmaxdlvap001", "41200", "7781"]);
        let mut blank = elided(&plain);
        blank.runs[0].answer = None;
        blank.runs[0].answer_digests = Default::default();
        let outcome = PriorTurnEvidence.check_digested(&blank, &ctx).unwrap();
        assert_eq!(outcome[0].disposition, Disposition::Unreachable);
        // A digest that cannot stand for the text (a declared shape) needs the text.
        let shaped = PassContext {
            evidence: crate::evidence::EvidenceConfig {
                shapes: vec![crate::evidence::ShapeDecl {
                    name: "desk".into(),
                    pattern: "desk".into(),
                }],
                ..Default::default()
            }
            .compile()
            .unwrap(),
            ..PassContext::default()
        };
        assert_eq!(answers(&no_answer_text, &shaped, true), None);
        assert_eq!(
            PriorTurnEvidence.check_digested(&no_answer_text, &shaped),
            None
        );

        let framed = conversation(
            history(&format!(
                "{SCHEMA} try again",
                SCHEMA = vocab::SCHEMA_FRAME_PREFIX
            )),
            answer,
        );
        assert_eq!(
            PriorTurnEvidence.check_digested(&elided(&framed), &ctx),
            None
        );
    }

    /// The framework's own finding and disposition row for this check are found however its
    /// envelope spells the check's name, and a disposition naming only other checks is not
    /// compared with.
    #[test]
    fn recorded_findings_and_disposition_rows_are_compared() {
        let verdict = |name: &str, payload: &str| {
            let mut e = Event::new(EventKind::Verdict);
            e.text = Some(name.into());
            e.payload = Some(format!(
                r#"{{"type":"agentfootprint.x","payload":{payload},"meta":{{"runId":"r"}}}}"#
            ));
            e
        };
        // Judged as failing: the answer's values were served in the turn before.
        let agreement = |recorded: Vec<Event>| {
            let mut events = vec![
                msg(Role::User, "What arrays do we have?"),
                msg(
                    Role::Tool,
                    r#"{"name":"SHPMAXDLVAP001","capacity_gb":41200}"#,
                ),
                msg(Role::User, "How full is it?"),
            ];
            events.extend(recorded);
            let out = judge(
                &conversation(events, "SHPMAXDLVAP001 is at 41200 GB"),
                false,
            );
            assert_eq!(out.disposition, Disposition::CheckedFail);
            out.agreement
        };
        let other = r#"{"check":"unsupported-claim","checked":1,"findings":0}"#;
        let agrees = agreement(vec![
            verdict("context-error", r#"{"kind":"prior\u002dturn-evidence"}"#),
            verdict(
                "disposition",
                &format!(r#"{{"rows":[{other},{{"check":"prior-turn-evidence","findings":1}}]}}"#),
            ),
        ]);
        assert_eq!(
            agrees,
            [
                ("disposition".to_string(), Agreement::Agrees, None),
                ("finding".to_string(), Agreement::Agrees, None),
            ]
        );
        let unrelated = agreement(vec![
            verdict("context-error", r#"{"kind":"dangling-reference"}"#),
            verdict("disposition", &format!(r#"{{"rows":[{other}]}}"#)),
        ]);
        assert!(unrelated.is_empty(), "{unrelated:?}");
        // The first disposition naming the check is the one compared.
        let differs = agreement(vec![
            verdict("disposition", &format!(r#"{{"rows":[{other}]}}"#)),
            verdict(
                "disposition",
                r#"{"rows":[{"check":"\u0070rior-turn-evidence","checked":1}]}"#,
            ),
            verdict(
                "disposition",
                r#"{"rows":[{"check":"prior-turn-evidence","findings":1}]}"#,
            ),
        ]);
        assert_eq!(
            differs,
            [
                (
                    "disposition".to_string(),
                    Agreement::Differs,
                    Some("recorded checked-pass, engine checked-fail".to_string())
                ),
                ("finding".to_string(), Agreement::EngineOnly, None),
            ]
        );
    }

    #[test]
    fn answer_from_an_earlier_turn_fails_with_one_finding() {
        let conv = conversation(
            vec![
                msg(Role::User, "What arrays do we have?"),
                msg(
                    Role::Tool,
                    r#"{"arrays":[{"name":"SHPMAXDLVAP001","capacity_gb":41200}]}"#,
                ),
                msg(Role::Assistant, "One array."),
                msg(Role::User, "How full is it?"),
            ],
            "SHPMAXDLVAP001 is at 41200 GB",
        );
        let out = judge(&conv, false);
        assert_eq!(out.disposition, Disposition::CheckedFail);
        assert_eq!(out.findings.len(), 1);
        let f = &out.findings[0];
        assert_eq!(
            (f.kind.as_str(), f.seam.as_str(), f.predicate.as_str()),
            ("prior-turn-evidence", "claim", "grounding")
        );
        assert!(f.advisory);
        assert_eq!(f.witnesses.len(), 3);
        assert_eq!(f.columns.grounded_count, Some(2));
        assert_eq!(f.columns.latest_prior_turn, Some(1));
        assert_eq!(f.columns.current_turn, Some(2));
        assert_eq!(f.columns.turns_back, Some(1));
        assert_eq!(f.columns.tool_results_this_turn, Some(0));
        // Values stay out unless asked for.
        assert_eq!(f.columns.grounded_values, None);
        assert!(!f.message.contains("41200"));
        let with_values = judge(&conv, true);
        assert_eq!(
            with_values.findings[0].columns.grounded_values,
            Some(vec!["shpmaxdlvap001".to_string(), "41200".to_string()])
        );
    }

    #[test]
    fn a_value_from_this_turn_passes_and_empty_answers_are_unreachable() {
        let conv = conversation(
            vec![
                msg(Role::User, "arrays?"),
                msg(Role::Tool, r#"{"name":"SHPMAXDLVAP001"}"#),
                msg(Role::User, "performance?"),
                msg(Role::Tool, r#"{"iops":98765}"#),
            ],
            "SHPMAXDLVAP001 runs 98765 IOPS",
        );
        assert_eq!(judge(&conv, false).disposition, Disposition::CheckedPass);
        let empty = conversation(vec![msg(Role::User, "hi")], "  ");
        assert_eq!(judge(&empty, false).disposition, Disposition::Unreachable);
        let no_user = conversation(vec![msg(Role::Tool, r#"{"iops":98765}"#)], "98765 IOPS");
        assert_eq!(judge(&no_user, false).disposition, Disposition::Unreachable);
    }

    #[test]
    fn an_unmet_output_contract_gets_no_grounding_verdict() {
        // This turn's tool result grounds the answer: judged, it passes.
        let grounded = || {
            conversation(
                vec![
                    msg(Role::User, "arrays?"),
                    msg(Role::Tool, r#"{"name":"SHPMAXDLVAP001"}"#),
                ],
                "The array SHPMAXDLVAP001 is healthy.",
            )
        };
        assert_eq!(
            judge(&grounded(), false).disposition,
            Disposition::CheckedPass
        );
        let verdict = |text: &str, payload: Option<&str>| {
            let mut v = Event::new(EventKind::Verdict);
            v.text = Some(text.into());
            v.payload = payload.map(str::to_string);
            v
        };
        // A recorded `contract-unmet` verdict: the gate never judged this answer.
        let mut unmet = grounded();
        unmet.runs[0]
            .events
            .push(verdict(vocab::CONTRACT_UNMET, None));
        let out = judge(&unmet, false);
        assert_eq!(out.disposition, Disposition::NotApplicable);
        assert!(out.reason.contains("never judged"), "{}", out.reason);
        assert!(out.findings.is_empty());
        // A recorded ledger: its last row decides.
        let ledger = |last: &str| {
            format!(
                r#"{{"type":"t","payload":[{{"attempt":1,"outcome":"retried"}},{{"attempt":2,"outcome":"{last}"}}]}}"#
            )
        };
        for (last, expected) in [
            ("exhausted", Disposition::NotApplicable),
            ("passed", Disposition::CheckedPass),
        ] {
            let mut conv = grounded();
            conv.runs[0]
                .events
                .push(verdict(vocab::OUTPUT_ATTEMPTS, Some(&ledger(last))));
            assert_eq!(judge(&conv, false).disposition, expected, "{last}");
        }
        // A retry alone is not an unmet contract.
        let mut retried = grounded();
        retried.runs[0]
            .events
            .push(verdict(vocab::SCHEMA_RETRY, None));
        assert_eq!(judge(&retried, false).disposition, Disposition::CheckedPass);
    }

    #[test]
    fn a_truncated_index_is_not_applicable() {
        let mut big = String::from("[");
        for i in 0..200_001 {
            if i > 0 {
                big.push(',');
            }
            big.push_str(&format!("\"v{i}\""));
        }
        big.push(']');
        let conv = conversation(
            vec![msg(Role::User, "list"), msg(Role::Tool, &big)],
            "value v5 is there",
        );
        assert_eq!(judge(&conv, false).disposition, Disposition::NotApplicable);
    }
}
