//! Generations: how a store grows night by night (`ingest --append`).
//!
//! Each append adds a generation: the events parts, runs table and quarantine of that night's
//! inputs, in a folder of their own (`generations/NNNNN/`, laid out as a store's root is). A
//! conversation that arrives again with new runs is written whole into the new generation (its
//! stored rows copied beside the new runs), and the generation lists it in `superseded.jsonl`:
//! readers then skip its rows in the earlier generation. So the store holds one live version of
//! every conversation, and no run is counted twice.
//!
//! The manifest at the store's root is the commit point. A generation's folder is complete
//! before the manifest names it, and the manifest is replaced by a rename, so a reader sees the
//! store before an append or after it, never between. Generation 0 of a store that was
//! ingested whole lies at the root itself (`events/`, `runs/`, `quarantine.jsonl`), as
//! every store did before generations existed; a manifest without `generations` has just that
//! one.
//!
//! Compaction (`traceaudit compact`, the pipeline's `append::compact`) writes the live rows of
//! every generation into one new generation and names the files it replaces under `retired`;
//! they are deleted by the next append or compaction (holding the store's lock), so a reader
//! that opened the store before the compaction can still finish.

use super::{Counts, StoreManifest};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::io::{self, BufRead};
use std::path::{Path, PathBuf};

/// The folder under a store's root that holds its appended generations.
pub const GENERATIONS_DIR: &str = "generations";

/// The file of a generation's folder listing the conversations it supersedes.
pub const SUPERSEDED_FILE: &str = "superseded.jsonl";

/// A generation as the manifest records it.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
pub struct GenerationEntry {
    /// 0 for the first; each append takes the next number.
    pub number: u32,
    /// Its folder, relative to the store's root (`""`: the root itself).
    pub dir: String,
    /// How many events parts it holds (named `DIR/events/part-NNNNN.parquet`, from 0).
    pub parts: u32,
    /// Its inputs: `inputs` entries of the manifest's list, from `first_input`.
    pub first_input: u64,
    pub inputs: u64,
    /// When it was committed: RFC 3339, UTC.
    pub written_at: String,
    /// Conversations it holds that no earlier generation held.
    pub new_conversations: u64,
    /// Conversations it holds a newer version of (their earlier rows are superseded).
    pub superseded_conversations: u64,
    /// Runs and events of those conversations copied from earlier generations.
    #[serde(default)]
    pub copied_runs: u64,
    #[serde(default)]
    pub copied_events: u64,
    /// Inputs given to the append that the store already held (the same SHA-256), not read
    /// again.
    /// Runs stored cut off by an earlier generation (their log still being written) that
    /// this one holds again with more events: the stored copies are left behind.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub replaced_runs: u64,
    #[serde(default)]
    pub skipped_as_ingested: u64,
    /// The generations whose live rows a compaction rewrote into this one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub compacted_from: Vec<u32>,
    /// Its runs lie in a file per part (`runs/part-NNNNN.parquet`, store schema 10 on), not
    /// in one `runs.parquet` (earlier versions).
    #[serde(default)]
    pub runs_by_part: bool,
    /// What this generation's own ingest counted (the rows it copied are not in these).
    pub counts: Counts,
    /// How long writing it took.
    #[serde(default)]
    pub seconds: f64,
}

/// The name of generation `number`'s folder under [`GENERATIONS_DIR`].
pub fn dir_name(number: u32) -> String {
    format!("{number:05}")
}

/// The folder of generation `number`, relative to the store's root.
pub fn relative_dir(number: u32) -> String {
    format!("{GENERATIONS_DIR}/{}", dir_name(number))
}

/// One generation's files, resolved against the store's directory.
#[derive(Debug, Clone)]
pub struct GenerationFiles {
    pub number: u32,
    /// Its folder (the store's root for a generation at the root).
    pub dir: PathBuf,
    /// Its parts' position among the store's parts.
    pub first_part: u32,
    pub parts: u32,
    /// Conversations of this generation a later generation holds a newer version of: their
    /// rows here are not read.
    pub superseded: HashSet<String>,
    /// Its runs lie in a file per part ([`GenerationFiles::runs_part_path`]), not in one
    /// `runs.parquet` ([`GenerationFiles::runs_path`]).
    pub runs_by_part: bool,
}

