//! Growing a store night by night: [`append`] adds a generation of new inputs
//! (`ingest --append`), [`compact`] rewrites the live rows of every generation into one.
//! The layout and its guarantees are [`crate::store::generations`]'.
//!
//! Both hold the store's lock for as long as they write, and both commit by replacing the
//! root's `manifest.json` with a rename: until then nothing a reader opens has changed, and a
//! run killed before it leaves a folder the manifest does not name, which the next run removes.

use crate::store::atomic::{self, write_file};
use crate::store::generations::{self, GenerationEntry, SupersededLine, GENERATIONS_DIR};
use crate::store::write::part_of;
use crate::store::{Counts, Store, StoreManifest, StoreWriter};
use arrow::array::{AsArray, BooleanArray};
use arrow::datatypes::UInt32Type;
use arrow::record_batch::RecordBatch;
use hashbrown::{HashMap, HashSet};
use std::collections::BTreeMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

use super::ingest::{ingest, ingest_into, part_rows, parts_for, Extension, IngestOptions};
use super::inputs::{find_inputs, FoundInputs, InputFile};
use super::remote::Grown;
use super::writer::{halves, id_key, ConversationRows, HeldRuns};

/// What an append did.
#[derive(Debug, Clone)]
pub struct AppendSummary {
    pub store: PathBuf,
    /// The store's manifest after the append.
    pub manifest: StoreManifest,
    /// The generation added: `None` when every input was in the store already (nothing was
    /// written).
    pub generation: Option<GenerationEntry>,
    /// Inputs skipped because the store held them already (the same SHA-256).
    pub skipped_as_ingested: u64,
    /// The store did not exist: it was created, its inputs its first generation.
    pub created: bool,
    /// For a store in a bucket: how many of the events parts it held were fetched to be read
    /// (those holding conversations the append continued), of how many. The rest of the store
    /// is its manifest and runs files.
    pub parts_fetched: Option<(u64, u64)>,
}

/// Add the inputs to the store at `out` as a new generation; a store is created when `out` is
/// absent (or an empty folder). Inputs the store holds already (same size and SHA-256; for an
/// object, same size and ETag) are skipped; runs it holds already are skipped as duplicates;
/// a conversation it holds that gains runs is written whole into the new generation, which
/// supersedes its earlier rows.
///
/// `out` can be a prefix in object storage (`s3://stores/nightly/`): the store there is
/// fetched into a temporary folder (its manifest and runs files; an events part only when the
/// inputs continue a conversation it holds), appended to, and only the new generation's files are
/// uploaded, its `manifest.json` last (the commit), under the prefix's lock object; an empty
/// prefix gets a new store, and a prefix holding objects but no store is refused.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use traceaudit::{append, compact, IngestOptions};
///
/// let work = tempfile::tempdir()?;
/// let store = work.path().join("store");
/// let opts = IngestOptions::default();
/// let dir = "testdata/agentfootprint/ndjson/";
/// let monday = append(&[format!("{dir}a_repeated_identical_call.ndjson").into()], &store, &opts)?;
/// assert!(monday.created);
/// // Tuesday's delivery holds Monday's file again: it is skipped, the new one appended.
/// let tuesday = append(
///     &[
///         format!("{dir}a_repeated_identical_call.ndjson").into(),
///         format!("{dir}b_polling_progress.ndjson").into(),
///     ],
///     &store,
///     &opts,
/// )?;
/// assert_eq!(tuesday.skipped_as_ingested, 1);
/// assert_eq!(tuesday.manifest.generations.as_ref().map(Vec::len), Some(2));
/// // The generations rewritten as one; an audit of the store gives the same results.
/// let compacted = compact(&store, &opts)?;
/// assert_eq!(compacted.generations_before, 2);
/// assert_eq!(compacted.manifest.counts.runs, tuesday.manifest.counts.runs);
/// # Ok(())
/// # }
/// ```
pub fn append(inputs: &[PathBuf], out: &Path, opts: &IngestOptions) -> io::Result<AppendSummary> {
    if super::remote::is_url(out) {
        atomic::refuse_overlap(out, inputs)?;
        return in_bucket(out, |local, copy| append_to(inputs, local, opts, copy));
    }
    append_to(inputs, out, opts, &Grown::Local)
}

/// An append to the store at the URL `out`: `job` run on its local copy
/// ([`super::remote::grow_in_bucket`]), its summary naming the URL and the events parts fetched.
fn in_bucket(
    out: &Path,
    job: impl FnOnce(&Path, &Grown) -> io::Result<AppendSummary>,
) -> io::Result<AppendSummary> {
    let summary = super::remote::grow_in_bucket(out, |local, copy| {
        let summary = job(local, &copy)?;
        Ok(AppendSummary {
            parts_fetched: copy.parts_fetched(),
            ..summary
        })
    })?;
    Ok(AppendSummary {
        store: super::remote::shown(out),
        ..summary
    })
}

