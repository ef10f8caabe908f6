//! An ingest in shards, for engines that read the input files of one store on other processes
//! or machines: [`plan_ingest`] lists the files and the store's parts as the command line would,
//! [`join_keys`] says which files must be read together (their fragments join across files:
//! OpenTelemetry traces), [`ingest_shard`] reads a group of files into a shard store with the
//! whole store's parts and input numbering, and [`merge_shards`] joins the shards into the
//! store, part by part: here, or from parts [`merge_part`] merged one at a time elsewhere (each
//! gathers one part's events and runs from every shard, given the duplicate runs
//! [`shard_duplicates`] lists, itself shared out by buckets of run ids). The process that
//! joins them reads the parts' tallies and the shards' manifests, never a run row.
//!
//! The store holds what the command line's ingest of the same inputs holds: each part the same
//! conversations (a conversation's part depends on its id and the part count only), read back
//! alike; the same runs (a run read from two inputs is kept from the earlier, as the command
//! line keeps it); the same counts and quarantine records. Rows within a part file, and
//! quarantine lines, may come in another order.

use super::ingest::{ingest_found, planned_parts, IngestOptions, IngestSummary, Shard};
use super::inputs::{find_inputs, FoundInputs, InputFile};
use super::writer::{write_quarantine, write_skipped};
use crate::ingest::{read_file, Format, Input, Quarantined, Sink};
use crate::model::Conversation;
use crate::store::atomic::{self, write_file, AtomicDir};
use crate::store::parquet_file::ParquetFile;
use crate::store::write::{
    part_file_name, runs_part_name, store_writer_properties, to_io, RUNS_DIR,
};
use crate::store::{Counts, InputEntry, StoreManifest};
use arrow::array::{Array, AsArray};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::ArrowWriter;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::io::{self, BufRead, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

/// One input file of a planned ingest.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct PlannedInput {
    pub path: PathBuf,
    /// The name written into the store, as the command line writes it.
    pub display: String,
    pub size: u64,
}

/// The files of an ingest in input order, what was passed over, and the store's part count:
/// what the command line's ingest of the same inputs would use.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct IngestPlan {
    pub inputs: Vec<PlannedInput>,
    /// (path, reason) of each entry passed over.
    pub skipped: Vec<(String, String)>,
    pub parts: u32,
}

/// Plan the ingest of `inputs` (files and folders; standard input and pipes cannot be shared
/// out, so they are refused), with parts of `part_bytes` input bytes (0: the default).
pub fn plan_ingest(inputs: &[PathBuf], part_bytes: u64) -> io::Result<IngestPlan> {
    let found = find_inputs(inputs)?;
    if let Some(stream) = found.files.iter().find(|f| f.stream) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is a stream; an ingest in shards reads files only",
                stream.display
            ),
        ));
    }
    if found.files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            "no input files found",
        ));
    }
    let mut planned = Vec::with_capacity(found.files.len());
    for f in &found.files {
        planned.push(PlannedInput {
            path: f.path.clone(),
            display: f.display.clone(),
            size: f.size(),
        });
    }

    Ok(IngestPlan {
        inputs: planned,
        skipped: found.skipped,
        parts: planned_parts(
            found
                .files
                .iter()
                .map(|f| (f.path.as_path(), f.remote.as_ref(), f.size())),
            part_bytes,
        ),
    })
}

/// Collects the join keys of the fragments a file's reader hands over.
struct KeySink {
    keys: Vec<String>,
}

impl Sink for KeySink {
    fn conversation(&mut self, _: Conversation, _: u64) {}
    fn quarantine(&mut self, _: Quarantined) {}
    fn records_read(&mut self, _: u64) {}
    fn fragment(&mut self, fragment: crate::ingest::Fragment) {
        if let Some(stitch) = fragment.format.adapter().stitcher() {
            self.keys.extend(stitch.keys(&fragment));
        }
    }
}

