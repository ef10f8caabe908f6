//! Section 4.3: the evidence index. Every form a tool result served, stamped with the latest
//! turn that served it, plus the run's exempt forms (what the user, the system prompt and other
//! injected material supplied).

use super::normalize::{
    for_each_token, for_each_token_or_word, is_token_byte, js_trim, lookup_forms, normalize_into,
};
use super::walk::{Gathered, Outcome};
use super::CompiledEvidence;
use crate::js;
use crate::model::{HistoryMessage, Role};
use hashbrown::hash_map::EntryRef;
use rustc_hash::FxBuildHasher;
use serde_json::Value;

pub use crate::model::vocab::{EVIDENCE_FRAME_PREFIX, SCHEMA_FRAME_PREFIX};

/// Did the framework, not a person, write this `role: user` (or `role: system`) text? Such a
/// message neither starts a turn nor exempts anything. The test is a plain, case-sensitive
/// prefix test on the untrimmed text.
pub fn is_framework_frame(text: &str) -> bool {
    text.starts_with(EVIDENCE_FRAME_PREFIX) || text.starts_with(SCHEMA_FRAME_PREFIX)
}

/// The index one answer is judged against. Built by [`build_index`], or message by message
/// with [`EvidenceIndex::new`] and [`EvidenceIndex::push`] when consecutive runs judge
/// histories that extend one another (a trajectory's turns), so a conversation is walked once.
#[derive(Debug)]
pub struct EvidenceIndex {
    /// Form -> the latest turn whose tool result carried it.
    evidence: Collector,
    /// Forms the run supplied itself; never counted either way.
    exempt: Collector,
    tool_results_this_turn: u32,
}

impl EvidenceIndex {
    /// An empty index with the configuration's ceiling.
    pub fn new(cfg: &CompiledEvidence) -> EvidenceIndex {
        EvidenceIndex {
            evidence: Collector::new(cfg.max_forms),
            exempt: Collector::new(cfg.max_forms),
            tool_results_this_turn: 0,
        }
    }

