//! Compressed inputs read into exactly the rows their plain files give: every file of
//! `testdata/` gzip'd, zstd'd, and gzip'd under its own name (known by its magic number only),
//! ingested and compared with the plain ingest table by table, row for row, with the same
//! quarantine and counts; and the compressed files a real night brings: several gzip members in
//! one file, a stream cut short, a small file that expands past the limit.

mod common;

use common::*;
use std::io::Write;
use std::path::{Path, PathBuf};
use traceaudit::{ingest, IngestOptions, Limits, StoreManifest};

/// How a test file is compressed.
type Encode = dyn Fn(&[u8]) -> Vec<u8>;

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn zstd(bytes: &[u8]) -> Vec<u8> {
    zstd::encode_all(bytes, 3).unwrap()
}

/// `testdata/` copied into `to`, each file through `encode` and renamed with `suffix`.
fn copy_tree(to: &Path, suffix: &str, encode: &Encode) {
    let from = testdata("");
    let mut files = Vec::new();
    files_under(&from, &mut files);
    for file in files {
        let rel = file.strip_prefix(&from).unwrap();
        let mut name = rel.as_os_str().to_owned();
        name.push(suffix);
        let bytes = std::fs::read(&file).unwrap();
        // A tau2 dir layout is read as one set only uncompressed (a compressed one is read file
        // by file): it stays as it is.
        if is_dir_layout(rel) {
            let dest = to.join(rel);
            std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
            std::fs::write(dest, bytes).unwrap();
            continue;
        }
        let dest = to.join(PathBuf::from(name));
        std::fs::create_dir_all(dest.parent().unwrap()).unwrap();
        std::fs::write(dest, encode(&bytes)).unwrap();
    }
}

/// A file of a tau2 dir layout: `results.json` and the `simulations/` beside it.
fn is_dir_layout(path: &Path) -> bool {
    path.file_name().is_some_and(|n| n == "results.json")
        || path
            .parent()
            .and_then(Path::file_name)
            .is_some_and(|n| n == "simulations")
}

fn store(inputs: &Path, out: &Path, limits: Limits) -> StoreManifest {
    ingest(
        &[inputs.to_path_buf()],
        out,
        &IngestOptions {
            threads: 2,
            limits,
            ..IngestOptions::default()
        },
    )
    .unwrap()
    .manifest
}

/// The counts of a manifest without the input bytes (the compressed files are smaller).
fn counts_but_bytes(m: &StoreManifest) -> serde_json::Value {
    let mut v = serde_json::to_value(&m.counts).unwrap();
    v.as_object_mut().unwrap().remove("bytes");
    v
}

