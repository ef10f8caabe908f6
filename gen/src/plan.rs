//! What happens in one generated conversation, before any format writes it down: the user's
//! turns, the tool calls of each turn (in batches, a batch of more than one call being a
//! parallel batch), their arguments and results, the answer, and (agentfootprint only) the
//! output-schema attempts.
//!
//! The plan is where the injected behaviour is decided, so the expected findings follow from it:
//! - repeats: a later call copies an earlier call's tool, arguments (sometimes with the keys in
//!   another order) and result; sometimes a third time, sometimes a second key;
//! - near misses that are not repeats: a polled job (same arguments, a new result);
//! - repeats of a tool judged on arguments alone (`render_view`, declared in the generated
//!   configuration): same arguments, a result stamped with a new version;
//! - answers: *fresh* (restates values served by a tool in this turn), *stale* (restates values
//!   served only in an earlier turn, with no tool call in this turn), *stale after calls* (the
//!   same, though this turn did call tools), or *no values*.
//!
//! Every value an answer restates is a "fact": a token generated from a per-conversation
//! sequence with a shape no other generated text has (`TRK-00042QX`, or a seven-digit number
//! when every other generated number is below 1,000,000), so the turn that served it is known
//! exactly. Users never say facts; answers may also name what the user said (exempt values),
//! and answers otherwise hold no digits, so the expected disposition of every run is known.

use super::rng::{Rng, DIGITS, HEX, UPPER};
use super::{GenFormat, Rates};
use serde_json::{json, Map, Value};

/// A generated tool: its name, the description a registry shows, and whether it exists only
/// on the simulated user's device.
pub struct ToolInfo {
    pub name: &'static str,
    pub description: &'static str,
}

pub const TOOLS: &[ToolInfo] = &[
    ToolInfo {
        name: "get_customer",
        description: "Look up a customer profile by id",
    },
    ToolInfo {
        name: "get_order",
        description: "Order details with line items and shipping",
    },
    ToolInfo {
        name: "search_orders",
        description: "Search a customer's orders by status",
    },
    ToolInfo {
        name: "list_devices",
        description: "List the devices installed at a site, one page at a time",
    },
    ToolInfo {
        name: "get_metrics",
        description: "Time series of one device metric",
    },
    ToolInfo {
        name: "search_kb",
        description: "Search the knowledge base",
    },
    ToolInfo {
        name: "job_status",
        description: "Status of a background job",
    },
    ToolInfo {
        name: "create_ticket",
        description: "Open a support ticket",
    },
    ToolInfo {
        name: "refund_payment",
        description: "Refund part or all of an order payment",
    },
    ToolInfo {
        name: "render_view",
        description: "Render a dashboard view for the operator",
    },
];

/// The tool whose repeats are judged on arguments alone (declared in the generated
/// `traceaudit.toml`).
pub const ARGUMENTS_MODE_TOOL: &str = "render_view";

/// Relative weights of [`TOOLS`] for a fresh call.
const TOOL_WEIGHTS: &[u32] = &[14, 16, 10, 12, 10, 10, 8, 6, 6, 4];

/// Tools on the simulated user's own device (tau2 telecom style).
pub const DEVICE_TOOLS: &[&str] = &[
    "run_speed_test",
    "check_network_status",
    "toggle_airplane_mode",
    "reboot_device",
];

/// A value an answer may restate, with the turn that served it.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// What it is, in words, for answer text (`tracking number`).
    pub label: &'static str,
    pub value: FactValue,
    /// The turn whose tool result served it.
    pub turn: u32,
}

#[derive(Debug, Clone, PartialEq)]
pub enum FactValue {
    /// An identifier such as `TRK-00042QX`, stored as a JSON string.
    Id(String),
    /// A number of seven digits, stored as a JSON number.
    Number(u64),
}

impl Fact {
    /// The fact as the tool result holds it.
    pub fn json(&self) -> Value {
        match &self.value {
            FactValue::Id(s) => Value::String(s.clone()),
            FactValue::Number(n) => json!(n),
        }
    }

    /// The fact written in prose, in one of the spellings the evidence gate normalises back
    /// to the same form (`1234567`, `1,234,567`, `$1,234,567`, `(TRK-00042QX)`).
    pub fn prose(&self, rng: &mut Rng) -> String {
        match &self.value {
            FactValue::Id(s) => match rng.below(4) {
                0 => format!("({s})"),
                _ => s.clone(),
            },
            FactValue::Number(n) => match rng.below(3) {
                0 => n.to_string(),
                1 => thousands(*n),
                _ => format!("${}", thousands(*n)),
            },
        }
    }

    /// The fact as a JSON string inside a structured answer (numbers quoted: a JSON number in
    /// an answer tokenises as `:1234567`, which nothing grounds).
    pub fn answer_string(&self) -> String {
        match &self.value {
            FactValue::Id(s) => s.clone(),
            FactValue::Number(n) => n.to_string(),
        }
    }
}

fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// What a call returned.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// A JSON object (agentfootprint delivers `JSON.stringify` of it; tau2 a Python dump).
    Json(Value),
    /// Plain text.
    Text(String),
    /// The tool threw: the message is the result the model read.
    Error(String),
}

/// Why a call is in the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    Fresh,
    /// An identical copy of slot `of` (same tool, arguments and result).
    Repeat {
        of: usize,
    },
    /// Slot `of` polled again: same arguments, a new result.
    Poll {
        of: usize,
    },
    /// Slot `of` rendered again: same arguments, the result stamped with a new version.
    Rerender {
        of: usize,
    },
}

