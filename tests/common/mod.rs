//! Helpers shared by the integration tests.
#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

pub fn crate_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

pub fn testdata(rel: &str) -> PathBuf {
    crate_dir().join("testdata").join(rel)
}

/// The shared real-data folder beside the checkout, when present.
pub fn shared_data(rel: &str) -> Option<PathBuf> {
    let p = crate_dir().join("..").join("shared").join("data").join(rel);
    if p.exists() {
        Some(p)
    } else {
        eprintln!("skipped: {} is not present", p.display());
        None
    }
}

pub struct Output {
    pub status: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn traceaudit(args: &[&str]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_traceaudit"))
        .args(args)
        .output()
        .expect("run traceaudit");
    Output {
        status: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("utf-8 path")
}

/// `f_prior_turn_evidence.ndjson` with over the adapter's lateness window of lines of a never-ending run
/// after each of the first two of `sess-f-conv`'s three runs: the agentfootprint adapter then
/// hands that session on in three fragments.
pub fn fragmented_session_ndjson() -> String {
    // The agentfootprint adapter's lateness window (8 MiB of file after a run's last line);
    // `a_session_stored_in_fragments_is_joined` checks that this padding does fragment the
    // session, so a wider window fails there rather than passing here unnoticed.
    const LATENESS_BYTES: u64 = 8 << 20;
    let text = std::fs::read_to_string(testdata(
        "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
    ))
    .unwrap();
    let pad = "x".repeat(64 << 10);
    let filler = format!(
        "{{\"type\":\"agentfootprint.stream.llm_start\",\"payload\":{{\"pad\":\"{pad}\"}},\
         \"meta\":{{\"runId\":\"filler\",\"sessionId\":\"filler\"}}}}\n"
    );
    let block = filler.repeat((LATENESS_BYTES as usize).div_ceil(filler.len()) + 20);
    let mut padded = String::new();
    let mut ended = 0;
    for line in text.lines() {
        padded.push_str(line);
        padded.push('\n');
        if line.contains("integrity.disposition") && line.contains("sess-f-conv") {
            ended += 1;
            if ended <= 2 {
                padded.push_str(&block);
            }
        }
    }
    assert_eq!(ended, 3);
    padded
}

/// Every file under `dir`, sorted, recursively.
pub fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            files_under(&p, out);
        } else {
            out.push(p);
        }
    }
}

/// The rows of one Parquet table, each as `column=value` pairs in column order (values as
/// Arrow displays them).
pub fn table_rows(path: &Path) -> Vec<String> {
    use arrow::util::display::{ArrayFormatter, FormatOptions};
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
    let file = std::fs::File::open(path).unwrap();
    let reader = ParquetRecordBatchReaderBuilder::try_new(file)
        .unwrap()
        .build()
        .unwrap();
    let options = FormatOptions::default().with_null("<null>");
    let mut rows = Vec::new();
    for batch in reader {
        let batch = batch.unwrap();
        let schema = batch.schema();
        // Times in a named zone are shown as UTC instants (Arrow names no zones without chrono-tz).
        let arrays: Vec<arrow::array::ArrayRef> = batch
            .columns()
            .iter()
            .map(|c| match c.data_type() {
                arrow::datatypes::DataType::Timestamp(unit, Some(_)) => {
                    arrow::compute::cast(c, &arrow::datatypes::DataType::Timestamp(*unit, None))
                        .unwrap()
                }
                _ => c.clone(),
            })
            .collect();
        let columns: Vec<ArrayFormatter> = arrays
            .iter()
            .map(|c| ArrayFormatter::try_new(c.as_ref(), &options).unwrap())
            .collect();
        for row in 0..batch.num_rows() {
            let cells: Vec<String> = schema
                .fields()
                .iter()
                .zip(&columns)
                .map(|(f, c)| format!("{}={}", f.name(), c.value(row)))
                .collect();
            rows.push(cells.join(" | "));
        }
    }
    rows
}

/// Every Parquet table of a store, by its path inside the store, each row as JSON text with
/// the input folder and the protobuf suffix taken out of file names.
pub fn store_tables(store: &Path, inputs: &Path, suffix: &str) -> Vec<(PathBuf, Vec<String>)> {
    let mut files = Vec::new();
    files_under(store, &mut files);
    let prefix = format!("{}/", inputs.display());
    files
        .into_iter()
        .filter(|p| p.extension().is_some_and(|e| e == "parquet"))
        .map(|p| {
            let rows = table_rows(&p)
                .iter()
                .map(|row| {
                    row.replace(&prefix, "<inputs>/")
                        .replace(&format!("{suffix} |"), " |")
                })
                .collect();
            (p.strip_prefix(store).unwrap().to_path_buf(), rows)
        })
        .collect()
}

/// The quarantine file of a store, file names as in [`store_tables`] and the locators left out.
pub fn store_notes(store: &Path, inputs: &Path, suffix: &str) -> Vec<Value> {
    let prefix = format!("{}/", inputs.display());
    std::fs::read_to_string(store.join("quarantine.jsonl"))
        .unwrap()
        .lines()
        .map(|l| {
            let mut v: Value = serde_json::from_str(l).unwrap();
            let obj = v.as_object_mut().unwrap();
            for key in ["line", "byte", "record", "locator"] {
                obj.remove(key);
            }
            let file = obj["file"]
                .as_str()
                .unwrap_or("")
                .replace(&prefix, "<inputs>/");
            obj.insert(
                "file".into(),
                Value::String(file.strip_suffix(suffix).unwrap_or(&file).to_string()),
            );
            v
        })
        .collect()
}

/// Copy the folder `from` to `to`, recursively.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}