/// [`append`] to the folder `out`, whose store is opened as `copy` says.
fn append_to(
    inputs: &[PathBuf],
    out: &Path,
    opts: &IngestOptions,
    copy: &Grown,
) -> io::Result<AppendSummary> {
    let empty_dir = out.is_dir()
        && std::fs::read_dir(out)
            .map_err(|e| atomic::with_path(e, "cannot read", out))?
            .next()
            .is_none();
    if !out.exists() || empty_dir {
        let summary = ingest(inputs, out, opts)?;
        let generation = generations::entries(&summary.manifest).pop();
        return Ok(AppendSummary {
            store: summary.store,
            manifest: summary.manifest,
            generation,
            skipped_as_ingested: 0,
            created: true,
            parts_fetched: None,
        });
    }
    let started = Instant::now();
    let _lock = atomic::lock_output(out)?;
    atomic::refuse_overlap(out, inputs)?;
    let store = open_for_writing(out, copy)?;
    let found = find_inputs(inputs)?;
    let (fresh, skipped) = not_yet_ingested(found, &store.manifest)?;
    if fresh.files.is_empty() {
        return Ok(AppendSummary {
            store: out.to_path_buf(),
            manifest: store.manifest,
            generation: None,
            skipped_as_ingested: skipped,
            created: false,
            parts_fetched: None,
        });
    }
    add_generation(out, &store, skipped, started, |dir| {
        let (known_runs, index) = live_index(&store)?;
        let mut continued = Continued::default();
        let mut copy =
            |writer: &mut StoreWriter, seen: &ConversationRows, replaced: &HashSet<String>| {
                continued.copy(&store, &index, writer, seen, replaced)
            };
        let written = ingest_into(
            &fresh,
            dir,
            opts,
            None,
            None,
            Some(Extension {
                first_input: store.manifest.inputs.len() as u32,
                known_runs,
                before_finish: &mut copy,
            }),
            started,
        )?;
        Ok((written.manifest, continued))
    })
}

/// The next generation's number and folder (relative to the store's root, and as a path),
/// created empty.
fn next_generation_dir(out: &Path, store: &Store) -> io::Result<(u32, String, PathBuf)> {
    let number = store.last_generation() + 1;
    let rel = generations::relative_dir(number);
    let dir = out.join(&rel);
    std::fs::create_dir_all(&dir).map_err(|e| atomic::with_path(e, "cannot create", &dir))?;
    Ok((number, rel, dir))
}

/// Add a generation to the store at `out`: `write` fills its new folder and gives the manifest
/// its own ingest made and the conversations it continues; then the generation is committed.
/// A folder `write` fails in is removed at once (nothing names it).
fn add_generation(
    out: &Path,
    store: &Store,
    skipped: u64,
    started: Instant,
    write: impl FnOnce(&Path) -> io::Result<(StoreManifest, Continued)>,
) -> io::Result<AppendSummary> {
    let (number, rel, dir) = next_generation_dir(out, store)?;
    let (own, continued) = match write(&dir) {
        Ok(written) => written,
        Err(e) => {
            let _ = std::fs::remove_dir_all(&dir);
            return Err(e);
        }
    };
    commit_generation(
        out,
        store,
        NewGeneration {
            number,
            rel,
            own,
            continued,
            skipped,
        },
        started,
    )
}

/// A generation written into its folder, not yet named by the store's manifest.
struct NewGeneration {
    number: u32,
    /// Its folder, relative to the store's root.
    rel: String,
    /// The manifest its own ingest made (its inputs, parts and counts).
    own: StoreManifest,
    /// The conversations it continues, with the rows it copied of them.
    continued: Continued,
    /// Inputs given that the store held already.
    skipped: u64,
}