/// The keys under which the file's conversations join those of other files (trace ids), sorted
/// and de-duplicated; none for a format whose conversations never span files, which is not
/// read. Files that share a key must be read by one [`ingest_shard`].
pub fn join_keys(path: &Path, format: Option<Format>) -> io::Result<Vec<String>> {
    let text = path.to_str().unwrap_or("");
    let remote = crate::source::object::is_url(text);
    let compressed = !remote && crate::source::Compression::of_file(path)?.is_some();
    if !remote && !compressed {
        return keys_of_file(path, format);
    }
    // An object is fetched, and a compressed file decompressed, into a folder of its own.
    static COPIES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let n = COPIES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!(".traceaudit-keys-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).map_err(|e| atomic::with_path(e, "cannot create", &dir))?;
    let keys = (|| {
        let mut local = path.to_path_buf();
        if remote {
            let input = InputFile::planned(path, text)?;
            let remote = input.remote.as_ref().expect("a URL plans as an object");
            local = dir.join(remote.file_name());
            crate::source::object::fetch(remote, &local)?;
        }
        if let Some(compression) = crate::source::Compression::of_file(&local)? {
            let name = local
                .file_name()
                .unwrap_or_default()
                .to_string_lossy()
                .into_owned();
            let copy = dir.join(format!("decompressed-{}", compression.inner_name(&name)));
            let limit = crate::ingest::Limits::default().decompressed_bytes;
            crate::source::decompress(compression, &local, &copy, limit)?;
            local = copy;
        }
        keys_of_file(&local, format)
    })();
    let _ = std::fs::remove_dir_all(&dir);
    keys
}

fn keys_of_file(path: &Path, format: Option<Format>) -> io::Result<Vec<String>> {
    let format = match format {
        Some(f) => Some(f),
        None => {
            let head = crate::ingest::read_head(path)?;
            Format::detect_file(path, &head)
        }
    };
    let Some(format) = format.filter(|f| f.adapter().stitcher().is_some()) else {
        return Ok(Vec::new());
    };
    let display = path.display().to_string();
    let mut sink = KeySink { keys: Vec::new() };
    read_file(format, &Input::new(path, &display), &mut sink)?;
    sink.keys.sort();
    sink.keys.dedup();
    Ok(sink.keys)
}

/// Ingest the planned inputs numbered `files` (in input order) into the shard store `out`,
/// with the plan's part count and each file's input number in the plan.
pub fn ingest_shard(
    plan: &IngestPlan,
    files: &[u32],
    out: &Path,
    opts: &IngestOptions,
) -> io::Result<IngestSummary> {
    let mut indices = files.to_vec();
    indices.sort_unstable();
    indices.dedup();
    let mut found = FoundInputs::default();
    for &i in &indices {
        let input = plan.inputs.get(i as usize).ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the plan has {} inputs; there is no input {i}",
                    plan.inputs.len()
                ),
            )
        })?;
        found
            .files
            .push(InputFile::planned(&input.path, &input.display)?);
    }
    if found.files.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "a shard needs at least one input",
        ));
    }
    let shard = Shard {
        parts: plan.parts,
        indices: &indices,
        last_index: plan.inputs.len() as u32 - 1,
    };
    ingest_found(&found, out, opts, None, Some(&shard), Instant::now()).map(|(s, _)| s)
}

/// A copy of a run in a shard, as the survey of duplicates sees it.
struct RunCopy {
    shard: usize,
    run_id: String,
    origin: (u32, u64),
}

/// The columns of a shard's runs the survey of duplicates reads: what names a copy of a run.
const KEY_COLUMNS: [&str; 3] = ["run_id", "input_index", "record_index"];

