use super::oracle::{reference, walk};
use super::*;
use serde_json::{json, Value};
use std::io::Cursor;

fn scanner(text: &[u8], chunk: usize, first_check: usize) -> Scanner<Cursor<Vec<u8>>> {
    Scanner::start(Cursor::new(text.to_vec()), chunk, first_check)
        .unwrap()
        .unwrap()
}

/// Strings holding brackets, braces, escaped quotes and backslashes, multi-byte text, nested
/// lists, blanks between elements.
const TRICKY: &str = "[ \"a]\" ,\n\t\"b\\\"]}\", \"a\\\\\", \"a\\\\\\\\\" ,{\"k\": \"}]\\\"{[\", \
                      \"n\": [1, [2, [3, []]]]}, [[\"]\"], {}], \"日本語 é ü\", \"\\u00e9\\n\",\r\n \
                      -1.5e3, 0, 12, true, false, null, {}, [] ]";

#[test]
fn the_fuzz_runs_findings_read_as_serde_json_reads_them() {
    // Inputs the 30-minute fuzz runs of this check found: Python's numbers where a key is due,
    // or in a value passed over; a `\u` escape with a `"` among its four bytes.
    let dir = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/fuzz-findings/json_scan"
    );
    let mut read = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        super::oracle::check_as_streamed(&std::fs::read(entry.unwrap().path()).unwrap());
        read += 1;
    }
    assert_eq!(read, 7);
}

#[test]
fn errors_on_python_numbers_out_of_place_are_where_serde_json_puts_them() {
    for doc in [
        // Where a key is due: serde_json stops after the number's first byte.
        "{\"pick\": {\n Infinity: 1}}",
        "[{NaN: 1}]",
        "{\"x\": {-Infinity: 2}}",
        // In a value passed over, followed by what cannot follow a value.
        "{\"version\":\nNaN  2, \"pick\": 1}",
        "{\"a\": [1, Infinity 3], \"pick\": 2}",
        // In a value the file cuts short: the error is past the number, as if it were one.
        "{\"\":\"\",\"\":[{\"\":\"\",\"\":NaN{",
        "{\"a\": [Infinity ,",
        // Not a token of its own: not one of Python's numbers.
        "[1NaN]",
        "[NaNa]",
        "{\"pick\": [-Infinityx]}",
    ] {
        super::oracle::check_as_streamed(doc.as_bytes());
        let stand_in = super::oracle::python_stand_ins(doc.as_bytes());
        let want = reference(stand_in.as_deref().unwrap_or(doc.as_bytes()));
        assert!(want.1.is_some(), "{doc} is an error");
    }
}

#[test]
fn elements_at_every_chunk_size() {
    let expected: Vec<Value> = serde_json::from_str(TRICKY).unwrap();
    assert_eq!(expected.len(), 16);
    assert_eq!(expected[2], json!("a\\"));
    assert_eq!(expected[3], json!("a\\\\"));
    for chunk in (1..=17).chain([4096]) {
        assert_eq!(
            walk(TRICKY.as_bytes(), chunk, 1 << 20),
            (expected.clone(), None),
            "chunk {chunk}"
        );
    }
}

#[test]
fn objects_keys_and_skipped_values() {
    let text =
        "\u{feff}\n {\"skip\": {\"a\": [1, \"]\"], \"b\": \"}\"}, \"pick\": {\"x\": \"é\"},\n \
                \"skip2\": [\"[\", 3, {\"c\": null}], \"n\": -0.5, \"list\": [1, \"two\", [3]],\n \
                \"pick\": \"\\\"\", \"list\": {\"a\": [1]}, \"list\": null}";
    let want = vec![
        json!({"x": "é"}),
        json!(1),
        json!("two"),
        json!([3]),
        json!("\""),
        json!("an object"),
        Value::Null,
    ];
    for chunk in [1, 2, 3, 7, 64, 1 << 20] {
        assert_eq!(walk(text.as_bytes(), chunk, 1 << 20), (want.clone(), None));
    }
    assert_eq!(reference(text.as_bytes()), (want, None));
}

#[test]
fn a_truncated_document_names_the_end() {
    let text = b"[{\"a\": 1},\n {\"b\": [2, \"x";
    for chunk in [1, 4, 1 << 20] {
        let (values, error) = walk(text, chunk, 1 << 20);
        assert_eq!(values, vec![json!({"a": 1})]);
        assert_eq!(
            error,
            Some((
                "EOF while parsing a string at line 2 column 13".to_string(),
                text.len() as u64
            ))
        );
    }
}

