//! Reading the store back: one part at a time, handed out as whole conversations in a stable
//! order (first input file and record of the conversation; runs by turn, then start time).

use crate::error::Error;
use crate::model::digest::{Digest, DigestKind};
use crate::model::Conversation;
use crate::store::generations::GenerationFiles;
use crate::store::rebuild::{append_events, gather, runs_from, DigestNames, Pieces};
use crate::store::row_groups::{
    col, conversation_filter, corrupt, load_checked, read_ahead, read_row_groups,
    read_row_groups_of,
};
use crate::store::write::{part_file_name, to_io, Origin};

pub use crate::store::rebuild::{conversations_from_batches, into_stored, RunRow};
pub use crate::store::row_groups::may_hold_part;
use crate::store::StoreManifest;
use arrow::array::{BooleanArray, StringArray, UInt32Array};
use arrow::record_batch::RecordBatch;
use hashbrown::HashMap;
use parquet::arrow::arrow_reader::{ArrowReaderMetadata, ParquetRecordBatchReaderBuilder};
use parquet::arrow::ProjectionMask;
use rayon::prelude::*;
use std::collections::HashSet;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// Every live row of the store's runs tables (those of every generation, without the rows a
/// later generation supersedes).
#[cfg(test)]
pub fn read_runs(store: &Path) -> io::Result<Vec<RunRow>> {
    Store::open(store)?.runs()
}

/// The generations of the store and their parts as the manifest lists them, each part checked
/// to be there and to look like a whole Parquet file (its magic at both ends), so that a store
/// missing a part, or holding a truncated one, is refused with the part's name instead of being
/// audited in part. The manifest is the truth: part files it does not list are not read.
fn listed_parts(
    dir: &Path,
    manifest: &StoreManifest,
    only: Option<u32>,
    on_demand: bool,
) -> io::Result<Vec<GenerationFiles>> {
    let refuse = |why: String| super::generations::not_whole(dir, why);
    if manifest.parts.is_empty() {
        return Err(refuse("its manifest lists no part".into()));
    }
    u32::try_from(manifest.parts.len()).map_err(|_| refuse("it lists too many parts".into()))?;
    let generations = super::generations::resolve(dir, manifest)?;
    let checked = |g: &GenerationFiles| only.is_none_or(|n| n == g.number);
    for generation in generations.iter().filter(|g| checked(g)) {
        let first = generation.first_part as usize;
        for listed in &manifest.parts[first..first + generation.parts as usize] {
            // A part its source fetches when first read is checked then.
            if on_demand && !dir.join(listed).exists() {
                continue;
            }
            looks_whole(&dir.join(listed)).map_err(|why| refuse(format!("{listed} {why}")))?;
        }
    }
    for generation in generations.iter().filter(|g| checked(g)) {
        for runs in generation.runs_files() {
            let name = runs
                .strip_prefix(dir)
                .unwrap_or(&runs)
                .display()
                .to_string();
            looks_whole(&runs).map_err(|why| refuse(format!("{name} {why}")))?;
        }
    }
    Ok(generations)
}

/// Does the file at `path` begin and end with Parquet's magic? `Err` says what is wrong with it.
fn looks_whole(path: &Path) -> crate::error::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    const MAGIC: &[u8; 4] = b"PAR1";
    let meta = std::fs::metadata(path).map_err(|e| match e.kind() {
        io::ErrorKind::NotFound => Error::Refused("is missing".to_string()),
        _ => Error::Refused(format!("cannot be read: {e}")),
    })?;
    if !meta.is_file() {
        return Err(Error::Refused("is not a regular file".into()));
    }
    let truncated = || {
        Error::Refused("is truncated or not a Parquet file (no Parquet footer at its end)".into())
    };
    if meta.len() < 12 {
        return Err(truncated());
    }
    let mut file = File::open(path).map_err(|e| Error::Refused(format!("cannot be read: {e}")))?;
    let (mut head, mut tail) = ([0u8; 4], [0u8; 4]);
    file.read_exact(&mut head)
        .and_then(|()| file.seek(SeekFrom::End(-4)))
        .and_then(|_| file.read_exact(&mut tail))
        .map_err(|e| Error::Refused(format!("cannot be read: {e}")))?;
    if &head != MAGIC || &tail != MAGIC {
        return Err(truncated());
    }
    Ok(())
}

/// Where the events parts of a store come from when its folder does not hold them: a store in
/// a bucket is copied for an append with its manifest and runs files only (all an append reads
/// of most parts), and a part is fetched when it is first read.
pub(crate) trait PartSource: Send + Sync {
    /// Fetch the store's file `rel` (relative to its root, `/`-separated) into `to`.
    fn fetch(&self, rel: &str, to: &Path) -> io::Result<()>;
}

/// An opened store. Runs and events are read a part at a time, so what is held in memory does
/// not grow with the store.
///
/// ```
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// use traceaudit::{ingest, IngestOptions, Store};
///
/// let work = tempfile::tempdir()?;
/// let out = work.path().join("store");
/// ingest(&["testdata/agentfootprint/ndjson".into()], &out, &IngestOptions::default())?;
/// let store = Store::open(&out)?;
/// // The runs table (one row per run, without events), then a part's conversations whole.
/// let runs = store.runs()?;
/// assert_eq!(runs.len() as u64, store.manifest.counts.runs);
/// let first = store.read_part(0)?;
/// assert!(first.iter().all(|c| !c.runs.is_empty()));
/// # Ok(())
/// # }
/// ```
pub struct Store {
    pub dir: PathBuf,
    /// The parts of every generation read, numbered from 0 in generation order.
    pub parts: u32,
    pub manifest: StoreManifest,
    /// The names events are given the digests of the fingerprint and evidence columns under:
    /// those asked for ([`Store::with_digests`]) that the store holds at their version.
    digest_names: DigestNames,
    /// The generations read, in order.
    generations: Vec<Generation>,
    /// Where events parts its folder lacks are fetched from, if anywhere.
    on_demand: Option<std::sync::Arc<dyn PartSource>>,
}

/// A generation of an opened store.
struct Generation {
    files: GenerationFiles,
    /// The footer of `runs.parquet`, in a store written before runs were kept by part, read
    /// once when first needed: it lists a row group per part flush (thousands in a large
    /// store) and every part's read needs it. A part's own runs file is read for each read of
    /// the part and its footer dropped with it: kept, the footers of every part read so far
    /// (a row group's metadata for each of 20 columns, thousands of row groups in a large
    /// store) made the audit's memory grow with the store.
    shared_runs: std::sync::OnceLock<ArrowReaderMetadata>,
}

/// A runs file of a generation, with its footer.
struct RunsFile {
    path: PathBuf,
    metadata: ArrowReaderMetadata,
    /// It holds the runs of every part of its generation (`runs.parquet`), a row group each.
    shared: bool,
}

impl RunsFile {
    /// May row group `group` hold runs of part `local`?
    fn may_hold(&self, group: &parquet::file::metadata::RowGroupMetaData, local: u32) -> bool {
        !self.shared || may_hold_part(group, local)
    }
}

impl Generation {
    fn new(files: GenerationFiles) -> Generation {
        Generation {
            shared_runs: std::sync::OnceLock::new(),
            files,
        }
    }

