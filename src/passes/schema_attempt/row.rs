//! One row of an attempt ledger, as recorded by the framework or rebuilt by the pass: what the
//! facts, the ledger rebuild, the judge and the table all speak of.

use serde_json::Value;

/// A JSON number that is a whole `u32` (writers may record attempt numbers as `2.0`).
pub(super) fn u32_of(v: Option<&Value>) -> Option<u32> {
    v.and_then(Value::as_f64)
        .filter(|n| *n >= 0.0 && n.fract() == 0.0 && *n <= u32::MAX as f64)
        .map(|n| n as u32)
}

/// What became of an attempt: the framework's three outcomes, or what else a recording wrote
/// (kept as written, so the ledger table shows it and the `known-outcome` rule names it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Passed,
    Retried,
    Exhausted,
    Other(String),
}

impl Outcome {
    pub fn parse(text: &str) -> Outcome {
        match text {
            "passed" => Outcome::Passed,
            "retried" => Outcome::Retried,
            "exhausted" => Outcome::Exhausted,
            other => Outcome::Other(other.to_string()),
        }
    }

    /// The name the framework and the ledger table write.
    pub fn as_str(&self) -> &str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Retried => "retried",
            Outcome::Exhausted => "exhausted",
            Outcome::Other(text) => text,
        }
    }

    /// One of the framework's three.
    pub fn is_known(&self) -> bool {
        !matches!(self, Outcome::Other(_))
    }
}

impl Default for Outcome {
    /// A row read without an outcome.
    fn default() -> Self {
        Outcome::Other(String::new())
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One row of an attempt ledger, recorded or rebuilt.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AttemptRow {
    /// 1-based; 0 when the recorded row had no usable number.
    pub attempt: u32,
    pub iteration: Option<u32>,
    pub outcome: Outcome,
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
            outcome: Outcome::parse(&s("outcome").unwrap_or_default()),
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
        self.outcome != Outcome::Passed
    }
}