#[test]
fn trailing_garbage_is_reported_after_the_values() {
    let (values, error) = walk(b"[1, 2]\n  x y", 3, 1 << 20);
    assert_eq!(values, vec![json!(1), json!(2)]);
    assert_eq!(
        error,
        Some(("trailing characters at line 2 column 3".to_string(), 10))
    );
    assert_eq!(walk(b"[1]\n \n", 1, 1 << 20), (vec![json!(1)], None));
}

#[test]
fn between_value_errors_use_serde_json_words() {
    // Each of the scanner's own messages, checked against serde_json's.
    for (text, words) in [
        ("[1", EOF_LIST),
        ("{\"a\": 1", EOF_OBJECT),
        ("[1,", EOF_VALUE),
        ("{\"a\" 1}", EXPECTED_COLON),
        ("[1 2]", LIST_COMMA_OR_END),
        ("{\"a\": 1 \"b\": 2}", OBJECT_COMMA_OR_END),
        ("{1: 2}", KEY_MUST_BE_A_STRING),
        ("[1] 2", TRAILING_CHARACTERS),
        ("[1,]", TRAILING_COMMA),
    ] {
        let err = serde_json::from_str::<Value>(text).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{words} at line")),
            "{err} / {words}"
        );
    }
}

/// Broken variants of a few documents: each cut short at every byte, and with each byte
/// replaced by (or preceded by) a troublesome one.
fn variants(doc: &str) -> Vec<Vec<u8>> {
    let doc = doc.as_bytes();
    let mut out = vec![doc.to_vec()];
    for cut in 0..doc.len() {
        out.push(doc[..cut].to_vec());
    }
    let swaps: [&[u8]; 17] = [
        b"x",
        b"}",
        b"]",
        b",",
        b"\"",
        b"\x01",
        b":",
        b"{",
        b"[",
        b"\\",
        b"",
        b"\n",
        b"\xff",
        b"1e",
        b"9e999",
        b"9e9999999999",
        b"9e99999999999",
    ];
    for at in 0..doc.len() {
        for swap in swaps {
            let mut v = doc[..at].to_vec();
            v.extend_from_slice(swap);
            v.extend_from_slice(&doc[at + 1..]);
            out.push(v);
        }
        for insert in [&b","[..], b" ", b"]", b"}"] {
            let mut v = doc[..at].to_vec();
            v.extend_from_slice(insert);
            v.extend_from_slice(&doc[at..]);
            out.push(v);
        }
    }
    out
}

#[test]
fn broken_documents_read_as_the_streaming_parser_read_them() {
    let docs = [
        "[{\"a\": [1, \"]\\\"\"]},\n 2.5, \"s\\\\\", null, [true, {}]]",
        "\u{feff} {\"x\": [1, {\"y\": \"}\"}],\n \"list\": [{\"k\": \"é\"}, -3e2], \"pick\": {\"p\": 1}}\n",
        "{\"list\": {\"a\": [1], \"b\": \"c\"}, \"pick\": tru}",
    ];
    let mut checked = 0;
    for doc in docs {
        for text in variants(doc) {
            // Files that open as no document at all are `opening_...`'s business.
            if Scanner::start(Cursor::new(text.clone()), 1, 1)
                .unwrap()
                .is_err()
            {
                continue;
            }
            let want = reference(&text);
            for (chunk, first_check) in [(1, 1), (3, 1 << 20), (5, 6), (1 << 20, 1 << 20)] {
                let got = walk(&text, chunk, first_check);
                assert_eq!(
                    got,
                    want,
                    "chunk {chunk}, check {first_check}: {:?}",
                    String::from_utf8_lossy(&text)
                );
                checked += 1;
            }
        }
    }
    assert!(checked > 10_000, "{checked}");
}

#[test]
fn a_broken_value_is_not_read_to_the_end_of_the_file() {
    // A missing colon early in the first element, then a long run that never closes it.
    let mut text = b"[{\"a\": 1, \"b\" 2, \"c\": ".to_vec();
    text.extend(std::iter::repeat_n(b'[', 100_000));
    let mut scan = scanner(&text, 256, 1024);
    let mut list = scan.enter();
    assert!(scan.next_element(&mut list).unwrap());
    let err = scan.parse(PhantomData::<Value>).unwrap_err();
    assert!(scan.buf.len() < 8 * 1024, "{}", scan.buf.len());
    assert_eq!(
        scan.describe(err).unwrap(),
        ("expected `:` at line 1 column 15".to_string(), 15)
    );
    assert_eq!(
        reference(&text).1,
        Some(("expected `:` at line 1 column 15".to_string(), 15))
    );
    // A large element that is sound is read whole however often it is checked.
    let big: Vec<Value> = (0..2000).map(|i| json!({"i": i, "s": "]}\"[{"})).collect();
    let text = serde_json::to_vec(&vec![Value::from(big.clone()), json!(1)]).unwrap();
    assert_eq!(
        walk(&text, 100, 512),
        (vec![Value::from(big), json!(1)], None)
    );
}

