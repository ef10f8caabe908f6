//! An ingest in shards, for engines that read the input files of one store on other processes
//! or machines: [`plan_ingest`] lists the files and the store's parts as the command line would,
//! [`join_keys`] says which files must be read together (their fragments join across files:
//! OpenTelemetry traces), [`ingest_shard`] reads a group of files into a shard store with the
//! whole store's parts and input numbering, and [`merge_shards`] joins the shards into the
//! store, part by part: here, or from parts [`merge_part`] merged one at a time elsewhere (each
//! gathers one part's rows from every shard, given the duplicate runs [`shard_duplicates`]
//! lists).
//!
//! The store holds what the command line's ingest of the same inputs holds: each part the same
//! conversations (a conversation's part depends on its id and the part count only), read back
//! alike; the same runs (a run read from two inputs is kept from the earlier, as the command
//! line keeps it); the same counts and quarantine records. Rows within a part file, and
//! quarantine lines, may come in another order.

use super::ingest::{ingest_found, parts_for, IngestOptions, IngestSummary, Shard};
use super::inputs::{find_inputs, FoundInputs, InputFile};
use super::writer::{write_quarantine, write_skipped};
use crate::ingest::{read_file, Format, Input, Quarantined, Sink};
use crate::model::Conversation;
use crate::store::atomic::{self, write_file, AtomicDir};
use crate::store::parquet_file::ParquetFile;
use crate::store::write::{part_file_name, store_writer_properties, to_io};
use crate::store::{Counts, InputEntry, StoreManifest};
use arrow::array::{Array, AsArray, BooleanArray};
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
    let total: u64 = planned.iter().map(|f| f.size).sum();
    Ok(IngestPlan {
        inputs: planned,
        skipped: found.skipped,
        parts: parts_for(total, part_bytes),
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

/// A run as the merge sees it: where it was read from, and what it holds.
struct RunCopy {
    shard: usize,
    run_id: String,
    conversation_id: String,
    origin: (u32, u64),
    turn: u32,
    landings: u64,
    events: u64,
}

/// The columns of a shard's runs a merge's survey reads: what names a copy of a run and what
/// the store's counts take from it (the runs' texts are not read).
const KEY_COLUMNS: [&str; 7] = [
    "run_id",
    "conversation_id",
    "input_index",
    "record_index",
    "turn",
    "landings",
    "events",
];

/// The key columns ([`KEY_COLUMNS`]) of every row of a store's `runs.parquet`.
fn read_key_batches(path: &Path) -> io::Result<Vec<RecordBatch>> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(path)?)
        .map_err(|e| corrupt_shard(path, e))?;
    let schema = builder.parquet_schema();
    let keep: Vec<usize> = (0..schema.num_columns())
        .filter(|&i| KEY_COLUMNS.contains(&schema.column(i).name()))
        .collect();
    let mask = parquet::arrow::ProjectionMask::leaves(schema, keep);
    builder
        .with_projection(mask)
        .build()
        .map_err(|e| corrupt_shard(path, e))?
        .map(|b| b.map_err(|e| corrupt_shard(path, e)))
        .collect()
}

/// The rows of part `part` of a store's `runs.parquet`: only the row groups whose statistics
/// may hold the part are decoded (the writer keeps a row group to one part).
fn read_part_batches(path: &Path, part: u32) -> io::Result<Vec<RecordBatch>> {
    let builder = ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(path)?)
        .map_err(|e| corrupt_shard(path, e))?;
    let groups: Vec<usize> = builder
        .metadata()
        .row_groups()
        .iter()
        .enumerate()
        .filter(|(_, g)| crate::store::read::may_hold_part(g, part))
        .map(|(i, _)| i)
        .collect();
    builder
        .with_row_groups(groups)
        .build()
        .map_err(|e| corrupt_shard(path, e))?
        .map(|b| {
            b.map_err(|e| corrupt_shard(path, e))
                .and_then(|b| of_part(&b, part))
        })
        .collect()
}

fn corrupt_shard(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!("{} cannot be read: {e}", path.display()),
    )
}

/// Every run row of a store's `runs.parquet`, as raw batches.
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