#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    pub tool: &'static str,
    /// The arguments as the model proposed them (key order kept).
    pub args: Value,
    pub outcome: Outcome,
    pub duration_ms: u64,
    pub origin: Origin,
}

/// What the answer restates.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum AnswerKind {
    /// At least one value served by a tool in this turn.
    Fresh,
    /// Only values served in earlier turns; no tool call in this turn.
    Stale,
    /// Only values served in earlier turns, though this turn called tools.
    StaleAfterCalls,
    /// No value a tool served (text, or values the user gave).
    NoValues,
    /// The run has no answer (tau2's closing user message).
    NoAnswer,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub kind: AnswerKind,
    /// Facts restated (distinct).
    pub facts: Vec<Fact>,
    /// Exempt values restated (what the user said).
    pub exempt: Vec<String>,
    /// The prose answer.
    pub text: String,
}

/// One would-be-final answer judged against the output schema.
#[derive(Debug, Clone, PartialEq)]
pub struct Attempt {
    pub text: String,
    /// `None` = passed; otherwise the failure.
    pub failure: Option<SchemaFailure>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaFailure {
    /// `json-parse` or `schema-validate`.
    pub stage: &'static str,
    pub error: String,
    pub path: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct SchemaPlan {
    pub retries: u32,
    pub attempts: Vec<Attempt>,
}

/// A call the simulated user makes on its own device (tau2), after the agent's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct DeviceCall {
    pub tool: &'static str,
    pub result: String,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnPlan {
    pub turn: u32,
    pub user: String,
    pub batches: Vec<Vec<Call>>,
    /// Facts this turn's tool results served.
    pub served: Vec<Fact>,
    pub answer: Answer,
    pub schema: Option<SchemaPlan>,
    pub device: Vec<DeviceCall>,
}

impl TurnPlan {
    pub fn calls(&self) -> impl Iterator<Item = &Call> {
        self.batches.iter().flatten()
    }

    pub fn landings(&self) -> usize {
        self.batches.iter().map(Vec::len).sum()
    }

    /// The final answer text: the last schema attempt when there is a schema, else the prose.
    pub fn final_answer(&self) -> &str {
        match &self.schema {
            Some(s) => &s.attempts.last().expect("at least one attempt").text,
            None => &self.answer.text,
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ConversationPlan {
    pub turns: Vec<TurnPlan>,
    /// The customer's name and id, which the user states.
    pub customer_name: String,
    pub customer_id: String,
    pub order_id: String,
    /// Whether runs are configured with an output schema (agentfootprint).
    pub schema: bool,
}

/// Per-conversation state while planning.
struct Ctx<'a> {
    rng: &'a mut Rng,
    rates: &'a Rates,
    fact_seq: u64,
    /// Result bytes served so far; past the budget results stay small, so the evidence index
    /// of a long conversation stays far below its form ceiling.
    served_bytes: u64,
    customer_id: String,
    order_id: String,
    /// Counter making fresh arguments of one conversation distinct.
    fresh_seq: u64,
}

const FIRST: &[&str] = &[
    "Mia", "Noah", "Ava", "Liam", "Zoe", "Omar", "Lena", "Ivan", "Sara", "Yusuf", "Chen", "Priya",
    "Jonas", "Amara", "Diego", "Hana",
];
const LAST: &[&str] = &[
    "Li", "Patel", "Garcia", "Kowalski", "Nakamura", "Okafor", "Silva", "Berg", "Haddad", "Moreau",
    "Ivanova", "Reyes", "Schmidt", "Adeyemi",
];
const CITIES: &[&str] = &[
    "Austin", "Lyon", "Osaka", "Porto", "Leeds", "Denver", "Tampere", "Cork", "Graz", "Quito",
];
const STREETS: &[&str] = &[
    "Main St",
    "Oak Ave",
    "Harbor Rd",
    "Mill Lane",
    "Station Sq",
    "Elm Court",
    "Pine Way",
];
const PRODUCTS: &[&str] = &[
    "desk lamp",
    "wireless router",
    "office chair",
    "water bottle",
    "backpack",
    "headphones",
    "mechanical keyboard",
    "laptop stand",
    "coffee grinder",
    "monitor arm",
];
const WORDS: &[&str] = &[
    "the",
    "a",
    "device",
    "firmware",
    "update",
    "customer",
    "order",
    "shipment",
    "delayed",
    "network",
    "port",
    "link",
    "restart",
    "policy",
    "refund",
    "within",
    "days",
    "warranty",
    "replacement",
    "check",
    "status",
    "cable",
    "power",
    "supply",
    "configuration",
    "setting",
    "enable",
    "disable",
    "account",
    "billing",
    "cycle",
    "invoice",
    "priority",
    "escalate",
    "queue",
    "error",
    "timeout",
    "retry",
    "latency",
    "throughput",
    "storage",
    "volume",
    "capacity",
    "healthy",
    "degraded",
    "offline",
    "online",
    "maintenance",
    "window",
    "scheduled",
    "and",
    "or",
    "to",
    "of",
    "for",
    "with",
    "when",
    "after",
    "before",
    "if",
    "is",
    "are",
];
const SITES: &[&str] = &[
    "dc-east",
    "dc-west",
    "lab",
    "edge-north",
    "edge-south",
    "hq",
];
const METRICS: &[&str] = &[
    "cpu_pct", "mem_pct", "iops", "rx_bytes", "tx_bytes", "temp_c",
];
const VIEWS: &[&str] = &["home", "orders", "billing", "devices", "alerts", "reports"];
const STATES: &[&str] = &["pending", "processed", "shipped", "delivered", "cancelled"];

fn words(rng: &mut Rng, n: usize) -> String {
    let mut out = String::new();
    for i in 0..n {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(rng.pick_str(WORDS));
    }
    out
}

fn sentence(rng: &mut Rng) -> String {
    let n = rng.range(6, 16) as usize;
    let mut s = words(rng, n);
    if let Some(first) = s.get(0..1) {
        let upper = first.to_uppercase();
        s.replace_range(0..1, &upper);
    }
    s.push('.');
    s
}

fn date(rng: &mut Rng) -> String {
    format!("2024-{:02}-{:02}", rng.range(1, 12), rng.range(1, 28))
}

fn timestamp(rng: &mut Rng) -> String {
    format!(
        "{} {:02}:{:02}:{:02}",
        date(rng),
        rng.range(0, 23),
        rng.range(0, 59),
        rng.range(0, 59)
    )
}

/// Cents below 1,000,000 (every generated number that is not a fact is).
fn cents(rng: &mut Rng) -> u64 {
    rng.range(100, 99_999)
}

fn money(rng: &mut Rng) -> f64 {
    rng.range(100, 99_999) as f64 / 100.0
}

/// Append items made by `item` to `list` until the whole value `base` would reach `target`
/// bytes of JSON (at least `min` items, at most 2,000).
fn fill(
    rng: &mut Rng,
    target: u64,
    min: usize,
    mut base_len: usize,
    mut item: impl FnMut(&mut Rng, usize) -> Value,
) -> Vec<Value> {
    let mut list = Vec::new();
    while list.len() < min || ((base_len as u64) < target && list.len() < 2_000) {
        let v = item(rng, list.len());
        base_len += traceaudit::fingerprint::stringify(&v).len() + 1;
        list.push(v);
    }
    list
}

impl Ctx<'_> {
    fn fact_id(&mut self, prefix: &str, label: &'static str, turn: u32) -> Fact {
        self.fact_seq += 1;
        let suffix = self.rng.chars(UPPER, 2);
        Fact {
            label,
            value: FactValue::Id(format!("{prefix}-{:05}{suffix}", self.fact_seq)),
            turn,
        }
    }

    fn fact_number(&mut self, label: &'static str, turn: u32) -> Fact {
        self.fact_seq += 1;
        // Disjoint ranges per sequence number: unique within the conversation, and seven
        // digits, while no other generated number reaches 1,000,000.
        let n = 1_000_000 + self.fact_seq * 89 + self.rng.below(89);
        Fact {
            label,
            value: FactValue::Number(n),
            turn,
        }
    }

    fn result_target(&mut self) -> u64 {
        let (lo, hi) = (
            self.rates.result_bytes_min.max(1),
            self.rates
                .result_bytes_max
                .max(self.rates.result_bytes_min.max(1) + 1),
        );
        if self.served_bytes > 384 * 1024 {
            self.rng.range(lo, hi.min(600).max(lo))
        } else {
            self.rng.log_uniform(lo, hi)
        }
    }

    fn fresh_id(&mut self, prefix: &str) -> String {
        self.fresh_seq += 1;
        format!(
            "{prefix}{}{:03}",
            self.rng.chars(DIGITS, 4),
            self.fresh_seq % 1000
        )
    }

    /// A fresh call of `tool`: arguments, outcome, facts served.
    fn fresh_call(&mut self, tool: &'static str, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let target = self.result_target();
        let (args, outcome, facts) = match tool {
            "get_customer" => self.get_customer(target, turn),
            "get_order" => self.get_order(target, turn),
            "search_orders" => self.search_orders(target, turn),
            "list_devices" => self.list_devices(target, turn),
            "get_metrics" => self.get_metrics(target, turn),
            "search_kb" => self.search_kb(target, turn),
            "job_status" => self.job_status(turn),
            "create_ticket" => self.create_ticket(turn),
            "refund_payment" => self.refund_payment(turn),
            "render_view" => {
                self.fresh_seq += 1;
                let view = *self.rng.pick(VIEWS);
                let page = self.fresh_seq;
                (
                    json!({"view": view, "page": page}),
                    Outcome::Text(format!("rendered {view} page {page} @v1")),
                    Vec::new(),
                )
            }
            other => unreachable!("unknown tool {other}"),
        };
        if self.rng.chance(self.rates.error) {
            let msg = match self.rng.below(4) {
                0 => "Error: upstream service timed out".to_string(),
                1 => "Error: rate limited, retry later".to_string(),
                2 => format!("Error: {tool} failed: permission denied"),
                _ => "Error: resource not found".to_string(),
            };
            return (args, Outcome::Error(msg), Vec::new());
        }
        if let Outcome::Json(v) = &outcome {
            self.served_bytes += traceaudit::fingerprint::stringify(v).len() as u64;
        }
        (args, outcome, facts)
    }

    fn get_customer(&mut self, target: u64, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let account = self.fact_id("ACC", "account reference", turn);
        let rng = &mut *self.rng;
        let name = format!("{} {}", rng.pick(FIRST), rng.pick(LAST));
        let mut m = Map::new();
        m.insert("customer_id".into(), json!(self.customer_id));
        m.insert("name".into(), json!(name));
        m.insert(
            "email".into(),
            json!(format!(
                "{}@example.com",
                name.to_lowercase().replace(' ', ".")
            )),
        );
        m.insert(
            "tier".into(),
            json!(rng.pick(&["basic", "plus", "premium"])),
        );
        m.insert("account_ref".into(), account.json());
        m.insert("created_at".into(), json!(timestamp(rng)));
        m.insert(
            "addresses".into(),
            json!([{"street": format!("{} {}", rng.range(1, 999), rng.pick(STREETS)),
                    "city": rng.pick(CITIES), "zip": rng.chars(DIGITS, 5)}]),
        );
        let notes = fill(rng, target, 0, 300, |rng, _| json!(sentence(rng)));
        m.insert("notes".into(), Value::Array(notes));
        (
            json!({"customer_id": self.customer_id}),
            Outcome::Json(Value::Object(m)),
            vec![account],
        )
    }

    fn get_order(&mut self, target: u64, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let tracking = self.fact_id("TRK", "tracking number", turn);
        let total = self.fact_number("order total in cents", turn);
        let order_id = if self.rng.chance(0.5) {
            self.order_id.clone()
        } else {
            format!("#W{}", self.rng.chars(DIGITS, 7))
        };
        let rng = &mut *self.rng;
        let items = fill(rng, target, 1, 260, |rng, _| {
            json!({"sku": format!("sku_{}", rng.chars(DIGITS, 6)), "name": rng.pick(PRODUCTS),
                   "quantity": rng.range(1, 4), "unit_price": money(rng),
                   "options": {"color": rng.pick(&["black", "white", "blue", "red"]),
                               "size": rng.pick(&["S", "M", "L"])}})
        });
        let result = json!({
            "order_id": order_id,
            "status": rng.pick(STATES),
            "placed_at": timestamp(rng),
            "tracking_number": tracking.json(),
            "total_cents": total.json(),
            "shipping": {"carrier": rng.pick(&["UPS", "DHL", "PostNL"]),
                         "city": rng.pick(CITIES)},
            "items": items,
        });
        (
            json!({"order_id": order_id, "include_items": true}),
            Outcome::Json(result),
            vec![tracking, total],
        )
    }

    fn search_orders(&mut self, target: u64, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let invoice = self.fact_id("INV", "invoice number", turn);
        let status = *self.rng.pick(STATES);
        let limit = self.rng.range(5, 50);
        let rng = &mut *self.rng;
        let mut orders = fill(rng, target, 1, 120, |rng, _| {
            json!({"order_id": format!("#W{}", rng.chars(DIGITS, 7)), "status": status,
                   "total": money(rng), "placed_at": date(rng)})
        });
        if let Some(Value::Object(first)) = orders.first_mut() {
            first.insert("invoice".into(), invoice.json());
        }
        (
            json!({"customer_id": self.customer_id, "status": status, "limit": limit}),
            Outcome::Json(json!({"orders": orders, "next_page": null})),
            vec![invoice],
        )
    }

    fn list_devices(&mut self, target: u64, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let serial = self.fact_id("SN", "serial number", turn);
        self.fresh_seq += 1;
        let page = self.fresh_seq;
        let site = *self.rng.pick(SITES);
        let rng = &mut *self.rng;
        let mut devices = fill(rng, target, 1, 80, |rng, _| {
            json!({"serial": format!("SRL{}", rng.chars(HEX, 8)),
                   "model": format!("{}-{}", rng.pick(&["EX", "QFX", "MX", "SRX"]), rng.range(100, 9999)),
                   "firmware": format!("v{}.{}.{}", rng.range(1, 9), rng.range(0, 9), rng.range(0, 20)),
                   "status": rng.pick(&["healthy", "degraded", "offline"]),
                   "rack": format!("r{}-u{}", rng.range(1, 40), rng.range(1, 42)),
                   "ports": [rng.range(1, 48), rng.range(1, 48)]})
        });
        if let Some(Value::Object(d)) = devices.last_mut() {
            d.insert("asset_tag".into(), serial.json());
        }
        (
            json!({"site": site, "page": page}),
            Outcome::Json(json!({"site": site, "page": page, "devices": devices})),
            vec![serial],
        )
    }

    fn get_metrics(&mut self, target: u64, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let peak = self.fact_number("peak value", turn);
        let device = self.fresh_id("SRL");
        let metric = *self.rng.pick(METRICS);
        let rng = &mut *self.rng;
        // Seconds into the window: every generated number that is not a fact stays below
        // 1,000,000.
        let points = fill(
            rng,
            target,
            2,
            120,
            |rng, i| json!({"t": i as u64 * 60, "v": rng.range(0, 999_999) as f64 / 100.0}),
        );
        (
            json!({"device_id": device, "metric": metric, "window": rng.pick(&["1h", "6h", "24h"])}),
            Outcome::Json(
                json!({"device_id": device, "metric": metric, "unit": "count",
                                  "peak": peak.json(), "points": points}),
            ),
            vec![peak],
        )
    }

    fn search_kb(&mut self, target: u64, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let article = self.fact_id("KB", "article", turn);
        let query = words(self.rng, 3);
        let rng = &mut *self.rng;
        let mut results = fill(rng, target, 1, 60, |rng, _| {
            let n = rng.range(1, 4) as usize;
            let snippet: Vec<String> = (0..n).map(|_| sentence(rng)).collect();
            json!({"article_id": format!("doc_{}", rng.chars(HEX, 6)), "title": sentence(rng),
                   "snippet": snippet.join(" "), "score": rng.range(1, 999) as f64 / 1000.0})
        });
        if let Some(Value::Object(r)) = results.first_mut() {
            r.insert("reference".into(), article.json());
        }
        (
            json!({"query": query, "top_k": rng.range(3, 10)}),
            Outcome::Json(json!({"query": query, "results": results})),
            vec![article],
        )
    }

    fn job_status(&mut self, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let job = self.fresh_id("job-");
        let (outcome, facts) = self.job_result(turn, 10);
        (json!({"job_id": job}), outcome, facts)
    }

    fn job_result(&mut self, turn: u32, progress: u64) -> (Outcome, Vec<Fact>) {
        let run_ref = self.fact_id("RUN", "run reference", turn);
        let rng = &mut *self.rng;
        let state = if progress >= 100 { "done" } else { "running" };
        (
            Outcome::Json(json!({"state": state, "progress": progress.min(100),
                                  "updated_at": timestamp(rng), "run_ref": run_ref.json()})),
            vec![run_ref],
        )
    }

    fn create_ticket(&mut self, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let ticket = self.fact_id("TKT", "ticket number", turn);
        let priority = *self.rng.pick(&["low", "normal", "high"]);
        let summary = sentence(self.rng);
        (
            json!({"customer_id": self.customer_id, "summary": summary, "priority": priority}),
            Outcome::Json(json!({"ticket_id": ticket.json(), "status": "open",
                                  "priority": priority, "created_at": timestamp(self.rng)})),
            vec![ticket],
        )
    }

    fn refund_payment(&mut self, turn: u32) -> (Value, Outcome, Vec<Fact>) {
        let refund = self.fact_id("RFD", "refund number", turn);
        let amount = cents(self.rng);
        (
            json!({"order_id": self.order_id, "amount_cents": amount, "reason": "customer request"}),
            Outcome::Json(json!({"refund_id": refund.json(), "status": "pending",
                                  "amount_cents": amount})),
            vec![refund],
        )
    }
}

fn landings(rng: &mut Rng, rates: &Rates) -> usize {
    if rng.chance(rates.zero_landings) {
        return 0;
    }
    if rng.chance(rates.heavy_run) {
        return rng.range(15, 30) as usize;
    }
    let mut n = 1;
    while n < 14 && rng.chance(0.72) {
        n += 1;
    }
    n
}

fn batch_sizes(rng: &mut Rng, rates: &Rates, n: usize) -> Vec<usize> {
    let mut sizes = Vec::new();
    let mut left = n;
    while left > 0 {
        let size = if left >= 2 && rng.chance(rates.parallel) {
            rng.range(2, left.min(4) as u64) as usize
        } else {
            1
        };
        sizes.push(size);
        left -= size;
    }
    sizes
}

/// Pick a slot in a batch strictly after `after_batch`, not yet assigned.
fn later_free_slot(
    rng: &mut Rng,
    batch_of: &[usize],
    taken: &[bool],
    after_batch: usize,
) -> Option<usize> {
    let free: Vec<usize> = (0..batch_of.len())
        .filter(|&s| batch_of[s] > after_batch && !taken[s])
        .collect();
    (!free.is_empty()).then(|| *rng.pick(&free))
}

/// A source slot (free, not in the last batch) and a later free target slot.
fn pair(rng: &mut Rng, batch_of: &[usize], taken: &[bool]) -> Option<(usize, usize)> {
    let last = *batch_of.last()?;
    let sources: Vec<usize> = (0..batch_of.len())
        .filter(|&s| batch_of[s] < last && !taken[s])
        .collect();
    if sources.is_empty() {
        return None;
    }
    let s = *rng.pick(&sources);
    let t = later_free_slot(rng, batch_of, taken, batch_of[s])?;
    Some((s, t))
}

/// Reorder an object's keys (a model proposing the same arguments in another order).
fn shuffled_keys(rng: &mut Rng, v: &Value) -> Value {
    match v {
        Value::Object(m) => {
            let mut entries: Vec<(&String, &Value)> = m.iter().collect();
            rng.shuffle(&mut entries);
            Value::Object(
                entries
                    .into_iter()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
            )
        }
        other => other.clone(),
    }
}

/// Force the tool of a source slot, for injected polls and re-renders.
#[derive(Clone, Copy, PartialEq)]
enum Forced {
    Any,
    Tool(&'static str),
}

fn plan_calls(ctx: &mut Ctx<'_>, turn: u32, n: usize) -> (Vec<Vec<Call>>, Vec<Fact>) {
    let sizes = batch_sizes(ctx.rng, ctx.rates, n);
    let batch_of: Vec<usize> = sizes
        .iter()
        .enumerate()
        .flat_map(|(b, &size)| std::iter::repeat_n(b, size))
        .collect();
    let mut origin = vec![Origin::Fresh; n];
    let mut forced = vec![Forced::Any; n];
    let mut taken = vec![false; n];
    let rates = ctx.rates;
    if sizes.len() >= 2 {
        if ctx.rng.chance(rates.repeat) {
            if let Some((s, t)) = pair(ctx.rng, &batch_of, &taken) {
                taken[s] = true;
                taken[t] = true;
                origin[t] = Origin::Repeat { of: s };
                if ctx.rng.chance(rates.third_occurrence) {
                    if let Some(u) = later_free_slot(ctx.rng, &batch_of, &taken, batch_of[t]) {
                        taken[u] = true;
                        origin[u] = Origin::Repeat { of: s };
                    }
                }
                if ctx.rng.chance(rates.second_key) {
                    if let Some((s2, t2)) = pair(ctx.rng, &batch_of, &taken) {
                        taken[s2] = true;
                        taken[t2] = true;
                        origin[t2] = Origin::Repeat { of: s2 };
                    }
                }
            }
        }
        if ctx.rng.chance(rates.poll) {
            if let Some((s, t)) = pair(ctx.rng, &batch_of, &taken) {
                taken[s] = true;
                taken[t] = true;
                forced[s] = Forced::Tool("job_status");
                origin[t] = Origin::Poll { of: s };
            }
        }
        if ctx.rng.chance(rates.arguments_mode_repeat) {
            if let Some((s, t)) = pair(ctx.rng, &batch_of, &taken) {
                taken[s] = true;
                taken[t] = true;
                forced[s] = Forced::Tool(ARGUMENTS_MODE_TOOL);
                origin[t] = Origin::Rerender { of: s };
            }
        }
    }
    let mut calls: Vec<Call> = Vec::with_capacity(n);
    let mut served = Vec::new();
    for slot in 0..n {
        let duration_ms = ctx.rng.log_uniform(2, 4_000);
        let call = match origin[slot] {
            Origin::Fresh => {
                let tool = match forced[slot] {
                    Forced::Tool(t) => t,
                    Forced::Any => TOOLS[ctx.rng.weighted(TOOL_WEIGHTS)].name,
                };
                let (args, outcome, facts) = ctx.fresh_call(tool, turn);
                served.extend(facts);
                Call {
                    tool,
                    args,
                    outcome,
                    duration_ms,
                    origin: Origin::Fresh,
                }
            }
            Origin::Repeat { of } => {
                let src = &calls[of];
                let args = if ctx.rng.chance(rates.key_order_shuffle) {
                    shuffled_keys(ctx.rng, &src.args)
                } else {
                    src.args.clone()
                };
                Call {
                    tool: src.tool,
                    args,
                    outcome: src.outcome.clone(),
                    duration_ms,
                    origin: origin[slot],
                }
            }
            Origin::Poll { of } => {
                let progress = ctx.rng.range(20, 100);
                let (outcome, facts) = ctx.job_result(turn, progress);
                served.extend(facts);
                Call {
                    tool: calls[of].tool,
                    args: calls[of].args.clone(),
                    outcome,
                    duration_ms,
                    origin: origin[slot],
                }
            }
            Origin::Rerender { of } => {
                let src = &calls[of];
                let outcome = match &src.outcome {
                    Outcome::Text(t) => Outcome::Text(t.replace("@v1", "@v2")),
                    other => other.clone(),
                };
                Call {
                    tool: src.tool,
                    args: src.args.clone(),
                    outcome,
                    duration_ms,
                    origin: origin[slot],
                }
            }
        };
        calls.push(call);
    }
    let mut batches = Vec::with_capacity(sizes.len());
    let mut it = calls.into_iter();
    for size in sizes {
        batches.push(it.by_ref().take(size).collect());
    }
    (batches, served)
}

const OPENERS: &[&str] = &[
    "Here is what I found:",
    "I checked that for you.",
    "Thanks for waiting.",
    "All right.",
    "Good news.",
];
const CLOSERS: &[&str] = &[
    "Is there anything else I can help with?",
    "Let me know if you need more.",
    "Happy to help further.",
    "",
];
const NO_VALUE_ANSWERS: &[&str] = &[
    "Is there anything else I can help you with?",
    "Done. Let me know if you need anything else.",
    "I could not find anything more on that. Could you tell me more?",
    "Understood, I have noted that.",
    "Sorry, the service did not answer in time. Shall I try again later?",
];

fn prose_answer(rng: &mut Rng, kind: AnswerKind, facts: &[Fact], exempt: &[String]) -> String {
    let mut out = String::new();
    match kind {
        AnswerKind::NoValues | AnswerKind::NoAnswer => {
            if let Some(id) = exempt.first() {
                out.push_str(&format!("I looked at {id} again. "));
            }
            out.push_str(rng.pick_str(NO_VALUE_ANSWERS));
            return out;
        }
        AnswerKind::Fresh => out.push_str(rng.pick_str(OPENERS)),
        AnswerKind::Stale | AnswerKind::StaleAfterCalls => {
            out.push_str(rng.pick_str(&["As I mentioned earlier,", "From what we saw before,"]))
        }
    }
    for (i, fact) in facts.iter().enumerate() {
        out.push_str(if i == 0 { " the " } else { "; the " });
        out.push_str(fact.label);
        out.push_str(" is ");
        out.push_str(&fact.prose(rng));
    }
    if let Some(id) = exempt.first() {
        out.push_str(&format!(", for {id}"));
    }
    out.push('.');
    let closer = rng.pick(CLOSERS);
    if !closer.is_empty() {
        out.push(' ');
        out.push_str(closer);
    }
    out
}

/// The structured answer the output schema asks for: `{status, references, summary}`.
fn json_answer(kind: AnswerKind, facts: &[Fact], summary: &str) -> String {
    let refs: Vec<Value> = facts
        .iter()
        .map(|f| Value::String(f.answer_string()))
        .collect();
    let status = match kind {
        AnswerKind::NoValues | AnswerKind::NoAnswer => "no-data",
        _ => "resolved",
    };
    traceaudit::fingerprint::stringify(
        &json!({"status": status, "references": refs, "summary": summary}),
    )
}

/// The first ten characters of a text as V8 quotes them in a JSON-parse error.
fn parse_error(text: &str) -> String {
    let first = text.chars().next().unwrap_or(' ');
    let head: String = text.chars().take(10).collect();
    format!("Unexpected token '{first}', \"{head}\"... is not valid JSON")
}

fn zod_error(path: &str, expected: &str, received: &str, message: &str) -> String {
    format!(
        "[\n  {{\n    \"code\": \"invalid_type\",\n    \"expected\": \"{expected}\",\n    \
         \"received\": \"{received}\",\n    \"path\": [\n      \"{path}\"\n    ],\n    \
         \"message\": \"{message}\"\n  }}\n]"
    )
}

fn schema_plan(rng: &mut Rng, kind: AnswerKind, facts: &[Fact], prose: &str) -> SchemaPlan {
    let summary = match kind {
        AnswerKind::NoValues | AnswerKind::NoAnswer => "nothing further to report",
        _ => "request handled",
    };
    let good = json_answer(kind, facts, summary);
    let bad = |rng: &mut Rng| -> Attempt {
        if rng.chance(0.5) {
            Attempt {
                text: prose.to_string(),
                failure: Some(SchemaFailure {
                    stage: "json-parse",
                    error: parse_error(prose),
                    path: None,
                }),
            }
        } else if rng.chance(0.5) {
            let refs: Vec<Value> = facts
                .iter()
                .map(|f| Value::String(f.answer_string()))
                .collect();
            Attempt {
                text: traceaudit::fingerprint::stringify(&json!({"status": 1, "references": refs,
                                                    "summary": summary})),
                failure: Some(SchemaFailure {
                    stage: "schema-validate",
                    error: zod_error(
                        "status",
                        "string",
                        "number",
                        "Expected string, received number",
                    ),
                    path: Some("status".into()),
                }),
            }
        } else {
            let refs: Vec<Value> = facts
                .iter()
                .map(|f| Value::String(f.answer_string()))
                .collect();
            Attempt {
                text: traceaudit::fingerprint::stringify(
                    &json!({"status": "resolved", "references": refs}),
                ),
                failure: Some(SchemaFailure {
                    stage: "schema-validate",
                    error: zod_error("summary", "string", "undefined", "Required"),
                    path: Some("summary".into()),
                }),
            }
        }
    };
    let retries = rng.weighted(&[10, 50, 30, 10]) as u32;
    // How many bad answers come before a good one (retries + 1 = exhausted).
    let failures = match rng.weighted(&[50, 30, 12, 8]) {
        0 => 0,
        1 => 1.min(retries + 1),
        2 => 2.min(retries + 1),
        _ => retries + 1,
    };
    let mut attempts: Vec<Attempt> = (0..failures).map(|_| bad(rng)).collect();
    if failures <= retries {
        attempts.push(Attempt {
            text: good,
            failure: None,
        });
    }
    SchemaPlan { retries, attempts }
}

fn user_message(
    rng: &mut Rng,
    turn: u32,
    plan: &ConversationPlan,
    kind_hint: AnswerKind,
) -> String {
    if turn == 1 {
        return format!(
            "Hi, this is {}. My customer id is {} and I have a question about order {}. {}",
            plan.customer_name,
            plan.customer_id,
            plan.order_id,
            rng.pick(&[
                "Can you check what is going on?",
                "Something looks wrong with it.",
                "I need an update, please.",
            ])
        );
    }
    match kind_hint {
        AnswerKind::Stale | AnswerKind::StaleAfterCalls => rng
            .pick(&[
                "Sorry, what was that number again?",
                "Can you repeat the reference you gave me?",
                "Remind me what you found earlier?",
            ])
            .to_string(),
        _ => rng
            .pick(&[
                "Can you also check the devices at my site?",
                "What about the refund?",
                "Could you look up the latest status?",
                "Please open a ticket for this.",
                "Anything in the knowledge base about it?",
                "And the metrics for last night?",
            ])
            .to_string(),
    }
}

/// Plan one conversation.
pub fn plan_conversation(rng: &mut Rng, rates: &Rates, format: GenFormat) -> ConversationPlan {
    let customer_name = format!("{} {}", rng.pick(FIRST), rng.pick(LAST));
    let customer_id = format!(
        "{}_{}_{}",
        customer_name
            .split(' ')
            .next()
            .unwrap_or("x")
            .to_lowercase(),
        customer_name
            .split(' ')
            .nth(1)
            .unwrap_or("y")
            .to_lowercase(),
        rng.chars(DIGITS, 4)
    );
    let order_id = format!("#W{}", rng.chars(DIGITS, 7));
    let n_turns = 1 + rng.weighted(&rates.turn_weights) as u32;
    let schema = format == GenFormat::Agentfootprint && rng.chance(rates.schema);
    let mut plan = ConversationPlan {
        turns: Vec::new(),
        customer_name,
        customer_id: customer_id.clone(),
        order_id: order_id.clone(),
        schema,
    };
    let mut ctx = Ctx {
        rng,
        rates,
        fact_seq: 0,
        served_bytes: 0,
        customer_id,
        order_id,
        fresh_seq: 0,
    };
    let mut prior: Vec<Fact> = Vec::new();
    for turn in 1..=n_turns {
        let stale_turn = !prior.is_empty() && ctx.rng.chance(rates.stale);
        let n = if stale_turn {
            0
        } else {
            landings(ctx.rng, rates)
        };
        let (batches, served) = plan_calls(&mut ctx, turn, n);
        let kind = if stale_turn {
            AnswerKind::Stale
        } else if n == 0 || served.is_empty() {
            AnswerKind::NoValues
        } else if !prior.is_empty() && ctx.rng.chance(rates.stale_after_calls) {
            AnswerKind::StaleAfterCalls
        } else if ctx.rng.chance(rates.no_values) {
            AnswerKind::NoValues
        } else {
            AnswerKind::Fresh
        };
        let rng = &mut *ctx.rng;
        let mut facts: Vec<Fact> = Vec::new();
        match kind {
            AnswerKind::Fresh => {
                let k = rng.range(1, served.len().min(3) as u64) as usize;
                let mut pool = served.clone();
                rng.shuffle(&mut pool);
                facts.extend(pool.into_iter().take(k));
                // Sometimes the answer also refers back: still fresh.
                if !prior.is_empty() && rng.chance(0.2) {
                    facts.push(rng.pick(&prior).clone());
                }
            }
            AnswerKind::Stale | AnswerKind::StaleAfterCalls => {
                let k = rng.range(1, prior.len().min(2) as u64) as usize;
                let mut pool = prior.clone();
                rng.shuffle(&mut pool);
                facts.extend(pool.into_iter().take(k));
            }
            AnswerKind::NoValues | AnswerKind::NoAnswer => {}
        }
        let exempt: Vec<String> = if rng.chance(0.3) {
            vec![rng
                .pick(&[plan.customer_id.clone(), plan.order_id.clone()])
                .clone()]
        } else {
            Vec::new()
        };
        let text = prose_answer(rng, kind, &facts, &exempt);
        let schema = plan.schema.then(|| schema_plan(rng, kind, &facts, &text));
        let user = user_message(rng, turn, &plan, kind);
        let mut device = Vec::new();
        if format == GenFormat::Tau2 && rng.chance(rates.device) {
            let tool = *rng.pick(DEVICE_TOOLS);
            let result = device_result(rng, tool);
            let twice = rng.chance(0.5);
            device.push(DeviceCall {
                tool,
                result: result.clone(),
            });
            if twice {
                // The same device call twice: not the agent's, so never a repeated call.
                device.push(DeviceCall { tool, result });
            }
        }
        prior.extend(served.iter().cloned());
        plan.turns.push(TurnPlan {
            turn,
            user,
            batches,
            served,
            answer: Answer {
                kind,
                facts,
                exempt,
                text,
            },
            schema,
            device,
        });
    }
    plan
}

fn device_result(rng: &mut Rng, tool: &str) -> String {
    match tool {
        "run_speed_test" => format!(
            "Speed Test Result: {}.{:02} Mbps ({}).",
            rng.range(1, 300),
            rng.range(0, 99),
            rng.pick(&["Poor", "Fair", "Good", "Excellent"])
        ),
        "check_network_status" => format!(
            "Status Bar: {} | {} | Data {}",
            rng.pick(&["No Signal", "Poor", "Good", "Excellent"]),
            rng.pick(&["4G", "5G", "LTE"]),
            rng.pick(&["Enabled", "Disabled"])
        ),
        "toggle_airplane_mode" => "Airplane mode is now OFF.".to_string(),
        _ => "Restarting network services...".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use traceaudit::evidence::{answer_values, CompiledEvidence};

    #[test]
    fn fact_spellings_normalise_to_one_form() {
        let cfg = CompiledEvidence::default();
        let mut rng = Rng::new(3);
        let f = Fact {
            label: "x",
            value: FactValue::Number(1_234_567),
            turn: 1,
        };
        for _ in 0..20 {
            let text = format!("the total is {}.", f.prose(&mut rng));
            let values: Vec<String> = answer_values(&text, &cfg)
                .into_iter()
                .map(|c| c.value)
                .collect();
            assert_eq!(values, vec!["1234567".to_string()], "{text}");
        }
        let f = Fact {
            label: "x",
            value: FactValue::Id("TRK-00042QX".into()),
            turn: 1,
        };
        for _ in 0..20 {
            let text = format!("see {}.", f.prose(&mut rng));
            let values: Vec<String> = answer_values(&text, &cfg)
                .into_iter()
                .map(|c| c.value)
                .collect();
            assert_eq!(values, vec!["trk-00042qx".to_string()], "{text}");
        }
    }

    #[test]
    fn answers_hold_no_values_but_facts_and_exempt_ids() {
        let cfg = CompiledEvidence::default();
        let rates = Rates::default();
        for seed in 0..200 {
            let mut rng = Rng::new(seed);
            let plan = plan_conversation(&mut rng, &rates, GenFormat::Agentfootprint);
            for turn in &plan.turns {
                let mut allowed: Vec<String> = turn
                    .answer
                    .facts
                    .iter()
                    .map(|f| f.answer_string().to_lowercase())
                    .collect();
                allowed.push(plan.customer_id.to_lowercase());
                allowed.push(plan.order_id.trim_start_matches('#').to_lowercase());
                let values = answer_values(&turn.answer.text, &cfg);
                for v in values {
                    assert!(
                        allowed.contains(&v.value),
                        "unexpected value {:?} in {:?}",
                        v.value,
                        turn.answer.text
                    );
                }
                // User messages never state a fact.
                for f in &turn.answer.facts {
                    assert!(!turn.user.contains(&f.answer_string()));
                }
            }
        }
    }
}
