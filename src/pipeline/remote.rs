//! Outputs in object storage and corpora read from it. An output URL (`s3://bucket/nights/
//! 2026-12-03/`) is written by running the local job into a temporary folder, then uploading
//! it with its manifest last, under a lock object that refuses a second writer; a prefix that
//! already holds objects is refused (nothing in a bucket is replaced or deleted). A corpus (or
//! a folder of nights) in a bucket is fetched whole into a temporary folder and read there.

use crate::error::Error;
use crate::source::object::{self, Prefix};
use std::io;
use std::path::{Path, PathBuf};

/// A folder of this process's under the system's temporary directory (`TMPDIR`), removed when
/// dropped.
pub struct TempFolder(PathBuf);

impl TempFolder {
    fn new(what: &str) -> io::Result<TempFolder> {
        static N: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!(".traceaudit-{what}-{}-{n}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", dir.display()))
        })?;
        Ok(TempFolder(dir))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// The output URL `out` as a summary names it: without the credentials or query it may carry.
pub fn shown(out: &Path) -> PathBuf {
    PathBuf::from(object::redacted(&out.to_string_lossy()))
}

/// Is `path` an object-storage URL?
pub fn is_url(path: &Path) -> bool {
    path.to_str().is_some_and(object::is_url)
}

/// Run `job` with a local folder in place of the output URL `out`, then upload what it wrote
/// (manifest last) to `out`. Refused before `job` runs when `out` holds objects or another run
/// holds its lock.
pub fn write_to_bucket<T>(out: &Path, job: impl FnOnce(&Path) -> io::Result<T>) -> io::Result<T> {
    let url = out.to_str().unwrap_or("");
    let prefix = Prefix::open(url)?;
    let lock = prefix.lock()?;
    let result = (|| {
        let found = prefix.objects()?;
        if let Some((rel, _)) = found.first() {
            return Err(io::Error::from(Error::Refused(format!(
                "{} already holds {} object(s) ({rel}, ...): an output in object storage \
                     is written to an empty prefix only, since objects in a bucket are not \
                     replaced; choose a new prefix (such as one per night)",
                prefix.shown(),
                found.len()
            ))));
        }
        let temp = TempFolder::new("out")?;
        let local = temp.path().join("output");
        let value = job(&local)?;
        prefix.upload(&local, "manifest.json")?;
        Ok(value)
    })();
    let released = lock.release();
    let value = result?;
    released?;
    Ok(value)
}

/// Run `job` (an append) on a local copy of the store at the output URL `out`, then upload what
/// it added, `manifest.json` last: the manifest is the commit point, so a reader of the bucket
/// sees the store before or after. All under the prefix's lock object; an empty prefix gets the
/// whole store `job` writes into a folder that does not exist yet. Objects the bucket holds are
/// never replaced or deleted, but for the manifest. Refused before `job` runs when the prefix
/// holds objects and no store's manifest, or another run holds the lock.
pub fn grow_in_bucket<T>(
    out: &Path,
    job: impl FnOnce(&Path, Grown) -> io::Result<T>,
) -> io::Result<T> {
    let prefix = Prefix::open(out.to_str().unwrap_or(""))?;
    let lock = prefix.lock()?;
    let result = grow_locked(&prefix, out, job);
    let released = lock.release();
    let value = result?;
    released?;
    Ok(value)
}

fn grow_locked<T>(
    prefix: &Prefix,
    out: &Path,
    job: impl FnOnce(&Path, Grown) -> io::Result<T>,
) -> io::Result<T> {
    let listed: std::collections::HashMap<String, object::Remote> =
        prefix.objects()?.into_iter().collect();
    if listed.is_empty() {
        let temp = TempFolder::new("out")?;
        let local = temp.path().join("store");
        let value = job(&local, Grown::Local).map_err(|e| named_as(e, &local, prefix.shown()))?;
        prefix.upload(&local, "manifest.json")?;
        return Ok(value);
    }
    let Some((local, _copy, parts)) = fetched_store_files(out, None, false)? else {
        let mut keys: Vec<&String> = listed.keys().collect();
        keys.sort();
        return Err(io::Error::from(Error::Refused(format!(
            "{} holds {} object(s) ({}, ...) and no store's manifest.json: an append adds to a \
             store traceaudit wrote there, or writes a new one to an empty prefix",
            prefix.shown(),
            keys.len(),
            keys[0]
        ))));
    };
    let mut fetched: std::collections::HashSet<String> =
        object::relative_files(&local)?.into_iter().collect();
    let manifest_before = std::fs::read(local.join("manifest.json"))?;
    let parts = std::sync::Arc::new(parts);
    let value = job(&local, Grown::Fetching(parts.clone()))
        .map_err(|e| named_as(e, &local, prefix.shown()))?;
    fetched.extend(
        parts
            .fetched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .drain(..),
    );
    let mut added = Vec::new();
    for rel in object::relative_files(&local)? {
        if fetched.contains(&rel) {
            let size = std::fs::metadata(local.join(&rel))?.len();
            if rel != "manifest.json" && listed.get(&rel).is_some_and(|r| r.size != size) {
                return Err(io::Error::other(format!(
                    "the append changed {rel} of {}, and objects in a bucket are not replaced; \
                     nothing was written",
                    prefix.shown()
                )));
            }
        } else if listed.contains_key(&rel) {
            return Err(io::Error::from(Error::Refused(format!(
                "{} holds {rel}, which its manifest does not name (left by an append stopped \
                 before its commit?), and objects in a bucket are not replaced: delete the \
                 objects of that generation, then append again; nothing was written",
                prefix.shown()
            ))));
        } else {
            added.push(rel);
        }
    }
    let manifest_after = std::fs::read(local.join("manifest.json"))?;
    if added.is_empty() && manifest_after == manifest_before {
        return Ok(value);
    }
    added.push("manifest.json".to_string());
    prefix.upload_files(&local, added, "manifest.json")?;
    Ok(value)
}