/// Read the runs of part `part` of the shard store in `dir` (its runs file), only the columns
/// `columns` when given, a batch at a time.
fn read_runs_part(dir: &Path, part: u32, columns: Option<&[&str]>) -> io::Result<Vec<RecordBatch>> {
    let path = dir.join(runs_part_name(part));
    let builder = ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(&path)?)
        .map_err(|e| corrupt_shard(&path, e))?;
    let builder = match columns {
        Some(columns) => {
            let schema = builder.parquet_schema();
            let keep: Vec<usize> = (0..schema.num_columns())
                .filter(|&i| columns.contains(&schema.column(i).name()))
                .collect();
            let mask = parquet::arrow::ProjectionMask::leaves(schema, keep);
            builder.with_projection(mask)
        }
        None => builder,
    };
    builder
        .build()
        .map_err(|e| corrupt_shard(&path, e))?
        .map(|b| b.map_err(|e| corrupt_shard(&path, e)))
        .collect()
}

fn corrupt_shard(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} cannot be read: {e}", path.display()),
    )
}

/// Every row of a Parquet file, as raw batches.
fn read_batches(path: &Path) -> io::Result<Vec<RecordBatch>> {
    ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(path)?)
        .map_err(to_io)?
        .build()
        .map_err(to_io)?
        .map(|b| b.map_err(to_io))
        .collect()
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> io::Result<&'a dyn Array> {
    batch
        .column_by_name(name)
        .map(|c| c.as_ref())
        .ok_or_else(|| io::Error::other(format!("store column {name} is missing")))
}

/// The rows of `batch` whose run is not in `dropped`.
fn without_runs(batch: &RecordBatch, dropped: &HashSet<String>) -> io::Result<RecordBatch> {
    if dropped.is_empty() {
        return Ok(batch.clone());
    }
    crate::store::write::rows_of_runs(batch, |id| !dropped.contains(id))
}

/// The shard stores' manifests, each checked to have the plan's part count.
fn shard_manifests(
    plan: &IngestPlan,
    shards: &[(PathBuf, Vec<u32>)],
) -> io::Result<Vec<StoreManifest>> {
    let mut manifests = Vec::with_capacity(shards.len());
    for (dir, _) in shards {
        let manifest = StoreManifest::read(dir)?;
        if manifest.parts.len() != plan.parts as usize {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "shard {} has {} parts; the plan has {}",
                    dir.display(),
                    manifest.parts.len(),
                    plan.parts
                ),
            ));
        }
        manifests.push(manifest);
    }
    Ok(manifests)
}

/// Does run `run_id` fall in bucket `bucket` of `buckets` (all of them when `None`)?
fn in_bucket(run_id: &str, bucket: Option<(u32, u32)>) -> bool {
    bucket.is_none_or(|(b, n)| n <= 1 || crate::js::fnv1a(run_id) % n == b)
}

/// The runs of each shard that the store does not keep (copies of runs an earlier input
/// holds), sorted, for [`merge_part`]: of every run, or, with `bucket` = (b, n), of the runs
/// whose id hashes to bucket b of n. The buckets' lists, joined shard by shard, are the whole
/// list, so the survey can be shared out: each bucket reads the run ids and origins of every
/// shard, and holds those of its own bucket only.
pub fn shard_duplicates(
    plan: &IngestPlan,
    shards: &[(PathBuf, Vec<u32>)],
    bucket: Option<(u32, u32)>,
) -> io::Result<Vec<Vec<String>>> {
    use arrow::datatypes::{UInt32Type, UInt64Type};
    shard_manifests(plan, shards)?;
    let mut copies = Vec::new();
    for (s, (dir, _)) in shards.iter().enumerate() {
        for part in 0..plan.parts {
            for b in read_runs_part(dir, part, Some(&KEY_COLUMNS))? {
                let run_id = column(&b, "run_id")?.as_string::<i32>();
                let input = column(&b, "input_index")?.as_primitive::<UInt32Type>();
                let record = column(&b, "record_index")?.as_primitive::<UInt64Type>();
                for i in 0..b.num_rows() {
                    if in_bucket(run_id.value(i), bucket) {
                        copies.push(RunCopy {
                            shard: s,
                            run_id: run_id.value(i).to_string(),
                            origin: (input.value(i), record.value(i)),
                        });
                    }
                }
            }
        }
    }
    // A run read more than once is kept from the earliest input, as the command line keeps the
    // first copy it reads.
    let mut first: HashMap<&str, usize> = HashMap::new();
    for (i, c) in copies.iter().enumerate() {
        match first.get(c.run_id.as_str()) {
            Some(&j) if (copies[j].origin, copies[j].shard) <= (c.origin, c.shard) => {}
            _ => {
                first.insert(c.run_id.as_str(), i);
            }
        }
    }
    let kept: HashSet<usize> = first.values().copied().collect();
    let mut dropped: Vec<Vec<String>> = vec![Vec::new(); shards.len()];
    for (i, c) in copies.iter().enumerate() {
        if !kept.contains(&i) {
            dropped[c.shard].push(c.run_id.clone());
        }
    }
    for d in &mut dropped {
        d.sort();
        d.dedup();
    }
    Ok(dropped)
}

