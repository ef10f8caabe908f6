//! `traceaudit._native`: the traceaudit library's front door (items at its crate root only)
//! for the Python package in `python/traceaudit/`, which documents and types the public API.
//! Results that are records (manifests, counts) cross as JSON text, Arrow data through the
//! Arrow C stream interface without a copy. Rust runs with the GIL released.

use arrow::ffi_stream::RecordBatchStreamReader;
use arrow::pyarrow::{PyArrowType, Table};
use pyo3::exceptions::{PyFileNotFoundError, PyOSError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::io;
use std::path::PathBuf;

#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// An error of the library as the Python exception a caller expects, with the command line's
/// one-line reason: bad settings, arguments or input data are `ValueError`, a missing file
/// `FileNotFoundError`, anything else (an output refused, a failed read or write) `OSError`.
fn to_py(e: impl Into<traceaudit::Error>) -> PyErr {
    use traceaudit::Error;
    let e = e.into();
    let text = e.to_string();
    match e {
        Error::Config(_) | Error::Malformed(_) => PyValueError::new_err(text),
        Error::Refused(_) => PyOSError::new_err(text),
        Error::Io(e) => match e.kind() {
            io::ErrorKind::InvalidInput | io::ErrorKind::InvalidData => PyValueError::new_err(text),
            io::ErrorKind::NotFound => PyFileNotFoundError::new_err(text),
            _ => PyOSError::new_err(text),
        },
    }
}

fn to_json<T: serde::Serialize>(value: &T) -> PyResult<String> {
    serde_json::to_string(value).map_err(|e| PyValueError::new_err(e.to_string()))
}

/// The threads asked for, resolved as the command line resolves them (a cap is not told).
fn threads(requested: Option<usize>) -> usize {
    traceaudit::front_door::threads(requested).0
}

/// Audit options from the Python arguments: a configuration file (whose text the manifest
/// records), the checks to run, the threads.
fn audit_options(
    config: Option<PathBuf>,
    checks: Option<Vec<String>>,
    threads_wanted: Option<usize>,
) -> PyResult<traceaudit::AuditOptions> {
    traceaudit::front_door::audit_options(config.as_deref(), checks, threads_wanted)
        .map(|(opts, _notes)| opts)
        .map_err(to_py)
}

#[pyfunction]
#[pyo3(signature = (inputs, out, format=None, threads=None, part_bytes=None, append=false))]
fn ingest(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    out: PathBuf,
    format: Option<String>,
    threads: Option<usize>,
    part_bytes: Option<u64>,
    append: bool,
) -> PyResult<String> {
    let opts = traceaudit::IngestOptions {
        format: format_named(format)?,
        threads: self::threads(threads),
        part_bytes: part_bytes.unwrap_or(0),
        ..traceaudit::IngestOptions::default()
    };
    if append {
        let summary = py
            .detach(|| traceaudit::append(&inputs, &out, &opts))
            .map_err(to_py)?;
        return appended_json(&summary);
    }
    let summary = py
        .detach(|| traceaudit::ingest(&inputs, &out, &opts))
        .map_err(to_py)?;
    to_json(&summary.manifest)
}

/// The inputs (files and folders) the store at `store` does not hold yet, as paths to read, and
/// how many it holds (all inputs, none held, when there is no store there).
#[pyfunction]
fn fresh_inputs(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    store: PathBuf,
) -> PyResult<(Vec<String>, u64)> {
    let (fresh, skipped) = py
        .detach(|| traceaudit::fresh_inputs(&inputs, &store))
        .map_err(to_py)?;
    Ok((
        fresh
            .into_iter()
            .map(|f| f.path.to_string_lossy().into_owned())
            .collect(),
        skipped,
    ))
}

/// Add the store `night` to the store `out` as a new generation (as `ingest --append` adds
/// inputs); the store's manifest after it, with an `appended` entry (JSON).
#[pyfunction]
#[pyo3(signature = (night, out, skipped, part_rows=None))]
fn append_store(
    py: Python<'_>,
    night: PathBuf,
    out: PathBuf,
    skipped: u64,
    part_rows: Option<u64>,
) -> PyResult<String> {
    let opts = traceaudit::IngestOptions {
        part_rows: part_rows.unwrap_or(0),
        ..traceaudit::IngestOptions::default()
    };
    let summary = py
        .detach(|| traceaudit::append_store(&night, &out, skipped, &opts))
        .map_err(to_py)?;
    appended_json(&summary)
}

/// An append's result as the Python module returns it: the store's manifest, with an
/// `appended` entry saying which generation was added.
fn appended_json(summary: &traceaudit::AppendSummary) -> PyResult<String> {
    let mut manifest = serde_json::to_value(&summary.manifest)
        .map_err(|e| PyValueError::new_err(e.to_string()))?;
    manifest["appended"] = serde_json::json!({
        "generation": summary.generation,
        "skipped_as_ingested": summary.skipped_as_ingested,
        "created": summary.created,
        "parts_fetched": summary.parts_fetched,
    });
    to_json(&manifest)
}

/// Compact a store's generations into one; the store's manifest after it (JSON).
#[pyfunction]
#[pyo3(signature = (store, part_bytes=None))]
fn compact(py: Python<'_>, store: PathBuf, part_bytes: Option<u64>) -> PyResult<String> {
    let opts = traceaudit::IngestOptions {
        part_bytes: part_bytes.unwrap_or(0),
        ..traceaudit::IngestOptions::default()
    };
    let summary = py
        .detach(|| traceaudit::compact(&store, &opts))
        .map_err(to_py)?;
    to_json(&summary.manifest)
}

#[pyfunction]
#[pyo3(signature = (inputs, out, config=None, checks=None, threads=None, generation=None))]
fn audit(
    py: Python<'_>,
    inputs: Vec<PathBuf>,
    out: PathBuf,
    config: Option<PathBuf>,
    checks: Option<Vec<String>>,
    threads: Option<usize>,
    generation: Option<String>,
) -> PyResult<String> {
    let mut opts = audit_options(config, checks, threads)?;
    opts.generation = generation
        .map(|g| traceaudit::GenerationPick::parse(&g))
        .transpose()
        .map_err(to_py)?;
    let summary = py
        .detach(|| traceaudit::audit(&inputs, &out, &opts))
        .map_err(to_py)?;
    to_json(&summary.manifest)
}

/// Every batch of an Arrow stream (taken with the GIL held: a stream made in Python needs it).
fn batches_of(
    stream: RecordBatchStreamReader,
    what: &str,
) -> PyResult<Vec<arrow::record_batch::RecordBatch>> {
    stream
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyValueError::new_err(format!("reading the {what} table: {e}")))
}

