//! Output directories that appear complete or not at all, and that never cost a user a file.
//!
//! Everything is written into a sibling staging directory (`NAME.tmp-<pid>`, marked as ours by a
//! `.traceaudit-staging` file); `commit` renames it into place. An interrupted run leaves only
//! the staging directory, which has no manifest and does not carry the final name, so nothing
//! looks complete; the next run for the same output removes it, and SIGINT or SIGTERM remove it
//! at once (see [`remove_staging_on_signal`]).
//!
//! Replacing an existing output swaps the two directories in one step where the file system can
//! (`renameat2` with `RENAME_EXCHANGE` on Linux), so the final name always names a complete
//! output. Elsewhere it takes two renames, the old output moving aside to `NAME.old-<pid>` first;
//! a run killed between them leaves the final name empty, and the next run for the same output
//! repairs that before anything else, with the lock held: it moves the finished new copy into
//! place (roll forward) or, when there is none, the old copy back (roll back). A previous output
//! is deleted only once a complete one holds the final name; while it is being deleted it
//! carries a `.traceaudit-discard` file, so a deletion cut short is finished by the next run.
//!
//! An existing directory at the target is replaced only when it is a traceaudit output of the
//! same kind to its last entry: its manifest says so, and every file and folder in it is one the
//! [`Layout`] names. Anything else (a web app with its own `manifest.json`, a corpus a user added
//! notes to, a symbolic link) is refused with the path and the reason before anything is read.
//!
//! Two runs writing the same output at once would race on the final renames, so each holds an
//! advisory lock on `.NAME.traceaudit-lock` beside the target for as long as it writes; the
//! second fails at once with a message that says so.

use crate::error::Error;
use serde_json::Value;
use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// The file that marks a staging directory as one of ours (removed before the commit).
const STAGING_MARKER: &str = ".traceaudit-staging";

/// The file that marks a replaced output as being deleted (it is removed last).
const DISCARD_MARKER: &str = ".traceaudit-discard";

/// Entries an ownership check looks at before it gives up and refuses: a traceaudit output
/// holds a few dozen files, so a directory past this is somebody else's.
const MAX_ENTRIES: usize = 100_000;

/// What a traceaudit output directory holds, so that an existing one can be told apart from a
/// directory that merely looks like one.
#[derive(Debug, Clone)]
pub struct Layout {
    /// What the output is called in messages ("store", "corpus").
    pub what: &'static str,
    /// The file whose content claims the directory (`manifest.json`).
    pub manifest: &'static str,
    /// Does the manifest's JSON say this is such an output?
    pub claims: fn(&Value) -> bool,
    /// Every entry the output may hold, as relative paths with `/`: a name ending in `/` is a
    /// folder; one `*` in a name matches any run of characters within that name.
    pub entries: Vec<String>,
}

impl Layout {
    fn allows(&self, rel: &str, is_dir: bool) -> bool {
        self.entries.iter().any(|pattern| {
            let (pattern, wants_dir) = match pattern.strip_suffix('/') {
                Some(p) => (p, true),
                None => (pattern.as_str(), false),
            };
            wants_dir == is_dir && path_matches(pattern, rel)
        })
    }

    /// Is `dir` an output of this layout, to its last entry? `Err` says why not.
    pub fn owns(&self, dir: &Path) -> crate::error::Result<()> {
        let manifest = dir.join(self.manifest);
        let text = std::fs::read(&manifest)
            .map_err(|_| Error::Refused(format!("it has no {}", self.manifest)))?;
        let value: Value = serde_json::from_slice(&text).map_err(|_| {
            Error::Refused(format!(
                "its {} is not a traceaudit manifest",
                self.manifest
            ))
        })?;
        if !(self.claims)(&value) {
            return Err(Error::Refused(format!(
                "its {} does not describe a traceaudit {}",
                self.manifest, self.what
            )));
        }
        let mut seen = 0usize;
        self.check_entries(dir, "", &mut seen)
    }