/// What the merge of one part kept and left out: the store's counts take the sum of every
/// part's, and its quarantine the copies left out.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct PartTally {
    pub conversations: u64,
    pub runs: u64,
    pub user_turn_runs: u64,
    pub events: u64,
    pub landings: u64,
    /// The copies of runs left out of the part (an earlier input holds them): input number,
    /// record index, run id.
    pub dropped: Vec<(u32, u64, String)>,
}

impl PartTally {
    fn add(&mut self, other: PartTally) {
        self.conversations += other.conversations;
        self.runs += other.runs;
        self.user_turn_runs += other.user_turn_runs;
        self.events += other.events;
        self.landings += other.landings;
        self.dropped.extend(other.dropped);
    }

    /// `all` without the runs in `dropped`: the runs kept counted, the copies left out noted.
    fn count(&mut self, all: &RecordBatch, dropped: &HashSet<String>) -> io::Result<RecordBatch> {
        use arrow::datatypes::{UInt32Type, UInt64Type};
        let run_id = column(all, "run_id")?.as_string::<i32>();
        let input = column(all, "input_index")?.as_primitive::<UInt32Type>();
        let record = column(all, "record_index")?.as_primitive::<UInt64Type>();
        let turn = column(all, "turn")?.as_primitive::<UInt32Type>();
        let landings = column(all, "landings")?.as_primitive::<UInt32Type>();
        let events = column(all, "events")?.as_primitive::<UInt32Type>();
        for i in 0..all.num_rows() {
            if dropped.contains(run_id.value(i)) {
                let copy = (input.value(i), record.value(i), run_id.value(i).to_string());
                self.dropped.push(copy);
            } else {
                self.runs += 1;
                self.user_turn_runs += u64::from(turn.value(i) >= 1);
                self.events += u64::from(events.value(i));
                self.landings += u64::from(landings.value(i));
            }
        }
        without_runs(all, dropped)
    }
}

/// Write part `part` of the store into `events` (its events file) and `runs` (its runs file):
/// the shards' rows of the part, in shard order, less the runs `dropped` from each. Returns
/// what it kept and left out.
fn write_merged_part(
    shards: &[&Path],
    dropped: &[HashSet<String>],
    part: u32,
    events: &Path,
    runs: &Path,
) -> io::Result<PartTally> {
    let name = part_file_name(part);
    let mut writer = ArrowWriter::try_new(
        File::create(events)?,
        crate::store::schema::events_schema(),
        Some(store_writer_properties()),
    )
    .map_err(to_io)?;
    for (dir, dropped) in shards.iter().zip(dropped) {
        for batch in read_batches(&dir.join("events").join(&name))? {
            writer
                .write(&without_runs(&batch, dropped)?)
                .map_err(to_io)?;
        }
    }
    writer.close().map_err(to_io)?;
    let mut tally = PartTally::default();
    let mut conversations = HashSet::new();
    let mut writer = ArrowWriter::try_new(
        File::create(runs)?,
        crate::store::schema::runs_schema(),
        Some(store_writer_properties()),
    )
    .map_err(to_io)?;
    for (dir, dropped) in shards.iter().zip(dropped) {
        for batch in read_runs_part(dir, part, None)? {
            let kept = tally.count(&batch, dropped)?;
            let ids = column(&kept, "conversation_id")?.as_string::<i32>();
            conversations.extend(ids.iter().flatten().map(str::to_string));
            if kept.num_rows() > 0 {
                writer.write(&kept).map_err(to_io)?;
            }
        }
    }
    writer.close().map_err(to_io)?;
    tally.conversations = conversations.len() as u64;
    Ok(tally)
}