    /// The runs file holding part `local`'s runs.
    fn runs_of(&self, local: u32) -> io::Result<RunsFile> {
        if !self.files.runs_by_part {
            let path = self.files.runs_path();
            let metadata = match self.shared_runs.get() {
                Some(metadata) => metadata.clone(),
                None => {
                    let loaded = load_checked(&path, &crate::store::schema::runs_read_schema())?;
                    self.shared_runs.get_or_init(|| loaded).clone()
                }
            };
            return Ok(RunsFile {
                path,
                metadata,
                shared: true,
            });
        }
        if local >= self.files.parts {
            return Err(io::Error::other(format!(
                "generation {} has no part {local}",
                self.files.number
            )));
        }
        let path = self.files.runs_part_path(local);
        let metadata = load_checked(&path, &crate::store::schema::runs_read_schema())?;
        refuse_runs_of_other_parts(&path, &metadata, local)?;
        Ok(RunsFile {
            path,
            metadata,
            shared: false,
        })
    }

    /// Every runs file of the generation, each once, read as the caller comes to it.
    fn all_runs(&self) -> impl Iterator<Item = io::Result<RunsFile>> + '_ {
        let files = if self.files.runs_by_part {
            self.files.parts
        } else {
            1
        };
        (0..files).map(|p| self.runs_of(p))
    }
}

/// Refuse the runs file of part `local` when its rows name another part (told by the `part`
/// column's statistics): a reader keeps only a part's own rows, so those would never be read.
fn refuse_runs_of_other_parts(
    path: &Path,
    metadata: &ArrowReaderMetadata,
    local: u32,
) -> io::Result<()> {
    let stray = metadata
        .metadata()
        .row_groups()
        .iter()
        .find(|g| g.num_rows() > 0 && !(may_hold_part(g, local) && only_part(g, local)));
    match stray {
        Some(_) => Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "{} holds runs of other parts than part {local}, whose runs file it is: the \
                 store is not whole; ingest its inputs again",
                path.display()
            ),
        )),
        None => Ok(()),
    }
}

/// Do the statistics of row group `group` say every row of it is of part `part`?
fn only_part(group: &parquet::file::metadata::RowGroupMetaData, part: u32) -> bool {
    use parquet::file::statistics::Statistics;
    let stats = group
        .columns()
        .iter()
        .find(|c| c.column_path().string() == "part")
        .and_then(|c| c.statistics());
    match stats {
        Some(Statistics::Int32(s)) => {
            s.min_opt().map(|&m| m as u32) == Some(part)
                && s.max_opt().map(|&m| m as u32) == Some(part)
        }
        _ => false,
    }
}

impl Store {
    /// The store at `dir`, every generation of it checked to be whole (each listed file there
    /// and looking like Parquet).
    pub fn open(dir: &Path) -> io::Result<Store> {
        Store::open_checked(dir, None, None).map(|(store, _)| store)
    }

    /// The store at `dir`, whose events parts not in the folder are fetched from `source` when
    /// first read (and checked then).
    pub(crate) fn open_fetching(
        dir: &Path,
        source: std::sync::Arc<dyn PartSource>,
    ) -> io::Result<Store> {
        Store::open_checked(dir, None, Some(source)).map(|(store, _)| store)
    }

    /// Generation `pick` of the store at `dir`, as [`Store::only_generation`] gives it, with
    /// only that generation's files checked (and needed): a copy of a store that holds the
    /// manifest and one generation's files opens. Its number is returned too.
    pub fn open_generation(dir: &Path, pick: super::generations::Pick) -> io::Result<(Store, u32)> {
        let (store, number) = Store::open_checked(dir, Some(pick), None)?;
        let number = number.unwrap_or_default();
        Ok((store.only_generation(number)?, number))
    }