    /// An empty index that keeps only the spellings of `values` (normalised answer values, as
    /// [`answer_values`](super::answer_values) gives them) instead of every form the history
    /// serves: a few entries instead of thousands, and a looked-up value, its exemption and
    /// the turns answer exactly as [`EvidenceIndex::new`]'s index would, as long as it has
    /// not [overflowed](EvidenceIndex::overflowed). [`len`](EvidenceIndex::len) and
    /// [`forms`](EvidenceIndex::forms) count the kept forms only.
    pub fn watching<'v>(
        cfg: &CompiledEvidence,
        values: impl IntoIterator<Item = &'v str>,
    ) -> EvidenceIndex {
        let mut watched = Watched::default();
        for value in values {
            watched.extend(lookup_forms(value).map(str::to_string));
        }
        let mut index = EvidenceIndex::new(cfg);
        index.exempt.watched = Some(watched.clone());
        index.evidence.watched = Some(watched);
        index
    }

    /// Can a [`watching`](EvidenceIndex::watching) index no longer stand for the full one? It
    /// spends a unit of budget on every form offered, new or not (it does not hold the others,
    /// so it cannot tell), and so runs out no later than the full index. Until then the full
    /// index has not run out either, and has dropped nothing. Once it has, the caller builds
    /// the full index instead. Always false for a full index.
    pub fn overflowed(&self) -> bool {
        self.evidence.overflowed() || self.exempt.overflowed()
    }

    /// Walk one more message of the history (the rules of [`build_index`]).
    pub fn push(&mut self, msg: &HistoryMessage<'_>) {
        match msg.role {
            Role::User | Role::System if is_framework_frame(msg.text) => {}
            Role::User => {
                self.evidence.turn += 1;
                self.tool_results_this_turn = 0;
                self.exempt.add_text(msg.text);
            }
            Role::System => self.exempt.add_text(msg.text),
            Role::Tool => {
                self.tool_results_this_turn += 1;
                self.evidence.add_result(msg.text);
            }
            Role::Assistant => {}
        }
    }

    /// Walk one message of the history from its [digest](EvidenceDigest) instead of its text:
    /// a tool message from [`digest_result`]'s digest, a person's user or system message from
    /// [`digest_text`]'s. Only a [`watching`](EvidenceIndex::watching) index can, and only when
    /// the digest is sure to stand for the text; otherwise nothing changes and `false` comes
    /// back, and the caller pushes the message's text instead. A framework frame
    /// ([`is_framework_frame`]) has no digest: its text is pushed.
    ///
    /// Why the digest stands for the text: a watching index keeps answer values, and each of
    /// them is a token, so it holds nothing but token characters, and unless a declared shape
    /// made it a value, a digit. The digest keeps every such form the message offers, so each
    /// kept form the text would stamp (or exempt) is among its forms or their spellings. That
    /// holds only if the text would be read to its end: the digest spends two units of budget
    /// for every form offered (the most the text could spend, one per spelling) and is refused
    /// unless the budget stays above zero after that; the text's walk, spending no more, then
    /// reads the whole message the same way (see `Gathered::fits_within`) and runs out of
    /// nothing. The budget left is then never more than the text would leave, so a later
    /// message can only be refused (and walked from its text) where the text alone would not
    /// have been.
    pub fn push_digest(&mut self, role: Role, digest: &EvidenceDigest) -> bool {
        let collector = match role {
            Role::Tool => &mut self.evidence,
            Role::User | Role::System => &mut self.exempt,
            Role::Assistant => return false,
        };
        let Some(watched) = &collector.watched else {
            return false;
        };
        let spend = (digest.offered as usize).saturating_mul(2);
        if watched.digitless || spend >= collector.budget {
            return false;
        }
        collector.budget -= spend;
        let turn = collector.turn;
        for form in digest.listed() {
            for spelling in lookup_forms(form) {
                if watched.contains(spelling) {
                    *collector.forms.entry_ref(spelling).or_insert(turn) = turn;
                }
            }
        }
        match role {
            Role::Tool => self.tool_results_this_turn += 1,
            Role::User => {
                self.evidence.turn += 1;
                self.tool_results_this_turn = 0;
            }
            _ => {}
        }
        true
    }

    /// Add injected material (system prompt, facts, recalled passages) to the exempt set.
    pub fn add_exempt_text(&mut self, text: &str) {
        self.exempt.add_text(text);
    }

    /// The turn that last served exactly this form.
    pub fn turn_of(&self, form: &str) -> Option<u32> {
        self.evidence.forms.get(form).copied()
    }

    /// The newest turn that served any spelling of a normalised value (see
    /// [`lookup_forms`](super::normalize::lookup_forms)).
    pub fn lookup(&self, value: &str) -> Option<u32> {
        lookup_forms(value).filter_map(|f| self.turn_of(f)).max()
    }

    /// Is any spelling of a normalised value in the run's exempt set?
    pub fn is_exempt(&self, value: &str) -> bool {
        lookup_forms(value).any(|f| self.exempt.forms.contains_key(f))
    }

    /// The turn being answered: how many person-written `role: user` messages the history
    /// holds; 0 when it holds none.
    pub fn current_turn(&self) -> u32 {
        self.evidence.turn
    }

    /// Tool messages seen since the last turn boundary.
    pub fn tool_results_this_turn(&self) -> u32 {
        self.tool_results_this_turn
    }

    /// True when the form budget was used up: the index may be missing forms (and fresher
    /// stamps), so nothing may be concluded from an absence.
    pub fn truncated(&self) -> bool {
        self.evidence.budget == 0
    }

    /// True when the exempt set hit the same ceiling (the framework does not report this; it is
    /// kept for diagnostics only).
    pub fn exempt_truncated(&self) -> bool {
        self.exempt.budget == 0
    }

    /// Number of distinct indexed forms.
    pub fn len(&self) -> usize {
        self.evidence.forms.len()
    }

    pub fn is_empty(&self) -> bool {
        self.evidence.forms.is_empty()
    }

    /// Number of distinct exempt forms.
    pub fn exempt_len(&self) -> usize {
        self.exempt.forms.len()
    }

    /// Every indexed form with its turn, in no particular order.
    pub fn forms(&self) -> impl Iterator<Item = (&str, u32)> {
        self.evidence.forms.iter().map(|(k, &t)| (k.as_str(), t))
    }
}

/// The forms a watching index keeps.
#[derive(Debug, Clone, Default)]
struct Watched {
    forms: hashbrown::HashSet<String, FxBuildHasher>,
    /// Bit `n % 64` is set when some kept form is `n` bytes long: most offered forms are not
    /// the length of any of the few kept ones, and are passed over without being hashed.
    lengths: u64,
    /// Some kept form has no ASCII digit: digests leave such forms out, so they cannot stand
    /// for the results' text (see [`EvidenceIndex::push_digest`]).
    digitless: bool,
}