/// Name generation `new` in the store's manifest: its superseded list written, the manifest's
/// parts, inputs, counts and generations extended, and the manifest replaced (the commit).
fn commit_generation(
    out: &Path,
    store: &Store,
    mut new: NewGeneration,
    started: Instant,
) -> io::Result<AppendSummary> {
    let dir = out.join(&new.rel);
    new.continued
        .write_superseded(&dir.join(generations::SUPERSEDED_FILE))?;
    let own = new.own;
    let superseded = new.continued.lines.len() as u64;
    let entry = GenerationEntry {
        number: new.number,
        dir: new.rel,
        parts: own.parts.len() as u32,
        first_input: store.manifest.inputs.len() as u64,
        inputs: own.inputs.len() as u64,
        written_at: generations::now_rfc3339(),
        new_conversations: own.counts.conversations.saturating_sub(superseded),
        superseded_conversations: superseded,
        copied_runs: new.continued.copied.runs,
        copied_events: new.continued.copied.events,
        replaced_runs: new.continued.replaced.runs,
        skipped_as_ingested: new.skipped,
        compacted_from: Vec::new(),
        runs_by_part: true,
        counts: own.counts.clone(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let mut manifest = store.manifest.clone();
    manifest.engine_version = crate::store::ENGINE_VERSION.into();
    manifest.store_schema_version = crate::store::schema::STORE_SCHEMA_VERSION;
    manifest.parts.extend(generations::part_names(&entry));
    manifest.inputs.extend(own.inputs);
    manifest.counts = grown(
        &store.manifest.counts,
        &own.counts,
        &entry,
        &new.continued.replaced,
    );
    manifest.seconds += started.elapsed().as_secs_f64();
    manifest.retired.clear();
    let mut list = generations::entries(&store.manifest);
    list.push(entry.clone());
    manifest.generations = Some(list);
    if manifest.store_id.is_none() {
        manifest.store_id = Some(generations::new_store_id(out));
    }
    commit(out, &manifest)?;
    Ok(AppendSummary {
        store: out.to_path_buf(),
        manifest,
        generation: Some(entry),
        skipped_as_ingested: new.skipped,
        created: false,
        parts_fetched: None,
    })
}

/// Add the store at `night` (a whole store of new inputs, as the distributed ingest writes
/// one) to the store at `out` as a new generation, as [`append`] adds inputs: runs `out` holds
/// already are left out (quarantined as duplicates), and the conversations it holds that
/// `night` continues are written whole into the generation. `skipped` counts the inputs the
/// caller left out as held already ([`fresh_inputs`]). The night's rows are rewritten a part at
/// a time, so memory is one of its parts.
pub fn append_store(
    night: &Path,
    out: &Path,
    skipped: u64,
    opts: &IngestOptions,
) -> io::Result<AppendSummary> {
    if super::remote::is_url(out) {
        return in_bucket(out, |local, copy| match local.exists() {
            true => append_store_to(night, local, skipped, opts, copy),
            false => night_as_new_store(night, local, skipped),
        });
    }
    append_store_to(night, out, skipped, opts, &Grown::Local)
}

/// [`append_store`] to the folder `out`, whose store is opened as `copy` says.
fn append_store_to(
    night: &Path,
    out: &Path,
    skipped: u64,
    opts: &IngestOptions,
    copy: &Grown,
) -> io::Result<AppendSummary> {
    let started = Instant::now();
    let _lock = atomic::lock_output(out)?;
    atomic::refuse_overlap(out, &[night.to_path_buf()])?;
    let store = open_for_writing(out, copy)?;
    let night_store = Store::open(night)?;
    if night_store.manifest.digests != store.manifest.digests
        || night_store.manifest.envelope_types != store.manifest.envelope_types
    {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "cannot add {} to {}: the two keep different digests or envelopes (written by \
                 other versions)",
                night.display(),
                out.display()
            ),
        ));
    }
    add_generation(out, &store, skipped, started, |dir| {
        let (mut known_runs, index) = live_index(&store)?;
        let mut replaced: HashSet<String> = HashSet::new();
        let first_input = store.manifest.inputs.len() as u32;
        let mut writer = StoreWriter::create(dir, night_store.parts, super::store_spec())?;
        let mut own = Copied::default();
        let mut seen = ConversationRows::default();
        let mut quarantine: Vec<u8> = match std::fs::read(night.join("quarantine.jsonl")) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == io::ErrorKind::NotFound => Vec::new(),
            Err(e) => return Err(atomic::with_path(e, "cannot read", night)),
        };
        let mut duplicates = 0u64;
        for part in 0..night_store.parts {
            let (runs, events) = night_store.raw_part(part, None)?;
            let runs = concat(&runs, crate::store::schema::runs_schema())?;
            let events = concat(&events, crate::store::schema::events_schema())?;
            let (dropped, longer) = held_runs(&runs, &known_runs)?;
            for run in longer {
                known_runs.remove(&halves(id_key(&run)));
                replaced.insert(run);
            }
            for (run, source, record) in &dropped {
                duplicates += 1;
                let q = crate::ingest::Quarantined::duplicate_run(source, *record, run);
                super::writer::write_quarantine(&mut quarantine, &q)?;
            }
            let dropped: HashSet<String> = dropped.into_iter().map(|d| d.0).collect();
            let runs = only_runs(&runs, &dropped, false)?;
            let events = only_runs(&events, &dropped, false)?;
            let runs = shifted_inputs(&runs, first_input)?;
            let ids = runs
                .column_by_name("conversation_id")
                .and_then(|c| c.as_string_opt::<i32>())
                .ok_or_else(|| io::Error::other("runs have no `conversation_id` column"))?;
            for id in ids.iter().flatten() {
                seen.add(ConversationRows::key(id), 1);
            }
            distribute(&mut writer, &[runs], &[events], &mut own)?;
        }
        let mut continued = Continued::default();
        continued.copy(&store, &index, &mut writer, &seen, &replaced)?;
        writer.finish()?;
        let split = crate::store::split::split_large_parts(
            dir,
            night_store.parts,
            super::ingest::part_rows(opts.part_rows),
        )?;
        std::fs::write(dir.join("quarantine.jsonl"), &quarantine)
            .map_err(|e| atomic::with_path(e, "cannot write", &dir.join("quarantine.jsonl")))?;
        let mut manifest = night_store.manifest.clone();
        manifest.parts = crate::store::write::part_names(split.parts);
        let c = &mut manifest.counts;
        c.conversations = seen.len() as u64;
        c.runs = own.runs;
        c.user_turn_runs = own.user_turn_runs;
        c.events = own.events;
        c.landings = own.landings;
        c.duplicate_runs += duplicates;
        Ok((manifest, continued))
    })
}