impl GenerationFiles {
    /// The one runs file of a generation written before runs were kept by part.
    pub fn runs_path(&self) -> PathBuf {
        self.dir.join("runs.parquet")
    }

    /// The runs file of part `local` (the generation's number) of a generation that keeps
    /// runs by part.
    pub fn runs_part_path(&self, local: u32) -> PathBuf {
        self.dir.join(super::write::runs_part_name(local))
    }

    /// Every runs file of the generation.
    pub fn runs_files(&self) -> Vec<PathBuf> {
        match self.runs_by_part {
            true => (0..self.parts).map(|p| self.runs_part_path(p)).collect(),
            false => vec![self.runs_path()],
        }
    }

    pub fn part_path(&self, local: u32) -> PathBuf {
        self.dir
            .join("events")
            .join(super::write::part_file_name(local))
    }

    pub fn quarantine_path(&self) -> PathBuf {
        self.dir.join("quarantine.jsonl")
    }
}

/// The generations a manifest lists, or the one at the root of a manifest without the list
/// (its runs by part from store schema 10 on).
pub fn entries(manifest: &StoreManifest) -> Vec<GenerationEntry> {
    match &manifest.generations {
        Some(list) => list.clone(),
        None => vec![GenerationEntry {
            number: 0,
            dir: String::new(),
            parts: manifest.parts.len() as u32,
            first_input: 0,
            inputs: manifest.inputs.len() as u64,
            new_conversations: manifest.counts.conversations,
            counts: manifest.counts.clone(),
            runs_by_part: manifest.store_schema_version >= 10,
            ..GenerationEntry::default()
        }],
    }
}

/// The manifest's names of generation `entry`'s parts, in order.
pub fn part_names(entry: &GenerationEntry) -> Vec<String> {
    (0..entry.parts)
        .map(|p| {
            let name = format!("events/{}", super::write::part_file_name(p));
            if entry.dir.is_empty() {
                name
            } else {
                format!("{}/{name}", entry.dir)
            }
        })
        .collect()
}

/// The generations of the store at `dir`, in order, each with the conversations later ones
/// supersede. `Err` (kind `InvalidData`) says how the manifest does not describe a whole
/// store: its parts are not its generations' parts in order, a folder is not one of ours, or
/// a superseded list cannot be read.
pub fn resolve(dir: &Path, manifest: &StoreManifest) -> io::Result<Vec<GenerationFiles>> {
    let refuse = |why: String| not_whole(dir, why);
    let list = entries(manifest);
    let mut files: Vec<GenerationFiles> = Vec::with_capacity(list.len());
    let mut expected_parts: Vec<String> = Vec::new();
    for (i, entry) in list.iter().enumerate() {
        if i > 0 && entry.number <= list[i - 1].number {
            return Err(refuse(format!(
                "its manifest lists generation {} after generation {}",
                entry.number,
                list[i - 1].number
            )));
        }
        if !entry.dir.is_empty() && entry.dir != relative_dir(entry.number) {
            return Err(refuse(format!(
                "its manifest puts generation {} in {:?}, where {:?} belongs",
                entry.number,
                entry.dir,
                relative_dir(entry.number)
            )));
        }
        files.push(GenerationFiles {
            number: entry.number,
            dir: if entry.dir.is_empty() {
                dir.to_path_buf()
            } else {
                dir.join(&entry.dir)
            },
            first_part: expected_parts.len() as u32,
            parts: entry.parts,
            superseded: HashSet::new(),
            runs_by_part: entry.runs_by_part,
        });
        expected_parts.extend(part_names(entry));
    }
    if manifest.parts != expected_parts {
        let at = manifest
            .parts
            .iter()
            .zip(&expected_parts)
            .position(|(a, b)| a != b)
            .unwrap_or(manifest.parts.len().min(expected_parts.len()));
        return Err(refuse(
            match (manifest.parts.get(at), expected_parts.get(at)) {
                (Some(listed), Some(expected)) => {
                    format!(
                        "its manifest lists {listed:?} as part {at}, where {expected:?} belongs"
                    )
                }
                (None, Some(expected)) => {
                    format!("its manifest lists no part {at} ({expected:?} belongs there)")
                }
                (Some(listed), None) => {
                    format!("its manifest lists {listed:?}, which no generation holds")
                }
                (None, None) => "its manifest's parts do not match its generations".into(),
            },
        ));
    }
    // Each generation's list names conversations of earlier generations.
    for i in 0..files.len() {
        let path = files[i].dir.join(SUPERSEDED_FILE);
        for (number, conversation) in read_superseded(&path).map_err(|e| refuse(e.to_string()))? {
            let Some(older) = files[..i].iter_mut().find(|g| g.number == number) else {
                if number >= files[i].number {
                    return Err(refuse(format!(
                        "{} names generation {number}, which is not older than its own",
                        path.display()
                    )));
                }
                // A generation compacted away: nothing of it is read.
                continue;
            };
            older.superseded.insert(conversation);
        }
    }
    Ok(files)
}