    fn check_entries(
        &self,
        dir: &Path,
        prefix: &str,
        seen: &mut usize,
    ) -> crate::error::Result<()> {
        let entries = std::fs::read_dir(dir)
            .map_err(|e| Error::Refused(format!("{} cannot be listed: {e}", dir.display())))?;
        for entry in entries {
            let entry = entry
                .map_err(|e| Error::Refused(format!("{} cannot be listed: {e}", dir.display())))?;
            *seen += 1;
            if *seen > MAX_ENTRIES {
                return Err(Error::Refused(format!(
                    "it holds more than {MAX_ENTRIES} entries, more than a traceaudit {} has",
                    self.what
                )));
            }
            let name = entry.file_name();
            let name = name.to_string_lossy();
            let rel = format!("{prefix}{name}");
            let ty = entry
                .file_type()
                .map_err(|e| Error::Refused(format!("{rel} cannot be read: {e}")))?;
            if ty.is_symlink() {
                return Err(Error::Refused(format!(
                    "it holds a symbolic link, {rel}, that traceaudit did not write"
                )));
            }
            if !ty.is_dir() && !ty.is_file() {
                return Err(Error::Refused(format!(
                    "it holds {rel}, which is not a regular file"
                )));
            }
            if !self.allows(&rel, ty.is_dir()) {
                return Err(Error::Refused(format!(
                    "it holds {rel}{}, which a traceaudit {} does not write",
                    if ty.is_dir() { "/" } else { "" },
                    self.what
                )));
            }
            if ty.is_dir() {
                self.check_entries(&entry.path(), &format!("{rel}/"), seen)?;
            }
        }
        Ok(())
    }
}

/// Match `rel` against `pattern`, component by component; a component of the pattern may hold
/// one `*`.
fn path_matches(pattern: &str, rel: &str) -> bool {
    let mut p = pattern.split('/');
    let mut r = rel.split('/');
    loop {
        match (p.next(), r.next()) {
            (None, None) => return true,
            (Some(pc), Some(rc)) if component_matches(pc, rc) => {}
            _ => return false,
        }
    }
}

fn component_matches(pattern: &str, name: &str) -> bool {
    match pattern.split_once('*') {
        None => pattern == name,
        Some((head, tail)) => {
            name.len() >= head.len() + tail.len() && name.starts_with(head) && name.ends_with(tail)
        }
    }
}

/// Staging directories and lock files of this process, removed by the signal handler.
static LIVE_STAGING: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());
static LIVE_LOCKS: Mutex<Vec<PathBuf>> = Mutex::new(Vec::new());

/// On SIGINT or SIGTERM, remove the staging directories this process is writing and exit with
/// 130 (SIGINT's conventional status), so an interrupted run leaves nothing behind. Call once,
/// from the binary: a library must not take over a host program's signals.
pub fn remove_staging_on_signal() {
    let _ = ctrlc::set_handler(|| {
        let dirs = LIVE_STAGING.lock().map(|d| d.clone()).unwrap_or_default();
        for dir in dirs.iter().rev() {
            // Workers may still be creating files in it: try a few times.
            for _ in 0..5 {
                if std::fs::remove_dir_all(dir).is_ok() || !dir.exists() {
                    break;
                }
            }
        }
        for lock in LIVE_LOCKS.lock().map(|l| l.clone()).unwrap_or_default() {
            let _ = std::fs::remove_file(lock);
        }
        eprintln!("traceaudit: interrupted; nothing was written");
        std::process::exit(130);
    });
}

/// An advisory lock on one output path, held while it is written.
struct OutputLock {
    path: PathBuf,
    file: File,
}

impl OutputLock {
    fn take(parent: &Path, name: &str, target: &Path) -> io::Result<OutputLock> {
        let path = parent.join(format!(".{name}.traceaudit-lock"));
        // The lock file is removed when a run ends; a run that opened it just before that
        // would hold a lock on a file nobody else can find, so the lock only counts when the
        // path still names the locked file.
        for _ in 0..16 {
            let file = std::fs::OpenOptions::new()
                .create(true)
                .truncate(false)
                .write(true)
                .open(&path)
                .map_err(|e| with_path(e, "cannot create the lock file", &path))?;
            match file.try_lock() {
                Ok(()) => {}
                Err(std::fs::TryLockError::WouldBlock) => {
                    return Err(io::Error::new(
                        io::ErrorKind::ResourceBusy,
                        format!(
                            "another traceaudit run is writing {} (it holds {}); wait for it \
                             to finish or choose another --out",
                            target.display(),
                            path.display()
                        ),
                    ))
                }
                Err(std::fs::TryLockError::Error(e)) => {
                    return Err(with_path(e, "cannot lock", &path))
                }
            }
            if same_file(&file, &path) {
                if let Ok(mut live) = LIVE_LOCKS.lock() {
                    live.push(path.clone());
                }
                return Ok(OutputLock { path, file });
            }
        }
        Err(io::Error::other(format!(
            "cannot take the lock {}: it keeps being replaced",
            path.display()
        )))
    }
}

#[cfg(unix)]
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

#[cfg(not(unix))]
fn same_file(_file: &File, path: &Path) -> bool {
    path.exists()
}