fn copies_of(shard: usize, batches: &[RecordBatch]) -> io::Result<Vec<RunCopy>> {
    use arrow::datatypes::{UInt32Type, UInt64Type};
    let mut out = Vec::new();
    for b in batches {
        let run_id = column(b, "run_id")?.as_string::<i32>();
        let conversation = column(b, "conversation_id")?.as_string::<i32>();
        let input = column(b, "input_index")?.as_primitive::<UInt32Type>();
        let record = column(b, "record_index")?.as_primitive::<UInt64Type>();
        let turn = column(b, "turn")?.as_primitive::<UInt32Type>();
        let landings = column(b, "landings")?.as_primitive::<UInt32Type>();
        let events = column(b, "events")?.as_primitive::<UInt32Type>();
        for i in 0..b.num_rows() {
            out.push(RunCopy {
                shard,
                run_id: run_id.value(i).to_string(),
                conversation_id: conversation.value(i).to_string(),
                origin: (input.value(i), record.value(i)),
                turn: turn.value(i),
                landings: landings.value(i) as u64,
                events: events.value(i) as u64,
            });
        }
    }
    Ok(out)
}

/// The rows of `batch` whose run is not in `dropped`.
fn without_runs(batch: &RecordBatch, dropped: &HashSet<String>) -> io::Result<RecordBatch> {
    if dropped.is_empty() {
        return Ok(batch.clone());
    }
    let run_id = column(batch, "run_id")?.as_string::<i32>();
    let keep: BooleanArray = run_id
        .iter()
        .map(|r| Some(!r.is_some_and(|r| dropped.contains(r))))
        .collect();
    arrow::compute::filter_record_batch(batch, &keep).map_err(to_io)
}

/// The rows of `batch` of part `part`.
fn of_part(batch: &RecordBatch, part: u32) -> io::Result<RecordBatch> {
    let parts = column(batch, "part")?.as_primitive::<arrow::datatypes::UInt32Type>();
    let keep: BooleanArray = parts.iter().map(|p| Some(p == Some(part))).collect();
    arrow::compute::filter_record_batch(batch, &keep).map_err(to_io)
}

/// What a merge needs of the shards: their manifests, every copy of a run (its key, not its
/// row), which copies are kept, and the runs each shard holds that the store does not keep.
struct Survey {
    manifests: Vec<StoreManifest>,
    copies: Vec<RunCopy>,
    kept: HashSet<usize>,
    dropped: Vec<HashSet<String>>,
}

fn survey(plan: &IngestPlan, shards: &[(PathBuf, Vec<u32>)]) -> io::Result<Survey> {
    let mut manifests = Vec::with_capacity(shards.len());
    let mut copies = Vec::new();
    for (s, (dir, _)) in shards.iter().enumerate() {
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
        let batches = read_key_batches(&dir.join("runs.parquet"))?;
        copies.extend(copies_of(s, &batches)?);
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
    let mut dropped: Vec<HashSet<String>> = vec![HashSet::new(); shards.len()];
    for (i, c) in copies.iter().enumerate() {
        if !kept.contains(&i) {
            dropped[c.shard].insert(c.run_id.clone());
        }
    }
    Ok(Survey {
        manifests,
        copies,
        kept,
        dropped,
    })
}

/// The runs of each shard that the store does not keep (copies of runs an earlier input
/// holds), sorted, for [`merge_part`].
pub fn shard_duplicates(
    plan: &IngestPlan,
    shards: &[(PathBuf, Vec<u32>)],
) -> io::Result<Vec<Vec<String>>> {
    Ok(survey(plan, shards)?
        .dropped
        .into_iter()
        .map(|d| {
            let mut d: Vec<String> = d.into_iter().collect();
            d.sort();
            d
        })
        .collect())
}

/// Write part `part` of the store's events at `path`: the shards' rows of the part, in shard
/// order, less the runs `dropped` from each.
fn write_merged_part(
    shards: &[&Path],
    dropped: &[HashSet<String>],
    part: u32,
    path: &Path,
) -> io::Result<()> {
    let name = part_file_name(part);
    let file = File::create(path)?;
    let schema = crate::store::schema::events_schema();
    let mut writer =
        ArrowWriter::try_new(file, schema, Some(store_writer_properties())).map_err(to_io)?;
    for (dir, dropped) in shards.iter().zip(dropped) {
        for batch in read_batches(&dir.join("events").join(&name))? {
            writer
                .write(&without_runs(&batch, dropped)?)
                .map_err(to_io)?;
        }
    }
    writer.close().map_err(to_io).map(|_| ())
}

/// Part `part` of the store's events from the shard stores `shards` (in shard order), less
/// the runs [`shard_duplicates`] gave for each, written as `out/part-NNNNN.parquet` through a
/// temporary name and a rename: a part merged again leaves the same file. The parts merged so
/// are then handed to [`merge_shards`].
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
    std::fs::create_dir_all(out)?;
    let dirs: Vec<&Path> = shards.iter().map(PathBuf::as_path).collect();
    let dropped: Vec<HashSet<String>> = dropped
        .iter()
        .map(|d| d.iter().cloned().collect())
        .collect();
    let name = part_file_name(part);
    let tmp = out.join(format!(".{name}.{}.partial", std::process::id()));
    write_merged_part(&dirs, &dropped, part, &tmp)?;
    std::fs::rename(&tmp, out.join(name))
}