/// Corpus tables by name, as pyarrow Tables.
type NamedTables = Vec<(String, PyArrowType<Table>)>;

/// The corpus tables of `events` and `runs` (objects with `__arrow_c_stream__`), as
/// (name, pyarrow.Table) pairs, and what was counted (JSON).
#[pyfunction]
#[pyo3(signature = (events, runs, config=None, checks=None, threads=None))]
fn audit_tables(
    py: Python<'_>,
    events: PyArrowType<RecordBatchStreamReader>,
    runs: PyArrowType<RecordBatchStreamReader>,
    config: Option<PathBuf>,
    checks: Option<Vec<String>>,
    threads: Option<usize>,
) -> PyResult<(NamedTables, String)> {
    let opts = audit_options(config, checks, threads)?;
    let events = batches_of(events.0, "events")?;
    let runs = batches_of(runs.0, "runs")?;
    let (tables, counted) = py
        .detach(|| traceaudit::distributed::audit_batches(&events, &runs, &opts))
        .map_err(to_py)?;
    let mut out = Vec::with_capacity(tables.len());
    for table in tables {
        let t = Table::try_new(table.batches, table.schema)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        out.push((table.name, PyArrowType(t)));
    }
    Ok((out, to_json(&counted)?))
}

/// Audit one part of a store into `out/TABLE/part-NNNNN.parquet`; what it counted (JSON) and
/// the part's lines of `findings.jsonl`.
#[pyfunction]
#[pyo3(signature = (store, part, out, config=None, checks=None, threads=None))]
fn audit_part<'py>(
    py: Python<'py>,
    store: PathBuf,
    part: u32,
    out: PathBuf,
    config: Option<PathBuf>,
    checks: Option<Vec<String>>,
    threads: Option<usize>,
) -> PyResult<(String, Bound<'py, PyBytes>)> {
    let opts = audit_options(config, checks, threads)?;
    let audited = py
        .detach(|| traceaudit::distributed::audit_part(&store, part, &out, &opts))
        .map_err(to_py)?;
    Ok((
        to_json(&audited.counted)?,
        PyBytes::new(py, &audited.findings_jsonl),
    ))
}