#[test]
fn every_fixture_compressed_makes_the_store_its_plain_file_makes() {
    let dir = tempfile::tempdir().unwrap();
    let plain_in = dir.path().join("plain");
    copy_tree(&plain_in, "", &|b| b.to_vec());
    let plain = dir.path().join("store-plain");
    let plain_manifest = store(&plain_in, &plain, Limits::default());
    assert!(
        plain_manifest.counts.runs > 100,
        "{:?}",
        plain_manifest.counts
    );
    let plain_tables = store_tables(&plain, &plain_in, ".never");
    let plain_notes = store_notes(&plain, &plain_in, ".never");

    let shapes: [(&str, &str, &Encode, &str); 3] = [
        ("gzip", ".gz", &gzip, "gzip"),
        ("zstd", ".zst", &zstd, "zstd"),
        // Known by its magic number only: the name is the plain file's.
        ("gzip-unnamed", "", &gzip, "gzip"),
    ];
    for (shape, suffix, encode, compression) in shapes {
        let inputs = dir.path().join(shape);
        copy_tree(&inputs, suffix, encode);
        let out = dir.path().join(format!("store-{shape}"));
        let manifest = store(&inputs, &out, Limits::default());
        assert_eq!(
            counts_but_bytes(&manifest),
            counts_but_bytes(&plain_manifest),
            "{shape}: counts"
        );
        let c = &manifest.counts;
        assert_eq!(c.records_read, c.records_stored + c.records_quarantined);
        let tables = store_tables(&out, &inputs, suffix);
        assert_eq!(tables.len(), plain_tables.len(), "{shape}: tables");
        for ((path, rows), (plain_path, plain_rows)) in tables.iter().zip(&plain_tables) {
            assert_eq!(path, plain_path);
            assert_eq!(rows.len(), plain_rows.len(), "{shape}: {}", path.display());
            for (k, (row, plain_row)) in rows.iter().zip(plain_rows).enumerate() {
                assert_eq!(row, plain_row, "{shape}: {} row {k}", path.display());
            }
        }
        assert_eq!(
            store_notes(&out, &inputs, suffix),
            plain_notes,
            "{shape}: quarantine"
        );
        // The manifest names each input by the compressed file on disk, with both sizes.
        for (entry, plain_entry) in manifest.inputs.iter().zip(&plain_manifest.inputs) {
            if is_dir_layout(Path::new(&entry.path)) {
                continue;
            }
            let on_disk = std::fs::read(&entry.path).unwrap();
            assert_eq!(entry.size, on_disk.len() as u64, "{}", entry.path);
            assert_eq!(entry.compression.as_deref(), Some(compression));
            assert_eq!(entry.decompressed_size, Some(plain_entry.size));
            assert_eq!(entry.sha256, sha256(&on_disk), "{}", entry.path);
            assert_eq!(
                (&entry.format, entry.records, entry.quarantined),
                (
                    &plain_entry.format,
                    plain_entry.records,
                    plain_entry.quarantined
                )
            );
        }
        // No decompressed copy is left behind.
        let mut left = Vec::new();
        files_under(&out, &mut left);
        assert!(
            left.iter()
                .all(|p| !p.to_string_lossy().contains("decompressed-")),
            "{left:?}"
        );
    }
}

/// A store's parts are planned from its inputs' decompressed bytes: a gzip'd night (the size in
/// its trailer) or a zstd'd one (the size in its frame header) is cut into the parts its plain
/// copy is, with the same rows in each, rather than into a sixth as many that are then rewritten
/// to be cut by rows.
#[test]
fn a_compressed_night_is_cut_into_the_parts_of_its_plain_copy() {
    let dir = tempfile::tempdir().unwrap();
    let with_parts = |inputs: &Path, out: &Path| {
        ingest(
            &[inputs.to_path_buf()],
            out,
            &IngestOptions {
                threads: 2,
                part_bytes: 400_000,
                ..IngestOptions::default()
            },
        )
        .unwrap()
        .manifest
    };
    let plain_in = dir.path().join("plain");
    copy_tree(&plain_in, "", &|b| b.to_vec());
    let plain = dir.path().join("store-plain");
    let plain_manifest = with_parts(&plain_in, &plain);
    assert!(
        plain_manifest.parts.len() >= 8,
        "{:?}",
        plain_manifest.parts
    );
    let plain_tables = store_tables(&plain, &plain_in, ".never");
    // zstd's one-shot compression writes the content size into the frame header.
    let zstd_sized = |b: &[u8]| zstd::bulk::compress(b, 3).unwrap();
    let shapes: [(&str, &str, &Encode); 2] =
        [("gzip", ".gz", &gzip), ("zstd", ".zst", &zstd_sized)];
    for (shape, suffix, encode) in shapes {
        let inputs = dir.path().join(shape);
        copy_tree(&inputs, suffix, encode);
        let out = dir.path().join(format!("store-{shape}"));
        let manifest = with_parts(&inputs, &out);
        assert_eq!(manifest.parts, plain_manifest.parts, "{shape}");
        let tables = store_tables(&out, &inputs, suffix);
        assert_eq!(tables, plain_tables, "{shape}");
    }
}

fn sha256(bytes: &[u8]) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn ndjson_fixture() -> Vec<u8> {
    std::fs::read(testdata(
        "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
    ))
    .unwrap()
}