impl Drop for OutputLock {
    fn drop(&mut self) {
        // Removed while still held, so no other run can have locked this file in between.
        let _ = std::fs::remove_file(&self.path);
        if let Ok(mut live) = LIVE_LOCKS.lock() {
            live.retain(|p| p != &self.path);
        }
        let _ = self.file.unlock();
    }
}

/// The lock [`AtomicDir`] takes on an output, held for as long as this lives: a run that
/// changes an output in place (an append to a store) shuts out the runs that would write it.
pub struct HeldLock {
    _lock: OutputLock,
}

/// Take the lock on the output directory `target` (which must have a name of its own).
pub fn lock_output(target: &Path) -> io::Result<HeldLock> {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{} names no directory of its own", target.display()),
            )
        })?;
    let parent = target
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    Ok(HeldLock {
        _lock: OutputLock::take(parent, &name, target)?,
    })
}

/// An I/O error that names the path it happened at (a bare "Read-only file system" or "No
/// space left on device" does not say where).
pub fn with_path(e: io::Error, doing: &str, path: &Path) -> io::Error {
    io::Error::new(e.kind(), format!("{doing} {}: {e}", path.display()))
}

pub struct AtomicDir {
    staging: PathBuf,
    target: PathBuf,
    committed: bool,
    _lock: OutputLock,
}

impl AtomicDir {
    /// Prepare to write `target` as an output of `layout`. Fails, before anything is written,
    /// when `target` exists and is not an empty directory or an output of `layout` to its last
    /// entry, or when another run is writing it. Staging directories that earlier runs for the
    /// same target left behind (killed before they could clean up) are removed.
    pub fn create(target: &Path, layout: &Layout) -> io::Result<AtomicDir> {
        let refuse = |why: String| {
            io::Error::from(Error::Refused(format!(
                "{} exists and is not a traceaudit {} that can be replaced ({why}); \
                     refusing to touch it: choose another --out, or remove it yourself",
                target.display(),
                layout.what
            )))
        };
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .filter(|n| n != "." && n != "..")
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::InvalidInput,
                    format!(
                        "{} names no directory of its own; give the output a name",
                        target.display()
                    ),
                )
            })?;
        // The reports read outputs through Polars, which takes UTF-8 paths only: an output
        // they could not read back is refused before it is written.
        let absolute = std::path::absolute(target).unwrap_or_else(|_| target.to_path_buf());
        if absolute.to_str().is_none() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} is not a UTF-8 path: `report`, `diff`, `trend` and `explain` could not \
                     read a {} there; choose an --out whose path is UTF-8",
                    absolute.display(),
                    layout.what
                ),
            ));
        }
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."))
            .to_path_buf();
        std::fs::create_dir_all(&parent)
            .map_err(|e| with_path(e, "cannot create the folder", &parent))?;
        let lock = OutputLock::take(&parent, &name, target)?;
        recover(&parent, &name, target, layout)?;
        match std::fs::symlink_metadata(target) {
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => return Err(with_path(e, "cannot read", target)),
            Ok(meta) if meta.file_type().is_symlink() => {
                return Err(refuse("it is a symbolic link".into()))
            }
            Ok(meta) if !meta.is_dir() => return Err(refuse("it is a file".into())),
            Ok(_) => {
                let empty = std::fs::read_dir(target)
                    .map_err(|e| with_path(e, "cannot list", target))?
                    .next()
                    .is_none();
                if !empty {
                    layout.owns(target).map_err(|why| refuse(why.to_string()))?;
                }
            }
        }
        let staging = parent.join(format!("{name}.tmp-{}", std::process::id()));
        if staging.exists() {
            if !staging.join(STAGING_MARKER).exists() {
                return Err(io::Error::from(Error::Refused(format!(
                    "{} exists and is not a traceaudit staging directory; refusing to \
                         touch it",
                    staging.display()
                ))));
            }
            std::fs::remove_dir_all(&staging)
                .map_err(|e| with_path(e, "cannot remove the old staging directory", &staging))?;
        }
        std::fs::create_dir(&staging)
            .map_err(|e| with_path(e, "cannot create the staging directory", &staging))?;
        std::fs::write(staging.join(STAGING_MARKER), b"")
            .map_err(|e| with_path(e, "cannot write in", &staging))?;
        if let Ok(mut live) = LIVE_STAGING.lock() {
            live.push(staging.clone());
        }
        Ok(AtomicDir {
            staging,
            target: target.to_path_buf(),
            committed: false,
            _lock: lock,
        })
    }

    /// Where to write files now.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Move the finished directory into place, replacing a previous output, which is deleted
    /// only once the new one holds the final name.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        std::fs::remove_file(self.staging.join(STAGING_MARKER))
            .map_err(|e| with_path(e, "cannot finish", &self.staging))?;
        if std::fs::symlink_metadata(&self.target).is_ok() {
            let aside = aside_path(&self.target, std::process::id());
            if exchange(&self.staging, &self.target)? {
                // The staging name now holds the previous output.
                std::fs::rename(&self.staging, &aside).map_err(|e| {
                    with_path(e, "cannot move the previous output aside", &self.staging)
                })?;
            } else {
                std::fs::rename(&self.target, &aside).map_err(|e| {
                    with_path(e, "cannot move the previous output aside", &self.target)
                })?;
                std::fs::rename(&self.staging, &self.target)
                    .map_err(|e| with_path(e, "cannot move the output into place", &self.target))?;
            }
            self.committed = true;
            self.forget_staging();
            discard(&aside)?;
        } else {
            std::fs::rename(&self.staging, &self.target)
                .map_err(|e| with_path(e, "cannot move the output into place", &self.target))?;
            self.committed = true;
            self.forget_staging();
        }
        Ok(self.target.clone())
    }

    fn forget_staging(&self) {
        if let Ok(mut live) = LIVE_STAGING.lock() {
            live.retain(|d| d != &self.staging);
        }
    }
}

