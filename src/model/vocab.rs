//! Names an ingest writes into the canonical rows and the checks read back: verdict names, the
//! source type of the neutral output-contract row, the openings of the user messages a framework
//! writes itself, and the corpus name of a source. Stores keep these names, so each is defined
//! once, here, for both sides. And the dispositions, which the evidence gate reaches and the
//! corpus writes, and how a check's conclusion compares with the framework's own record of it:
//! enums in memory, their names on disk.

use serde::{Deserialize, Serialize};

/// Verdict name (a verdict row's `text`): an answer failed the output contract and the
/// framework asked again.
pub const SCHEMA_RETRY: &str = "schema-retry";
/// Verdict name: the last answer failed the output contract and stands.
pub const CONTRACT_UNMET: &str = "contract-unmet";
/// Verdict name: the framework's own ledger of output attempts (the payload is its rows).
pub const OUTPUT_ATTEMPTS: &str = "output-attempts";

/// Source type of the `other` row an ingest writes to state a run's output contract: a payload
/// `{mode, schema, tools, terminalVerdicts, correctionHashes, contentOmitted}`, the mode in
/// `text`.
pub const OUTPUT_CONTRACT: &str = "output-contract";

/// Source type of an agentfootprint model call's end: its envelope's payload says whether the
/// response called tools, and why it stopped.
pub const AGENTFOOTPRINT_LLM_END: &str = "agentfootprint.stream.llm_end";
/// Source type of an agentfootprint model call's start: its envelope holds the request, which no
/// check reads, so stores archive it with the envelopes audits leave undecoded.
pub const AGENTFOOTPRINT_LLM_START: &str = "agentfootprint.stream.llm_start";

/// Opening of the correction the evidence gate appends as a `role: user` message.
pub const EVIDENCE_FRAME_PREFIX: &str = "[evidence check";
/// Opening of the output-schema correction (the re-ask), also a `role: user` message the
/// framework writes.
pub const SCHEMA_FRAME_PREFIX: &str = "[schema check";
/// User messages a framework writes itself: they do not start a turn.
pub const TURN_NEUTRAL_FRAMES: [&str; 2] = [EVIDENCE_FRAME_PREFIX, SCHEMA_FRAME_PREFIX];

/// The corpus `source` of a run's stored format name: the framework that recorded it.
/// agentfootprint's two shapes are one framework, and so are OpenHands' two; every other
/// format, an unknown name included, is its own (`ingest::Format::family` states the same per
/// format, and a test holds the two together).
pub fn source_family(format: &str) -> String {
    match format {
        "agentfootprint-ndjson" | "agentfootprint-recording" => "agentfootprint".to_string(),
        "openhands-events" | "openhands-output" => "openhands".to_string(),
        other => other.to_string(),
    }
}

/// What one check concluded for one run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Disposition {
    #[serde(rename = "checked-pass")]
    CheckedPass,
    #[serde(rename = "checked-fail")]
    CheckedFail,
    #[serde(rename = "not-applicable")]
    NotApplicable,
    #[serde(rename = "unreachable")]
    Unreachable,
}

impl Disposition {
    pub const ALL: [Disposition; 4] = [
        Disposition::CheckedPass,
        Disposition::CheckedFail,
        Disposition::NotApplicable,
        Disposition::Unreachable,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Disposition::CheckedPass => "checked-pass",
            Disposition::CheckedFail => "checked-fail",
            Disposition::NotApplicable => "not-applicable",
            Disposition::Unreachable => "unreachable",
        }
    }
}

/// How the engine's conclusion about one thing (a repeated-call key, an output attempt, a
/// disposition) compares with what the framework recorded about it: a row's `status` in the
/// agreement table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Agreement {
    #[serde(rename = "agrees")]
    Agrees,
    #[serde(rename = "differs")]
    Differs,
    /// The engine found it; the framework recorded nothing about it.
    #[serde(rename = "engine-only")]
    EngineOnly,
    /// The framework recorded it; the engine did not find it.
    #[serde(rename = "recorded-only")]
    RecordedOnly,
}

impl Agreement {
    pub fn as_str(self) -> &'static str {
        match self {
            Agreement::Agrees => "agrees",
            Agreement::Differs => "differs",
            Agreement::EngineOnly => "engine-only",
            Agreement::RecordedOnly => "recorded-only",
        }
    }
}

impl std::fmt::Display for Agreement {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}