#[test]
fn opening_skips_a_byte_order_mark_and_blanks() {
    let mut scan = scanner(b"\xEF\xBB\xBF \n[1]", 2, 1 << 20);
    assert_eq!(scan.start, 5);
    assert_eq!(scan.peek().unwrap(), Some(b'['));
    for (text, verdict) in [
        (&b""[..], NotJson::Empty),
        (&b" \r\n\t"[..], NotJson::Blank),
        (&b"\xEF\xBB\xBF"[..], NotJson::Blank),
        (&b" 12"[..], NotJson::Starts("12".to_string())),
        (
            &b"  not json, and longer than the quoted part"[..],
            NotJson::Starts("not json, and longer tha".to_string()),
        ),
    ] {
        for chunk in [1, 1 << 20] {
            let opened = Scanner::start(Cursor::new(text.to_vec()), chunk, 1 << 20).unwrap();
            assert_eq!(opened.err(), Some(verdict.clone()));
        }
    }
}

#[test]
fn marks_are_found_eight_bytes_at_a_time_as_one_at_a_time() {
    // Every byte value, and runs of the marks and their near neighbours (a borrow in the
    // word-wide compare must not hide or invent the first mark).
    let mut text: Vec<u8> = (0..=255u8).collect();
    text.extend_from_slice(b"ab\"[]{}\\\x01\x02\x21\x23ZZ\x5a\x5c\x7c\x7e{\x00\xff\x7b\x1b}]");
    text.extend(std::iter::repeat_n(b'x', 20));
    for in_string in [false, true] {
        let naive = |from: usize| {
            (from..text.len()).find(|&i| {
                let b = text[i];
                if in_string {
                    b == b'"' || b == b'\\'
                } else {
                    matches!(b, b'"' | b'[' | b']' | b'{' | b'}' | b'N' | b'I')
                }
            })
        };
        for from in 0..=text.len() {
            assert_eq!(find_mark(&text, from, in_string), naive(from), "{from}");
        }
    }
}

/// Each element of a top-level list: its value, or the reason it was passed over.
fn elements(text: &[u8], chunk: usize, limit: usize) -> (Vec<Result<Value, String>>, u64) {
    let mut scan = scanner(text, chunk, 1 << 20);
    scan.set_limit(limit);
    let mut out = Vec::new();
    let mut list = scan.enter();
    while scan.next_element(&mut list).unwrap() {
        match scan.parse(PhantomData::<Value>) {
            Ok(value) => out.push(Ok(value)),
            Err(ScanError::Skipped(reason)) => out.push(Err(reason)),
            Err(err) => panic!("{:?}", scan.describe(err)),
        }
    }
    scan.end().unwrap();
    (out, scan.take_python_numbers())
}

#[test]
fn python_numbers_read_as_null() {
    let text =
        br#"[NaN, {"a": Infinity, "b": "NaN \" Infinity", "c": [-Infinity, 1]}, 2, -Infinity]"#;
    for chunk in [1, 3, 1 << 20] {
        let (values, count) = elements(text, chunk, 1 << 20);
        let values: Vec<Value> = values.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            values,
            vec![
                Value::Null,
                json!({"a": null, "b": "NaN \" Infinity", "c": [null, 1]}),
                json!(2),
                Value::Null
            ]
        );
        assert_eq!(count, 4);
    }
    // Without them, nothing is counted.
    assert_eq!(elements(b"[1, \"NaN\"]", 1, 1 << 20).1, 0);
}

#[test]
fn errors_after_python_numbers_are_placed_in_the_file() {
    // The same document with a number of the same length in place of each of Python's:
    // the error must be reported where serde_json reports it there.
    for (doc, same_length) in [
        ("[{\"a\": NaN, \"b\" 1}]", "[{\"a\": 0.0, \"b\" 1}]"),
        (
            "[{\"a\": [-Infinity,\n Infinity], \"b\": [1 2]}]",
            "[{\"a\": [-1.000000,\n 1.000000], \"b\": [1 2]}]",
        ),
        (
            "[{\"a\": NaN,\n \"b\": tru}]",
            "[{\"a\": 0.0,\n \"b\": tru}]",
        ),
    ] {
        let want = reference(same_length.as_bytes());
        assert!(want.1.is_some());
        for chunk in [1, 4, 1 << 20] {
            assert_eq!(walk(doc.as_bytes(), chunk, 1 << 20).1, want.1, "{doc}");
        }
    }
}