/// The store at `dir` refused as not whole, saying why (kind `InvalidData`).
pub fn not_whole(dir: &Path, why: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} is not a whole store: {why}; ingest its inputs again",
            dir.display()
        ),
    )
}

/// One line of a generation's superseded list.
#[derive(Serialize, Deserialize)]
pub struct SupersededLine {
    pub conversation_id: String,
    /// The generation whose rows of it are superseded.
    pub generation: u32,
}

/// The (generation, conversation) pairs of a superseded list; none when the file is absent.
fn read_superseded(path: &Path) -> io::Result<Vec<(u32, String)>> {
    let file = match std::fs::File::open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(super::atomic::with_path(e, "cannot read", path)),
    };
    let mut out = Vec::new();
    for (n, line) in io::BufReader::new(file).lines().enumerate() {
        let line = line.map_err(|e| super::atomic::with_path(e, "cannot read", path))?;
        if line.trim().is_empty() {
            continue;
        }
        let parsed: SupersededLine = serde_json::from_str(&line).map_err(|e| {
            io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} line {}: {e}", path.display(), n + 1),
            )
        })?;
        out.push((parsed.generation, parsed.conversation_id));
    }
    Ok(out)
}

/// The current time as RFC 3339, UTC, to the second.
pub fn now_rfc3339() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

/// A new store's id: unique to the store, kept by every append and compaction (a corpus
/// records it, so its store is recognised after the store has grown).
pub fn new_store_id(out: &Path) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(std::process::id().to_le_bytes());
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    hash.update(nanos.to_le_bytes());
    hash.update(out.as_os_str().as_encoded_bytes());
    crate::source::hashing::hex(&hash.finalize()[..16])
}

/// Make `manifest`, a store's first, name its id and its one generation, at the root.
pub fn first_generation(manifest: &mut StoreManifest, out: &Path) {
    manifest.store_id = Some(new_store_id(out));
    manifest.generations = Some(vec![GenerationEntry {
        number: 0,
        dir: String::new(),
        parts: manifest.parts.len() as u32,
        first_input: 0,
        inputs: manifest.inputs.len() as u64,
        written_at: now_rfc3339(),
        new_conversations: manifest.counts.conversations,
        counts: manifest.counts.clone(),
        seconds: manifest.seconds,
        runs_by_part: true,
        ..GenerationEntry::default()
    }]);
}

/// Which generation an audit reads (`--generation N|last`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pick {
    Number(u32),
    Last,
}

impl Pick {
    /// `last`, or a generation's number.
    pub fn parse(text: &str) -> crate::error::Result<Pick> {
        match text.trim() {
            "last" => Ok(Pick::Last),
            t => t.parse().map(Pick::Number).map_err(|_| {
                crate::error::Error::Config(format!(
                    "{text:?} is not a generation: give its number (0, 1, ...) or `last`"
                ))
            }),
        }
    }

    /// The number picked, of a store whose last generation is `last`.
    pub fn number(self, last: u32) -> u32 {
        match self {
            Pick::Number(n) => n,
            Pick::Last => last,
        }
    }
}

/// Does `dir` look like a store: a manifest, and runs at the root or generations?
pub fn looks_like_store(dir: &Path) -> bool {
    dir.is_dir()
        && dir.join("manifest.json").is_file()
        && (dir.join("runs.parquet").is_file()
            || dir.join(super::write::RUNS_DIR).is_dir()
            || dir.join(GENERATIONS_DIR).is_dir())
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}