/// What [`grow_in_bucket`]'s job is given beside the local folder.
pub(crate) enum Grown {
    /// A local folder: the store there holds every file, or (a new store) the folder does not
    /// exist yet.
    Local,
    /// The folder holds the bucket's store without its events parts, which the store opened
    /// with this source fetches as it reads them.
    Fetching(std::sync::Arc<BucketParts>),
}

impl Grown {
    /// The store in `dir` (the job's folder), opened to fetch what it lacks from the bucket.
    pub(crate) fn open(&self, dir: &Path) -> io::Result<crate::store::Store> {
        match self {
            Grown::Local => crate::store::Store::open(dir),
            Grown::Fetching(parts) => crate::store::Store::open_fetching(dir, parts.clone()),
        }
    }

    /// How many events parts were fetched so far, of how many the bucket's store holds.
    pub(crate) fn parts_fetched(&self) -> Option<(u64, u64)> {
        match self {
            Grown::Local => None,
            Grown::Fetching(parts) => {
                let fetched = parts.fetched.lock().unwrap_or_else(|e| e.into_inner());
                Some((fetched.len() as u64, parts.objects.len() as u64))
            }
        }
    }
}

/// `e` with the local copy's path `local` shown as the URL it is a copy of.
fn named_as(e: io::Error, local: &Path, shown: &str) -> io::Error {
    let from = local.display().to_string();
    let e = Error::from(e);
    let text = e.to_string();
    if !text.contains(&from) {
        return e.into();
    }
    let text = text.replace(&from, shown.trim_end_matches('/'));
    match e {
        Error::Config(_) => Error::Config(text).into(),
        Error::Malformed(_) => Error::Malformed(text).into(),
        Error::Refused(_) => Error::Refused(text).into(),
        Error::Io(io) => io::Error::new(io.kind(), text),
    }
}

/// The manifest of the store at the URL `input`, fetched alone into a temporary folder (which
/// lives as long as the returned one); `None` when the prefix holds no `manifest.json`.
pub fn fetched_manifest(input: &Path) -> io::Result<Option<(PathBuf, TempFolder)>> {
    let prefix = Prefix::open(&as_prefix(input))?;
    let Some((_, manifest)) = prefix
        .objects()?
        .into_iter()
        .find(|(rel, _)| rel == "manifest.json")
    else {
        return Ok(None);
    };
    let temp = TempFolder::new("manifest")?;
    let local = temp.path().join("store");
    std::fs::create_dir_all(&local)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", local.display())))?;
    object::fetch(&manifest, &local.join("manifest.json"))?;
    Ok(Some((local, temp)))
}

/// The URL `path` as a prefix (ending in `/`): a corpus, store or folder of nights is read as
/// the objects under it, named with or without the slash.
fn as_prefix(path: &Path) -> String {
    let url = path.to_str().unwrap_or("");
    if url.ends_with('/') {
        url.to_string()
    } else {
        format!("{url}/")
    }
}

/// A local copy of the corpus, store or folder of nights at `path`: `path` itself, or for a URL
/// a fetched copy that lives as long as the returned folder.
#[cfg(feature = "reports")]
pub fn readable(path: &Path) -> io::Result<(PathBuf, Option<TempFolder>)> {
    if !is_url(path) {
        return Ok((path.to_path_buf(), None));
    }
    let url = as_prefix(path);
    let prefix = Prefix::open(&url)?;
    let temp = TempFolder::new("read")?;
    // The copy keeps the prefix's own name: reports name nights and corpora by their folder.
    let name = url
        .trim_end_matches('/')
        .rsplit('/')
        .next()
        .filter(|n| !n.is_empty() && *n != "." && *n != "..")
        .unwrap_or("corpus");
    let local = temp.path().join(name);
    std::fs::create_dir_all(&local)?;
    if prefix.download(&local)? == 0 {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} holds no objects", prefix.shown()),
        ));
    }
    Ok((local, Some(temp)))
}