impl Watched {
    fn length_bit(form: &str) -> u64 {
        1 << (form.len() % 64)
    }

    fn extend(&mut self, forms: impl IntoIterator<Item = String>) {
        for form in forms {
            self.lengths |= Watched::length_bit(&form);
            self.digitless |= !form.bytes().any(|b| b.is_ascii_digit());
            self.forms.insert(form);
        }
    }

    fn contains(&self, form: &str) -> bool {
        self.lengths & Watched::length_bit(form) != 0 && self.forms.contains(form)
    }
}

/// A set of forms filling up against a budget of distinct entries.
#[derive(Debug)]
struct Collector {
    /// Forms are short and numerous and hashed once each; a keyed hash is not needed here.
    forms: hashbrown::HashMap<String, u32, FxBuildHasher>,
    /// When set, only these forms are kept, and every offered form spends budget.
    watched: Option<Watched>,
    budget: usize,
    turn: u32,
    /// A buffer reused for normalising.
    scratch: String,
    /// Forms of the JSON result being read, before they reach `forms`.
    gathered: Gathered,
    /// When set, the collector only digests what it is offered (see [`digest_result`]).
    digest: Option<DigestSink>,
}

impl Collector {
    fn new(budget: usize) -> Collector {
        Collector {
            forms: hashbrown::HashMap::default(),
            watched: None,
            budget,
            turn: 0,
            scratch: String::new(),
            gathered: Gathered::default(),
            digest: None,
        }
    }

    /// Normalise `raw` and record it (both spellings of a `0x` value).
    fn add(&mut self, raw: &str) {
        let mut norm = std::mem::take(&mut self.scratch);
        normalize_into(raw, &mut norm);
        self.add_normalized(&norm);
        self.scratch = norm;
    }

    /// Has a watching collector spent its budget (see [`EvidenceIndex::overflowed`])?
    fn overflowed(&self) -> bool {
        self.watched.is_some() && self.budget == 0
    }

    /// Record an already normalised form. A form already present is re-stamped with the current
    /// turn whatever the budget says (that costs no entry); a new form takes one unit of budget,
    /// and once the budget is spent new forms are dropped.
    fn add_normalized(&mut self, norm: &str) {
        if norm.is_empty() {
            return;
        }
        if let Some(sink) = &mut self.digest {
            sink.offer(norm);
            return;
        }
        if let Some(watched) = &self.watched {
            for form in lookup_forms(norm) {
                if self.budget == 0 {
                    return;
                }
                self.budget -= 1;
                if watched.contains(form) {
                    *self.forms.entry_ref(form).or_insert(self.turn) = self.turn;
                }
            }
            return;
        }
        for form in lookup_forms(norm) {
            match self.forms.entry_ref(form) {
                EntryRef::Occupied(mut held) => *held.get_mut() = self.turn,
                EntryRef::Vacant(new) => {
                    if self.budget == 0 {
                        return;
                    }
                    new.insert(self.turn);
                    self.budget -= 1;
                }
            }
        }
    }

    /// Record every token of `text`; stops reading as soon as the budget is spent, so later
    /// tokens (even ones already present) are not re-stamped.
    fn add_text(&mut self, text: &str) {
        if let Some(sink) = &mut self.digest {
            // A digest keeps only the forms that hold a digit and counts the others, so the form
            // of a word is not made. A digesting collector's budget is unlimited.
            for_each_token_or_word(text, |token| {
                match token {
                    Some(form) => sink.offer(form),
                    None => sink.offered += 1,
                }
                true
            });
            return;
        }
        for_each_token(text, |token| {
            if self.budget == 0 {
                return false;
            }
            // Tokens come out normalised, and normalising is idempotent on them.
            self.add_normalized(token);
            true
        });
    }