impl Drop for AtomicDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
            self.forget_staging();
        }
    }
}

/// Is the process `pid` gone? Without `/proc` nobody can tell, and a directory is kept.
fn process_gone(pid: u32) -> bool {
    Path::new("/proc/self").exists() && !Path::new(&format!("/proc/{pid}")).exists()
}

/// Where a previous output waits while it is replaced by the run `pid`.
fn aside_path(target: &Path, pid: u32) -> PathBuf {
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    target.with_file_name(format!("{name}.old-{pid}"))
}

/// Swap `a` and `b` in one step. `Ok(false)` when the file system cannot, and nothing moved.
#[cfg(target_os = "linux")]
fn exchange(a: &Path, b: &Path) -> io::Result<bool> {
    use std::ffi::CString;
    use std::os::unix::ffi::OsStrExt;
    let c = |p: &Path| {
        CString::new(p.as_os_str().as_bytes())
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte"))
    };
    let (ca, cb) = (c(a)?, c(b)?);
    // SAFETY: both are NUL-terminated paths that live across the call.
    let rc = unsafe {
        libc::renameat2(
            libc::AT_FDCWD,
            ca.as_ptr(),
            libc::AT_FDCWD,
            cb.as_ptr(),
            libc::RENAME_EXCHANGE,
        )
    };
    if rc == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    match e.raw_os_error() {
        // The kernel or the file system does not offer the exchange.
        Some(libc::EINVAL) | Some(libc::ENOSYS) | Some(libc::EOPNOTSUPP) => Ok(false),
        _ => Err(with_path(e, "cannot move the output into place", b)),
    }
}

#[cfg(not(target_os = "linux"))]
fn exchange(_a: &Path, _b: &Path) -> io::Result<bool> {
    Ok(false)
}

/// Delete a replaced output: marked first, then its entries, the mark last, so a deletion that
/// is cut short is recognised and finished by the next run.
fn discard(dir: &Path) -> io::Result<()> {
    let failed = |e| with_path(e, "cannot remove the previous output", dir);
    std::fs::write(dir.join(DISCARD_MARKER), b"").map_err(failed)?;
    for entry in std::fs::read_dir(dir).map_err(failed)? {
        let entry = entry.map_err(failed)?;
        if entry.file_name() == DISCARD_MARKER {
            continue;
        }
        let path = entry.path();
        if entry.file_type().map_err(failed)?.is_dir() {
            std::fs::remove_dir_all(&path).map_err(failed)?;
        } else {
            std::fs::remove_file(&path).map_err(failed)?;
        }
    }
    std::fs::remove_file(dir.join(DISCARD_MARKER)).map_err(failed)?;
    std::fs::remove_dir(dir).map_err(failed)
}

/// What a run that is gone left beside `target`.
struct Leftover {
    path: PathBuf,
    state: LeftoverState,
}

#[derive(PartialEq)]
enum LeftoverState {
    /// A staging directory still being written: never complete.
    Unfinished,
    /// A finished output that did not reach the final name (a commit cut short), or the previous
    /// output that a swap left under the staging name.
    Finished,
    /// A previous output moved aside during a commit.
    Aside,
    /// A previous output whose deletion was cut short.
    Discarding,
}