/// Join the shard stores `shards`, each with the plan's input numbers of the files it read,
/// into the store `out` (written atomically, as an ingest writes a store). A run read by two
/// shards is kept from the earlier input, and the later copy quarantined as a duplicate, as
/// the command line's ingest does. `started_seconds_ago`: how long the ingest ran before the
/// merge. The events parts are those [`merge_part`] wrote into `merged`, moved into the store
/// (it must be on the store's filesystem), or when `None` merged here.
pub fn merge_shards(
    plan: &IngestPlan,
    shards: &[(PathBuf, Vec<u32>)],
    out: &Path,
    opts: &IngestOptions,
    started_seconds_ago: f64,
    merged: Option<&Path>,
) -> io::Result<IngestSummary> {
    let started = Instant::now();
    let staging = AtomicDir::create(out, &crate::store::store_layout())?;
    let Survey {
        manifests,
        copies,
        kept,
        dropped,
    } = survey(plan, shards)?;
    let mut duplicates: Vec<&RunCopy> = copies
        .iter()
        .enumerate()
        .filter(|(i, _)| !kept.contains(i))
        .map(|(_, c)| c)
        .collect();
    duplicates.sort_by_key(|c| c.origin);

    // Events, part by part: each shard's rows of the part, less the runs dropped.
    let events = staging.path().join("events");
    std::fs::create_dir_all(&events)?;
    match merged {
        Some(merged) => {
            for part in 0..plan.parts {
                let name = part_file_name(part);
                std::fs::rename(merged.join(&name), events.join(&name)).map_err(|e| {
                    atomic::with_path(e, "cannot move the merged part", &merged.join(&name))
                })?;
            }
        }
        None => {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(opts.threads.max(1))
                .build()
                .map_err(io::Error::other)?;
            let dirs: Vec<&Path> = shards.iter().map(|(d, _)| d.as_path()).collect();
            pool.install(|| {
                use rayon::prelude::*;
                (0..plan.parts).into_par_iter().try_for_each(|part| {
                    let path = events.join(part_file_name(part));
                    write_merged_part(&dirs, &dropped, part, &path)
                })
            })?;
        }
    }

    // Runs, in row groups of one part each (the reader picks a part's by their statistics).
    let file = File::create(staging.path().join("runs.parquet"))?;
    let mut writer = ArrowWriter::try_new(
        file,
        crate::store::schema::runs_schema(),
        Some(store_writer_properties()),
    )
    .map_err(to_io)?;
    // A part at a time, each shard's rows of it read from its file: the merge holds one part's
    // rows of one shard, whatever the store's size.
    for part in 0..plan.parts {
        for (s, (dir, _)) in shards.iter().enumerate() {
            for batch in read_part_batches(&dir.join("runs.parquet"), part)? {
                let rows = without_runs(&batch, &dropped[s])?;
                if rows.num_rows() > 0 {
                    writer.write(&rows).map_err(to_io)?;
                }
            }
        }
        writer.flush().map_err(to_io)?;
    }
    writer.close().map_err(to_io)?;
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
    for c in &duplicates {
        write_quarantine(
            &mut quarantine,
            &Quarantined::duplicate_run(
                &plan.inputs[c.origin.0 as usize].display,
                c.origin.1,
                &c.run_id,
            ),
        )?;
    }
    quarantine.flush()?;
    drop(quarantine);

    let manifest = merged_manifest(
        plan,
        shards,
        &manifests,
        &copies,
        &kept,
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
    copies: &[RunCopy],
    kept: &HashSet<usize>,
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
    let mut conversations = HashSet::new();
    for (i, c) in copies.iter().enumerate() {
        if kept.contains(&i) {
            conversations.insert(c.conversation_id.as_str());
            counts.runs += 1;
            counts.events += c.events;
            counts.landings += c.landings;
            counts.user_turn_runs += u64::from(c.turn >= 1);
        } else {
            counts.duplicate_runs += 1;
        }
    }
    counts.conversations = conversations.len() as u64;
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