/// A night's store copied whole to `out` (a folder not there yet), as the store an append to
/// an empty prefix creates: its inputs its first generation.
fn night_as_new_store(night: &Path, out: &Path, skipped: u64) -> io::Result<AppendSummary> {
    let store = Store::open(night)?;
    for rel in crate::source::object::relative_files(night)? {
        let to = out.join(&rel);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| atomic::with_path(e, "cannot create", parent))?;
        }
        std::fs::copy(night.join(&rel), &to)
            .map_err(|e| atomic::with_path(e, "cannot write", &to))?;
    }
    let generation = generations::entries(&store.manifest).pop();
    Ok(AppendSummary {
        store: out.to_path_buf(),
        manifest: store.manifest,
        generation,
        skipped_as_ingested: skipped,
        created: true,
        parts_fetched: None,
    })
}

/// The inputs of `inputs` (files and folders, as `ingest` takes them) that the store at `store`
/// does not hold yet, and how many it holds; every input when there is no store there.
pub fn fresh_inputs(inputs: &[PathBuf], store: &Path) -> io::Result<(Vec<InputFile>, u64)> {
    if super::remote::is_url(store) {
        if let Some((local, _copy)) = super::remote::fetched_manifest(store)? {
            return fresh_inputs(inputs, &local);
        }
        return Ok((find_inputs(inputs)?.files, 0));
    }
    let found = find_inputs(inputs)?;
    if !store.join("manifest.json").is_file() {
        return Ok((found.files, 0));
    }
    let manifest = StoreManifest::read(store)?;
    let (fresh, skipped) = not_yet_ingested(found, &manifest)?;
    Ok((fresh.files, skipped))
}

/// The runs of `runs` that `held` holds already: those to drop as duplicates (run id, source,
/// record index), and those that replace the held copy (they have more events).
#[allow(clippy::type_complexity)]
fn held_runs(
    runs: &RecordBatch,
    held: &HeldRuns,
) -> io::Result<(Vec<(String, String, u64)>, Vec<String>)> {
    if runs.num_rows() == 0 {
        return Ok((Vec::new(), Vec::new()));
    }
    let text = |name: &str| {
        runs.column_by_name(name)
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| io::Error::other(format!("runs have no `{name}` column")))
    };
    let (ids, sources) = (text("run_id")?, text("source")?);
    let records = runs
        .column_by_name("record_index")
        .and_then(|c| c.as_primitive_opt::<arrow::datatypes::UInt64Type>())
        .ok_or_else(|| io::Error::other("runs have no `record_index` column"))?;
    let events = runs
        .column_by_name("events")
        .and_then(|c| c.as_primitive_opt::<UInt32Type>())
        .ok_or_else(|| io::Error::other("runs have no `events` column"))?;
    let (mut dropped, mut longer) = (Vec::new(), Vec::new());
    for i in 0..runs.num_rows() {
        let Some(&stored) = held.get(&halves(id_key(ids.value(i)))) else {
            continue;
        };
        if events.value(i) > stored {
            longer.push(ids.value(i).to_string());
        } else {
            dropped.push((
                ids.value(i).to_string(),
                sources.value(i).to_string(),
                records.value(i),
            ));
        }
    }
    Ok((dropped, longer))
}

/// The rows of `batch` of the runs in `ids` (`inside`), or of the others.
fn only_runs(batch: &RecordBatch, ids: &HashSet<String>, inside: bool) -> io::Result<RecordBatch> {
    if ids.is_empty() && !inside {
        return Ok(batch.clone());
    }
    crate::store::write::rows_of_runs(batch, |id| ids.contains(id) == inside)
}