/// The leftovers of runs for `name` in `parent` whose process is gone, and that are ours.
fn leftovers(parent: &Path, name: &str, layout: &Layout) -> Vec<Leftover> {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let file_name = entry.file_name();
        let file_name = file_name.to_string_lossy();
        let Some(rest) = file_name.strip_prefix(name) else {
            continue;
        };
        let (pid, aside) = if let Some(pid) = rest.strip_prefix(".tmp-") {
            (pid, false)
        } else if let Some(pid) = rest.strip_prefix(".old-") {
            (pid, true)
        } else {
            continue;
        };
        let Ok(pid) = pid.parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() || !process_gone(pid) {
            continue;
        }
        if !entry.file_type().is_ok_and(|t| t.is_dir()) {
            continue;
        }
        let path = entry.path();
        let state = if path.join(DISCARD_MARKER).exists() {
            LeftoverState::Discarding
        } else if !aside && path.join(STAGING_MARKER).exists() {
            LeftoverState::Unfinished
        } else if layout.owns(&path).is_err() {
            // Not something traceaudit wrote whole: kept.
            continue;
        } else if aside {
            LeftoverState::Aside
        } else {
            LeftoverState::Finished
        };
        found.push(Leftover { path, state });
    }
    // The newest first among equals, so a roll forward takes the last finished output.
    found.sort_by_key(|l| {
        std::cmp::Reverse(std::fs::metadata(&l.path).and_then(|m| m.modified()).ok())
    });
    found
}

/// Put right what killed runs for the same target left beside it, with the target's lock held
/// (so no live run is writing them): an empty final name gets the finished new copy (roll
/// forward) or else the copy moved aside (roll back); then everything else that run left is
/// deleted, now that the final name holds a complete output (or none was ever there).
fn recover(parent: &Path, name: &str, target: &Path, layout: &Layout) -> io::Result<()> {
    let found = leftovers(parent, name, layout);
    if found.is_empty() {
        return Ok(());
    }
    if std::fs::symlink_metadata(target).is_err() {
        let restore = found
            .iter()
            .find(|l| l.state == LeftoverState::Finished)
            .or_else(|| found.iter().find(|l| l.state == LeftoverState::Aside));
        if let Some(l) = restore {
            std::fs::rename(&l.path, target).map_err(|e| {
                with_path(
                    e,
                    &format!(
                        "cannot restore the output a killed run left at {} to",
                        l.path.display()
                    ),
                    target,
                )
            })?;
        }
    }
    for l in &found {
        if !l.path.exists() {
            continue;
        }
        match l.state {
            LeftoverState::Unfinished => {
                let _ = std::fs::remove_dir_all(&l.path);
            }
            LeftoverState::Finished | LeftoverState::Aside | LeftoverState::Discarding => {
                // Only once a complete output holds the final name.
                if layout.owns(target).is_ok() || l.state == LeftoverState::Discarding {
                    discard(&l.path)?;
                }
            }
        }
    }
    Ok(())
}

/// Write a file inside an output directory via a temporary name and a rename.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes).map_err(|e| with_path(e, "cannot write", &tmp))?;
    std::fs::rename(&tmp, path).map_err(|e| with_path(e, "cannot write", path))
}

/// Does `out` overlap any of `inputs`: is it one of them, inside one, or does it hold one? Such
/// an output would be written over what the run reads (or, replaced, delete it), so it is
/// refused before anything is read. Paths are compared after resolving links.
pub fn refuse_overlap(out: &Path, inputs: &[PathBuf]) -> io::Result<()> {
    fn url(p: &Path) -> Option<&str> {
        p.to_str().filter(|s| crate::source::object::is_url(s))
    }
    if let Some(out_url) = url(out) {
        return refuse_url_overlap(out_url, inputs);
    }
    let out_abs = resolved(out);
    for input in inputs {
        if input.as_os_str() == "-" || url(input).is_some() {
            continue;
        }
        if let Some(how) = relation(&out_abs, &resolved(input)) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "the output {} {how} the input {}: writing it would overwrite or delete \
                     what this run reads; choose an --out outside every input",
                    out.display(),
                    input.display()
                ),
            ));
        }
    }
    Ok(())
}

/// [`refuse_overlap`] for an output in object storage: against the inputs in object storage,
/// compared as prefixes (scheme, bucket and path, without credentials or query). An output
/// inside an input prefix would be read back as input by the next run over that prefix.
fn refuse_url_overlap(out: &str, inputs: &[PathBuf]) -> io::Result<()> {
    // Compared by path components, so a trailing `/` makes no difference.
    let shown = |url: &str| {
        let shown = crate::source::object::redacted(url);
        shown.trim_end_matches('/').to_string()
    };
    let out_shown = shown(out);
    for input in inputs.iter().filter_map(|p| p.to_str()) {
        if !crate::source::object::is_url(input) {
            continue;
        }
        let input_shown = shown(input);
        if let Some(how) = relation(Path::new(&out_shown), Path::new(&input_shown)) {
            return Err(io::Error::from(Error::Refused(format!(
                "the output {out_shown} {how} the input {input_shown}: what this run writes \
                 would be read as input by the next run over that prefix; choose an --out \
                 outside every input"
            ))));
        }
    }
    Ok(())
}

