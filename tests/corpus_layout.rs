//! One corpus layout for every reader: a corpus written a part at a time (each table a folder of
//! `part-NNNNN.parquet` files its manifest lists, as `traceaudit.ray` writes it) reads as the
//! command line's corpus of the same store reads. The part corpus is made here by the library
//! calls the Ray driver makes for a local store (`audit_part` per part, in any order and one
//! part twice, the parts' findings lines written in part order, then `finish_corpus`);
//! `python/tests/test_ray.py` makes one through Ray itself.
//!
//! Every report format, `diff` (within and across layouts), `trend` and `explain` give the same
//! bytes for both layouts; a missing, truncated or miscounted part is refused by name, and so is
//! a gate over it; files the manifest does not list are not read.

mod common;

use common::{copy_dir, path_str, testdata, traceaudit as binary};
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use traceaudit::distributed::{audit_part, finish_corpus};
use traceaudit::tables::findings_jsonl;
use traceaudit::{audit, ingest, AuditOptions, Config, IngestOptions};

fn options() -> AuditOptions {
    let (config, text) = Config::load(&testdata("traceaudit.toml")).unwrap();
    AuditOptions {
        config,
        config_text: Some(text),
        threads: 2,
        ..AuditOptions::default()
    }
}

/// Run a command in-process with `--out` to a temporary file: its exit status and output.
fn run(args: &[&str]) -> (u8, String) {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    let mut full = vec!["traceaudit"];
    full.extend_from_slice(args);
    full.extend_from_slice(&["--out", path_str(&out)]);
    let code = traceaudit::run_command_line(full);
    let status = [0u8, 1, 2]
        .into_iter()
        .find(|&c| ExitCode::from(c) == code)
        .expect("exit status 0, 1 or 2");
    (status, std::fs::read_to_string(&out).unwrap_or_default())
}

/// The part files of `table` in `corpus`, by name.
fn parts_of(corpus: &Path, table: &str) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus.join(table))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort();
    files
}

/// The corpus of `store` a part at a time, as the Ray driver writes it into `out`.
fn part_corpus(store: &Path, out: &Path) {
    let manifest = std::fs::read_to_string(store.join("manifest.json")).unwrap();
    let parts = serde_json::from_str::<serde_json::Value>(&manifest).unwrap()["parts"]
        .as_array()
        .unwrap()
        .len() as u32;
    assert!(parts >= 3, "{} has {parts} part(s)", store.display());
    // The tasks finish in any order, and a retried one writes its files again.
    let mut audited: Vec<_> = (0..parts)
        .rev()
        .map(|p| (p, audit_part(store, p, out, &options()).unwrap()))
        .collect();
    audit_part(store, 1, out, &options()).unwrap();
    audited.sort_by_key(|(p, _)| *p);
    // The driver writes the parts' lines in part order; they are the lines of the findings
    // parts it would otherwise read back.
    let mut jsonl = Vec::new();
    let mut counted = Vec::new();
    for ((_, part), file) in audited.into_iter().zip(parts_of(out, "findings")) {
        let batches: Vec<_> =
            ParquetRecordBatchReaderBuilder::try_new(std::fs::File::open(&file).unwrap())
                .unwrap()
                .build()
                .unwrap()
                .map(Result::unwrap)
                .collect();
        assert_eq!(
            findings_jsonl(&batches).unwrap(),
            part.findings_jsonl,
            "{}",
            file.display()
        );
        jsonl.extend(part.findings_jsonl);
        counted.push(part.counted);
    }
    std::fs::write(out.join("findings.jsonl"), jsonl).unwrap();
    finish_corpus(out, path_str(store), &manifest, &counted, &options(), 1.0).unwrap();
}

/// A night of `inputs`: a store of small parts, the command line's corpus of it in
/// `root/single/NAME` and the part corpus in `root/parts/NAME`.
fn night(root: &Path, name: &str, inputs: &[&str]) {
    let store = root.join("stores").join(name);
    let inputs: Vec<PathBuf> = inputs.iter().map(|i| testdata(i)).collect();
    let opts = IngestOptions {
        threads: 2,
        part_bytes: 300_000,
        ..IngestOptions::default()
    };
    ingest(&inputs, &store, &opts).unwrap();
    audit(
        std::slice::from_ref(&store),
        &root.join("single").join(name),
        &options(),
    )
    .unwrap();
    part_corpus(&store, &root.join("parts").join(name));
}