/// Log rotation appends gzip members: a file of several holds all of their lines.
#[test]
fn a_file_of_several_gzip_members_is_read_whole() {
    let dir = tempfile::tempdir().unwrap();
    let text = ndjson_fixture();
    let lines: Vec<&[u8]> = text.split_inclusive(|&b| b == b'\n').collect();
    let mut file = Vec::new();
    for chunk in lines.chunks(lines.len().div_ceil(3)) {
        file.extend(gzip(&chunk.concat()));
    }
    std::fs::write(dir.path().join("rotated.ndjson.gz"), &file).unwrap();
    std::fs::write(dir.path().join("plain.ndjson"), &text).unwrap();
    let one = |name: &str| {
        let inputs = dir.path().join(format!("in-{name}"));
        std::fs::create_dir(&inputs).unwrap();
        std::fs::rename(dir.path().join(name), inputs.join(name)).unwrap();
        store(
            &inputs,
            &dir.path().join(format!("s-{name}")),
            Limits::default(),
        )
    };
    let rotated = one("rotated.ndjson.gz");
    let plain = one("plain.ndjson");
    assert_eq!(counts_but_bytes(&rotated), counts_but_bytes(&plain));
    assert!(rotated.counts.runs >= 3);
    assert_eq!(rotated.inputs[0].decompressed_size, Some(text.len() as u64));
}

/// A gzip file cut short in the middle of a line: the lines before the cut are stored, the cut
/// line is quarantined as any torn line is, and a note stands for what could not be
/// decompressed; the counts reconcile.
#[test]
fn a_compressed_file_cut_short_keeps_what_came_before_with_a_note() {
    let dir = tempfile::tempdir().unwrap();
    let text = ndjson_fixture();
    let file = gzip(&text);
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    std::fs::write(inputs.join("torn.ndjson.gz"), &file[..file.len() * 2 / 3]).unwrap();
    let out = dir.path().join("store");
    let manifest = store(&inputs, &out, Limits::default());
    let c = &manifest.counts;
    assert_eq!(c.records_read, c.records_stored + c.records_quarantined);
    assert!(c.records_stored > 0, "{c:?}");
    let notes = std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap();
    assert!(
        notes.contains("its gzip stream is cut short after"),
        "{notes}"
    );
}

/// A few kilobytes that expand to 64 MiB of zeros, read under a 1 MiB decompression limit: the
/// copy stops at the limit, the file is noted as over it, and the ingest goes on to the next
/// file.
#[test]
fn a_small_file_that_expands_past_the_limit_is_stopped_at_the_limit() {
    let dir = tempfile::tempdir().unwrap();
    let inputs = dir.path().join("in");
    std::fs::create_dir(&inputs).unwrap();
    let bomb = gzip(&vec![0u8; 64 << 20]);
    assert!(bomb.len() < 100_000);
    std::fs::write(inputs.join("a-bomb.jsonl.gz"), &bomb).unwrap();
    std::fs::write(inputs.join("b-good.ndjson.gz"), gzip(&ndjson_fixture())).unwrap();
    let out = dir.path().join("store");
    let limits = Limits {
        decompressed_bytes: 1 << 20,
        ..Limits::default()
    };
    let manifest = store(&inputs, &out, limits);
    assert_eq!(manifest.inputs[0].decompressed_size, Some(1 << 20));
    assert!(manifest.counts.runs >= 3, "{:?}", manifest.counts);
    let notes = std::fs::read_to_string(out.join("quarantine.jsonl")).unwrap();
    assert!(
        notes.contains("decompresses to more than the 1 MiB limit for one decompressed input"),
        "{notes}"
    );
}

/// The command line reads a compressed file named on it, as a user would type it.
#[test]
fn audit_reads_a_gzip_file_named_on_the_command_line() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("runs.ndjson.gz");
    std::fs::write(&input, gzip(&ndjson_fixture())).unwrap();
    let out = dir.path().join("corpus");
    let run = traceaudit(&[
        "audit",
        path_str(&input),
        "--quiet",
        "--out",
        path_str(&out),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let manifest: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.join("manifest.json")).unwrap()).unwrap();
    assert!(
        manifest.to_string().contains("runs.ndjson.gz"),
        "{manifest}"
    );
}