    /// Walk a parsed JSON result: keys and leaves, never `null`.
    fn walk(&mut self, node: &Value) {
        if self.budget == 0 {
            return;
        }
        match node {
            Value::Null => {}
            Value::String(s) => {
                // The whole leaf (it may hold spaces and still be one value), then its tokens.
                self.add(s);
                self.add_text(s);
            }
            Value::Number(n) => self.add(&js::number_to_string(js::number_value(n))),
            Value::Bool(b) => self.add(if *b { "true" } else { "false" }),
            Value::Array(items) => {
                for item in items {
                    self.walk(item);
                }
            }
            Value::Object(map) => {
                // No budget test between entries: a key already present is still re-stamped
                // after the budget runs out, while the walk into its value stops at once.
                for (key, value) in js::js_property_order(map) {
                    self.add(key);
                    self.walk(value);
                }
            }
        }
    }

    /// Index one tool result: walked when its trimmed text opens with `{` or `[` and parses,
    /// tokenised as text otherwise.
    ///
    /// The walk reads the text directly ([`Gathered`]) when that is sure to give what the
    /// reference walk over a parsed `Value` ([`Collector::add_result_reference`]) gives, and
    /// takes the reference walk otherwise.
    fn add_result(&mut self, content: &str) {
        let trimmed = js_trim(content);
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let mut gathered = std::mem::take(&mut self.gathered);
            let direct =
                gathered.read(trimmed) == Outcome::Complete && gathered.fits_within(self.budget);
            if direct {
                for form in gathered.forms() {
                    self.add_normalized(form);
                }
                // Only a digest's reading counts words instead of gathering them.
                if let Some(sink) = &mut self.digest {
                    sink.offered += gathered.words();
                }
            }
            self.gathered = gathered;
            if direct {
                return;
            }
        }
        self.add_result_reference(content);
    }

    /// The reference walk: parse into a `Value` (lone surrogate escapes allowed, as
    /// `JSON.parse` allows them) and visit keys in JavaScript property order.
    fn add_result_reference(&mut self, content: &str) {
        let trimmed = js_trim(content);
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            if let Ok(parsed) = js::parse_json(trimmed) {
                self.walk(&parsed);
                return;
            }
        }
        self.add_text(content);
    }
}

pub use crate::model::digest::EvidenceDigest;

/// The forms a digesting collector keeps (see [`EvidenceDigest`]).
#[derive(Debug, Default)]
struct DigestSink {
    /// Kept forms in the order offered, repeats included, each ended by `\n`.
    kept: String,
    offered: usize,
}

impl DigestSink {
    fn offer(&mut self, norm: &str) {
        self.offered += 1;
        let b = norm.as_bytes();
        if b.iter().any(u8::is_ascii_digit) && b.iter().all(|&c| is_token_byte(c)) {
            self.kept.push_str(norm);
            self.kept.push('\n');
        }
    }

    /// The digest of the forms offered so far, leaving the sink empty for the next text.
    fn take(&mut self) -> EvidenceDigest {
        let mut forms = std::mem::take(&mut self.kept);
        forms.pop();
        let offered = u32::try_from(std::mem::take(&mut self.offered)).unwrap_or(u32::MAX);
        EvidenceDigest { forms, offered }
    }
}

thread_local! {
    /// A digesting collector per thread, its buffers reused from result to result.
    static DIGESTER: std::cell::RefCell<Collector> = std::cell::RefCell::new(Collector {
        digest: Some(DigestSink::default()),
        gathered: Gathered::counting_words(),
        ..Collector::new(usize::MAX)
    });
}

/// What the per-thread digesting collector makes of one text, fed by `feed`.
fn digested(feed: impl FnOnce(&mut Collector)) -> EvidenceDigest {
    DIGESTER.with(|cell| {
        let mut collector = cell.borrow_mut();
        feed(&mut collector);
        collector
            .digest
            .as_mut()
            .expect("the digesting collector has a sink")
            .take()
    })
}

/// The [`EvidenceDigest`] of one tool result's text: the same walk an index makes of it
/// ([`EvidenceIndex::push`]), with an unlimited budget.
pub fn digest_result(content: &str) -> EvidenceDigest {
    digested(|c| c.add_result(content))
}

/// The [`EvidenceDigest`] of a text the index tokenises: a person's user or system message
/// (for the exempt set) or an answer (for its values, see
/// [`answer_values_from_digest`](super::values::answer_values_from_digest)). Its forms are the
/// tokens that hold a digit, in order, repeats kept; `offered` counts every token.
pub fn digest_text(text: &str) -> EvidenceDigest {
    digested(|c| c.add_text(text))
}