/// The files [`merge_part`] writes part `part` to under `out`: events, runs and tally.
fn merged_files(out: &Path, part: u32) -> [PathBuf; 3] {
    let name = part_file_name(part);
    [
        out.join("events").join(&name),
        out.join(runs_part_name(part)),
        out.join("tally").join(format!("part-{part:05}.json")),
    ]
}

/// Part `part` of the store from the shard stores `shards` (in shard order), less the runs
/// [`shard_duplicates`] gave for each: its events, its runs and what it counted, written under
/// `out` (`events/`, `runs/` and `tally/`, each file through a temporary name and a rename: a
/// part merged again leaves the same files). The parts merged so are then handed to
/// [`merge_shards`], which reads only their tallies.
pub fn merge_part(
    shards: &[PathBuf],
    dropped: &[Vec<String>],
    part: u32,
    out: &Path,
) -> io::Result<()> {
    if dropped.len() != shards.len() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} shards but {} lists of dropped runs",
                shards.len(),
                dropped.len()
            ),
        ));
    }
    let dirs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let dropped: Vec<HashSet<String>> = dropped
        .iter()
        .map(|d| d.iter().cloned().collect())
        .collect();
    let files = merged_files(out, part);
    let tmp = |path: &Path| {
        let name = path.file_name().unwrap_or_default().to_string_lossy();
        path.with_file_name(format!(".{name}.{}.partial", std::process::id()))
    };
    for path in &files {
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
    }
    let tally = write_merged_part(&dirs, &dropped, part, &tmp(&files[0]), &tmp(&files[1]))?;
    let text = serde_json::to_vec(&tally).map_err(io::Error::other)?;
    std::fs::write(tmp(&files[2]), text)?;
    for path in &files {
        std::fs::rename(tmp(path), path)?;
    }
    Ok(())
}

/// Move the file `from` to `to`: renamed, or copied and removed when the two are on different
/// filesystems (merged parts on a shared scratch folder, a store staged under `TMPDIR`).
fn moved(from: &Path, to: &Path) -> io::Result<()> {
    match std::fs::rename(from, to) {
        Err(e) if e.kind() == io::ErrorKind::CrossesDevices => {
            std::fs::copy(from, to)?;
            std::fs::remove_file(from)
        }
        other => other,
    }
}