/// How the output `out` overlaps the input `input` (both absolute, or both URLs as paths),
/// compared by path components: it is the input, lies inside it, or contains it.
fn relation(out: &Path, input: &Path) -> Option<&'static str> {
    if out == input {
        Some("is")
    } else if out.starts_with(input) {
        Some("lies inside")
    } else if input.starts_with(out) {
        Some("contains")
    } else {
        None
    }
}

/// `path` made absolute with its links resolved, as far as it exists; the rest (an output not
/// yet written) is appended with `.` and `..` folded.
fn resolved(path: &Path) -> PathBuf {
    let absolute = if path.is_absolute() {
        path.to_path_buf()
    } else {
        std::env::current_dir()
            .unwrap_or_else(|_| PathBuf::from("/"))
            .join(path)
    };
    let mut existing = absolute.clone();
    let mut rest: Vec<std::ffi::OsString> = Vec::new();
    loop {
        if let Ok(real) = existing.canonicalize() {
            let mut out = real;
            for part in rest.iter().rev() {
                if part == ".." {
                    out.pop();
                } else if part != "." {
                    out.push(part);
                }
            }
            return out;
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => {
                // Only `..` or the root are left unresolved: fold lexically.
                let mut out = PathBuf::new();
                for c in absolute.components() {
                    match c {
                        std::path::Component::ParentDir => {
                            out.pop();
                        }
                        std::path::Component::CurDir => {}
                        c => out.push(c),
                    }
                }
                return out;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn test_layout() -> Layout {
        Layout {
            what: "store",
            manifest: "manifest.json",
            claims: |v| v.get("engine").and_then(Value::as_str) == Some("traceaudit"),
            entries: vec![
                "manifest.json".into(),
                "runs.parquet".into(),
                "events/".into(),
                "events/part-*.parquet".into(),
            ],
        }
    }

    const OURS: &str = r#"{"engine":"traceaudit"}"#;

    #[test]
    fn commit_replaces_only_our_outputs() {
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let a = AtomicDir::create(&target, &layout).unwrap();
        std::fs::write(a.path().join("manifest.json"), OURS).unwrap();
        std::fs::create_dir(a.path().join("events")).unwrap();
        std::fs::write(a.path().join("events/part-00000.parquet"), "x").unwrap();
        a.commit().unwrap();
        assert!(target.join("manifest.json").exists());
        assert!(!target.join(STAGING_MARKER).exists());
        // Ours: replaced.
        let b = AtomicDir::create(&target, &layout).unwrap();
        std::fs::write(
            b.path().join("manifest.json"),
            r#"{"engine":"traceaudit","v":2}"#,
        )
        .unwrap();
        b.commit().unwrap();
        assert!(std::fs::read_to_string(target.join("manifest.json"))
            .unwrap()
            .contains("\"v\":2"));
        // Not ours: refused.
        let foreign = dir.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("notes.txt"), "keep").unwrap();
        assert!(AtomicDir::create(&foreign, &layout).is_err());
        // Dropped without commit: the staging directory goes away, nothing appears.
        let never = dir.path().join("never");
        let c = AtomicDir::create(&never, &layout).unwrap();
        let staging = c.path().to_path_buf();
        drop(c);
        assert!(!staging.exists());
        assert!(!never.exists());
        // No lock file is left behind.
        let left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert!(
            left.iter().all(|n| !n.contains("traceaudit-lock")),
            "{left:?}"
        );
    }

    #[test]
    fn a_folder_with_a_manifest_of_its_own_survives() {
        // A web app's folder: a manifest.json that is not ours, beside the user's files.
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let webapp = dir.path().join("webapp");
        std::fs::create_dir(&webapp).unwrap();
        std::fs::write(webapp.join("manifest.json"), r#"{"name":"pwa"}"#).unwrap();
        std::fs::write(webapp.join("important.txt"), "canary").unwrap();
        let err = AtomicDir::create(&webapp, &layout).err().expect("refused");
        let msg = err.to_string();
        assert!(
            msg.contains("webapp") && msg.contains("does not describe"),
            "{msg}"
        );
        assert_eq!(
            std::fs::read_to_string(webapp.join("important.txt")).unwrap(),
            "canary"
        );
    }

    #[test]
    fn an_output_with_a_file_we_did_not_write_survives() {
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let out = dir.path().join("corpus");
        std::fs::create_dir_all(out.join("events")).unwrap();
        std::fs::write(out.join("manifest.json"), OURS).unwrap();
        std::fs::write(out.join("events/notes.md"), "canary").unwrap();
        let msg = AtomicDir::create(&out, &layout).err().unwrap().to_string();
        assert!(msg.contains("events/notes.md"), "{msg}");
        assert!(out.join("events/notes.md").exists());
        // A file where the output should be, and a link to a folder: refused too.
        let file = dir.path().join("file");
        std::fs::write(&file, "canary").unwrap();
        assert!(AtomicDir::create(&file, &layout).is_err());
        assert_eq!(std::fs::read_to_string(&file).unwrap(), "canary");
        #[cfg(unix)]
        {
            let link = dir.path().join("link");
            std::os::unix::fs::symlink(&out, &link).unwrap();
            let msg = AtomicDir::create(&link, &layout).err().unwrap().to_string();
            assert!(msg.contains("symbolic link"), "{msg}");
        }
    }

    #[test]
    fn a_second_writer_of_the_same_output_is_refused() {
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let first = AtomicDir::create(&target, &layout).unwrap();
        let err = AtomicDir::create(&target, &layout).err().expect("refused");
        assert_eq!(err.kind(), io::ErrorKind::ResourceBusy);
        assert!(err.to_string().contains("another traceaudit run"), "{err}");
        drop(first);
        // Free again once the first is done.
        AtomicDir::create(&target, &layout).unwrap();
    }

    #[test]
    fn staging_left_by_a_dead_run_is_removed_and_a_foreign_one_kept() {
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        // A pid that cannot be running: above the kernel's pid limit.
        let dead = dir.path().join("out.tmp-4194304999");
        std::fs::create_dir(&dead).unwrap();
        std::fs::write(dead.join(STAGING_MARKER), "").unwrap();
        std::fs::write(dead.join("big.parquet"), vec![0u8; 1000]).unwrap();
        // Same name pattern, but not ours: kept.
        let foreign = dir.path().join("out.tmp-4194304998");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("keep.txt"), "canary").unwrap();
        let _w = AtomicDir::create(&target, &layout).unwrap();
        assert!(!dead.exists());
        assert!(foreign.join("keep.txt").exists());
    }

    /// A complete output of `test_layout` at `dir`, its manifest saying `version`.
    fn our_output(dir: &Path, version: u32) {
        std::fs::create_dir_all(dir.join("events")).unwrap();
        std::fs::write(
            dir.join("manifest.json"),
            format!(r#"{{"engine":"traceaudit","v":{version}}}"#),
        )
        .unwrap();
        std::fs::write(dir.join("events/part-00000.parquet"), "x").unwrap();
    }

    fn version_at(dir: &Path) -> Option<u64> {
        let text = std::fs::read_to_string(dir.join("manifest.json")).ok()?;
        serde_json::from_str::<Value>(&text).ok()?["v"].as_u64()
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn replacing_an_output_leaves_nothing_aside() {
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        our_output(&target, 1);
        let w = AtomicDir::create(&target, &layout).unwrap();
        our_output(w.path(), 2);
        w.commit().unwrap();
        assert_eq!(version_at(&target), Some(2));
        assert_eq!(names_in(dir.path()), ["out"]);
    }

    #[test]
    fn a_commit_cut_between_its_renames_is_rolled_forward() {
        // Killed after moving the old output aside and before moving the new one in: the final
        // name is empty, the old copy waits aside, the finished new copy under its staging name.
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        our_output(&dir.path().join("out.old-4194304999"), 1);
        our_output(&dir.path().join("out.tmp-4194304999"), 2);
        // The next run fails before it writes anything (nothing readable, say).
        let w = AtomicDir::create(&target, &layout).unwrap();
        assert_eq!(version_at(&target), Some(2), "rolled forward at once");
        drop(w);
        assert_eq!(version_at(&target), Some(2));
        assert_eq!(names_in(dir.path()), ["out"]);
    }

    #[test]
    fn a_commit_cut_after_moving_aside_is_rolled_back() {
        // No finished new copy (its run was killed while writing it): the old copy comes back,
        // and stays when the next run fails.
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        our_output(&dir.path().join("out.old-4194304999"), 1);
        let unfinished = dir.path().join("out.tmp-4194304999");
        our_output(&unfinished, 2);
        std::fs::write(unfinished.join(STAGING_MARKER), "").unwrap();
        drop(AtomicDir::create(&target, &layout).unwrap());
        assert_eq!(version_at(&target), Some(1));
        assert_eq!(names_in(dir.path()), ["out"]);
        // A copy aside that is not wholly ours is never moved or deleted.
        std::fs::remove_dir_all(&target).unwrap();
        let foreign = dir.path().join("out.old-4194304998");
        our_output(&foreign, 1);
        std::fs::write(foreign.join("notes.txt"), "canary").unwrap();
        drop(AtomicDir::create(&target, &layout).unwrap());
        assert!(foreign.join("notes.txt").exists());
        assert!(!target.exists());
    }

    #[test]
    fn a_previous_output_is_deleted_only_behind_a_complete_one() {
        let layout = test_layout();
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        our_output(&target, 2);
        // Left by a swap cut short: the previous output under the staging name, unmarked.
        our_output(&dir.path().join("out.tmp-4194304999"), 1);
        // A deletion cut short: the mark and what was left of the files.
        let discarding = dir.path().join("out.old-4194304998");
        std::fs::create_dir_all(discarding.join("events")).unwrap();
        std::fs::write(discarding.join(DISCARD_MARKER), "").unwrap();
        drop(AtomicDir::create(&target, &layout).unwrap());
        assert_eq!(version_at(&target), Some(2));
        assert_eq!(names_in(dir.path()), ["out"]);
    }

    #[cfg(unix)]
    #[test]
    fn an_output_the_reports_could_not_read_back_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join(std::ffi::OsStr::from_bytes(b"night-\xff"));
        let err = AtomicDir::create(&target, &test_layout())
            .err()
            .expect("refused");
        assert!(err.to_string().contains("not a UTF-8 path"), "{err}");
        assert!(names_in(dir.path()).is_empty(), "nothing is written");
    }

    #[test]
    fn overlapping_inputs_and_outputs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let recs = dir.path().join("recs");
        std::fs::create_dir_all(recs.join("sub")).unwrap();
        let corp = dir.path().join("corp");
        std::fs::create_dir_all(corp.join("store")).unwrap();
        // The output is an input.
        assert!(refuse_overlap(&recs, std::slice::from_ref(&recs)).is_err());
        // The output contains an input (the store a corpus points at).
        assert!(refuse_overlap(&corp, &[corp.join("store")]).is_err());
        // The output lies inside an input, not yet existing, spelled with `..`.
        let inside = recs.join("sub/../new-corpus");
        assert!(refuse_overlap(&inside, std::slice::from_ref(&recs)).is_err());
        // Spelled differently: through `.` and a link.
        #[cfg(unix)]
        {
            let link = dir.path().join("recs-link");
            std::os::unix::fs::symlink(&recs, &link).unwrap();
            assert!(refuse_overlap(&recs.join("."), std::slice::from_ref(&link)).is_err());
        }
        // Beside each other: fine, including a shared name prefix.
        assert!(refuse_overlap(&dir.path().join("recs2"), std::slice::from_ref(&recs)).is_ok());
        assert!(refuse_overlap(&dir.path().join("out"), &[recs, corp]).is_ok());
    }

    /// An output in a bucket is refused inside (or around) an input prefix of the same bucket,
    /// however the two are spelt (a trailing slash, credentials, a query), and before anything
    /// is read or written: no server is needed to refuse it.
    #[test]
    fn an_output_prefix_inside_an_input_prefix_is_refused() {
        let p = |s: &str| PathBuf::from(s);
        let logs = [p("s3://ops/logs/"), p("/var/log/agents")];
        for out in [
            "s3://ops/logs/store/",
            "s3://ops/logs",
            "s3://u:secret@ops/logs/x?sig=1",
        ] {
            let e = refuse_overlap(&p(out), &logs).unwrap_err().to_string();
            assert!(e.contains("s3://ops/logs"), "{e}");
            assert!(!e.contains("secret") && !e.contains("sig="), "{e}");
        }
        let e = refuse_overlap(&p("s3://ops/"), &logs)
            .unwrap_err()
            .to_string();
        assert!(e.contains("contains the input s3://ops/logs"), "{e}");
        for out in [
            "s3://ops/stores/",
            "s3://ops/logs-store/",
            "gs://ops/logs/store/",
        ] {
            assert!(refuse_overlap(&p(out), &logs).is_ok(), "{out}");
        }
    }

    #[test]
    fn patterns_match_whole_components() {
        assert!(path_matches(
            "events/part-*.parquet",
            "events/part-00001.parquet"
        ));
        assert!(!path_matches(
            "events/part-*.parquet",
            "events/part-1.parquet/x"
        ));
        assert!(!path_matches(
            "events/part-*.parquet",
            "other/part-1.parquet"
        ));
        assert!(!path_matches("manifest.json", "manifest.json.bak"));
        assert!(component_matches("a*", "a"));
        assert!(!component_matches("ab*ba", "aba"));
    }
}
