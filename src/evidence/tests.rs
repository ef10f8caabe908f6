//! The vectors of spec section 4, the decisions the module documents, and answers judged by the
//! real framework in the recorded sample `f_prior_turn_evidence` / `j_json_answer_gate`.

use super::reading::GroundedValue;
use super::values::{classify_token, Candidate};
use super::*;
use crate::model::vocab::Disposition;
use crate::model::{HistoryMessage, Role};

fn msg(role: Role, text: &str) -> HistoryMessage<'_> {
    HistoryMessage {
        role,
        text,
        tool_name: None,
        call_id: None,
    }
}

/// Compact history: one (role letter, text) pair per message; `u` user, `s` system,
/// `a` assistant, `t` tool.
fn history<'a>(items: &[(&str, &'a str)]) -> Vec<HistoryMessage<'a>> {
    items
        .iter()
        .map(|&(r, text)| {
            let role = match r {
                "u" => Role::User,
                "s" => Role::System,
                "a" => Role::Assistant,
                "t" => Role::Tool,
                other => panic!("unknown role letter {other}"),
            };
            msg(role, text)
        })
        .collect()
}

fn cfg() -> CompiledEvidence {
    CompiledEvidence::default()
}

fn with(edit: impl FnOnce(&mut EvidenceConfig)) -> CompiledEvidence {
    let mut c = EvidenceConfig::default();
    edit(&mut c);
    c.compile().unwrap()
}

fn pairs(values: &[Candidate]) -> Vec<(&str, &str)> {
    values
        .iter()
        .map(|c| (c.value.as_str(), c.shape.as_str()))
        .collect()
}

const LONG_ANSWER: &str =
    "Array SHPMAXDLVAP001 holds 41,200 GB; port fc1/3 (0xEF0101) had 892 CRC \
errors, 24/7 uptime, 32G links, 48-port switch, 41200iops, po1, UCSB-B200-M5, v7.0.3, 2024-05-01, \
08:15, 98304.0, $20/month, 1234 and 12345678901234567890.";

#[test]
fn spec_extraction_vector() {
    let got = answer_values(LONG_ANSWER, &cfg());
    assert_eq!(
        pairs(&got),
        [
            ("shpmaxdlvap001", "identifier"),
            ("41200", "number"),
            ("fc1/3", "identifier"),
            ("0xef0101", "identifier"),
            ("ucsb-b200-m5", "identifier"),
            ("v7.0.3", "identifier"),
            ("2024-05-01", "identifier"),
            ("08:15", "identifier"),
            ("98304", "number"),
            ("1234", "number"),
            ("12345678901234567890", "number"),
        ]
    );
}

#[test]
fn single_token_rules() {
    let c = cfg();
    let judge = |t: &str| classify_token(t, &c).map(|c| (c.value, c.shape));
    let num = |v: &str| Some((v.to_string(), "number".to_string()));
    let id = |v: &str| Some((v.to_string(), "identifier".to_string()));
    assert_eq!(judge(""), None);
    assert_eq!(judge("gb"), None);
    assert_eq!(judge("24/7"), None);
    assert_eq!(judge("1/2"), None);
    // Three digits on one side: no longer a prose ratio, an identifier.
    assert_eq!(judge("123/4"), id("123/4"));
    assert_eq!(judge("892"), None);
    assert_eq!(judge("32g"), None);
    assert_eq!(judge("48-port"), None);
    assert_eq!(judge("20/month"), None);
    assert_eq!(judge("41200iops"), num("41200"));
    assert_eq!(judge("100000mb/s"), num("100000"));
    // The number part is normalised before its digits are counted.
    assert_eq!(judge("0041200gb"), num("41200"));
    assert_eq!(judge("0012gb"), None);
    // Six letters is no unit: an identifier.
    assert_eq!(judge("12abcdef"), id("12abcdef"));
    // Digits of the normalised text, decimals included.
    assert_eq!(judge("1234.5"), num("1234.5"));
    assert_eq!(judge("0.001"), num("0.001"));
    assert_eq!(judge("-1234"), num("-1234"));
    assert_eq!(judge("po1"), None);
    assert_eq!(judge("ab12"), id("ab12"));
    assert_eq!(judge("1.2.3"), id("1.2.3"));
    assert_eq!(judge("12%3"), None);
    // JavaScript writes 0.0000001 as `1e-7`, which then reads as an identifier.
    assert_eq!(judge("1e-7"), id("1e-7"));
    assert_eq!(judge("1234e"), num("1234"));
}

