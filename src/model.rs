//! The canonical run model: the only vocabulary past `ingest/`.
//!
//! Every source format maps onto the same shapes:
//! - a [`Conversation`] is one session or trajectory, holding [`Run`]s in order;
//! - a [`Run`] is the agent's work answering one user message (turn >= 1), or the work done
//!   before any user message (turn 0);
//! - a run's [`Event`]s keep their recorded order (`seq`). A few event kinds are canonical and
//!   read by the checks: [`EventKind::Landing`] (an assistant-requested tool call paired with its
//!   result), [`EventKind::Message`] (a message of the conversation, in order),
//!   [`EventKind::Context`] (a message of the list the model saw when it wrote the answer, when
//!   the recording states it explicitly), [`EventKind::Answer`] and [`EventKind::Verdict`] (a
//!   check result the recording framework filed itself). Everything else is
//!   [`EventKind::Other`], kept so that nothing recorded is lost.

pub mod digest;
pub mod vocab;

use serde::{Deserialize, Serialize};

/// What an event is, in the engine's own words.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// A message of the conversation (system, user, assistant or tool), in recorded order.
    Message,
    /// A message of the history the model saw when it wrote this run's answer. Only formats that
    /// record that list explicitly produce these rows; otherwise the history is the
    /// conversation's messages up to the answer.
    Context,
    /// A tool call the assistant requested, paired with the result the model read.
    Landing,
    /// The run's final answer.
    Answer,
    /// A verdict the recording framework filed itself (repeated call, schema retry, ...).
    Verdict,
    /// A model call (request or response), kept for timing and token counts.
    ModelCall,
    /// Anything else the source recorded.
    Other,
}

impl EventKind {
    pub const ALL: [EventKind; 7] = [
        EventKind::Message,
        EventKind::Context,
        EventKind::Landing,
        EventKind::Answer,
        EventKind::Verdict,
        EventKind::ModelCall,
        EventKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Message => "message",
            EventKind::Context => "context",
            EventKind::Landing => "landing",
            EventKind::Answer => "answer",
            EventKind::Verdict => "verdict",
            EventKind::ModelCall => "model_call",
            EventKind::Other => "other",
        }
    }

    pub fn parse(s: &str) -> Option<EventKind> {
        EventKind::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    System,
    User,
    Assistant,
    Tool,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::System => "system",
            Role::User => "user",
            Role::Assistant => "assistant",
            Role::Tool => "tool",
        }
    }

    pub fn parse(s: &str) -> Option<Role> {
        match s {
            "system" | "developer" => Some(Role::System),
            "user" | "human" => Some(Role::User),
            "assistant" | "model" | "ai" => Some(Role::Assistant),
            "tool" | "function" => Some(Role::Tool),
            _ => None,
        }
    }
}

/// One recorded event in canonical form. Optional fields are `None` when the source did not
/// record them.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Position within the run, from 0, in recorded order.
    pub seq: u32,
    pub kind: Option<EventKind>,
    /// The source's own name for the event (for example `agentfootprint.stream.tool_end`).
    pub source_type: Option<String>,
    pub role: Option<Role>,
    pub tool_name: Option<String>,
    pub call_id: Option<String>,
    /// Arguments as JSON text: a landing's arguments, or an assistant message's tool calls
    /// (a JSON list of `{id, name, arguments}`).
    pub arguments: Option<String>,
    /// Message text, tool result (as the model read it) or answer.
    pub text: Option<String>,
    /// A landing whose tool failed, or a tool message flagged as an error.
    pub error: bool,
    /// Flags a landing may carry, see [`LandingFlags`].
    pub flags: u32,
    /// ReAct iteration (1-based) when the source records it.
    pub iteration: Option<u32>,
    /// Milliseconds since the Unix epoch.
    pub timestamp_ms: Option<i64>,
    pub duration_ms: Option<f64>,
    /// The original record as JSON text, for formats whose payload carries more than the
    /// canonical columns (agentfootprint envelopes).
    pub payload: Option<String>,
    /// What checks keep of a tool result ([`digest`]), worked out at ingest for the events
    /// whose result a check may need without its text.
    #[serde(skip)]
    pub digests: digest::Digests,
}

/// Bit flags on a landing event.
pub struct LandingFlags;

impl LandingFlags {
    /// The call was requested but no result was recorded.
    pub const UNANSWERED: u32 = 1;
    /// Middleware rewrote some argument keys: the arguments that ran are not the ones recorded.
    pub const ARGS_REWRITTEN: u32 = 2;
    /// The recorded result is the framework's model-channel value (what the model read).
    pub const MODEL_RESULT: u32 = 4;
    /// The source recorded that content (arguments and results) was omitted.
    pub const CONTENT_OMITTED: u32 = 8;
}