/// Build the index for one judgement from the history the run saw (spec 4.3).
///
/// - Turns: each `role: user` message that is not a framework frame ([`is_framework_frame`])
///   adds one to the turn and resets the tool-result count; each `role: tool` message adds one
///   to the count and is indexed. Before the first user message the turn is 0.
/// - Only tool messages are evidence: not tool-call arguments, not assistant text.
/// - Both spellings of a `0x` value are stored, as the framework does, so a result's
///   `0x5f2a91` grounds an answer's `5f2a91` and the other way round.
/// - Ceiling: at most `cfg.max_forms` distinct forms. Re-serving a form already held is free
///   and re-stamps it, but only while the index is still being read: when the budget reaches
///   zero the index is marked truncated and the walk stops taking text, so later results
///   re-stamp nothing. (One exception follows the framework's walk: the remaining keys of the
///   JSON objects being walked at that moment are still offered, which can re-stamp them.) An
///   index holding exactly `max_forms` forms counts as truncated.
/// - Exempt set: the tokens of `role: user` and `role: system` messages (frames excluded), then
///   of each of `extra_exempt_texts` (the run's own user message and injected prompt material:
///   system prompt, facts, recalled passages). It has its own budget of `cfg.max_forms`,
///   filled in that order. Declared exempt values are not stored here: the extractor already
///   refuses them (spec 4.2), which is where the framework applies them.
pub fn build_index(
    history: &[HistoryMessage<'_>],
    extra_exempt_texts: &[&str],
    cfg: &CompiledEvidence,
) -> EvidenceIndex {
    fill(EvidenceIndex::new(cfg), history, extra_exempt_texts)
}

/// [`build_index`] into a [`watching`](EvidenceIndex::watching) index.
pub fn build_watching_index<'v>(
    history: &[HistoryMessage<'_>],
    extra_exempt_texts: &[&str],
    cfg: &CompiledEvidence,
    values: impl IntoIterator<Item = &'v str>,
) -> EvidenceIndex {
    fill(
        EvidenceIndex::watching(cfg, values),
        history,
        extra_exempt_texts,
    )
}

fn fill(
    mut index: EvidenceIndex,
    history: &[HistoryMessage<'_>],
    extra_exempt_texts: &[&str],
) -> EvidenceIndex {
    for msg in history {
        index.push(msg);
    }
    for text in extra_exempt_texts {
        index.add_exempt_text(text);
    }
    index
}

/// Feed the same results to a collector taking the direct walk where it may and to one always
/// taking the reference walk, at the given budget; panic unless the indexes are the same entry
/// for entry, with the same budget left, after every result.
#[cfg(any(test, fuzzing))]
#[doc(hidden)]
pub fn assert_direct_walk_as_reference(budget: usize, results: &[&str]) {
    let mut direct = Collector::new(budget);
    let mut reference = Collector::new(budget);
    for (turn, result) in results.iter().enumerate() {
        direct.turn = turn as u32 / 2;
        reference.turn = turn as u32 / 2;
        direct.add_result(result);
        reference.add_result_reference(result);
        let mut a: Vec<_> = direct.forms.iter().collect();
        let mut b: Vec<_> = reference.forms.iter().collect();
        a.sort();
        b.sort();
        assert_eq!(a, b, "budget {budget}, after result {turn}: {result}");
        assert_eq!(direct.budget, reference.budget, "budget {budget}: {result}");
    }
}

#[cfg(test)]
mod direct_walk_tests {
    use super::assert_direct_walk_as_reference as assert_same;
    use super::Collector;
    use crate::model::Role;

    const RESULTS: &[&str] = &[
        r#"{"order":"A-1042","total":"$1,250.00","items":[{"sku":"0xEF0101","qty":3}],"paid":true,"note":null}"#,
        r#"  [1, -0, 0.1, 1e21, 1.5e-7, 123456789012345678, -42, 9007199254740993, 2.50]  "#,
        r#"[0.30000000000000004, 123456789012345.67, -1234.5, 5e-324, 1.7976931348623157e308, 1e-7, 100, 0.000001, 12345678901234567890, -0.0, 1E2]"#,
        r#"{"price":"12.50","qty":"007","big":"1,234,567.80","neg":"-0","sci":"1e5"}"#,
        r#"{"10":"ten","2":"two","b":"bee","1":"one","a":{"0":"zero"}}"#,
        r#"{"a":"first value","b":1,"a":"second value"}"#,
        r#"{"outer":{"k":"x","k":"y"},"z":"zed"}"#,
        r#"{"s":"caf\u00e9 \n line\tbreak \"quoted\" 41,200 fc1/3,fc1/4"}"#,
        r#"{"lone":"\ud800 high"}"#,
        r#"{"broken": "#,
        r#"{"trailing":1} extra"#,
        r#"[[[["deep"]]]]"#,
        "plain text 1,250 units of 0xAB",
        r#"{"order":"A-1042","status":"shipped again"}"#,
    ];

    #[test]
    fn direct_walk_indexes_what_the_reference_walk_indexes() {
        assert_same(200_000, RESULTS);
    }

    #[test]
    fn direct_walk_agrees_when_the_budget_runs_out_part_way() {
        for budget in 0..40 {
            assert_same(budget, RESULTS);
        }
    }

    /// The length filter in front of the watched set only passes over forms of a length no kept
    /// form has; lengths 64 apart share a bit and are told apart by the set itself.
    #[test]
    fn the_watched_set_finds_exactly_its_forms() {
        let mut watched = super::Watched::default();
        let long = "7".repeat(65);
        watched.extend(["0xab12".to_string(), "ab12".to_string(), long.clone()]);
        for kept in ["0xab12", "ab12", long.as_str()] {
            assert!(watched.contains(kept), "{kept}");
        }
        for other in [
            "ab13",
            "0xab1",
            "7",
            "8",
            &"7".repeat(64),
            &"7".repeat(129),
            "",
        ] {
            assert!(!watched.contains(other), "{other}");
        }
    }

    /// Judge the same history twice with watching indexes, messages once from their text and
    /// once from their digests (where the index takes them); both must answer every lookup
    /// alike. Every third result follows a user message, the first of them naming the values
    /// of `results[0]`, so the exempt set is filled from digests too. Returns how many
    /// messages the digest side took from digests.
    fn assert_digests_stand_for_text(max_forms: usize, values: &[&str], results: &[&str]) -> usize {
        use super::{digest_result, digest_text, EvidenceIndex};
        use crate::evidence::EvidenceConfig;
        use crate::model::{HistoryMessage, Role};
        let cfg = EvidenceConfig {
            max_forms,
            ..EvidenceConfig::default()
        }
        .compile()
        .unwrap();
        let mut from_text = EvidenceIndex::watching(&cfg, values.iter().copied());
        let mut from_digest = EvidenceIndex::watching(&cfg, values.iter().copied());
        let mut digested = 0;
        for (i, result) in results.iter().enumerate() {
            let msg = |role, text| HistoryMessage {
                role,
                text,
                tool_name: None,
                call_id: None,
            };
            if i % 3 == 0 {
                let said = if i == 0 {
                    format!("I have {} here", results[0])
                } else {
                    "next question".to_string()
                };
                for role in [Role::System, Role::User] {
                    let person = HistoryMessage {
                        role,
                        text: &said,
                        tool_name: None,
                        call_id: None,
                    };
                    from_text.push(&person);
                    if from_digest.push_digest(role, &digest_text(&said)) {
                        digested += 1;
                    } else {
                        from_digest.push(&person);
                    }
                }
            }
            let tool = msg(Role::Tool, result);
            from_text.push(&tool);
            if from_digest.push_digest(Role::Tool, &digest_result(result)) {
                digested += 1;
            } else {
                from_digest.push(&tool);
            }
            let context = format!("max_forms {max_forms}, values {values:?}, result {i}");
            // The digest side never has more budget left, so it overflows no later; once it
            // has, the judge turns to a full index and this one is not asked.
            assert!(
                from_digest.overflowed() || !from_text.overflowed(),
                "{context}"
            );
            if from_digest.overflowed() {
                break;
            }
            for v in values {
                assert_eq!(from_text.lookup(v), from_digest.lookup(v), "{v}: {context}");
                assert_eq!(
                    from_text.is_exempt(v),
                    from_digest.is_exempt(v),
                    "{v}: {context}"
                );
            }
            let mut a: Vec<_> = from_text.forms().collect();
            let mut b: Vec<_> = from_digest.forms().collect();
            a.sort();
            b.sort();
            assert_eq!(a, b, "{context}");
            assert_eq!(from_text.current_turn(), from_digest.current_turn());
            assert_eq!(
                from_text.tool_results_this_turn(),
                from_digest.tool_results_this_turn()
            );
            assert_eq!(from_text.truncated(), from_digest.truncated(), "{context}");
        }
        digested
    }

    #[test]
    fn a_digest_stands_for_its_text() {
        let values = [
            "a-1042",
            "1250",
            "ef0101",
            "0xef0101",
            "41200",
            "3",
            "007",
            "1e21",
            "fc1/4",
            "123456789012345680",
            "1234567.8",
        ];
        let taken = assert_digests_stand_for_text(200_000, &values, RESULTS);
        let people = 2 * RESULTS.len().div_ceil(3);
        assert_eq!(
            taken,
            RESULTS.len() + people,
            "with room to spare every digest is taken"
        );
        // Small budgets: digests are refused before the text would run out, and the text's
        // own walk then agrees with the reference.
        for budget in 0..80 {
            assert_digests_stand_for_text(budget, &values, RESULTS);
        }
    }

    #[test]
    fn a_digest_is_refused_when_a_kept_form_has_no_digit() {
        use super::{digest_result, EvidenceIndex};
        let cfg = crate::evidence::CompiledEvidence::default();
        // `0xabcd` is a value; its bare spelling `abcd` holds no digit, and a result saying
        // just `abcd` grounds it, which a digest cannot show.
        let mut index = EvidenceIndex::watching(&cfg, ["0xabcd"]);
        assert!(!index.push_digest(Role::Tool, &digest_result(r#"{"code":"abcd"}"#)));
        assert!(!index.push_digest(Role::User, &super::digest_text("my code is abcd")));
        assert_digests_stand_for_text(200_000, &["0xabcd"], &[r#"{"code":"abcd"}"#]);
        // A full index takes no digest either.
        let mut full = EvidenceIndex::new(&cfg);
        assert!(!full.push_digest(Role::Tool, &digest_result("41200")));
        assert!(!full.push_digest(Role::User, &super::digest_text("41200")));
        // Nor does an assistant message: the index reads none.
        let mut watching = EvidenceIndex::watching(&cfg, ["41200"]);
        assert!(!watching.push_digest(Role::Assistant, &super::digest_text("41200")));
    }

    #[test]
    fn a_digest_keeps_only_forms_an_answer_value_can_match() {
        let digest = super::digest_result(
            r#"{"Order":"A-1042","note":"two words 7","items":[3,"caf\u00e9 99"],"ok":true}"#,
        );
        // Keys and leaves without a digit are left out, and so is a whole leaf holding a
        // space or a non-ASCII character; its tokens are kept.
        assert_eq!(digest.forms, "a-1042\n7\n3\n99");
        // order, a-1042, note, the leaf and its three tokens, items, 3, the leaf and its two
        // tokens, ok, true.
        assert_eq!(digest.offered, 14);
    }

    #[test]
    fn a_repeated_key_keeps_only_its_last_value() {
        let mut c = Collector::new(1000);
        c.add_result(r#"{"a":"stale","a":"fresh"}"#);
        assert!(c.forms.contains_key("fresh"));
        assert!(!c.forms.contains_key("stale"));
    }
}

#[cfg(test)]
mod digest_tests {
    use super::{digest_result, digest_text, DigestSink, EvidenceDigest};
    use crate::evidence::normalize::{js_trim, normalize_token, tokenize};
    use crate::evidence::walk::{Gathered, Outcome};
    use crate::js;
    use serde_json::Value;

    /// A digest made the long way: every form made, in order, and offered to the sink.
    fn offered_whole(forms: impl IntoIterator<Item = String>) -> EvidenceDigest {
        let mut sink = DigestSink::default();
        for form in forms.into_iter().filter(|f| !f.is_empty()) {
            sink.offer(&form);
        }
        sink.take()
    }

    /// Every form the reference walk makes of a parsed result, in its order.
    fn walk_forms(node: &Value, out: &mut Vec<String>) {
        match node {
            Value::Null => {}
            Value::String(s) => {
                out.push(normalize_token(s));
                out.extend(tokenize(s));
            }
            Value::Number(n) => {
                out.push(normalize_token(&js::number_to_string(js::number_value(n))))
            }
            Value::Bool(b) => out.push(b.to_string()),
            Value::Array(items) => items.iter().for_each(|item| walk_forms(item, out)),
            Value::Object(map) => {
                for (key, value) in js::js_property_order(map) {
                    out.push(normalize_token(key));
                    walk_forms(value, out);
                }
            }
        }
    }

    /// A tool result's digest made the long way: the direct walk's forms when it reads the
    /// result whole (a leaf that is one token gives its form once), else the reference walk's,
    /// else the text's tokens.
    fn result_whole(content: &str) -> EvidenceDigest {
        let trimmed = js_trim(content);
        if trimmed.starts_with('{') || trimmed.starts_with('[') {
            let mut gathered = Gathered::default();
            if gathered.read(trimmed) == Outcome::Complete {
                return offered_whole(gathered.forms().map(str::to_string));
            }
            if let Ok(parsed) = js::parse_json(trimmed) {
                let mut forms = Vec::new();
                walk_forms(&parsed, &mut forms);
                return offered_whole(forms);
            }
        }
        offered_whole(tokenize(content))
    }

    /// Pieces that meet every branch of the tokeniser: words in both cases, digits, the number
    /// rules, decoration, commas between digits and not, `0x` values, non-ASCII letters and
    /// separators.
    const PIECES: &[&str] = &[
        "word",
        "Word",
        "WORDS",
        "x",
        "abc123",
        "41,200",
        "1,250.00",
        "$5",
        "($5).",
        "(x)",
        "a,b",
        "done,",
        ",",
        ".",
        "...",
        "0xEF01",
        "café",
        "İstanbul",
        "-0",
        "007",
        "+5",
        "e.g.",
        "__init__",
        "10%",
        "A-1042",
        "fc1/3,fc1/4",
        "1e5",
        "12345678901234567",
        " ",
        "  ",
        "\n",
        "\t",
        "\u{a0}",
        "'",
        "\"",
        "`",
        "#",
        "@home",
        "ÄÖÜ",
        "x1",
        "1x",
        "a:b",
        "é1",
    ];

    /// A small deterministic generator (xorshift), so the texts are the same on every run.
    struct Texts(u64);

    impl Texts {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn text(&mut self) -> String {
            let n = (self.next() % 12) as usize;
            let mut out = String::new();
            for _ in 0..n {
                out.push_str(PIECES[(self.next() % PIECES.len() as u64) as usize]);
                if self.next().is_multiple_of(3) {
                    out.push(' ');
                }
            }
            out
        }

        fn value(&mut self, depth: u32) -> Value {
            match self.next() % if depth > 2 { 4 } else { 6 } {
                0 => Value::Null,
                1 => Value::Bool(self.next().is_multiple_of(2)),
                2 => serde_json::json!((self.next() % 100_000) as f64 / 8.0),
                3 => Value::String(self.text()),
                4 => Value::Array(
                    (0..self.next() % 4)
                        .map(|_| self.value(depth + 1))
                        .collect(),
                ),
                _ => Value::Object(
                    (0..self.next() % 4)
                        .map(|_| (self.text(), self.value(depth + 1)))
                        .collect(),
                ),
            }
        }
    }

    #[test]
    fn a_text_digest_with_words_unmade_is_the_one_made_with_every_form() {
        let mut texts = Texts(0x9E37_79B9_7F4A_7C15);
        for _ in 0..5_000 {
            let text = texts.text();
            assert_eq!(
                digest_text(&text),
                offered_whole(tokenize(&text)),
                "{text:?}"
            );
        }
    }

    #[test]
    fn a_result_digest_with_words_unmade_is_the_one_made_with_every_form() {
        let mut texts = Texts(0xD1B5_4A32_D192_ED03);
        let (mut direct, mut reference) = (0, 0);
        for i in 0..5_000 {
            let result = match i % 5 {
                // Text that is not JSON is tokenised.
                0 => texts.text(),
                // A repeated key sends the reading to the reference walk.
                1 => format!(
                    r#"{{"k":{},"k":{}}}"#,
                    Value::String(texts.text()),
                    texts.value(0)
                ),
                _ => texts.value(0).to_string(),
            };
            assert_eq!(digest_result(&result), result_whole(&result), "{result}");
            if result.starts_with(['{', '[']) {
                match Gathered::default().read(&result) {
                    Outcome::Complete => direct += 1,
                    Outcome::Fallback => reference += 1,
                }
            }
        }
        // Both walks were met.
        assert!(direct > 500 && reference > 500, "{direct} {reference}");
    }
}