/// Join the shard stores `shards`, each with the plan's input numbers of the files it read,
/// into the store `out` (written atomically, as an ingest writes a store). A run read by two
/// shards is kept from the earlier input, and the later copy quarantined as a duplicate, as
/// the command line's ingest does. `started_seconds_ago`: how long the ingest ran before the
/// merge. The parts are those [`merge_part`] wrote into `merged`, moved into the store (it
/// must be on the store's filesystem), or when `None` merged here. Given merged parts, this
/// process reads their tallies and no run at all; merging here, it also holds every run's key
/// (id and origin) for the survey of duplicates, as the command line's ingest does.
///
/// `out` can be a prefix in object storage (`s3://stores/nightly/`), written as `ingest` writes
/// one: the store is merged into a folder under `TMPDIR` and uploaded with its manifest last,
/// under the prefix's lock object, to an empty prefix only.
pub fn merge_shards(
    plan: &IngestPlan,
    shards: &[(PathBuf, Vec<u32>)],
    out: &Path,
    opts: &IngestOptions,
    started_seconds_ago: f64,
    merged: Option<&Path>,
) -> io::Result<IngestSummary> {
    if super::remote::is_url(out) {
        return super::remote::write_to_bucket(out, |local| {
            let mut summary = merge_shards(plan, shards, local, opts, started_seconds_ago, merged)?;
            summary.store = super::remote::shown(out);
            Ok(summary)
        });
    }
    let started = Instant::now();
    let manifests = shard_manifests(plan, shards)?;
    let staging = AtomicDir::create(out, &crate::store::store_layout())?;
    std::fs::create_dir_all(staging.path().join("events"))?;
    std::fs::create_dir_all(staging.path().join(RUNS_DIR))?;
    let mut tally = PartTally::default();
    match merged {
        Some(merged) => {
            for part in 0..plan.parts {
                let [events, runs, counted] = merged_files(merged, part);
                let text = std::fs::read(&counted)
                    .map_err(|e| atomic::with_path(e, "cannot read the merged part", &counted))?;
                let counted: PartTally = serde_json::from_slice(&text)
                    .map_err(|e| atomic::with_path(io::Error::other(e), "cannot read", &counted))?;
                tally.add(counted);
                for (from, to) in [
                    (
                        events,
                        staging.path().join("events").join(part_file_name(part)),
                    ),
                    (runs, staging.path().join(runs_part_name(part))),
                ] {
                    moved(&from, &to)
                        .map_err(|e| atomic::with_path(e, "cannot move the merged part", &from))?;
                }
            }
        }
        None => {
            // One survey of every run's key: a survey per bucket would read every shard's
            // runs files once per bucket, which only pays where the buckets run elsewhere.
            let dropped: Vec<HashSet<String>> = shard_duplicates(plan, shards, None)?
                .into_iter()
                .map(|ids| ids.into_iter().collect())
                .collect();
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(opts.threads.max(1))
                .build()
                .map_err(io::Error::other)?;
            let dirs: Vec<&Path> = shards.iter().map(|(d, _)| d.as_path()).collect();
            let tallies: Vec<PartTally> = pool.install(|| {
                use rayon::prelude::*;
                (0..plan.parts)
                    .into_par_iter()
                    .map(|part| {
                        let events = staging.path().join("events").join(part_file_name(part));
                        let runs = staging.path().join(runs_part_name(part));
                        write_merged_part(&dirs, &dropped, part, &events, &runs)
                    })
                    .collect::<io::Result<Vec<_>>>()
            })?;
            for t in tallies {
                tally.add(t);
            }
        }
    }
    // Parts over the row limit are split as the command line's ingest splits them.
    let split = crate::store::split::split_large_parts(
        staging.path(),
        plan.parts,
        super::ingest::part_rows(opts.part_rows),
    )?;

    // Quarantine: what was passed over, every shard's records, then the duplicates.
    let mut quarantine = io::BufWriter::new(File::create(staging.path().join("quarantine.jsonl"))?);
    write_skipped(&mut quarantine, &plan.skipped)?;
    for (dir, _) in shards {
        let lines = io::BufReader::new(File::open(dir.join("quarantine.jsonl"))?);
        for line in lines.lines() {
            let line = line?;
            if !line.is_empty() {
                quarantine.write_all(line.as_bytes())?;
                quarantine.write_all(b"\n")?;
            }
        }
    }
    tally.dropped.sort();
    for (input, record, run_id) in &tally.dropped {
        let display = &plan
            .inputs
            .get(*input as usize)
            .ok_or_else(|| io::Error::other(format!("a merged run names input {input}")))?
            .display;
        write_quarantine(
            &mut quarantine,
            &Quarantined::duplicate_run(display, *record, run_id),
        )?;
    }
    quarantine.flush()?;
    drop(quarantine);

    let manifest = merged_manifest(
        plan,
        shards,
        &manifests,
        &tally,
        started_seconds_ago + started.elapsed().as_secs_f64(),
    )?;
    let mut manifest = StoreManifest {
        parts: crate::store::write::part_names(split.parts),
        ..manifest
    };
    crate::store::generations::first_generation(&mut manifest, out);
    let text = serde_json::to_string_pretty(&manifest).map_err(io::Error::other)?;
    write_file(&staging.path().join("manifest.json"), text.as_bytes())?;
    let store = staging.commit()?;
    Ok(IngestSummary { store, manifest })
}