/// Two nights, the second with more sources (so the diff between them has changes and new
/// keys): `root/{single,parts}/{2025-06-01,2025-06-02}`.
fn nights(root: &Path) {
    night(
        root,
        "2025-06-01",
        &["tau-bench", "tau2", "swe-agent", "otel"],
    );
    night(root, "2025-06-02", &[""]);
}

const NIGHTS: [&str; 2] = ["2025-06-01", "2025-06-02"];

/// `args` with `{layout}` replaced by each layout's folder: the same output and exit status.
fn same_for_both(root: &Path, args: &[&str]) -> (u8, String) {
    let with = |layout: &str| -> Vec<String> {
        let folder = path_str(&root.join(layout)).to_string();
        args.iter()
            .map(|a| a.replace("{layout}", &folder))
            .collect()
    };
    let single = with("single");
    let parts = with("parts");
    let (s_status, s_text) = run(&single.iter().map(String::as_str).collect::<Vec<_>>());
    let (p_status, p_text) = run(&parts.iter().map(String::as_str).collect::<Vec<_>>());
    assert_eq!(s_status, p_status, "{args:?}");
    assert!(s_text == p_text, "{args:?}: the layouts' outputs differ");
    assert!(!s_text.is_empty(), "{args:?}");
    (s_status, s_text)
}

#[test]
fn every_reader_reads_both_layouts_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    nights(root);
    for name in NIGHTS {
        let (single, parts) = (
            root.join("single").join(name),
            root.join("parts").join(name),
        );
        for file in ["findings.jsonl", "ledger.parquet"] {
            assert!(
                std::fs::read(single.join(file)).unwrap()
                    == std::fs::read(parts.join(file)).unwrap(),
                "{name}/{file}"
            );
        }
        assert!(!single.join("findings").exists() && !parts.join("findings.parquet").exists());
        let c = format!("{{layout}}/{name}");
        for format in ["table", "markdown", "json", "html"] {
            same_for_both(root, &["report", &c, "--format", format]);
        }
        for by in ["agent", "model", "source", "day", "tool"] {
            same_for_both(root, &["report", &c, "--by", by]);
            same_for_both(root, &["report", &c, "--by", by, "--format", "json"]);
        }
    }

    let (base, cand) = ("{layout}/2025-06-01", "{layout}/2025-06-02");
    for format in ["markdown", "json", "html"] {
        let (status, _) = same_for_both(root, &["diff", base, cand, "--format", format]);
        assert_eq!(
            status, 1,
            "the second night has finding keys the first has not"
        );
        same_for_both(
            root,
            &["diff", base, cand, "--by", "source", "--format", format],
        );
        let (status, _) = same_for_both(root, &["diff", cand, cand, "--format", format]);
        assert_eq!(status, 0);
    }
    // Across layouts: a part corpus against a single-file one gives the diff of two
    // single-file ones.
    let corpus = |layout: &str, night: &str| path_str(&root.join(layout).join(night)).to_string();
    let single_diff = run(&[
        "diff",
        &corpus("single", NIGHTS[0]),
        &corpus("single", NIGHTS[1]),
        "--format",
        "json",
    ]);
    for (b, c) in [("single", "parts"), ("parts", "single")] {
        let crossed = run(&[
            "diff",
            &corpus(b, NIGHTS[0]),
            &corpus(c, NIGHTS[1]),
            "--format",
            "json",
        ]);
        assert!(crossed == single_diff, "{b} against {c}");
    }
    let (status, _) = run(&[
        "diff",
        &corpus("single", NIGHTS[1]),
        &corpus("parts", NIGHTS[1]),
    ]);
    assert_eq!(status, 0, "a corpus and its part layout are no regression");

    for format in ["table", "json", "html"] {
        let (status, text) = same_for_both(root, &["trend", "{layout}", "--format", format]);
        // The last night is flagged (below): the nightly gate's exit status.
        assert_eq!(status, 1);
        if format == "json" {
            let t: serde_json::Value = serde_json::from_str(&text).unwrap();
            let flagged: Vec<bool> = t["nights"]
                .as_array()
                .unwrap()
                .iter()
                .map(|n| n["flagged"].as_bool().unwrap())
                .collect();
            assert_eq!(flagged, [false, true]);
        }
    }

    // Runs with findings of each check, and one without.
    let jsonl = std::fs::read_to_string(root.join("single").join(NIGHTS[1]).join("findings.jsonl"))
        .unwrap();
    let mut runs: Vec<(String, String)> = Vec::new();
    for line in jsonl.lines() {
        let f: serde_json::Value = serde_json::from_str(line).unwrap();
        let check = f["check_name"].as_str().unwrap().to_string();
        if !runs.iter().any(|(c, _)| *c == check) {
            runs.push((check, f["run_id"].as_str().unwrap().to_string()));
        }
    }
    assert!(runs.len() >= 3, "{runs:?}");
    let c = format!("{{layout}}/{}", NIGHTS[1]);
    for (_, run_id) in &runs {
        same_for_both(root, &["explain", &c, run_id]);
        same_for_both(root, &["explain", &c, run_id, "--format", "json"]);
    }
}

