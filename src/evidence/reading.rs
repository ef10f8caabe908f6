//! Section 4.4: reading an answer against the index, and the prior-turn-evidence disposition.

use super::index::EvidenceIndex;
use super::values::{answer_values, Candidate};
use super::CompiledEvidence;
use crate::model::vocab::Disposition;
use serde::Serialize;

/// A value of the answer that some tool result carried, and the newest turn that served it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GroundedValue {
    pub value: String,
    pub shape: String,
    pub turn: u32,
}

/// What the gate can see of one answer's values (the framework's grounding reading, plus the
/// values themselves).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Reading {
    /// Grounded values whose newest source is the turn being answered.
    pub from_this_turn: usize,
    /// Grounded values served only in earlier turns.
    pub from_prior_turns: usize,
    /// The newest turn among the prior-turn values; `None` when there are none.
    pub latest_prior_turn: Option<u32>,
    pub current_turn: u32,
    pub tool_results_this_turn: u32,
    pub index_truncated: bool,
    /// Grounded values, in answer order.
    pub grounded: Vec<GroundedValue>,
    /// Values no indexed tool result carried, in answer order, unclipped (see
    /// [`reported_value`] for the spelling the framework records).
    pub unsupported: Vec<Candidate>,
    /// Values skipped because the run itself supplied them (user, system, injected text).
    pub exempt: Vec<Candidate>,
}

impl Reading {
    /// Every value the extractor produced, exempt ones included: the number the framework
    /// records as `candidates` on its `agent.evidence_checked` event.
    pub fn candidates(&self) -> usize {
        self.grounded.len() + self.unsupported.len() + self.exempt.len()
    }

    /// How many turns separate the newest prior source from the turn being answered.
    pub fn turns_back(&self) -> Option<u32> {
        self.latest_prior_turn
            .map(|t| self.current_turn.saturating_sub(t))
    }
}

/// Judge each value of `answer` against `index` (spec 4.4): a value any of whose spellings is
/// exempt is skipped; one with no spelling in the index is unsupported; otherwise it takes the
/// newest turn among its spellings and counts for this turn when that turn is at least the
/// current one, for a prior turn otherwise.
pub fn read_answer(answer: &str, index: &EvidenceIndex, cfg: &CompiledEvidence) -> Reading {
    read_values(&answer_values(answer, cfg), index)
}

/// [`read_answer`] of values already extracted with [`answer_values`], for a caller that
/// needs them before the index is built (a watching index keeps only their forms).
pub fn read_values(values: &[Candidate], index: &EvidenceIndex) -> Reading {
    let mut reading = Reading {
        current_turn: index.current_turn(),
        tool_results_this_turn: index.tool_results_this_turn(),
        index_truncated: index.truncated(),
        ..Reading::default()
    };
    for candidate in values {
        if index.is_exempt(&candidate.value) {
            reading.exempt.push(candidate.clone());
            continue;
        }
        let Some(turn) = index.lookup(&candidate.value) else {
            reading.unsupported.push(candidate.clone());
            continue;
        };
        if turn >= reading.current_turn {
            reading.from_this_turn += 1;
        } else {
            reading.from_prior_turns += 1;
            reading.latest_prior_turn = reading.latest_prior_turn.max(Some(turn));
        }
        reading.grounded.push(GroundedValue {
            value: candidate.value.clone(),
            shape: candidate.shape.clone(),
            turn,
        });
    }
    reading
}

/// Longest value the framework writes into a recorded `unsupported` entry.
const MAX_REPORTED_CHARS: usize = 64;

/// A value as the framework records it in `unsupported[].value`: unchanged up to 64 UTF-16
/// units, otherwise its first 63 units and `…`. Candidate values are ASCII (the tokeniser
/// separates on every other character), so units and chars coincide.
pub fn reported_value(value: &str) -> String {
    if value.encode_utf16().count() <= MAX_REPORTED_CHARS {
        return value.to_string();
    }
    let mut out: String = value.chars().take(MAX_REPORTED_CHARS - 1).collect();
    out.push('…');
    out
}

/// The prior-turn-evidence disposition of a reading, with a one-line reason. Tried in order:
/// a truncated index cannot say when anything was served; a history without a person-written
/// user message has no turn boundary; an answer with no grounded value has nothing to date; one
/// value from this turn is enough to pass; otherwise every grounded value is older than the
/// turn being answered. An empty answer is `unreachable` too, and is the caller's to handle
/// before asking for a reading.
pub fn disposition(reading: &Reading) -> (Disposition, &'static str) {
    if reading.index_truncated {
        return (
            Disposition::NotApplicable,
            "the evidence index hit its form ceiling, so the turn of a value cannot be trusted",
        );
    }
    if reading.current_turn == 0 {
        return (
            Disposition::Unreachable,
            "the history holds no user turn, so there is no earlier turn to compare with",
        );
    }
    if reading.from_this_turn == 0 && reading.from_prior_turns == 0 {
        return (
            Disposition::Unreachable,
            "the answer states no value that a tool result grounds",
        );
    }
    if reading.from_this_turn > 0 {
        return (
            Disposition::CheckedPass,
            "at least one grounded value was served in the turn being answered",
        );
    }
    (
        Disposition::CheckedFail,
        "every grounded value was last served in an earlier turn",
    )
}