    /// The store at `dir`, with every generation checked, or only the one `pick` names (its
    /// number returned).
    fn open_checked(
        dir: &Path,
        pick: Option<super::generations::Pick>,
        on_demand: Option<std::sync::Arc<dyn PartSource>>,
    ) -> io::Result<(Store, Option<u32>)> {
        if !dir.join("manifest.json").exists() {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a complete traceaudit store (no manifest.json)",
                    dir.display()
                ),
            ));
        }
        let manifest = super::StoreManifest::read(dir)?;
        if !super::schema::READABLE_STORE_VERSIONS.contains(&manifest.store_schema_version) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} was written by {} {} with store schema version {}; this engine reads \
                     versions {} to {}: ingest its inputs again",
                    dir.display(),
                    manifest.engine,
                    manifest.engine_version,
                    manifest.store_schema_version,
                    super::schema::READABLE_STORE_VERSIONS.start(),
                    super::schema::STORE_SCHEMA_VERSION
                ),
            ));
        }
        let only = pick.map(|p| {
            let last = super::generations::entries(&manifest)
                .last()
                .map_or(0, |g| g.number);
            p.number(last)
        });
        let generations = listed_parts(dir, &manifest, only, on_demand.is_some())?;
        let store = Store {
            dir: dir.to_path_buf(),
            parts: manifest.parts.len() as u32,
            manifest,
            digest_names: DigestNames::default(),
            generations: generations.into_iter().map(Generation::new).collect(),
            on_demand,
        };
        for generation in &store.generations {
            let shared = !generation.files.runs_by_part;
            if shared && only.is_none_or(|n| n == generation.files.number) {
                store.refuse_runs_past_the_parts(generation)?;
            }
        }
        Ok((store, only))
    }

    /// The store as generation `number` wrote it: its parts only (numbered from 0), every
    /// conversation it holds read, as the store held it then (later generations may hold
    /// newer versions of some). `Err` when the store has no such generation.
    pub fn only_generation(mut self, number: u32) -> io::Result<Store> {
        let Some(at) = self
            .generations
            .iter()
            .position(|g| g.files.number == number)
        else {
            let held: Vec<String> = self
                .generations
                .iter()
                .map(|g| g.files.number.to_string())
                .collect();
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} has no generation {number} (it holds {})",
                    self.dir.display(),
                    held.join(", ")
                ),
            ));
        };
        let mut generation = self.generations.swap_remove(at);
        generation.files.first_part = 0;
        generation.files.superseded.clear();
        self.parts = generation.files.parts;
        self.generations = vec![generation];
        Ok(self)
    }

    /// The number of the store's last generation.
    pub fn last_generation(&self) -> u32 {
        self.generations.last().map_or(0, |g| g.files.number)
    }

    /// The generations read, in order, with their parts and what later ones supersede.
    pub fn generations(&self) -> impl Iterator<Item = &GenerationFiles> {
        self.generations.iter().map(|g| &g.files)
    }

    /// The generation holding part `part` of the store, and the part's number within it.
    fn locate(&self, part: u32) -> io::Result<(&Generation, u32)> {
        self.generations
            .iter()
            .find(|g| part >= g.files.first_part && part < g.files.first_part + g.files.parts)
            .map(|g| (g, part - g.files.first_part))
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!("{} has no part {part}", self.dir.display()),
                )
            })
    }

    /// The file of part `part` of the store.
    pub fn part_path(&self, part: u32) -> io::Result<PathBuf> {
        let (generation, local) = self.locate(part)?;
        Ok(generation.files.part_path(local))
    }

    /// The events file of part `local` of `generation`, fetched first if the store's folder
    /// lacks it and it has a source ([`Store::open_fetching`]).
    fn events_file(&self, generation: &Generation, local: u32) -> io::Result<PathBuf> {
        let path = generation.files.part_path(local);
        let Some(source) = &self.on_demand else {
            return Ok(path);
        };
        if path.exists() {
            return Ok(path);
        }
        let rel = path.strip_prefix(&self.dir).unwrap_or(&path);
        let rel: Vec<String> = rel
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let rel = rel.join("/");
        source.fetch(&rel, &path)?;
        looks_whole(&path)
            .map_err(|why| super::generations::not_whole(&self.dir, format!("{rel} {why}")))?;
        Ok(path)
    }

    /// Refuse a `runs.parquet` whose rows point into a part its generation does not hold:
    /// those runs would never be read. Told by the `part` column's statistics, which the
    /// writer keeps. (A runs file per part is checked when it is first read.)
    fn refuse_runs_past_the_parts(&self, generation: &Generation) -> io::Result<()> {
        use parquet::file::statistics::Statistics;
        let runs = generation.runs_of(0)?;
        let highest = runs
            .metadata
            .metadata()
            .row_groups()
            .iter()
            .filter_map(|g| {
                let c = g
                    .columns()
                    .iter()
                    .find(|c| c.column_path().string() == "part")?;
                match c.statistics() {
                    Some(Statistics::Int32(s)) => s.max_opt().map(|&m| m as u32),
                    _ => None,
                }
            })
            .max();
        match highest {
            Some(part) if part >= generation.files.parts => Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is not a whole store: {} holds runs of part {part}, and the \
                     manifest lists {} part(s) there; ingest its inputs again",
                    self.dir.display(),
                    generation.files.runs_path().display(),
                    generation.files.parts
                ),
            )),
            _ => Ok(()),
        }
    }

    /// Every column of part `part`'s live rows, as stored: its runs and its events, of the
    /// conversations in `only` when given. For copying rows into another generation.
    pub fn raw_part(
        &self,
        part: u32,
        only: Option<&HashSet<String>>,
    ) -> io::Result<(Vec<RecordBatch>, Vec<RecordBatch>)> {
        let (generation, local) = self.locate(part)?;
        let superseded = &generation.files.superseded;
        let keep = |id: &str| only.is_none_or(|o| o.contains(id)) && !superseded.contains(id);
        let runs_file = generation.runs_of(local)?;
        // Copying a few conversations out of a part decodes their rows only: a row filter on
        // the conversation id selects them before the other columns are read.
        let only_shared = only.map(|o| std::sync::Arc::new(o.clone()));
        let mut runs = Vec::new();
        for batch in read_row_groups_of(
            &runs_file.path,
            &runs_file.metadata,
            |g| runs_file.may_hold(g, local),
            &[],
            only_shared.as_ref(),
        )? {
            let ids = col::<StringArray>(&batch, "conversation_id")?;
            let parts = col::<UInt32Array>(&batch, "part")?;
            let mask: BooleanArray = (0..batch.num_rows())
                .map(|i| Some(parts.value(i) == local && keep(ids.value(i))))
                .collect();
            let kept = arrow::compute::filter_record_batch(&batch, &mask).map_err(to_io)?;
            if kept.num_rows() > 0 {
                runs.push(kept);
            }
        }
        let path = self.events_file(generation, local)?;
        let metadata = load_checked(&path, &crate::store::schema::events_schema())?;
        let mut events = Vec::new();
        for batch in read_row_groups_of(&path, &metadata, |_| true, &[], only_shared.as_ref())? {
            let ids = col::<StringArray>(&batch, "conversation_id")?;
            let mask: BooleanArray = ids.iter().map(|id| Some(id.is_some_and(keep))).collect();
            let kept = arrow::compute::filter_record_batch(&batch, &mask).map_err(to_io)?;
            if kept.num_rows() > 0 {
                events.push(kept);
            }
        }
        Ok((runs, events))
    }

    /// Hand back on the events the values of these digests, those the store holds at their
    /// version ([`StoreManifest::holds_digest`]); events read without them carry none.
    pub fn with_digests(mut self, digests: &[&'static dyn Digest]) -> Store {
        let held = |kind| {
            digests
                .iter()
                .find(|d| d.kind() == kind && self.manifest.holds_digest(d.name(), d.version()))
                .map(|d| d.name())
        };
        self.digest_names = DigestNames {
            fingerprint: held(DigestKind::Fingerprint),
            arguments: held(DigestKind::ArgumentsFingerprint),
            evidence: held(DigestKind::Evidence),
        };
        self
    }

    /// Every run of the store (events not loaded); for small stores and tests.
    pub fn runs(&self) -> io::Result<Vec<RunRow>> {
        let mut rows = Vec::new();
        for generation in &self.generations {
            for file in generation.all_runs() {
                let file = file?;
                let mut these = runs_from(
                    read_row_groups(&file.path, &file.metadata, |_| true, &[])?,
                    None,
                    None,
                    &generation.files.superseded,
                )?;
                for row in &mut these {
                    row.part += generation.files.first_part;
                }
                rows.append(&mut these);
            }
        }
        Ok(rows)
    }

    /// Every live run's key, a run at a time: its id, its conversation's, its part (the
    /// store's number) and how many events it holds, read from those four columns only. What an
    /// append needs to know of what the store holds; the keys are not collected, as a store of
    /// millions of runs has as many.
    pub fn for_each_run_key(&self, mut each: impl FnMut(&str, &str, u32, u32)) -> io::Result<()> {
        for generation in &self.generations {
            let superseded = &generation.files.superseded;
            for file in generation.all_runs() {
                let file = file?;
                let others: Vec<&str> = file
                    .metadata
                    .parquet_schema()
                    .columns()
                    .iter()
                    .map(|c| c.name())
                    .filter(|n| !matches!(*n, "run_id" | "conversation_id" | "part" | "events"))
                    .collect();
                for batch in read_row_groups(&file.path, &file.metadata, |_| true, &others)? {
                    let runs = col::<StringArray>(&batch, "run_id")?;
                    let conversations = col::<StringArray>(&batch, "conversation_id")?;
                    let parts = col::<UInt32Array>(&batch, "part")?;
                    let events = col::<UInt32Array>(&batch, "events")?;
                    for i in 0..batch.num_rows() {
                        let conversation = conversations.value(i);
                        if superseded.contains(conversation) {
                            continue;
                        }
                        each(
                            runs.value(i),
                            conversation,
                            parts.value(i) + generation.files.first_part,
                            events.value(i),
                        );
                    }
                }
            }
        }
        Ok(())
    }

    /// The conversations of one part, in stable order, with every event loaded.
    pub fn read_part(&self, part: u32) -> io::Result<Vec<Conversation>> {
        Ok(self
            .read_part_ordered(part)?
            .into_iter()
            .map(|(_, c)| c)
            .collect())
    }

    /// [`Store::read_part`], each conversation with its origin (the earliest of its runs'),
    /// which is what orders them: by origin, then id.
    pub fn read_part_ordered(&self, part: u32) -> io::Result<Vec<(Origin, Conversation)>> {
        self.read_part_where(part, None)
    }

    /// [`Store::read_part_ordered`], only the conversations named in `only` (all when `None`).
    /// Rows of other conversations are skipped as the events are decoded.
    pub fn read_part_where(
        &self,
        part: u32,
        only: Option<&HashSet<String>>,
    ) -> io::Result<Vec<(Origin, Conversation)>> {
        self.read_events(part, only, true)
    }

    /// [`Store::read_part_ordered`] without the text of tool results (`result_text`, most of
    /// a store's bytes) and of the other messages (`message_text`): landings and messages have
    /// no text, and carry the digests asked for ([`Store::with_digests`]) instead. Context
    /// rows, verdicts and the rest keep theirs. Runs come without the user message they answer
    /// ([`Run::user_message`](crate::model::Run::user_message)), which no check reads, and, when the store holds the evidence
    /// digest asked for, without their answer ([`Run::answer`](crate::model::Run::answer)), which carries it instead.
    /// Likewise events come without their arguments when the store holds the arguments
    /// fingerprint digest asked for.
    pub fn read_part_without_results(&self, part: u32) -> io::Result<Vec<(Origin, Conversation)>> {
        self.read_events(part, None, false)
    }

    /// [`Store::read_events_of`], a decoder panic turned into an error: the parquet crate can
    /// panic on a corrupt page (a shift overflow in its bit reader), and a damaged part must be
    /// refused by name, not take the audit down.
    fn read_events(
        &self,
        part: u32,
        only: Option<&HashSet<String>>,
        results: bool,
    ) -> io::Result<Vec<(Origin, Conversation)>> {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            self.read_events_of(part, only, results)
        }))
        .unwrap_or_else(|panic| {
            let why = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "the Parquet decoder gave up".into());
            Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!(
                    "{} is corrupt: its pages cannot be decoded ({why}); ingest its inputs again",
                    self.part_path(part)
                        .unwrap_or_else(|_| self.dir.join("events").join(part_file_name(part)))
                        .display()
                ),
            ))
        })
    }

    fn read_events_of(
        &self,
        part: u32,
        only: Option<&HashSet<String>>,
        results: bool,
    ) -> io::Result<Vec<(Origin, Conversation)>> {
        let (generation, local) = self.locate(part)?;
        let path = self.events_file(generation, local)?;
        let runs_file = generation.runs_of(local)?;
        let superseded = &generation.files.superseded;
        let only_shared: Option<std::sync::Arc<HashSet<String>>> =
            only.map(|o| std::sync::Arc::new(o.clone()));
        // Row groups are decoded in parallel on the caller's rayon pool (the audit's), batch by
        // batch, and merged in row-group order, so a run's events keep their stored order.
        // Batches are small (128 rows): a tau2 result is up to 20 KB, so thousands of rows would
        // make text columns of tens of MB, grown by doubling into fresh pages.
        let metadata = load_checked(&path, &crate::store::schema::events_schema())?;
        let groups = metadata.metadata().num_row_groups();
        // Every column but the archived envelopes (see `StoreSpec::envelope_is_checked`), and,
        // when the text of tool results and other messages is not wanted, that text, and the
        // arguments when the store holds their fingerprints (no check reads more of them).
        let skip_arguments = !results && self.digest_names.arguments.is_some();
        let columns = metadata
            .parquet_schema()
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| {
                c.name() != "archived_payload"
                    && (results || !matches!(c.name(), "result_text" | "message_text"))
                    && !(skip_arguments && c.name() == "arguments")
            })
            .map(|(i, _)| i)
            .collect::<Vec<_>>();
        let projection = ProjectionMask::leaves(metadata.parquet_schema(), columns.iter().copied());
        type Decoded = Vec<(String, Pieces)>;
        // The part's runs are read while its events are decoded (both on the caller's pool).
        let read_runs = || -> io::Result<Vec<RunRow>> {
            runs_from(
                read_row_groups_of(
                    &runs_file.path,
                    &runs_file.metadata,
                    |g| runs_file.may_hold(g, local),
                    {
                        // No check reads the user message a run answers (they read the messages);
                        // answers are read from their digests when the store holds them.
                        match (results, self.digest_names.evidence) {
                            (true, _) => &[],
                            (false, Some(_)) => &["user_message", "answer"],
                            (false, None) => &["user_message"],
                        }
                    },
                    only_shared.as_ref(),
                )?,
                Some(local),
                self.digest_names.evidence,
                superseded,
            )
        };
        let decode = || -> Vec<io::Result<Decoded>> {
            (0..groups)
                .into_par_iter()
                .map(|group| {
                    let mut runs = HashMap::new();
                    // The group's column chunks, read with a read or two: its pages are then
                    // decoded from memory.
                    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
                        read_ahead(&path, metadata.metadata(), &[group], &columns)?,
                        metadata.clone(),
                    )
                    .with_row_groups(vec![group])
                    .with_projection(projection.clone())
                    .with_batch_size(128);
                    if let Some(only) = &only_shared {
                        // The conversation ids are decoded first, and the other columns for the
                        // rows kept only.
                        builder = builder.with_row_filter(conversation_filter(
                            metadata.parquet_schema(),
                            only.clone(),
                        )?);
                    }
                    let reader = builder.build().map_err(|e| corrupt(&path, e))?;
                    for batch in reader {
                        let batch = batch.map_err(|e| corrupt(&path, e))?;
                        append_events(&batch, self.digest_names, &mut runs)?;
                    }
                    Ok(runs.into_iter().collect())
                })
                .collect()
        };
        let (part_runs, decoded) = rayon::join(read_runs, decode);
        let part_runs = part_runs?;
        let groups = decoded.into_iter().collect::<io::Result<Vec<_>>>()?;
        Ok(gather(part_runs, groups))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Event, EventKind, Role, Run};
    use crate::store::write::{part_of, StoreWriter};
    use crate::store::StoreSpec;
    use arrow::array::{Array, LargeStringArray};

    /// What an ingest keeps for the registered checks.
    fn spec() -> &'static StoreSpec {
        crate::pipeline::store_spec()
    }

    /// The manifest an ingest would write last, claiming `version` and naming the digests of
    /// [`spec`].
    fn write_manifest(dir: &Path, version: u32) {
        write_manifest_holding(dir, version, Some(spec().digest_entries()));
    }

    /// [`write_manifest`] naming the digests the store holds.
    fn write_manifest_holding(
        dir: &Path,
        version: u32,
        digests: Option<Vec<crate::store::DigestEntry>>,
    ) {
        let manifest = crate::store::StoreManifest {
            engine: crate::store::ENGINE.into(),
            engine_version: crate::store::ENGINE_VERSION.into(),
            store_schema_version: version,
            // The parts written in `dir`, as the ingest lists them.
            parts: (0..)
                .map(|p| format!("events/{}", part_file_name(p)))
                .take_while(|name| dir.join(name).exists())
                .collect(),
            inputs: Vec::new(),
            counts: Default::default(),
            seconds: 0.0,
            digests,
            envelope_types: None,
            store_id: None,
            generations: None,
            retired: Vec::new(),
        };
        std::fs::write(
            dir.join("manifest.json"),
            serde_json::to_string(&manifest).unwrap(),
        )
        .unwrap();
    }

    /// Runs get their pieces from every row group, in row-group order, sorted by `seq` and lent
    /// their texts; conversations and their runs come in the store's order; of two rows with
    /// one id the first takes the events; pieces of runs not in the part are dropped. The same
    /// whatever the pool's size.
    #[test]
    fn gather_hands_every_piece_to_its_run() {
        let event = |seq: u32, text: Option<&str>| Event {
            seq,
            text: text.map(str::to_string),
            ..Event::default()
        };
        let row = |run: &str, conversation: &str, turn: u32, record: u64| RunRow {
            run: Run {
                run_id: run.into(),
                conversation_id: conversation.into(),
                turn,
                ..Run::default()
            },
            part: 0,
            origin: Origin {
                input_index: 0,
                record_index: record,
            },
            landings: 0,
            events: 0,
        };
        let pieces = |events: Vec<Event>, borrowed: Vec<(u32, u32)>| Pieces { events, borrowed };
        // (origin's record, conversation id, [(run id, [(seq, text)])])
        type Shape = Vec<(u64, String, Vec<(String, Vec<(u32, Option<String>)>)>)>;
        let shape = |gathered: Vec<(Origin, Conversation)>| -> Shape {
            gathered
                .into_iter()
                .map(|(origin, c)| {
                    let runs = c
                        .runs
                        .into_iter()
                        .map(|r| {
                            (
                                r.run_id,
                                r.events.into_iter().map(|e| (e.seq, e.text)).collect(),
                            )
                        })
                        .collect();
                    (origin.record_index, c.id, runs)
                })
                .collect()
        };
        let once = || {
            let rows = vec![
                row("b2", "b", 1, 7),
                row("a1", "a", 0, 3),
                row("b1", "b", 0, 5),
                row("a1", "a", 2, 9),
            ];
            let groups = vec![
                vec![
                    (
                        "a1".to_string(),
                        pieces(vec![event(2, None), event(0, Some("x"))], vec![(2, 0)]),
                    ),
                    ("b1".to_string(), pieces(vec![event(0, Some("q"))], vec![])),
                    (
                        "elsewhere".to_string(),
                        pieces(vec![event(0, None)], vec![]),
                    ),
                ],
                vec![
                    ("a1".to_string(), pieces(vec![event(1, Some("y"))], vec![])),
                    (
                        "b2".to_string(),
                        pieces(vec![event(1, None), event(0, Some("z"))], vec![(1, 0)]),
                    ),
                ],
            ];
            shape(gather(rows, groups))
        };
        let text = |t: &str| Some(t.to_string());
        let expected = vec![
            (
                3,
                "a".to_string(),
                vec![
                    (
                        "a1".to_string(),
                        vec![(0, text("x")), (1, text("y")), (2, text("x"))],
                    ),
                    ("a1".to_string(), vec![]),
                ],
            ),
            (
                5,
                "b".to_string(),
                vec![
                    ("b1".to_string(), vec![(0, text("q"))]),
                    ("b2".to_string(), vec![(0, text("z")), (1, text("z"))]),
                ],
            ),
        ];
        for threads in [1, 2, 4] {
            let pool = rayon::ThreadPoolBuilder::new()
                .num_threads(threads)
                .build()
                .unwrap();
            assert_eq!(pool.install(once), expected, "{threads} threads");
        }
    }

    #[test]
    fn a_store_of_another_schema_version_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        StoreWriter::create(dir.path(), 1, spec())
            .unwrap()
            .finish()
            .unwrap();
        write_manifest(dir.path(), 1);
        let err = Store::open(dir.path()).err().expect("version 1 is refused");
        assert_eq!(err.kind(), io::ErrorKind::InvalidData);
        let text = err.to_string();
        assert!(text.contains("store schema version 1"), "{text}");
        assert!(text.contains("ingest its inputs again"), "{text}");
        write_manifest(dir.path(), crate::store::schema::STORE_SCHEMA_VERSION);
        assert!(Store::open(dir.path()).is_ok());
    }

    /// A store of 3 parts in `dir`: conversations `c0` to `c11`, of `runs` runs each.
    fn twelve_conversations(dir: &Path, runs: u32) {
        let mut writer = StoreWriter::create(dir, 3, spec()).unwrap();
        for i in 0..12 {
            let c = conversation(&format!("c{i}"), runs, 10);
            let origin = Origin {
                input_index: 0,
                record_index: i,
            };
            writer.write(&c, origin).unwrap();
        }
        writer.finish().unwrap();
        write_manifest(dir, crate::store::schema::STORE_SCHEMA_VERSION);
    }

    #[test]
    fn a_store_missing_or_truncating_a_part_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        twelve_conversations(dir.path(), 1);
        assert_eq!(Store::open(dir.path()).unwrap().parts, 3);
        let refused = |dir: &Path| Store::open(dir).err().expect("refused").to_string();
        // Lose the middle part: before, the parts after it were skipped without a word.
        let part1 = dir.path().join("events/part-00001.parquet");
        let bytes = std::fs::read(&part1).unwrap();
        std::fs::remove_file(&part1).unwrap();
        let err = refused(dir.path());
        assert!(
            err.contains("events/part-00001.parquet is missing"),
            "{err}"
        );
        // Truncated: refused by name too.
        std::fs::write(&part1, &bytes[..bytes.len() / 2]).unwrap();
        let err = refused(dir.path());
        assert!(
            err.contains("events/part-00001.parquet is truncated"),
            "{err}"
        );
        std::fs::write(&part1, &bytes).unwrap();
        // Lose the first part: before, the audit read nothing and exited 0.
        let part0 = dir.path().join("events/part-00000.parquet");
        std::fs::rename(&part0, dir.path().join("aside")).unwrap();
        assert!(refused(dir.path()).contains("events/part-00000.parquet is missing"));
        std::fs::rename(dir.path().join("aside"), &part0).unwrap();
        // A runs file lost, or put in the place of another part's.
        let runs1 = dir.path().join("runs/part-00001.parquet");
        let kept = std::fs::read(&runs1).unwrap();
        std::fs::remove_file(&runs1).unwrap();
        assert!(refused(dir.path()).contains("runs/part-00001.parquet is missing"));
        std::fs::copy(dir.path().join("runs/part-00002.parquet"), &runs1).unwrap();
        let err = Store::open(dir.path())
            .unwrap()
            .read_part(1)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("runs/part-00001.parquet holds runs of other parts than part 1"),
            "{err}"
        );
        std::fs::write(&runs1, kept).unwrap();
        assert_eq!(
            Store::open(dir.path()).unwrap().read_part(1).unwrap().len(),
            {
                (0..12)
                    .filter(|i| part_of(&format!("c{i}"), 3) == 1)
                    .count()
            }
        );
    }

    /// A store of schema 9 (one `runs.parquet`, row groups of one part each) is read as before,
    /// and refused when its manifest lists fewer parts than its runs point into.
    #[test]
    fn a_store_with_one_runs_file_is_read_and_checked() {
        let dir = tempfile::tempdir().unwrap();
        twelve_conversations(dir.path(), 2);
        let store = Store::open(dir.path()).unwrap();
        let by_part: Vec<String> = (0..3)
            .map(|p| format!("{:?}", store.read_part(p).unwrap()))
            .collect();
        let runs = store.runs().unwrap();
        // The same rows as schema 9 laid them out: one file, a row group per part.
        let props = crate::store::write::store_writer_properties();
        let out = File::create(dir.path().join("runs.parquet")).unwrap();
        let mut w = parquet::arrow::ArrowWriter::try_new(
            out,
            crate::store::schema::runs_schema(),
            Some(props),
        )
        .unwrap();
        for p in 0..3 {
            let path = dir.path().join(crate::store::write::runs_part_name(p));
            for b in ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .unwrap()
                .build()
                .unwrap()
            {
                w.write(&b.unwrap()).unwrap();
            }
            w.flush().unwrap();
        }
        w.close().unwrap();
        std::fs::remove_dir_all(dir.path().join("runs")).unwrap();
        write_manifest(dir.path(), 9);
        let old = Store::open(dir.path()).unwrap();
        for (p, expected) in by_part.iter().enumerate() {
            assert_eq!(&format!("{:?}", old.read_part(p as u32).unwrap()), expected);
        }
        assert_eq!(format!("{:?}", old.runs().unwrap()), format!("{runs:?}"));
        // A manifest that lists fewer parts than the runs point into.
        let path = dir.path().join("manifest.json");
        let mut manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        manifest["parts"].as_array_mut().unwrap().truncate(2);
        std::fs::write(&path, manifest.to_string()).unwrap();
        let err = Store::open(dir.path()).err().expect("refused").to_string();
        assert!(
            err.contains("runs of part 2") && err.contains("lists 2 part(s)"),
            "{err}"
        );
    }

    /// Rewrite the Parquet file at `path` as another tool would: Snappy-compressed, each batch
    /// passed through `edit`.
    fn rewrite(path: &Path, edit: impl Fn(RecordBatch) -> RecordBatch) {
        let file = File::open(path).unwrap();
        let batches: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .map(|b| edit(b.unwrap()))
            .collect();
        let props = parquet::file::properties::WriterProperties::builder()
            .set_compression(parquet::basic::Compression::SNAPPY)
            .build();
        let out = File::create(path).unwrap();
        let mut w =
            parquet::arrow::ArrowWriter::try_new(out, batches[0].schema(), Some(props)).unwrap();
        for b in &batches {
            w.write(b).unwrap();
        }
        w.close().unwrap();
    }

    #[test]
    fn a_part_written_back_by_another_tool_is_read_or_refused_by_column() {
        use arrow::datatypes::{DataType, Field, Schema, TimeUnit};
        let dir = tempfile::tempdir().unwrap();
        let mut writer = StoreWriter::create(dir.path(), 1, spec()).unwrap();
        writer
            .write(
                &conversation("c0", 2, 10),
                Origin {
                    input_index: 0,
                    record_index: 0,
                },
            )
            .unwrap();
        writer.finish().unwrap();
        write_manifest(dir.path(), crate::store::schema::STORE_SCHEMA_VERSION);
        let before = Store::open(dir.path()).unwrap().read_part(0).unwrap();
        // The same columns, Snappy-compressed (pyarrow's default): read as before.
        let part = dir.path().join("events/part-00000.parquet");
        rewrite(&part, |b| b);
        rewrite(&dir.path().join("runs/part-00000.parquet"), |b| b);
        let after = Store::open(dir.path()).unwrap().read_part(0).unwrap();
        assert_eq!(format!("{before:?}"), format!("{after:?}"));
        // Timestamps in nanoseconds, as a pandas round trip leaves them: before, a worker
        // panicked; now the part is refused, naming the column and both types.
        rewrite(&part, |b| {
            let i = b.schema().index_of("timestamp").unwrap();
            let ns = DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()));
            let mut fields: Vec<Field> = b
                .schema()
                .fields()
                .iter()
                .map(|f| f.as_ref().clone())
                .collect();
            fields[i] = Field::new("timestamp", ns.clone(), true);
            let mut columns = b.columns().to_vec();
            columns[i] = arrow::compute::cast(&columns[i], &ns).unwrap();
            RecordBatch::try_new(std::sync::Arc::new(Schema::new(fields)), columns).unwrap()
        });
        let err = Store::open(dir.path())
            .unwrap()
            .read_part(0)
            .unwrap_err()
            .to_string();
        assert!(
            err.contains("part-00000.parquet")
                && err.contains("column `timestamp` is Timestamp(ns"),
            "{err}"
        );
    }

    #[test]
    fn a_part_whose_pages_panic_the_decoder_is_refused_by_name() {
        // Parts the read_store fuzz target made: their footers are whole, a page is not, and the
        // decoder panics on it (the parquet crate's bit reader; arrow-buffer's bit chunks under
        // the definition levels).
        // A third has a page header naming a Thrift list of about 2^31 elements past the end of
        // the file, which the crate's skip took minutes over until reads past the end failed.
        for fixture in [
            "corrupt-page.parquet",
            "corrupt-levels.parquet",
            "corrupt-page-header.parquet",
        ] {
            let dir = tempfile::tempdir().unwrap();
            let mut writer = StoreWriter::create(dir.path(), 1, spec()).unwrap();
            for i in 0..4 {
                let origin = Origin {
                    input_index: 0,
                    record_index: i,
                };
                writer
                    .write(&conversation(&format!("c{i}"), 2, 10), origin)
                    .unwrap();
            }
            writer.finish().unwrap();
            write_manifest(dir.path(), crate::store::schema::STORE_SCHEMA_VERSION);
            let corrupt = Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("tests/fixtures/store")
                .join(fixture);
            std::fs::copy(corrupt, dir.path().join("events/part-00000.parquet")).unwrap();
            let store = Store::open(dir.path()).unwrap();
            for read in [
                store.read_part_ordered(0),
                store.read_part_without_results(0),
            ] {
                // Refused by name, never a panic.
                let err = read.unwrap_err().to_string();
                assert!(
                    err.contains("part-00000.parquet is corrupt: its pages cannot be decoded"),
                    "{fixture}: {err}"
                );
            }
        }
    }

    /// A conversation of `runs` runs, each with a user message, a landing and an answer whose
    /// texts are `size` bytes, and a verdict; payloads on every row.
    fn conversation(id: &str, runs: u32, size: usize) -> Conversation {
        let runs = (0..runs)
            .map(|t| {
                let mut run = Run {
                    run_id: format!("{id}-r{t}"),
                    conversation_id: id.to_string(),
                    turn: t + 1,
                    format: "test".into(),
                    source: "test".into(),
                    ..Run::default()
                };
                for (seq, kind) in [
                    EventKind::Message,
                    EventKind::Landing,
                    EventKind::Verdict,
                    EventKind::Answer,
                ]
                .into_iter()
                .enumerate()
                {
                    let mut e = Event::new(kind);
                    e.seq = seq as u32;
                    e.text = Some(format!("{id}/{t}/{}", noise(size, seq as u64 + 1)));
                    e.payload = Some(format!("{{\"kind\":\"{}\"}}", kind.as_str()));
                    run.events.push(e);
                }
                run
            })
            .collect();
        Conversation {
            id: id.to_string(),
            runs,
        }
    }

    /// `len` letters that compress poorly, as the store holds real text compressed: a
    /// repeated letter would shrink to nothing and never reach the writer's budget.
    fn noise(len: usize, seed: u64) -> String {
        let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
        let mut out = String::with_capacity(len + 8);
        while out.len() < len {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out.extend(x.to_le_bytes().map(|b| char::from(b'a' + b % 26)));
        }
        out.truncate(len);
        out
    }

    /// Read without results, a tool message and a landing keep what checks read of them (an
    /// evidence digest, a result fingerprint for a call made twice) and nothing else of their
    /// text; read whole, they are what was written, digests included.
    #[test]
    fn a_part_read_without_results_keeps_their_digests() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = StoreWriter::create(dir.path(), 1, spec()).unwrap();
        let mut run = Run {
            run_id: "r".into(),
            conversation_id: "c".into(),
            turn: 1,
            format: "tau2".into(),
            source: "t.json".into(),
            user_message: Some("what does it cost?".into()),
            answer: Some("Order A-1042 costs $1,250".into()),
            ..Run::default()
        };
        let result = r#"{"order":"A-1042","total":1250}"#;
        for call in ["call-1", "call-2"] {
            let mut landing = Event::new(EventKind::Landing);
            landing.call_id = Some(call.into());
            landing.tool_name = Some("get_order".into());
            landing.arguments = Some(r#"{"id":"A-1042"}"#.into());
            landing.text = Some(result.into());
            run.events.push(landing);
            let mut tool = Event::new(EventKind::Message);
            tool.role = Some(Role::Tool);
            tool.call_id = Some(call.into());
            tool.text = Some(result.into());
            run.events.push(tool);
        }
        let mut user = Event::new(EventKind::Message);
        user.role = Some(Role::User);
        user.text = Some("what does it cost?".into());
        run.events.insert(0, user);
        run.renumber();
        let mut written = Conversation {
            id: "c".into(),
            runs: vec![run],
        };
        crate::pipeline::fill_digests(&mut written);
        let origin = Origin {
            input_index: 0,
            record_index: 0,
        };
        writer.write(&written, origin).unwrap();
        writer.finish().unwrap();
        write_manifest(dir.path(), crate::store::schema::STORE_SCHEMA_VERSION);
        let store = Store::open(dir.path())
            .unwrap()
            .with_digests(&spec().digests);

        let whole = store.read_part(0).unwrap();
        assert_eq!(whole, vec![written.clone()]);
        // Each result's text is stored once: a tool message names the landing holding it.
        let file = File::open(dir.path().join("events").join(part_file_name(0))).unwrap();
        let batch = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap()
            .next()
            .unwrap()
            .unwrap();
        let stored = col::<LargeStringArray>(&batch, "result_text").unwrap();
        let text_of = col::<UInt32Array>(&batch, "result_text_of").unwrap();
        let kinds = col::<StringArray>(&batch, "kind").unwrap();
        let rows: Vec<(&str, bool, Option<u32>)> = (0..batch.num_rows())
            .map(|i| {
                let of = (!text_of.is_null(i)).then(|| text_of.value(i));
                (kinds.value(i), !stored.is_null(i), of)
            })
            .collect();
        assert_eq!(
            rows,
            [
                ("message", false, None),
                ("landing", true, None),
                ("message", false, Some(1)),
                ("landing", true, None),
                ("message", false, Some(3)),
            ]
        );

        let lean = store.read_part_without_results(0).unwrap();
        let (_, lean) = &lean[0];
        let events = &lean.runs[0].events;
        // Messages come without their text, and the run without the user message it answers
        // and without its answer; the person's message and the answer carry their digests: the
        // tokens with a digit, and how many tokens there are.
        assert_eq!(events[0].text, None);
        assert_eq!(lean.runs[0].user_message, None);
        assert_eq!(lean.runs[0].answer, None);
        let user = events[0]
            .digests
            .evidence("evidence")
            .expect("the user's digest");
        assert_eq!((user.forms.as_str(), user.offered), ("", 4));
        let answer = lean.runs[0].answer_digests.evidence("evidence");
        let answer = answer.expect("the answer's digest");
        assert_eq!((answer.forms.as_str(), answer.offered), ("a-1042\n1250", 4));
        let fingerprint = crate::passes::repeated_call::result_fingerprint(result);
        for e in &events[1..] {
            assert_eq!(e.text, None, "{:?}", e.kind());
            match e.kind() {
                EventKind::Landing => {
                    let fp = e.digests.fingerprint("result-fingerprint");
                    assert_eq!(fp, Some(fingerprint.as_str()));
                    assert_eq!(e.digests.evidence("evidence"), None);
                }
                _ => {
                    let digest = e.digests.evidence("evidence");
                    let digest = digest.expect("a tool message has its digest");
                    assert_eq!(digest.forms, "a-1042\n1250");
                    assert_eq!(digest.offered, 4);
                }
            }
        }
    }

    /// Events are given back only the digests the manifest names at the version asked for; a
    /// manifest that names none was written when every store held today's.
    #[test]
    fn only_the_digests_a_manifest_names_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let mut writer = StoreWriter::create(dir.path(), 1, spec()).unwrap();
        let mut run = conversation("c", 1, 10).runs.remove(0);
        for call in ["call-1", "call-2"] {
            let mut landing = Event::new(EventKind::Landing);
            landing.call_id = Some(call.into());
            landing.tool_name = Some("get_order".into());
            landing.arguments = Some(r#"{"id":"A-7"}"#.into());
            landing.text = Some("order A-7".into());
            run.events.push(landing);
            let mut tool = Event::new(EventKind::Message);
            tool.role = Some(Role::Tool);
            tool.call_id = Some(call.into());
            tool.text = Some("order A-7".into());
            run.events.push(tool);
        }
        run.renumber();
        let mut written = Conversation {
            id: "c".into(),
            runs: vec![run],
        };
        crate::pipeline::fill_digests(&mut written);
        let origin = Origin {
            input_index: 0,
            record_index: 0,
        };
        writer.write(&written, origin).unwrap();
        writer.finish().unwrap();
        let version = crate::store::schema::STORE_SCHEMA_VERSION;
        let entry = |name: &str, version: u32| crate::store::DigestEntry {
            name: name.into(),
            version,
        };
        // (manifest's digests, landings with a result fingerprint, tool messages with
        // evidence, landings with an arguments fingerprint: the two calls and the fixture's
        // landing without arguments). A manifest naming none holds evidence 1, which this
        // engine does not read.
        let cases = [
            (None, 2, 0, 0),
            (Some(vec![]), 0, 0, 0),
            (Some(vec![entry("evidence", 1)]), 0, 0, 0),
            (Some(vec![entry("evidence", 2)]), 0, 2, 0),
            (
                Some(vec![entry("result-fingerprint", 1), entry("evidence", 3)]),
                2,
                0,
                0,
            ),
            (Some(vec![entry("arguments-fingerprint", 1)]), 0, 0, 3),
            (Some(vec![entry("arguments-fingerprint", 2)]), 0, 0, 0),
        ];
        for (digests, fingerprinted, evidenced, argued) in cases {
            write_manifest_holding(dir.path(), version, digests.clone());
            let store = Store::open(dir.path())
                .unwrap()
                .with_digests(&spec().digests);
            let lean = store.read_part_without_results(0).unwrap();
            let events = &lean[0].1.runs[0].events;
            let count = |name: &str| {
                events
                    .iter()
                    .filter(|e| e.digests.get(name).is_some())
                    .count()
            };
            assert_eq!(count("result-fingerprint"), fingerprinted, "{digests:?}");
            assert_eq!(count("evidence"), evidenced, "{digests:?}");
            assert_eq!(count("arguments-fingerprint"), argued, "{digests:?}");
            // The arguments are left undecoded exactly when their fingerprints stand for them.
            let with_arguments = events.iter().filter(|e| e.arguments.is_some()).count();
            assert_eq!(
                with_arguments,
                if argued > 0 { 0 } else { 2 },
                "{digests:?}"
            );
            if argued > 0 {
                let stored = events
                    .iter()
                    .filter_map(|e| e.digests.arguments_fingerprint("arguments-fingerprint"))
                    .collect::<Vec<_>>();
                let of = |arguments| {
                    crate::js::fingerprint(&crate::passes::repeated_call::arguments_text(arguments))
                };
                let (absent, call) = (of(None), of(Some(r#"{"id":"A-7"}"#)));
                assert_eq!(stored, [absent.as_str(), call.as_str(), call.as_str()]);
            }
            // A whole read has them whatever the manifest says.
            let whole = store.read_part(0).unwrap();
            let whole_arguments = whole[0].runs[0]
                .events
                .iter()
                .filter(|e| e.arguments.is_some())
                .count();
            assert_eq!(whole_arguments, 2, "{digests:?}");
        }
    }

    #[test]
    fn parts_read_back_alone_and_whole() {
        let dir = tempfile::tempdir().unwrap();
        let parts = 5;
        let mut writer = StoreWriter::create(dir.path(), parts, spec()).unwrap();
        // 300 conversations of 3 runs with 100 KB texts: 360 MB of text in events and 90 MB in
        // the runs' answers, so every part writes its events and its runs in several row groups.
        let ids: Vec<String> = (0..300).map(|i| format!("c{i:03}")).collect();
        for (i, id) in ids.iter().enumerate() {
            let origin = Origin {
                input_index: 0,
                record_index: i as u64,
            };
            let mut c = conversation(id, 3, 100_000);
            for run in &mut c.runs {
                run.answer = run.events.last().and_then(|e| e.text.clone());
            }
            writer.write(&c, origin).unwrap();
        }
        writer.finish().unwrap();
        write_manifest(dir.path(), crate::store::schema::STORE_SCHEMA_VERSION);

        let store = Store::open(dir.path()).unwrap();
        assert_eq!(store.parts, parts);
        assert_eq!(store.runs().unwrap().len(), 900);
        // Every part's runs lie in a file of its own, flushed in several row groups.
        let mut groups = 0;
        for p in 0..parts {
            let path = dir.path().join(crate::store::write::runs_part_name(p));
            let meta = ParquetRecordBatchReaderBuilder::try_new(File::open(path).unwrap())
                .unwrap()
                .metadata()
                .clone();
            assert!(
                meta.row_groups().iter().all(|g| only_part(g, p)),
                "part {p}"
            );
            groups += meta.num_row_groups();
        }
        assert!(groups >= 2 * parts as usize, "{groups} row groups");
        // Each part gives back its conversations whole, in input order, and nothing else.
        let mut seen = Vec::new();
        for p in 0..parts {
            let convs = store.read_part(p).unwrap();
            let expected: Vec<&String> = ids.iter().filter(|id| part_of(id, parts) == p).collect();
            let got: Vec<&String> = convs.iter().map(|c| &c.id).collect();
            assert_eq!(got, expected);
            for c in &convs {
                assert_eq!(c.runs.len(), 3);
                for (t, run) in c.runs.iter().enumerate() {
                    assert_eq!(run.turn, t as u32 + 1);
                    let kinds: Vec<EventKind> = run.events.iter().map(|e| e.kind()).collect();
                    assert_eq!(
                        kinds,
                        [
                            EventKind::Message,
                            EventKind::Landing,
                            EventKind::Verdict,
                            EventKind::Answer
                        ]
                    );
                    assert!(run.events[1]
                        .text
                        .as_ref()
                        .unwrap()
                        .starts_with(&format!("{}/{t}/", c.id)));
                    // Envelopes are read back where checks read them, and only there.
                    let payloads: Vec<bool> =
                        run.events.iter().map(|e| e.payload.is_some()).collect();
                    assert_eq!(payloads, [false, false, true, false]);
                }
            }
            seen.extend(convs.into_iter().map(|c| c.id));
        }
        seen.sort();
        assert_eq!(seen, ids);
        // On disk every envelope is kept: the checked ones in `payload`, the others in
        // `archived_payload`, which the reads above never decoded.
        let file = File::open(dir.path().join("events").join(part_file_name(0))).unwrap();
        let reader = ParquetRecordBatchReaderBuilder::try_new(file)
            .unwrap()
            .build()
            .unwrap();
        let mut rows = 0;
        for batch in reader {
            let batch = batch.unwrap();
            let kind = col::<StringArray>(&batch, "kind").unwrap();
            let checked = col::<LargeStringArray>(&batch, "payload").unwrap();
            let archived = col::<LargeStringArray>(&batch, "archived_payload").unwrap();
            for i in 0..batch.num_rows() {
                let (held, other) = if kind.value(i) == "verdict" {
                    (checked, archived)
                } else {
                    (archived, checked)
                };
                assert_eq!(held.value(i), format!("{{\"kind\":\"{}\"}}", kind.value(i)));
                assert!(other.is_null(i));
                rows += 1;
            }
        }
        assert!(rows > 0);

        // A part read for some of its conversations gives exactly those, as a whole read
        // gives them (and nothing for a part holding none of them).
        for p in 0..parts {
            let whole = store.read_part_ordered(p).unwrap();
            let some: HashSet<String> =
                whole.iter().step_by(3).map(|(_, c)| c.id.clone()).collect();
            let expected: Vec<_> = whole
                .into_iter()
                .filter(|(_, c)| some.contains(&c.id))
                .collect();
            assert!(!expected.is_empty());
            assert_eq!(store.read_part_where(p, Some(&some)).unwrap(), expected);
        }
        let elsewhere: HashSet<String> = [ids[0].clone()].into();
        let other_part = (part_of(&ids[0], parts) + 1) % parts;
        assert!(store
            .read_part_where(other_part, Some(&elsewhere))
            .unwrap()
            .is_empty());
    }

    /// `into_stored` gives what a store read gives: for conversations stored in the order read
    /// back, and for ones whose runs and events are stored out of order, with events of no kind
    /// and with envelopes the checks do not read.
    #[test]
    fn into_stored_is_what_the_store_gives_back() {
        let plain = conversation("plain", 3, 40);
        let mut shuffled = conversation("shuffled", 4, 40);
        shuffled.runs.reverse();
        shuffled.runs[1].started_ms = Some(5);
        shuffled.runs[2].turn = 2; // two runs of turn 2, told apart by start time and id
        for run in &mut shuffled.runs {
            run.events.reverse();
            run.events[0].kind = None;
            run.events[0].source_type = Some("agentfootprint.agent.route_decided".into());
            let mut other = Event::new(EventKind::Other);
            other.seq = 1; // the same seq as another event: their order is kept
            other.source_type = Some("some.other.event".into());
            other.payload = Some("{}".into());
            run.events.push(other);
        }
        let mut elsewhere = conversation("elsewhere", 2, 10);
        elsewhere.runs[1].conversation_id = "another".into();

        let dir = tempfile::tempdir().unwrap();
        let mut writer = StoreWriter::create(dir.path(), 1, spec()).unwrap();
        for (i, c) in [&plain, &shuffled].into_iter().enumerate() {
            let origin = Origin {
                input_index: 0,
                record_index: i as u64,
            };
            writer.write(c, origin).unwrap();
        }
        writer.finish().unwrap();
        write_manifest(dir.path(), crate::store::schema::STORE_SCHEMA_VERSION);
        let back = Store::open(dir.path()).unwrap().read_part(0).unwrap();
        assert_eq!(back.len(), 2);

        let plain_view = into_stored(plain.clone(), spec()).unwrap();
        assert_ne!(
            plain_view, plain,
            "verdict envelopes stay, the landing's goes"
        );
        assert_eq!(plain_view, back[0]);
        let shuffled_view = into_stored(shuffled.clone(), spec()).unwrap();
        assert_eq!(shuffled_view, back[1]);
        assert_ne!(shuffled, back[1]);
        assert!(into_stored(elsewhere, spec()).is_none());

        // Read back once more, it is its own stored form.
        let again = into_stored(back[1].clone(), spec()).unwrap();
        assert_eq!(again, back[1]);
    }
}