/// `runs` with `by` added to every `input_index` (their inputs' place in the store's list).
fn shifted_inputs(runs: &RecordBatch, by: u32) -> io::Result<RecordBatch> {
    let at = runs
        .schema()
        .index_of("input_index")
        .map_err(|_| io::Error::other("runs have no `input_index` column"))?;
    let old = runs
        .column(at)
        .as_primitive_opt::<UInt32Type>()
        .ok_or_else(|| io::Error::other("runs' `input_index` is not UInt32"))?;
    let shifted: arrow::array::UInt32Array = old.iter().map(|i| i.map(|i| i + by)).collect();
    let mut columns = runs.columns().to_vec();
    columns[at] = std::sync::Arc::new(shifted);
    RecordBatch::try_new(runs.schema(), columns).map_err(crate::store::write::to_io)
}

/// The store at `out`, opened to be written: one this engine can add to (its digests and
/// envelopes the ones an ingest writes now), with what earlier runs left behind removed:
/// generation folders the manifest does not name (an append killed before its commit) and the
/// files a compaction retired.
fn open_for_writing(out: &Path, copy: &Grown) -> io::Result<Store> {
    let store = copy.open(out)?;
    let manifest = &store.manifest;
    let spec = super::store_spec();
    let refuse = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "cannot add to {}: {why}; ingest all of its inputs again into a new store",
                out.display()
            ),
        )
    };
    if manifest.store_schema_version < 8 {
        return Err(refuse(format!(
            "it has store schema version {}, and appends need 8 or later",
            manifest.store_schema_version
        )));
    }
    if manifest.digests.as_ref() != Some(&spec.digest_entries()) {
        return Err(refuse(
            "it keeps other digests than this engine writes (it was written by another version)"
                .into(),
        ));
    }
    let envelope_types: Vec<String> = spec.envelope_types.iter().map(|t| t.to_string()).collect();
    if manifest.envelope_types.as_ref() != Some(&envelope_types) {
        return Err(refuse(
            "it keeps the envelopes of other row types than this engine writes".into(),
        ));
    }
    remove_leftovers(out, manifest)?;
    Ok(store)
}

/// Remove what no reader of the store's manifest reads and an earlier writer left: folders
/// under `generations/` named as ours (five digits, or a temporary name of ours) that the
/// manifest does not list, and the files a compaction retired.
fn remove_leftovers(out: &Path, manifest: &StoreManifest) -> io::Result<()> {
    let listed: std::collections::HashSet<String> = generations::entries(manifest)
        .into_iter()
        .map(|g| g.dir)
        .collect();
    let root = out.join(GENERATIONS_DIR);
    if root.is_dir() {
        for entry in
            std::fs::read_dir(&root).map_err(|e| atomic::with_path(e, "cannot read", &root))?
        {
            let entry = entry.map_err(|e| atomic::with_path(e, "cannot read", &root))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let ours = name.len() == 5 && name.bytes().all(|b| b.is_ascii_digit());
            if ours && !listed.contains(&format!("{GENERATIONS_DIR}/{name}")) {
                let path = entry.path();
                std::fs::remove_dir_all(&path)
                    .map_err(|e| atomic::with_path(e, "cannot remove", &path))?;
            }
        }
    }
    for retired in &manifest.retired {
        let rel = retired.trim_end_matches('/');
        let allowed = matches!(rel, "runs.parquet" | "runs" | "events" | "quarantine.jsonl")
            || (rel.starts_with("generations/") && !rel.contains("..") && !listed.contains(rel));
        if !allowed {
            continue;
        }
        let path = out.join(rel);
        let removed = if path.is_dir() {
            std::fs::remove_dir_all(&path)
        } else {
            std::fs::remove_file(&path)
        };
        match removed {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(atomic::with_path(e, "cannot remove", &path)),
        }
    }
    Ok(())
}

/// The inputs the store does not hold yet, and how many it holds. A local file is held when an
/// input of the same size has its SHA-256 (only files of such a size are hashed first); an
/// object, when one of the same URL, size and ETag was read; a stream never is.
fn not_yet_ingested(
    found: FoundInputs,
    manifest: &StoreManifest,
) -> io::Result<(FoundInputs, u64)> {
    let sizes: std::collections::HashSet<u64> = manifest.inputs.iter().map(|i| i.size).collect();
    let held = |file: &InputFile| -> io::Result<bool> {
        if file.stream {
            return Ok(false);
        }
        if let Some(remote) = &file.remote {
            return Ok(remote.etag.is_some()
                && manifest.inputs.iter().any(|i| {
                    i.path == file.display && i.size == remote.size && i.etag == remote.etag
                }));
        }
        let size = std::fs::metadata(&file.path)
            .map_err(|e| atomic::with_path(e, "cannot read", &file.path))?
            .len();
        if !sizes.contains(&size) {
            return Ok(false);
        }
        let sha = crate::source::sha256_of(&file.path)
            .map_err(|e| atomic::with_path(e, "cannot read", &file.path))?;
        Ok(manifest
            .inputs
            .iter()
            .any(|i| i.size == size && i.sha256 == sha))
    };
    let mut fresh = Vec::with_capacity(found.files.len());
    let mut skipped = 0u64;
    for file in found.files {
        if held(&file)? {
            skipped += 1;
        } else {
            fresh.push(file);
        }
    }
    Ok((
        FoundInputs {
            files: fresh,
            skipped: found.skipped,
        },
        skipped,
    ))
}