/// The store's manifest from its shards': inputs in input order, counts summed, and the counts
/// of what was stored taken from the runs kept.
fn merged_manifest(
    plan: &IngestPlan,
    shards: &[(PathBuf, Vec<u32>)],
    manifests: &[StoreManifest],
    tally: &PartTally,
    seconds: f64,
) -> io::Result<StoreManifest> {
    let mut entries: Vec<Option<InputEntry>> = vec![None; plan.inputs.len()];
    let mut counts = Counts {
        files: plan.inputs.len() as u64,
        bytes: plan.inputs.iter().map(|f| f.size).sum(),
        skipped_inputs: plan.skipped.len() as u64,
        ..Counts::default()
    };
    for ((dir, files), m) in shards.iter().zip(manifests) {
        let mut indices = files.clone();
        indices.sort_unstable();
        indices.dedup();
        if indices.len() != m.inputs.len() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "shard {} read {} inputs; {} were given for it",
                    dir.display(),
                    m.inputs.len(),
                    indices.len()
                ),
            ));
        }
        for (i, entry) in indices.iter().zip(&m.inputs) {
            entries[*i as usize] = Some(entry.clone());
        }
        let c = &m.counts;
        counts.records_read += c.records_read;
        counts.records_stored += c.records_stored;
        counts.records_quarantined += c.records_quarantined;
        counts.partial_notes += c.partial_notes;
        counts.duplicate_runs += c.duplicate_runs;
        counts.unrecognised_files += c.unrecognised_files;
    }
    let inputs = entries
        .into_iter()
        .enumerate()
        .map(|(i, e)| {
            e.ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("no shard read input {}", plan.inputs[i].display),
                )
            })
        })
        .collect::<io::Result<Vec<_>>>()?;
    counts.conversations = tally.conversations;
    counts.runs = tally.runs;
    counts.user_turn_runs = tally.user_turn_runs;
    counts.events = tally.events;
    counts.landings = tally.landings;
    counts.duplicate_runs += tally.dropped.len() as u64;
    if counts.records_stored == 0 {
        let why = if counts.records_read == 0 && counts.unrecognised_files > 0 {
            format!(
                "nothing could be read: no adapter recognised {} of {} file(s)",
                counts.unrecognised_files, counts.files
            )
        } else {
            format!(
                "nothing could be read: {} record(s) read, all quarantined",
                counts.records_read
            )
        };
        return Err(io::Error::new(io::ErrorKind::InvalidData, why));
    }
    let spec = super::store_spec();
    Ok(StoreManifest {
        engine: crate::store::ENGINE.into(),
        engine_version: crate::store::ENGINE_VERSION.into(),
        store_schema_version: crate::store::schema::STORE_SCHEMA_VERSION,
        parts: (0..plan.parts)
            .map(|p| format!("events/{}", part_file_name(p)))
            .collect(),
        inputs,
        counts,
        seconds,
        digests: Some(spec.digest_entries()),
        envelope_types: Some(spec.envelope_types.iter().map(|t| t.to_string()).collect()),
        store_id: None,
        generations: None,
        retired: Vec::new(),
    })
}