/// The command line's error for `args` (exit 2), through the binary.
fn refusal(args: &[&str]) -> String {
    let out = binary(args);
    assert_eq!(out.status, 2, "{args:?}: {}", out.stderr);
    out.stderr
}

fn edit_manifest(corpus: &Path, edit: impl FnOnce(&mut serde_json::Value)) {
    let path = corpus.join("manifest.json");
    let mut manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    edit(&mut manifest);
    std::fs::write(path, serde_json::to_string_pretty(&manifest).unwrap()).unwrap();
}

#[test]
fn a_part_corpus_is_read_whole_or_not_at_all() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    night(root, "night", &[""]);
    let good = root.join("parts").join("night");
    let good_s = path_str(&good);
    let (_, report) = run(&["report", good_s, "--format", "json"]);
    let (_, page) = run(&["report", good_s, "--format", "html"]);

    // Stray files, inside the table folders and beside them, are not read.
    let stray = root.join("stray");
    copy_dir(&good, &stray);
    let first = parts_of(&stray, "dispositions")[0].clone();
    std::fs::copy(
        &first,
        stray.join("dispositions").join("part-99999.parquet"),
    )
    .unwrap();
    std::fs::copy(&first, stray.join("dispositions.parquet")).unwrap();
    std::fs::copy(
        parts_of(&stray, "findings")[1].clone(),
        stray
            .join("findings")
            .join(".part-00000.parquet.1-2-3.partial"),
    )
    .unwrap();
    assert_eq!(
        run(&["report", path_str(&stray), "--format", "json"]).1,
        report
    );
    assert_eq!(
        run(&["report", path_str(&stray), "--format", "html"]).1,
        page
    );

    let broken = |name: &str, damage: &dyn Fn(&Path)| -> (PathBuf, String) {
        let corpus = root.join(name);
        copy_dir(&good, &corpus);
        damage(&corpus);
        let c = path_str(&corpus).to_string();
        let why = refusal(&["report", &c]);
        // Neither gate passes on it, whichever side it is on, nor does the trend.
        for args in [
            vec!["diff", good_s, &c],
            vec!["diff", &c, good_s],
            vec!["diff", &c, &c, "--fail-on", "none"],
            vec!["trend", good_s, &c],
        ] {
            refusal(&args);
        }
        refusal(&["explain", &c, "any-run"]);
        (corpus, why)
    };

    let (corpus, why) = broken("missing", &|c| {
        std::fs::remove_file(c.join("findings").join("part-00001.parquet")).unwrap()
    });
    let part = corpus.join("findings").join("part-00001.parquet");
    assert!(
        why.contains(&format!("{} is not a whole corpus", corpus.display()))
            && why.contains(&format!(
                "{}, which its manifest lists, is missing",
                part.display()
            )),
        "{why}"
    );

    let (corpus, why) = broken("truncated", &|c| {
        let part = parts_of(c, "dispositions")[2].clone();
        let bytes = std::fs::read(&part).unwrap();
        std::fs::write(&part, &bytes[..bytes.len() / 2]).unwrap();
    });
    let part = corpus.join("dispositions").join("part-00002.parquet");
    assert!(
        why.contains(&format!("{} holds", part.display()))
            && why.contains("it is truncated or was written again"),
        "{why}"
    );

    // The same size and footer, its pages overwritten: named once Polars fails on it.
    let (corpus, why) = broken("corrupt", &|c| {
        let part = parts_of(c, "dispositions")[3].clone();
        let mut bytes = std::fs::read(&part).unwrap();
        let half = bytes.len() / 2;
        bytes[4..half].fill(0x5a);
        std::fs::write(&part, bytes).unwrap();
    });
    let part = corpus.join("dispositions").join("part-00003.parquet");
    assert!(
        why.contains(&format!("{} is unreadable", part.display())),
        "{why}"
    );

    // The same size, other rows: a footer counting other rows than the manifest records.
    let (corpus, why) = broken("miscounted", &|c| {
        edit_manifest(c, |m| {
            assert_eq!(m["tables"][1]["table"], "dispositions");
            let files = m["tables"][1]["files"].as_array_mut().unwrap();
            let rows = files[0]["rows"].as_u64().unwrap();
            files[0]["rows"] = (rows + 1).into();
        })
    });
    let part = corpus.join("dispositions").join("part-00000.parquet");
    assert!(
        why.contains(&format!("{} holds", part.display()))
            && why.contains("rows where the corpus manifest records"),
        "{why}"
    );

    // A listed path that leaves the corpus is not followed.
    let (_, why) = broken("escaping", &|c| {
        edit_manifest(c, |m| {
            m["tables"][0]["files"][0]["path"] = "../night/findings/part-00000.parquet".into();
        })
    });
    assert!(
        why.contains("which is not a Parquet file's path inside"),
        "{why}"
    );

    // Part folders the manifest does not list (an earlier driver's): refused, not guessed.
    let (_, why) = broken("unlisted", &|c| {
        edit_manifest(c, |m| {
            m.as_object_mut().unwrap().remove("tables");
        })
    });
    assert!(why.contains("does not list their files"), "{why}");
}