/// The live runs of a store with the events each holds, and the part holding each live
/// conversation. Runs are keyed by their ids' digests, as the ingest keeps them: a store grows
/// night by night, and an id's string and its copy took some 150 bytes a run.
fn live_index(store: &Store) -> io::Result<(HeldRuns, HashMap<String, u32>)> {
    let mut runs = HeldRuns::new();
    let mut conversations: HashMap<String, u32> = HashMap::new();
    store.for_each_run_key(|run_id, conversation_id, part, events| {
        conversations.entry_ref(conversation_id).or_insert(part);
        runs.insert(halves(id_key(run_id)), events);
    })?;
    Ok((runs, conversations))
}

/// The rows copied into a generation.
#[derive(Default, Debug, Clone, Copy)]
struct Copied {
    runs: u64,
    user_turn_runs: u64,
    events: u64,
    landings: u64,
}

impl Copied {
    fn count(&mut self, runs: &RecordBatch, events: &RecordBatch) -> io::Result<()> {
        self.runs += runs.num_rows() as u64;
        self.events += events.num_rows() as u64;
        let column = |name: &str| {
            runs.column_by_name(name)
                .and_then(|c| c.as_primitive_opt::<UInt32Type>())
                .ok_or_else(|| io::Error::other(format!("copied runs have no `{name}` column")))
        };
        let turns = column("turn")?;
        self.user_turn_runs += turns.iter().filter(|t| t.is_some_and(|t| t >= 1)).count() as u64;
        self.landings += column("landings")?
            .iter()
            .map(|l| l.unwrap_or(0) as u64)
            .sum::<u64>();
        Ok(())
    }
}

/// The conversations a generation continues: their stored rows are copied into it, but for
/// the runs it holds longer copies of.
#[derive(Default)]
struct Continued {
    lines: Vec<SupersededLine>,
    copied: Copied,
    /// The stored rows of the runs replaced by longer copies (left behind, superseded).
    replaced: Copied,
}

impl Continued {
    /// Copy into `writer` the stored rows of every conversation of `seen` (the new
    /// generation's) that the store holds, a source part at a time, leaving out the runs of
    /// `replaced` (the generation holds them again, longer).
    fn copy(
        &mut self,
        store: &Store,
        index: &HashMap<String, u32>,
        writer: &mut StoreWriter,
        seen: &ConversationRows,
        replaced: &HashSet<String>,
    ) -> io::Result<()> {
        let mut by_part: BTreeMap<u32, std::collections::HashSet<String>> = BTreeMap::new();
        for (id, &part) in index {
            if seen.contains(ConversationRows::key(id)) {
                by_part.entry(part).or_default().insert(id.clone());
            }
        }
        let numbers: Vec<(u32, u32, u32)> = store
            .generations()
            .map(|g| (g.first_part, g.first_part + g.parts, g.number))
            .collect();
        for (part, ids) in by_part {
            let (runs, events) = store.raw_part(part, Some(&ids))?;
            let (runs, events) = if replaced.is_empty() {
                (runs, events)
            } else {
                let runs = concat(&runs, crate::store::schema::runs_schema())?;
                let events = concat(&events, crate::store::schema::events_schema())?;
                self.replaced.count(
                    &only_runs(&runs, replaced, true)?,
                    &only_runs(&events, replaced, true)?,
                )?;
                (
                    vec![only_runs(&runs, replaced, false)?],
                    vec![only_runs(&events, replaced, false)?],
                )
            };
            distribute(writer, &runs, &events, &mut self.copied)?;
            let generation = numbers
                .iter()
                .find(|(from, to, _)| part >= *from && part < *to)
                .map_or(0, |g| g.2);
            let mut ids: Vec<String> = ids.into_iter().collect();
            ids.sort();
            self.lines
                .extend(ids.into_iter().map(|conversation_id| SupersededLine {
                    conversation_id,
                    generation,
                }));
        }
        Ok(())
    }