#[test]
fn values_over_the_limit_are_passed_over() {
    let long = "x".repeat(300);
    let text = format!(
        "[{{\"a\": \"{long}\", \"n\": [1, {{\"b\": \"]\\\"[\"}}]}}, {{\"b\": 1}}, \"short\", \"{long}\", 3]"
    );
    for chunk in [1, 7, 64, 1 << 20] {
        let (values, _) = elements(text.as_bytes(), chunk, 64);
        assert_eq!(values.len(), 5, "chunk {chunk}");
        assert_eq!(
            values[0],
            Err("is 334 B (334 bytes), over the 64 B record limit".to_string())
        );
        assert_eq!(values[1], Ok(json!({"b": 1})));
        assert_eq!(values[2], Ok(json!("short")));
        assert_eq!(
            values[3],
            Err("is 302 B (302 bytes), over the 64 B record limit".to_string())
        );
        assert_eq!(values[4], Ok(json!(3)));
    }
    // The buffer does not grow with the value passed over.
    let huge = format!("[\"{}\", 1]", "y".repeat(1 << 20));
    let mut scan = scanner(huge.as_bytes(), 256, 1 << 20);
    scan.set_limit(1024);
    let mut list = scan.enter();
    assert!(scan.next_element(&mut list).unwrap());
    assert!(matches!(
        scan.parse(PhantomData::<Value>),
        Err(ScanError::Skipped(_))
    ));
    assert!(scan.buf.len() < 4096, "{}", scan.buf.len());
    assert!(scan.next_element(&mut list).unwrap());
    assert_eq!(scan.parse(PhantomData::<Value>).unwrap(), json!(1));
    // A value skipped unbuilt is passed over without complaint.
    let text = format!("{{\"skip\": [\"{long}\", {{\"k\": \"{long}\"}}], \"pick\": 2}}");
    let mut scan = scanner(text.as_bytes(), 16, 1 << 20);
    scan.set_limit(64);
    let mut object = scan.enter();
    assert_eq!(scan.next_key(&mut object).unwrap().as_deref(), Some("skip"));
    scan.skip().unwrap();
    assert_eq!(scan.next_key(&mut object).unwrap().as_deref(), Some("pick"));
    assert_eq!(scan.parse(PhantomData::<Value>).unwrap(), json!(2));
}

#[test]
fn over_the_limit_and_broken() {
    // Broken at its beginning: reported as broken, where it breaks.
    let text = format!("[{{\"a\" 1, \"b\": \"{}\"}}]", "x".repeat(300));
    let mut scan = scanner(text.as_bytes(), 16, 1 << 20);
    scan.set_limit(64);
    let mut list = scan.enter();
    assert!(scan.next_element(&mut list).unwrap());
    let err = scan.parse(PhantomData::<Value>).unwrap_err();
    assert_eq!(
        scan.describe(err).unwrap(),
        ("expected `:` at line 1 column 7".to_string(), 7)
    );
    // Never ending: the end of the file is reported.
    let text = format!("[{{\"a\": \"{}", "x".repeat(300));
    let mut scan = scanner(text.as_bytes(), 16, 1 << 20);
    scan.set_limit(64);
    let mut list = scan.enter();
    assert!(scan.next_element(&mut list).unwrap());
    let err = scan.parse(PhantomData::<Value>).unwrap_err();
    assert_eq!(
        scan.describe(err).unwrap(),
        (
            "EOF while parsing a value at line 1 column 308".to_string(),
            308
        )
    );
}

#[test]
fn values_nested_too_deep_are_passed_over() {
    let deep = format!("{}{}", "[".repeat(200), "]".repeat(200));
    let text = format!("[{deep}, {{\"a\": {deep}}}, 1]");
    let (values, _) = elements(text.as_bytes(), 5, 1 << 20);
    let reason = "nests lists and objects deeper than 127 levels".to_string();
    assert_eq!(values, vec![Err(reason.clone()), Err(reason), Ok(json!(1))]);
    // 127 levels are read, 128 are not.
    let nested = |n| format!("[{}{}]", "[".repeat(n), "]".repeat(n));
    assert!(elements(nested(127).as_bytes(), 5, 1 << 20).0[0].is_ok());
    assert!(elements(nested(128).as_bytes(), 5, 1 << 20).0[0].is_err());
}

#[test]
fn token_lengths() {
    for (token, len) in [
        (&b"null,"[..], 4),
        (b"true]", 4),
        (b"false}", 5),
        (b"0,", 1),
        (b"-12.5e+3x", 8),
        (b"7", 1),
        (b"1E5 ", 3),
        (b"-0.0]", 4),
    ] {
        assert_eq!(
            token_len(token),
            len,
            "{:?}",
            String::from_utf8_lossy(token)
        );
    }
}