/// Write the ledger and manifest of a corpus audited a part at a time; the manifest (JSON).
#[pyfunction]
#[pyo3(signature = (out, store_name, store_manifest, parts, seconds, config=None, checks=None, threads=None))]
#[allow(clippy::too_many_arguments)]
fn finish_corpus(
    py: Python<'_>,
    out: PathBuf,
    store_name: String,
    store_manifest: String,
    parts: Vec<String>,
    seconds: f64,
    config: Option<PathBuf>,
    checks: Option<Vec<String>>,
    threads: Option<usize>,
) -> PyResult<String> {
    let opts = audit_options(config, checks, threads)?;
    let parts = parts
        .iter()
        .map(|p| serde_json::from_str::<traceaudit::distributed::PartAudit>(p))
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| PyValueError::new_err(format!("a part's counts cannot be read: {e}")))?;
    let manifest = py
        .detach(|| {
            traceaudit::distributed::finish_corpus(
                &out,
                &store_name,
                &store_manifest,
                &parts,
                &opts,
                seconds,
            )
        })
        .map_err(to_py)?;
    to_json(&manifest)
}

/// The `findings.jsonl` lines of a findings table (an object with `__arrow_c_stream__`), as the
/// command line writes them for those findings.
#[pyfunction]
fn findings_jsonl<'py>(
    py: Python<'py>,
    findings: PyArrowType<RecordBatchStreamReader>,
) -> PyResult<Bound<'py, PyBytes>> {
    let batches = batches_of(findings.0, "findings")?;
    let lines = py
        .detach(|| traceaudit::tables::findings_jsonl(&batches))
        .map_err(to_py)?;
    Ok(PyBytes::new(py, &lines))
}

/// The files of table `table` of the corpus `corpus`, in the order its rows are read (either
/// layout; a corpus whose manifest lists its files is checked whole first).
#[pyfunction]
fn table_files(py: Python<'_>, corpus: PathBuf, table: String) -> PyResult<Vec<PathBuf>> {
    py.detach(|| traceaudit::tables::table_files(&corpus, &table))
        .map_err(to_py)
}

/// Table `table` of the corpus `corpus` as one pyarrow Table (either layout).
#[pyfunction]
fn read_table(py: Python<'_>, corpus: PathBuf, table: String) -> PyResult<PyArrowType<Table>> {
    let (schema, batches) = py
        .detach(|| traceaudit::tables::read_table(&corpus, &table))
        .map_err(to_py)?;
    let table =
        Table::try_new(batches, schema).map_err(|e| PyValueError::new_err(e.to_string()))?;
    Ok(PyArrowType(table))
}

fn format_named(format: Option<String>) -> PyResult<Option<traceaudit::Format>> {
    match format {
        None => Ok(None),
        Some(name) => traceaudit::Format::named(&name).map(Some).ok_or_else(|| {
            let known: Vec<&str> = traceaudit::Format::ALL.iter().map(|f| f.name()).collect();
            PyValueError::new_err(format!(
                "unknown format {name:?}; known: {}",
                known.join(", ")
            ))
        }),
    }
}

fn plan_from(plan: &str) -> PyResult<traceaudit::distributed::IngestPlan> {
    serde_json::from_str(plan)
        .map_err(|e| PyValueError::new_err(format!("not an ingest plan: {e}")))
}

/// The plan of an ingest in shards (JSON): the files in input order, what was passed over,
/// the part count.
#[pyfunction]
#[pyo3(signature = (inputs, part_bytes=None))]
fn plan_ingest(py: Python<'_>, inputs: Vec<PathBuf>, part_bytes: Option<u64>) -> PyResult<String> {
    let plan = py
        .detach(|| traceaudit::distributed::plan_ingest(&inputs, part_bytes.unwrap_or(0)))
        .map_err(to_py)?;
    to_json(&plan)
}

/// The keys under which a file's conversations join other files' (trace ids).
#[pyfunction]
#[pyo3(signature = (path, format=None))]
fn join_keys(py: Python<'_>, path: PathBuf, format: Option<String>) -> PyResult<Vec<String>> {
    let format = format_named(format)?;
    py.detach(|| traceaudit::distributed::join_keys(&path, format))
        .map_err(to_py)
}