    fn write_superseded(&mut self, path: &Path) -> io::Result<()> {
        self.lines.sort_by(|a, b| {
            (&a.conversation_id, a.generation).cmp(&(&b.conversation_id, b.generation))
        });
        let mut text = Vec::new();
        for line in &self.lines {
            serde_json::to_writer(&mut text, line).map_err(io::Error::other)?;
            text.push(b'\n');
        }
        let mut file =
            std::fs::File::create(path).map_err(|e| atomic::with_path(e, "cannot write", path))?;
        file.write_all(&text)
            .and_then(|()| file.sync_all())
            .map_err(|e| atomic::with_path(e, "cannot write", path))
    }
}

/// Copy whole conversations' rows (`runs`, `events`: every column, as stored) into the parts of
/// `writer` they belong to, counting them.
fn distribute(
    writer: &mut StoreWriter,
    runs: &[RecordBatch],
    events: &[RecordBatch],
    copied: &mut Copied,
) -> io::Result<()> {
    if runs.is_empty() && events.is_empty() {
        return Ok(());
    }
    let to_io = crate::store::write::to_io;
    let runs = concat(runs, crate::store::schema::runs_schema())?;
    let events = concat(events, crate::store::schema::events_schema())?;
    copied.count(&runs, &events)?;
    let parts = writer.part_count();
    let targets = |batch: &RecordBatch| -> io::Result<Vec<u32>> {
        let ids = batch
            .column_by_name("conversation_id")
            .and_then(|c| c.as_string_opt::<i32>())
            .ok_or_else(|| io::Error::other("copied rows have no `conversation_id` column"))?;
        Ok(ids
            .iter()
            .map(|id| part_of(id.unwrap_or(""), parts))
            .collect())
    };
    let (run_targets, event_targets) = (targets(&runs)?, targets(&events)?);
    let mut used: Vec<u32> = run_targets.iter().chain(&event_targets).copied().collect();
    used.sort_unstable();
    used.dedup();
    for part in used {
        let pick = |batch: &RecordBatch, targets: &[u32]| {
            let mask: BooleanArray = targets.iter().map(|&t| Some(t == part)).collect();
            arrow::compute::filter_record_batch(batch, &mask).map_err(to_io)
        };
        writer.copy_rows(
            part,
            &pick(&runs, &run_targets)?,
            &pick(&events, &event_targets)?,
        )?;
    }
    Ok(())
}

fn concat(batches: &[RecordBatch], schema: arrow::datatypes::SchemaRef) -> io::Result<RecordBatch> {
    arrow::compute::concat_batches(&schema, batches).map_err(crate::store::write::to_io)
}

/// The store's counts once generation `entry`, whose own ingest counted `own`, is added: its
/// conversations counted once (those it continues were counted before), the rows it copied
/// counted where they are now, the stored rows of the runs it `replaced` no longer.
fn grown(before: &Counts, own: &Counts, entry: &GenerationEntry, replaced: &Copied) -> Counts {
    Counts {
        files: before.files + own.files,
        bytes: before.bytes + own.bytes,
        conversations: before.conversations + entry.new_conversations,
        runs: before.runs - replaced.runs + own.runs,
        user_turn_runs: before.user_turn_runs - replaced.user_turn_runs + own.user_turn_runs,
        events: before.events - replaced.events + own.events,
        landings: before.landings - replaced.landings + own.landings,
        records_read: before.records_read + own.records_read,
        records_stored: before.records_stored + own.records_stored,
        records_quarantined: before.records_quarantined + own.records_quarantined,
        partial_notes: before.partial_notes + own.partial_notes,
        duplicate_runs: before.duplicate_runs + own.duplicate_runs,
        skipped_inputs: before.skipped_inputs + own.skipped_inputs,
        unrecognised_files: before.unrecognised_files + own.unrecognised_files,
    }
}

/// Replace the store's manifest: the commit point of an append or a compaction.
fn commit(out: &Path, manifest: &StoreManifest) -> io::Result<()> {
    let text = serde_json::to_string_pretty(manifest).map_err(io::Error::other)?;
    write_file(&out.join("manifest.json"), text.as_bytes())
}

/// What a compaction did.
#[derive(Debug, Clone)]
pub struct CompactSummary {
    pub store: PathBuf,
    pub manifest: StoreManifest,
    /// The generations compacted, and the parts before and after.
    pub generations_before: u32,
    pub parts_before: u32,
    pub parts_after: u32,
    /// Conversations whose superseded rows were dropped.
    pub superseded_dropped: u64,
}