#[test]
fn the_manifest_lists_only_what_the_parts_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let opts = IngestOptions {
        threads: 2,
        part_bytes: 300_000,
        ..IngestOptions::default()
    };
    ingest(&[testdata("tau2"), testdata("tau-bench")], &store, &opts).unwrap();
    let manifest = std::fs::read_to_string(store.join("manifest.json")).unwrap();
    let out = dir.path().join("parts");
    let counted: Vec<_> = (0..2)
        .map(|p| audit_part(&store, p, &out, &options()).unwrap().counted)
        .collect();
    assert_eq!(counted[1].files.len(), 4, "{:?}", counted[1].files);
    assert_eq!(
        counted[1].files[0].files[0].path,
        "findings/part-00001.parquet"
    );
    let finish = |parts: &[traceaudit::distributed::PartAudit]| {
        finish_corpus(&out, path_str(&store), &manifest, parts, &options(), 1.0).unwrap_err()
    };
    // Counts without the files (as an audit in memory gives them).
    let mut bare = counted.clone();
    bare[1].files.clear();
    let why = finish(&bare).to_string();
    assert!(
        why.contains("the audit of part 1 did not report writing findings/part-00001.parquet"),
        "{why}"
    );
    // Part 0's files reported for part 1.
    let mut swapped = counted.clone();
    swapped[1].files = counted[0].files.clone();
    assert!(finish(&swapped)
        .to_string()
        .contains("part 1 did not report"));
    // Files holding other rows than the part counted.
    let mut more = counted.clone();
    more[0].files[1].files[0].rows += 1;
    let why = finish(&more).to_string();
    assert!(
        why.contains("the parts counted") && why.contains("dispositions rows"),
        "{why}"
    );
    assert!(finish(&counted[..1])
        .to_string()
        .contains("2 part(s), and 1 were audited"));
    assert!(!out.join("manifest.json").exists() && !out.join("ledger.parquet").exists());
    let made = finish_corpus(&out, path_str(&store), &manifest, &counted, &options(), 1.0).unwrap();
    let listed: Vec<&str> = made
        .tables
        .as_ref()
        .unwrap()
        .iter()
        .map(|t| t.table.as_str())
        .collect();
    assert_eq!(
        listed,
        [
            "findings",
            "dispositions",
            "agreement",
            "ledger",
            "attempts"
        ]
    );
}
