//! One row of an attempt ledger, as recorded by the framework or rebuilt by the pass: what the
//! facts, the ledger rebuild, the judge and the table all speak of.

use serde_json::Value;

/// A JSON number that is a whole `u32` (writers may record attempt numbers as `2.0`).
pub(super) fn u32_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_f64)
        .filter(|n| *n >= 0.0 && n.fract() == 0.0 && *n <= u32::MAX as f64)
        .map(|n| n as u32)
}

/// One row of an attempt ledger, recorded or rebuilt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptRow {
    /// 1-based; 0 when the recorded row had no usable number.
    pub attempt: u32,
    pub iteration: Option<u32>,
    pub outcome: String,
    pub stage: Option<String>,
    pub error: Option<String>,
    pub path: Option<String>,
    pub corrective_message_hash: Option<String>,
    pub broken_by: Option<String>,
    pub stop_reason: Option<String>,
    /// The outcome was not recorded: the engine concluded it (a source that records no terminal
    /// verdict, judged by the validator).
    pub inferred: bool,
}

impl AttemptRow {
    /// Read a recorded ledger row (`{attempt, iteration, outcome, stage?, ...}`).
    pub fn from_recorded(v: &Value) -> AttemptRow {
        let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
        AttemptRow {
            attempt: u32_of(v.get("attempt")).unwrap_or(0),
            iteration: u32_of(v.get("iteration")),
            outcome: s("outcome").unwrap_or_default(),
            stage: s("stage"),
            error: s("error"),
            path: s("path"),
            corrective_message_hash: s("correctiveMessageHash"),
            broken_by: s("brokenBy"),
            stop_reason: s("stopReason"),
            inferred: false,
        }
    }

    pub(super) fn failed(&self) -> bool {
        self.outcome != "passed"
    }
}