/// A store in object storage (a prefix holding a store's `manifest.json`), fetched for an
/// audit: its manifest, then the files it names of every generation, or of generation `pick`
/// only (with the superseded lists of the others). `None` when the prefix holds no store's
/// manifest (its objects are then raw inputs). The copy lives as long as the returned folder.
pub fn fetched_store(
    input: &Path,
    pick: Option<crate::store::generations::Pick>,
) -> io::Result<Option<(PathBuf, TempFolder)>> {
    Ok(fetched_store_files(input, pick, true)?.map(|(local, temp, _)| (local, temp)))
}

/// What [`fetched_store`] fetches, but the events parts when `events` is false: those are
/// checked to be in the bucket, and left for [`BucketParts`] (returned with the copy) to fetch
/// when they are read.
fn fetched_store_files(
    input: &Path,
    pick: Option<crate::store::generations::Pick>,
    events: bool,
) -> io::Result<Option<(PathBuf, TempFolder, BucketParts)>> {
    use crate::store::generations;
    let url = as_prefix(input);
    let prefix = Prefix::open(&url)?;
    let objects: std::collections::HashMap<String, object::Remote> =
        prefix.objects()?.into_iter().collect();
    let Some(manifest_object) = objects.get("manifest.json") else {
        return Ok(None);
    };
    let temp = TempFolder::new("store")?;
    let local = temp.path().join("store");
    std::fs::create_dir_all(&local)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", local.display())))?;
    object::fetch(manifest_object, &local.join("manifest.json"))?;
    let Ok(manifest) = crate::store::StoreManifest::read(&local) else {
        return Ok(None);
    };
    let list = generations::entries(&manifest);
    let wanted_number = pick.map(|p| p.number(list.last().map_or(0, |g| g.number)));
    let mut wanted: Vec<String> = Vec::new();
    let mut later: std::collections::HashSet<String> = std::collections::HashSet::new();
    for entry in &list {
        let at = |name: &str| {
            if entry.dir.is_empty() {
                name.to_string()
            } else {
                format!("{}/{name}", entry.dir)
            }
        };
        let superseded = at(generations::SUPERSEDED_FILE);
        if objects.contains_key(&superseded) {
            wanted.push(superseded);
        }
        if wanted_number.is_none_or(|n| n == entry.number) {
            match entry.runs_by_part {
                true => wanted
                    .extend((0..entry.parts).map(|p| at(&crate::store::write::runs_part_name(p)))),
                false => wanted.push(at("runs.parquet")),
            }
            let parts = generations::part_names(entry);
            if !events {
                later.extend(parts.iter().cloned());
            }
            wanted.extend(parts);
        }
    }
    for rel in &wanted {
        if rel
            .split('/')
            .any(|p| p == ".." || p == "." || p.is_empty())
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{url} lists {rel:?}, which is not a file of a store"),
            ));
        }
        let Some(remote) = objects.get(rel) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a whole store: its manifest lists {rel}, which the bucket does \
                     not hold",
                    prefix.shown()
                ),
            ));
        };
        if !later.contains(rel) {
            fetch_into(remote, &local.join(rel))?;
        }
    }
    let parts = BucketParts {
        shown: prefix.shown().to_string(),
        objects: objects
            .into_iter()
            .filter(|(rel, _)| later.contains(rel))
            .collect(),
        fetched: std::sync::Mutex::new(Vec::new()),
    };
    Ok(Some((local, temp, parts)))
}

fn fetch_into(remote: &object::Remote, to: &Path) -> io::Result<()> {
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            io::Error::new(e.kind(), format!("cannot create {}: {e}", parent.display()))
        })?;
    }
    object::fetch(remote, to).map(|_| ())
}

/// The events parts of a store in a bucket that its local copy lacks, fetched when the store
/// reads them ([`crate::store::Store::open_fetching`]); which ones were is kept.
pub(crate) struct BucketParts {
    shown: String,
    objects: std::collections::HashMap<String, object::Remote>,
    fetched: std::sync::Mutex<Vec<String>>,
}

impl crate::store::read::PartSource for BucketParts {
    fn fetch(&self, rel: &str, to: &Path) -> io::Result<()> {
        let Some(remote) = self.objects.get(rel) else {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} holds no {rel} to read", self.shown),
            ));
        };
        fetch_into(remote, to)?;
        self.fetched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(rel.to_string());
        Ok(())
    }
}