/// Rewrite the live rows of every generation of the store at `dir` into one new generation of
/// parts near the part size (`opts.part_bytes` of input each, or more when their rows need
/// more under `opts.part_rows`; a part still over it is split), and
/// retire the files it replaces (deleted by the next append or compaction). Readers see the
/// store before or after; an audit of it gives the same results.
pub fn compact(dir: &Path, opts: &IngestOptions) -> io::Result<CompactSummary> {
    if super::remote::is_url(dir) {
        return Err(io::Error::from(crate::error::Error::Refused(format!(
            "{} is in object storage, and a compaction retires (deletes) a store's files, which \
             objects in a bucket never are: compact a local copy and write it to a new prefix",
            crate::source::object::redacted(&dir.to_string_lossy())
        ))));
    }
    let started = Instant::now();
    let _lock = atomic::lock_output(dir)?;
    let store = open_for_writing(dir, &Grown::Local)?;
    let before = generations::entries(&store.manifest);
    let superseded_dropped: u64 = store.generations().map(|g| g.superseded.len() as u64).sum();
    let (number, rel, out) = next_generation_dir(dir, &store)?;
    let input_bytes: u64 = store
        .manifest
        .inputs
        .iter()
        .map(|i| i.decompressed_size.unwrap_or(i.size))
        .sum();
    // The rows are known here (the manifest counts every live one): parts that would be over
    // the row limit are made from the start, with an eighth to spare for conversations that
    // do not share out evenly, rather than written and then split.
    let rows = store.manifest.counts.runs + store.manifest.counts.events;
    let max_rows = part_rows(opts.part_rows);
    let by_rows = u32::try_from(
        rows.saturating_mul(8)
            .div_ceil(max_rows.saturating_mul(7).max(1)),
    )
    .unwrap_or(u32::MAX);
    let parts = parts_for(input_bytes, opts.part_bytes).max(by_rows);
    let mut writer = StoreWriter::create(&out, parts, super::store_spec())?;
    let mut copied = Copied::default();
    for part in 0..store.parts {
        let (runs, events) = store.raw_part(part, None)?;
        distribute(&mut writer, &runs, &events, &mut copied)?;
    }
    writer.finish()?;
    let split = crate::store::split::split_large_parts(&out, parts, max_rows)?;
    // Every generation's quarantine, in order: what could not be used stays on record.
    let mut quarantine = Vec::new();
    for generation in store.generations() {
        match std::fs::read(generation.quarantine_path()) {
            Ok(bytes) => quarantine.extend(bytes),
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(atomic::with_path(
                    e,
                    "cannot read",
                    &generation.quarantine_path(),
                ))
            }
        }
    }
    std::fs::write(out.join("quarantine.jsonl"), &quarantine)
        .map_err(|e| atomic::with_path(e, "cannot write", &out.join("quarantine.jsonl")))?;

    let counts = store.manifest.counts.clone();
    if copied.runs != counts.runs || copied.events != counts.events {
        return Err(io::Error::other(format!(
            "compacting {} read {} runs and {} events, and its manifest counts {} and {}; \
             the store is left as it was",
            dir.display(),
            copied.runs,
            copied.events,
            counts.runs,
            counts.events
        )));
    }
    let entry = GenerationEntry {
        number,
        dir: rel,
        parts: split.parts,
        first_input: 0,
        inputs: store.manifest.inputs.len() as u64,
        written_at: generations::now_rfc3339(),
        new_conversations: counts.conversations,
        superseded_conversations: 0,
        copied_runs: copied.runs,
        copied_events: copied.events,
        replaced_runs: 0,
        skipped_as_ingested: 0,
        compacted_from: before.iter().map(|g| g.number).collect(),
        runs_by_part: true,
        counts: counts.clone(),
        seconds: started.elapsed().as_secs_f64(),
    };
    let mut manifest = store.manifest.clone();
    manifest.engine_version = crate::store::ENGINE_VERSION.into();
    manifest.store_schema_version = crate::store::schema::STORE_SCHEMA_VERSION;
    manifest.parts = generations::part_names(&entry);
    manifest.seconds += started.elapsed().as_secs_f64();
    manifest.retired = before
        .iter()
        .flat_map(|g| {
            if g.dir.is_empty() {
                let runs = match g.runs_by_part {
                    true => "runs/",
                    false => "runs.parquet",
                };
                vec![
                    runs.to_string(),
                    "events/".to_string(),
                    "quarantine.jsonl".to_string(),
                ]
            } else {
                vec![format!("{}/", g.dir)]
            }
        })
        .collect();
    manifest.generations = Some(vec![entry]);
    if manifest.store_id.is_none() {
        manifest.store_id = Some(generations::new_store_id(dir));
    }
    commit(dir, &manifest)?;
    Ok(CompactSummary {
        store: dir.to_path_buf(),
        manifest,
        generations_before: before.len() as u32,
        parts_before: store.parts,
        parts_after: split.parts,
        superseded_dropped,
    })
}