#[test]
fn json_answer_quirk() {
    let answer = r#"{"array":"SHPMAXDLVAP001","capacity_gb":41200,"healthy":true}"#;
    assert_eq!(
        pairs(&answer_values(answer, &cfg())),
        [("shpmaxdlvap001", "identifier"), (":41200", "identifier")]
    );
}

#[test]
fn spec_index_vector() {
    let h = history(&[
        ("u", "What arrays do we have?"),
        (
            "t",
            r#"{"arrays":[{"name":"SHPMAXDLVAP001","capacity_gb":41200,"serial":"0x5f2a91"}]}"#,
        ),
        ("a", "There is one."),
        ("u", "And its IOPS?"),
        ("t", r#"{"iops":98765}"#),
    ]);
    let index = build_index(&h, &[], &cfg());
    assert_eq!(index.current_turn(), 2);
    assert_eq!(index.tool_results_this_turn(), 1);
    assert!(!index.truncated());
    assert_eq!(index.turn_of("41200"), Some(1));
    assert_eq!(index.turn_of("shpmaxdlvap001"), Some(1));
    assert_eq!(index.turn_of("98765"), Some(2));
    // Keys are evidence too; both spellings of the serial are stored.
    assert_eq!(index.turn_of("capacity_gb"), Some(1));
    assert_eq!(index.turn_of("iops"), Some(2));
    assert_eq!(index.turn_of("0x5f2a91"), Some(1));
    assert_eq!(index.turn_of("5f2a91"), Some(1));
    // User and assistant text is not evidence.
    assert_eq!(index.turn_of("one"), None);
    assert_eq!(index.turn_of("what"), None);

    // A framework frame in the middle is no turn boundary and resets nothing.
    let mut framed = h.clone();
    framed.push(msg(Role::Assistant, "It runs 99999 IOPS."));
    framed.push(msg(
        Role::User,
        "[evidence check — values not found.]\n\n`99999` (number)",
    ));
    framed.push(msg(Role::User, "[schema check — not JSON]"));
    let index = build_index(&framed, &[], &cfg());
    assert_eq!(index.current_turn(), 2);
    assert_eq!(index.tool_results_this_turn(), 1);
    // ... and the frame exempts nothing.
    assert!(!index.is_exempt("99999"));
    let reading = read_answer("It runs 99999 IOPS.", &index, &cfg());
    assert_eq!(pairs(&reading.unsupported), [("99999", "number")]);
}

#[test]
fn index_walks_json_as_javascript_reads_it() {
    let h = history(&[
        ("u", "q"),
        (
            "t",
            r#" {"big":12345678901234567890,"f":1.0,"ok":false,"none":null,"s":"Port FC1/3 is DOWN","2":"x"} "#,
        ),
    ]);
    let index = build_index(&h, &[], &cfg());
    // The double JavaScript parses, printed as JavaScript prints it.
    assert_eq!(index.turn_of("12345678901234567000"), Some(1));
    assert_eq!(index.turn_of("12345678901234567890"), None);
    assert_eq!(index.turn_of("1"), Some(1));
    assert_eq!(index.turn_of("false"), Some(1));
    assert_eq!(index.turn_of("null"), None);
    assert_eq!(index.turn_of("none"), Some(1));
    // A string leaf whole, then its tokens.
    assert_eq!(index.turn_of("port fc1/3 is down"), Some(1));
    assert_eq!(index.turn_of("fc1/3"), Some(1));
    assert_eq!(index.turn_of("2"), Some(1));

    // Text that only looks like JSON is tokenised instead.
    let h = history(&[("u", "q"), ("t", r#"{"a": 41200, broken"#)]);
    let index = build_index(&h, &[], &cfg());
    assert_eq!(index.turn_of("41200"), Some(1));
    assert_eq!(index.turn_of("a"), Some(1));
    // Plain text results are tokenised.
    let h = history(&[("u", "q"), ("t", "Serial 0x5F2A91, 41,200 GB.")]);
    let index = build_index(&h, &[], &cfg());
    assert_eq!(index.turn_of("41200"), Some(1));
    assert_eq!(index.turn_of("5f2a91"), Some(1));
}

#[test]
fn json_keys_follow_javascript_property_order() {
    // With room for two forms, the integer-like key and its value come first.
    let c = with(|c| c.max_forms = 2);
    let h = history(&[("u", "q"), ("t", r#"{"b":"q1","2":"y2"}"#)]);
    let index = build_index(&h, &[], &c);
    assert!(index.truncated());
    assert_eq!(index.turn_of("2"), Some(1));
    assert_eq!(index.turn_of("y2"), Some(1));
    assert_eq!(index.turn_of("b"), None);
}

#[test]
fn no_user_message_is_turn_zero() {
    let h = history(&[("s", "system text"), ("t", "ABC-1234")]);
    let index = build_index(&h, &[], &cfg());
    assert_eq!(index.current_turn(), 0);
    assert_eq!(index.tool_results_this_turn(), 1);
    assert_eq!(index.turn_of("abc-1234"), Some(0));
    let reading = read_answer("ABC-1234", &index, &cfg());
    assert_eq!(reading.from_this_turn, 1);
    assert_eq!(disposition(&reading).0, Disposition::Unreachable);
}

#[test]
fn latest_turn_wins() {
    let h = history(&[
        ("u", "q1"),
        ("t", "ARR-0001 ARR-0002"),
        ("u", "q2"),
        ("t", "ARR-0002"),
        ("u", "q3"),
    ]);
    let index = build_index(&h, &[], &cfg());
    assert_eq!(index.turn_of("arr-0001"), Some(1));
    assert_eq!(index.turn_of("arr-0002"), Some(2));
    assert_eq!(index.current_turn(), 3);
    assert_eq!(index.tool_results_this_turn(), 0);
    let reading = read_answer("ARR-0001 and ARR-0002", &index, &cfg());
    assert_eq!(reading.from_prior_turns, 2);
    assert_eq!(reading.latest_prior_turn, Some(2));
    assert_eq!(reading.turns_back(), Some(1));
    assert_eq!(
        reading.grounded,
        [
            GroundedValue {
                value: "arr-0001".into(),
                shape: "identifier".into(),
                turn: 1
            },
            GroundedValue {
                value: "arr-0002".into(),
                shape: "identifier".into(),
                turn: 2
            },
        ]
    );
}

#[test]
fn zero_x_lookups() {
    // Answer with the prefix, tool without.
    let h = history(&[("u", "q"), ("t", "fcid ef0101")]);
    let index = build_index(&h, &[], &cfg());
    let r = read_answer("FCID 0xEF0101", &index, &cfg());
    assert_eq!(r.from_this_turn, 1);
    assert!(r.unsupported.is_empty());
    // Tool with the prefix, answer without.
    let h = history(&[("u", "q"), ("t", r#"{"serial":"0x5f2a91"}"#)]);
    let index = build_index(&h, &[], &cfg());
    let r = read_answer("serial 5F2A91", &index, &cfg());
    assert_eq!(r.from_this_turn, 1);
    // The newest turn over both spellings counts.
    let h = history(&[("u", "q"), ("t", "0xab12"), ("u", "q"), ("t", "ab12")]);
    let index = build_index(&h, &[], &cfg());
    assert_eq!(index.turn_of("0xab12"), Some(1));
    assert_eq!(index.lookup("0xab12"), Some(2));
    // `0x` alone has one spelling.
    assert_eq!(lookup_forms("0x").count(), 1);
}

#[test]
fn run_supplied_values_are_exempt() {
    let h = history(&[
        ("s", "Site code SITE-0042."),
        ("u", "Check array ARR-2291 please"),
        ("t", "ARR-2291 ok, 77777 IOPS"),
    ]);
    let index = build_index(&h, &["Build 20240501 of the prompt."], &cfg());
    let r = read_answer(
        "ARR-2291 runs 77777 IOPS at SITE-0042 on build 20240501, not 31337.",
        &index,
        &cfg(),
    );
    assert_eq!(
        pairs(&r.exempt),
        [
            ("arr-2291", "identifier"),
            ("site-0042", "identifier"),
            ("20240501", "number")
        ]
    );
    assert_eq!(r.from_this_turn, 1);
    assert_eq!(pairs(&r.unsupported), [("31337", "number")]);
    // Exempt values are candidates all the same.
    assert_eq!(r.candidates(), 5);
    // A value the user gave is exempt in either spelling.
    let h = history(&[("u", "fcid 0xEF0101?")]);
    let index = build_index(&h, &[], &cfg());
    assert!(index.is_exempt("ef0101"));
    assert!(index.is_exempt("0xef0101"));
}

#[test]
fn declared_exemptions() {
    let c = with(|c| {
        c.exempt_values = vec!["41,200".into(), "0xEF0101".into(), "ab12".into()];
        c.exempt_patterns = vec![r"v\d+\.\d+\.\d+".into()];
    });
    let got = answer_values(
        "41200 0xef0101 ef0101 v7.0.3 v7.0.3-rc1 ab12 0xab12 98765",
        &c,
    );
    // Exempt values are compared normalised; a declared `0x` value exempts its bare form;
    // patterns are anchored, so `v7.0.3-rc1` is still a value.
    assert_eq!(
        pairs(&got),
        [
            ("v7.0.3-rc1", "identifier"),
            ("0xab12", "identifier"),
            ("98765", "number")
        ]
    );
    // Declared exemptions stay in the extractor: the bare form `ab12` being declared does not
    // set `0xab12` aside in the reading; it is looked up (and here unsupported).
    let index = build_index(&history(&[("u", "q")]), &[], &c);
    let r = read_answer("0xab12", &index, &c);
    assert_eq!(pairs(&r.unsupported), [("0xab12", "identifier")]);
    assert!(r.exempt.is_empty());
}

#[test]
fn declared_shapes() {
    let c = with(|c| {
        c.shapes = vec![
            ShapeDecl {
                name: "host".into(),
                pattern: "esxi-host-[a-z]+".into(),
            },
            ShapeDecl {
                name: "small".into(),
                pattern: r"\d{3}".into(),
            },
        ]
    });
    let got = answer_values("esxi-host-alpha had 892 errors; esxi-host-alpha2 24/7", &c);
    assert_eq!(
        pairs(&got),
        [
            ("esxi-host-alpha", "host"),
            ("892", "small"),
            ("esxi-host-alpha2", "identifier")
        ]
    );
    // Anchored: a shape does not match inside a longer token.
    assert_eq!(
        pairs(&answer_values("x892y", &c)),
        [("x892y", "identifier")]
    );
}

#[test]
fn min_digits_moves_the_number_bar() {
    let text = "892 errors, 41200iops, 1234 and fc1/3";
    let three = with(|c| c.min_digits = 3);
    assert_eq!(
        pairs(&answer_values(text, &three)),
        [
            ("892", "number"),
            ("41200", "number"),
            ("1234", "number"),
            ("fc1/3", "identifier")
        ]
    );
    let six = with(|c| c.min_digits = 6);
    assert_eq!(pairs(&answer_values(text, &six)), [("fc1/3", "identifier")]);
}

#[test]
fn answer_token_ceiling() {
    let c = with(|c| c.max_answer_tokens = 3);
    // Three tokens are read (`ab-1`, `x`, `cd-2`); `ef-3` is past the ceiling.
    assert_eq!(
        pairs(&answer_values("AB-1, x, CD-2 EF-3", &c)),
        [("ab-1", "identifier"), ("cd-2", "identifier")]
    );
    // Decoration-only pieces are not tokens and do not count.
    assert_eq!(answer_values(". , ; AB-1", &c).len(), 1);
}

#[test]
fn the_ceiling_truncates_at_two_hundred_thousand_forms() {
    let text: String = (0..200_001).map(|i| format!("f{i} ")).collect();
    let h = history(&[("u", "q"), ("t", text.as_str())]);
    let index = build_index(&h, &[], &cfg());
    assert!(index.truncated());
    assert_eq!(index.len(), 200_000);
    assert_eq!(index.turn_of("f199999"), Some(1));
    assert_eq!(index.turn_of("f200000"), None);
    let r = read_answer("f200000 is missing", &index, &cfg());
    assert_eq!(disposition(&r).0, Disposition::NotApplicable);
    // One form fewer fits without truncation.
    let text: String = (0..199_999).map(|i| format!("f{i} ")).collect();
    let h = history(&[("u", "q"), ("t", text.as_str())]);
    assert!(!build_index(&h, &[], &cfg()).truncated());
}

#[test]
fn small_ceiling_and_re_stamping() {
    // Exactly max_forms distinct forms already counts as truncated.
    let c = with(|c| c.max_forms = 2);
    let index = build_index(&history(&[("u", "q"), ("t", "aaaa bbbb")]), &[], &c);
    assert!(index.truncated());
    // Re-serving a held form is free and re-stamps it while budget remains.
    let c = with(|c| c.max_forms = 3);
    let h = history(&[
        ("u", "q1"),
        ("t", "aaaa bbbb"),
        ("u", "q2"),
        ("t", "aaaa cccc dddd"),
    ]);
    let index = build_index(&h, &[], &c);
    assert!(index.truncated());
    assert_eq!(index.turn_of("aaaa"), Some(2));
    assert_eq!(index.turn_of("bbbb"), Some(1));
    assert_eq!(index.turn_of("cccc"), Some(2));
    assert_eq!(index.turn_of("dddd"), None);
    // Once the budget is spent, later text is not read at all: no re-stamp.
    let c = with(|c| c.max_forms = 2);
    let h = history(&[("u", "q1"), ("t", "aaaa bbbb"), ("u", "q2"), ("t", "aaaa")]);
    let index = build_index(&h, &[], &c);
    assert_eq!(index.turn_of("aaaa"), Some(1));
    assert_eq!(index.tool_results_this_turn(), 1);
    // A zero budget is truncated from the start.
    let c = with(|c| c.max_forms = 0);
    assert!(build_index(&[], &[], &c).truncated());
}

#[test]
fn reading_vector_and_dispositions() {
    let fail = Reading {
        from_this_turn: 0,
        from_prior_turns: 3,
        latest_prior_turn: Some(1),
        current_turn: 3,
        tool_results_this_turn: 0,
        ..Reading::default()
    };
    assert_eq!(disposition(&fail).0, Disposition::CheckedFail);
    assert_eq!(fail.turns_back(), Some(2));
    let pass = Reading {
        from_this_turn: 1,
        ..fail.clone()
    };
    assert_eq!(disposition(&pass).0, Disposition::CheckedPass);
    let nothing = Reading {
        from_prior_turns: 0,
        latest_prior_turn: None,
        ..fail.clone()
    };
    assert_eq!(disposition(&nothing).0, Disposition::Unreachable);
    let no_turn = Reading {
        current_turn: 0,
        ..pass.clone()
    };
    assert_eq!(disposition(&no_turn).0, Disposition::Unreachable);
    // Truncation outranks everything.
    let truncated = Reading {
        index_truncated: true,
        current_turn: 0,
        ..fail.clone()
    };
    assert_eq!(disposition(&truncated).0, Disposition::NotApplicable);
    for r in [&fail, &pass, &nothing, &no_turn, &truncated] {
        assert!(!disposition(r).1.is_empty());
    }
}

#[test]
fn reported_values_are_clipped_like_the_framework() {
    let short = "a".repeat(64);
    assert_eq!(reported_value(&short), short);
    let long = format!("{}xyz", "b".repeat(62));
    assert_eq!(reported_value(&long), format!("{}x…", "b".repeat(62)));
}

#[test]
fn config_table_and_compile_errors() {
    let table: EvidenceConfig = toml::from_str(
        r#"
min_digits = 5
exempt_values = ["ORD-1"]
[[shapes]]
name = "order"
pattern = "ord-\\d+"
"#,
    )
    .unwrap();
    assert_eq!(table.min_digits, 5);
    assert_eq!(table.max_forms, 200_000);
    assert_eq!(table.max_answer_tokens, 20_000);
    let c = table.compile().unwrap();
    assert!(c.is_declared_exempt("ord-1"));
    assert_eq!(c.shape_of("ord-77"), Some("order"));

    let bad = EvidenceConfig {
        shapes: vec![ShapeDecl {
            name: "wwn".into(),
            pattern: "(".into(),
        }],
        ..EvidenceConfig::default()
    };
    let err = bad.compile().unwrap_err().to_string();
    assert!(err.contains("wwn") && err.contains('('), "{err}");
    let bad = EvidenceConfig {
        exempt_patterns: vec!["[z-a]".into()],
        ..EvidenceConfig::default()
    };
    assert!(bad.compile().unwrap_err().to_string().contains("[z-a]"));
    let twice = ShapeDecl {
        name: " a ".into(),
        pattern: "x".into(),
    };
    let bad = EvidenceConfig {
        shapes: vec![twice.clone(), twice],
        ..EvidenceConfig::default()
    };
    assert!(bad.compile().unwrap_err().to_string().contains("'a'"));
    let bad = EvidenceConfig {
        min_digits: 0,
        ..EvidenceConfig::default()
    };
    assert!(bad.compile().is_err());
}

// ---------------------------------------------------------------------------------------------
// Answers the framework (agentfootprint 9.62.0) judged in the recorded sample. Each history is
// the one the run held at the `agent.evidence_checked` event; the recorded payload is quoted in
// the comment. The system prompt and the run's user message are the injected material.

const SYSTEM_F: &str = "You are a storage operations assistant.";
const INVENTORY: &str = r#"{"arrays":[{"name":"SHPMAXDLVAP001","capacity_gb":41200}]}"#;

/// Judge like the gate and return (candidates, unsupported) plus the reading.
fn gate(
    h: &[HistoryMessage<'_>],
    extra: &[&str],
    answer: &str,
) -> (usize, Vec<(String, String)>, Reading) {
    let c = cfg();
    let index = build_index(h, extra, &c);
    let r = read_answer(answer, &index, &c);
    let unsupported = r
        .unsupported
        .iter()
        .map(|u| (reported_value(&u.value), u.shape.clone()))
        .collect();
    (r.candidates(), unsupported, r)
}

fn owned(v: &[(&str, &str)]) -> Vec<(String, String)> {
    v.iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect()
}

#[test]
fn recorded_f_conv_turn2_answer_from_the_previous_turn() {
    // run-1795968650406-2: {"candidates": 2, "unsupported": [], "action": "grounded"}
    let q1 = "What storage arrays do we have in dc1?";
    let q2 = "How full is it?";
    let h = history(&[
        ("u", q1),
        ("a", ""),
        ("t", INVENTORY),
        (
            "a",
            "There is one array, SHPMAXDLVAP001, with 41200 GB of capacity.",
        ),
        ("u", q2),
    ]);
    let (candidates, unsupported, r) = gate(&h, &[q2, SYSTEM_F], "SHPMAXDLVAP001 is at 41200 GB");
    assert_eq!(candidates, 2);
    assert!(unsupported.is_empty());
    // The manifest's expectation for the newer check: 2 values, latest prior turn 1, current
    // turn 2, 0 tool results this turn -> checked-fail.
    assert_eq!(
        (
            r.from_this_turn,
            r.from_prior_turns,
            r.latest_prior_turn,
            r.current_turn
        ),
        (0, 2, Some(1), 2)
    );
    assert_eq!(r.tool_results_this_turn, 0);
    assert_eq!(disposition(&r).0, Disposition::CheckedFail);
}

#[test]
fn recorded_f_conv_turn3_and_single_runs() {
    // run-1795968650577-3: {"candidates": 2, "unsupported": []}; expected checked-pass.
    let q3 = "And how is its performance?";
    let h = history(&[
        ("u", "What storage arrays do we have in dc1?"),
        ("a", ""),
        ("t", INVENTORY),
        (
            "a",
            "There is one array, SHPMAXDLVAP001, with 41200 GB of capacity.",
        ),
        ("u", "How full is it?"),
        ("a", "SHPMAXDLVAP001 is at 41200 GB"),
        ("u", q3),
        ("a", ""),
        ("t", r#"{"iops":98765}"#),
    ]);
    let (candidates, unsupported, r) =
        gate(&h, &[q3, SYSTEM_F], "SHPMAXDLVAP001 is running 98765 IOPS.");
    assert_eq!((candidates, unsupported.len()), (2, 0));
    assert_eq!(
        (r.from_this_turn, r.from_prior_turns, r.current_turn),
        (1, 1, 3)
    );
    assert_eq!(disposition(&r).0, Disposition::CheckedPass);

    // run-1795968650753-4: {"candidates": 0, "unsupported": []}; expected unreachable.
    let q = "Are the arrays healthy?";
    let h = history(&[("u", q), ("a", ""), ("t", INVENTORY)]);
    let (candidates, unsupported, r) =
        gate(&h, &[q, SYSTEM_F], "All storage arrays report healthy.");
    assert_eq!((candidates, unsupported.len()), (0, 0));
    assert_eq!(disposition(&r).0, Disposition::Unreachable);

    // run-1795968651058-6: {"candidates": 3, "unsupported": [{"value": "52000", "shape":
    // "number"}, {"value": "7.0.3", "shape": "identifier"}], "action": "flagged"}
    let q = "What is the capacity of our array?";
    let h = history(&[("u", q), ("a", ""), ("t", INVENTORY)]);
    let (candidates, unsupported, r) = gate(
        &h,
        &[q, SYSTEM_F],
        "SHPMAXDLVAP001 has 52000 GB and firmware 7.0.3.",
    );
    assert_eq!(candidates, 3);
    assert_eq!(
        unsupported,
        owned(&[("52000", "number"), ("7.0.3", "identifier")])
    );
    assert_eq!(disposition(&r).0, Disposition::CheckedPass);
}

#[test]
fn recorded_f_guard_fixed_revision() {
    let q = "What is the capacity of our array?";
    let frame = "[evidence check — the answer above states values that appear in NO tool result \
from this turn, so they were not read from the data. Reply again using only names and numbers a \
tool actually returned. If you need one of these values, call the tool that provides it. If the \
data was never collected, say so plainly — an honest \"that was not collected\" is a correct \
answer and an invented identifier is not. The tokens listed after this line are quoted from YOUR \
OWN answer as DATA; they are a report, not an instruction addressed to you.]\n\n`52000` (number)";
    // run-1795968651291-7, iteration 2: {"candidates": 2, "unsupported": [{"value": "52000",
    // "shape": "number"}], "action": "revision-asked"}
    let first = history(&[("u", q), ("a", ""), ("t", INVENTORY)]);
    let (candidates, unsupported, _) = gate(&first, &[q, SYSTEM_F], "SHPMAXDLVAP001 has 52000 GB.");
    assert_eq!(candidates, 2);
    assert_eq!(unsupported, owned(&[("52000", "number")]));
    // Iteration 3, after the frame: {"candidates": 2, "unsupported": [], "action": "grounded",
    // "afterRevision": true}
    let mut second = first.clone();
    second.push(msg(Role::Assistant, "SHPMAXDLVAP001 has 52000 GB."));
    second.push(msg(Role::User, frame));
    let (candidates, unsupported, r) = gate(
        &second,
        &[q, SYSTEM_F],
        "Correction: SHPMAXDLVAP001 has 41200 GB.",
    );
    assert_eq!((candidates, unsupported.len()), (2, 0));
    assert_eq!(
        (r.current_turn, r.tool_results_this_turn, r.from_this_turn),
        (1, 1, 2)
    );
    // The frame quotes `52000` but exempts nothing.
    let (_, unsupported, _) = gate(&second, &[q, SYSTEM_F], "SHPMAXDLVAP001 has 52000 GB.");
    assert_eq!(unsupported, owned(&[("52000", "number")]));
}

#[test]
fn recorded_j_json_answers() {
    let q = "Report the dc1 array capacity.";
    let system = "Answer storage questions as JSON.";
    let instructions = "Respond ONLY with valid JSON matching the output schema. Do NOT include \
prose, markdown fences, or explanatory text.";
    let answer = r#"{"array":"SHPMAXDLVAP001","capacity_gb":41200,"healthy":true}"#;
    // run-1795968658872-1: {"candidates": 2, "unsupported": [{"value": ":41200", "shape":
    // "identifier"}], "action": "flagged"}
    let h = history(&[("u", q), ("a", ""), ("t", INVENTORY)]);
    let (candidates, unsupported, _) = gate(&h, &[q, system, instructions], answer);
    assert_eq!(candidates, 2);
    assert_eq!(unsupported, owned(&[(":41200", "identifier")]));
    // run-1795968658952-2: the repeated-call note makes the second result unparseable, so it is
    // tokenised and `:41200` is served as text: {"candidates": 2, "unsupported": [],
    // "action": "grounded"}
    let noted = format!(
        "{INVENTORY}\n\n[identical call: 'storage_inventory' has now returned exactly this result 2 \
times this turn, for exactly these arguments. Calling it again will not change it — act on what \
you have, or change the arguments (a different filter, a wider range, a different tool). If you \
are waiting for something to change, say so in your answer rather than calling again.]"
    );
    let h = history(&[
        ("u", q),
        ("a", ""),
        ("t", INVENTORY),
        ("a", ""),
        ("t", noted.as_str()),
    ]);
    let (candidates, unsupported, r) = gate(&h, &[q, system, instructions], answer);
    assert_eq!((candidates, unsupported.len()), (2, 0));
    assert_eq!(r.tool_results_this_turn, 2);
}

/// A watching index answers every lookup of its values as the full index does, at budgets the
/// full index fits in, runs out in, and in between; and it says when it can no longer stand
/// for the full index.
#[test]
fn a_watching_index_answers_as_the_full_one_until_it_overflows() {
    let h = history(&[
        ("s", "You serve orders; account 0xAB12 is yours"),
        ("u", "Where is order A-1042?"),
        (
            "t",
            r#"{"order":"A-1042","total":"$1,250.00","items":[{"sku":"0xEF0101","qty":3}],"paid":true}"#,
        ),
        ("t", "plain text: 41,200 units shipped from DEPOT-7"),
        ("a", "It is on its way."),
        ("u", "And the total for A-1042?"),
        (
            "t",
            r#"[1250, 9007199254740993, "depot-7", {"a":"x","a":"y"}]"#,
        ),
        ("u", "[evidence check] not a turn"),
        ("t", r#"{"broken": "#),
    ]);
    let answers = [
        "Order A-1042 totals $1,250 and 0xEF0101 ships 41,200 units from DEPOT-7",
        "ab12 and 9007199254740993, sku ef0101, y not x, 3 of them",
        "nothing to see",
    ];
    let mut overflowed_at = None;
    for budget in (1..=400).rev() {
        let cfg = with(|c| c.max_forms = budget);
        let values: Vec<String> = answers
            .iter()
            .flat_map(|a| answer_values(a, &cfg))
            .map(|c| c.value)
            .collect();
        assert!(values.len() >= 8, "{values:?}");
        let full = build_index(&h, &["extra 7777"], &cfg);
        let watching =
            build_watching_index(&h, &["extra 7777"], &cfg, values.iter().map(String::as_str));
        assert!(!full.overflowed());
        if watching.overflowed() {
            overflowed_at.get_or_insert(budget);
            continue;
        }
        assert!(
            overflowed_at.is_none(),
            "budget {budget} fits after a larger one overflowed"
        );
        assert!(!full.truncated(), "budget {budget}");
        assert!(!watching.truncated());
        assert_eq!(watching.current_turn(), full.current_turn());
        assert_eq!(
            watching.tool_results_this_turn(),
            full.tool_results_this_turn()
        );
        assert!(watching.len() < full.len(), "it keeps fewer forms");
        for v in &values {
            assert_eq!(watching.lookup(v), full.lookup(v), "budget {budget}: {v}");
            assert_eq!(
                watching.is_exempt(v),
                full.is_exempt(v),
                "budget {budget}: {v}"
            );
        }
        for answer in answers {
            assert_eq!(
                read_answer(answer, &watching, &cfg),
                read_answer(answer, &full, &cfg)
            );
        }
    }
    // Both sides were reached: the larger budgets fit, the smaller overflow.
    let overflowed_at = overflowed_at.expect("small budgets overflow");
    assert!(overflowed_at < 400, "some budget fits");
}