impl Event {
    pub fn new(kind: EventKind) -> Event {
        Event {
            kind: Some(kind),
            ..Event::default()
        }
    }

    pub fn kind(&self) -> EventKind {
        self.kind.unwrap_or(EventKind::Other)
    }

    pub fn has_flag(&self, flag: u32) -> bool {
        self.flags & flag != 0
    }

    pub fn text_or_empty(&self) -> &str {
        self.text.as_deref().unwrap_or("")
    }

    /// The event as a message of a history, when it has a role.
    pub fn as_history_message(&self) -> Option<HistoryMessage<'_>> {
        self.role.map(|role| HistoryMessage {
            role,
            text: self.text.as_deref().unwrap_or(""),
            tool_name: self.tool_name.as_deref(),
            call_id: self.call_id.as_deref(),
        })
    }
}

/// The agent's work answering one user message.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Run {
    pub run_id: String,
    pub conversation_id: String,
    /// 1-based ordinal of the user message this run answers; 0 = work before any user message.
    pub turn: u32,
    /// The source format (`agentfootprint`, `tau-bench`, `tau2`, ...).
    pub format: String,
    /// The input file the run was read from.
    pub source: String,
    pub agent: Option<String>,
    pub model: Option<String>,
    pub started_ms: Option<i64>,
    pub ended_ms: Option<i64>,
    pub duration_ms: Option<f64>,
    /// The user message this run answers.
    pub user_message: Option<String>,
    pub answer: Option<String>,
    pub events: Vec<Event>,
    /// What checks keep of the answer ([`digest`]), worked out at ingest, so that an audit of
    /// a store need not tokenise the answer again.
    #[serde(skip)]
    pub answer_digests: digest::Digests,
}

impl Run {
    /// The agent's tool landings, in order (unanswered calls included, flagged).
    pub fn landings(&self) -> impl Iterator<Item = &Event> {
        self.events
            .iter()
            .filter(|e| e.kind() == EventKind::Landing)
    }

    pub fn events_of(&self, kind: EventKind) -> impl DoubleEndedIterator<Item = &Event> {
        self.events.iter().filter(move |e| e.kind() == kind)
    }

    /// Renumber `seq` from 0 in vector order.
    pub fn renumber(&mut self) {
        for (i, e) in self.events.iter_mut().enumerate() {
            e.seq = i as u32;
        }
    }
}

/// One session or trajectory.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Conversation {
    pub id: String,
    pub runs: Vec<Run>,
}

/// A message as a check reads it: the history the model saw.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HistoryMessage<'a> {
    pub role: Role,
    pub text: &'a str,
    pub tool_name: Option<&'a str>,
    pub call_id: Option<&'a str>,
}

/// The wall clocks a recording can plausibly hold, in milliseconds since 1970: from 1990 to
/// 2200. A time outside it is a unit mistake (nanoseconds or microseconds written where
/// milliseconds belong, seconds read as milliseconds) or noise, and no date can be shown for it.
pub const PLAUSIBLE_WALL_CLOCK_MS: std::ops::RangeInclusive<i64> =
    631_152_000_000..=7_258_118_400_000;

impl Conversation {
    /// Clear every time outside [`PLAUSIBLE_WALL_CLOCK_MS`] (runs' start and end, events'
    /// timestamps): it is stored as absent. Gives how many were cleared and the first of them.
    pub fn clear_impossible_times(&mut self) -> (u64, Option<i64>) {
        let mut cleared = 0u64;
        let mut first = None;
        let mut check = |t: &mut Option<i64>| {
            if let Some(v) = *t {
                if !PLAUSIBLE_WALL_CLOCK_MS.contains(&v) {
                    cleared += 1;
                    first.get_or_insert(v);
                    *t = None;
                }
            }
        };
        for run in &mut self.runs {
            check(&mut run.started_ms);
            check(&mut run.ended_ms);
            for e in &mut run.events {
                check(&mut e.timestamp_ms);
            }
        }
        (cleared, first)
    }

    /// The message list the model saw when it wrote run `index`'s answer: the run's explicit
    /// context rows when the source recorded them, otherwise every conversation message of the
    /// runs up to and including this one.
    pub fn history_for(&self, index: usize) -> Vec<HistoryMessage<'_>> {
        let run = &self.runs[index];
        if run.events_of(EventKind::Context).next().is_some() {
            return run
                .events_of(EventKind::Context)
                .filter_map(Event::as_history_message)
                .collect();
        }
        self.runs[..=index]
            .iter()
            .flat_map(|r| r.events_of(EventKind::Message))
            .filter_map(Event::as_history_message)
            .collect()
    }
}