/// Ingest the planned inputs numbered `files` into the shard store `out`; its manifest (JSON).
#[pyfunction]
#[pyo3(signature = (plan, files, out, format=None, threads=None))]
fn ingest_shard(
    py: Python<'_>,
    plan: String,
    files: Vec<u32>,
    out: PathBuf,
    format: Option<String>,
    threads: Option<usize>,
) -> PyResult<String> {
    let plan = plan_from(&plan)?;
    let opts = traceaudit::IngestOptions {
        format: format_named(format)?,
        threads: self::threads(threads),
        ..traceaudit::IngestOptions::default()
    };
    let summary = py
        .detach(|| traceaudit::distributed::ingest_shard(&plan, &files, &out, &opts))
        .map_err(to_py)?;
    to_json(&summary.manifest)
}

/// The runs of each shard the store does not keep (copies of runs an earlier input holds);
/// with `bucket` and `buckets`, only those whose id hashes to that bucket.
#[pyfunction]
#[pyo3(signature = (plan, shards, bucket=None, buckets=None))]
fn shard_duplicates(
    py: Python<'_>,
    plan: String,
    shards: Vec<(PathBuf, Vec<u32>)>,
    bucket: Option<u32>,
    buckets: Option<u32>,
) -> PyResult<Vec<Vec<String>>> {
    let plan = plan_from(&plan)?;
    let bucket = bucket.zip(buckets);
    py.detach(|| traceaudit::distributed::shard_duplicates(&plan, &shards, bucket))
        .map_err(to_py)
}

/// Merge part `part` of the store from the shards into `out` (`events/`, `runs/` and `tally/`).
#[pyfunction]
fn merge_part(
    py: Python<'_>,
    shards: Vec<PathBuf>,
    dropped: Vec<Vec<String>>,
    part: u32,
    out: PathBuf,
) -> PyResult<()> {
    py.detach(|| traceaudit::distributed::merge_part(&shards, &dropped, part, &out))
        .map_err(to_py)
}

/// Join shard stores (each with the input numbers it read) into the store `out`, with the
/// parts merged into `merged` when given; its manifest (JSON).
#[pyfunction]
#[pyo3(signature = (plan, shards, out, seconds_before, threads=None, merged=None))]
fn merge_shards(
    py: Python<'_>,
    plan: String,
    shards: Vec<(PathBuf, Vec<u32>)>,
    out: PathBuf,
    seconds_before: f64,
    threads: Option<usize>,
    merged: Option<PathBuf>,
) -> PyResult<String> {
    let plan = plan_from(&plan)?;
    let opts = traceaudit::IngestOptions {
        threads: self::threads(threads),
        ..traceaudit::IngestOptions::default()
    };
    let summary = py
        .detach(|| {
            traceaudit::distributed::merge_shards(
                &plan,
                &shards,
                &out,
                &opts,
                seconds_before,
                merged.as_deref(),
            )
        })
        .map_err(to_py)?;
    to_json(&summary.manifest)
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    m.add_function(wrap_pyfunction!(ingest, m)?)?;
    m.add_function(wrap_pyfunction!(audit, m)?)?;
    m.add_function(wrap_pyfunction!(compact, m)?)?;
    m.add_function(wrap_pyfunction!(fresh_inputs, m)?)?;
    m.add_function(wrap_pyfunction!(append_store, m)?)?;
    m.add_function(wrap_pyfunction!(audit_tables, m)?)?;
    m.add_function(wrap_pyfunction!(audit_part, m)?)?;
    m.add_function(wrap_pyfunction!(finish_corpus, m)?)?;
    m.add_function(wrap_pyfunction!(findings_jsonl, m)?)?;
    m.add_function(wrap_pyfunction!(table_files, m)?)?;
    m.add_function(wrap_pyfunction!(read_table, m)?)?;
    m.add_function(wrap_pyfunction!(plan_ingest, m)?)?;
    m.add_function(wrap_pyfunction!(join_keys, m)?)?;
    m.add_function(wrap_pyfunction!(ingest_shard, m)?)?;
    m.add_function(wrap_pyfunction!(shard_duplicates, m)?)?;
    m.add_function(wrap_pyfunction!(merge_part, m)?)?;
    m.add_function(wrap_pyfunction!(merge_shards, m)?)?;
    Ok(())
}
