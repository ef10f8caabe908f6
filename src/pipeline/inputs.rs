//! Finding the inputs: walking folders, passing over what cannot be read with a reason, and
//! spooling streams (standard input, pipes) to a file so they can be read like any other.

use crate::source::object::{self, Remote};
use crate::store::atomic;
use std::collections::HashSet;
use std::io;
use std::path::{Path, PathBuf};

/// One file an ingest reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InputFile {
    /// Where to read it.
    pub path: PathBuf,
    /// The name written into the store (`runs.source`, quarantine `file`).
    pub display: String,
    /// A pipe, FIFO or standard input: it can be read once only, so the ingest copies it into
    /// its staging directory first and reads the copy.
    pub stream: bool,
    /// An object in object storage: fetched into the staging directory while it is read.
    /// `path` is then its URL as shown (nothing secret), which is not a local path.
    pub remote: Option<Remote>,
}

impl InputFile {
    fn local(path: PathBuf, display: String, stream: bool) -> InputFile {
        InputFile {
            path,
            display,
            stream,
            remote: None,
        }
    }

    fn object(remote: Remote) -> InputFile {
        let display = remote.display();
        InputFile {
            path: PathBuf::from(&display),
            display,
            stream: false,
            remote: Some(remote),
        }
    }

    /// Its size: listed for an object, else read from the file system (0 when unreadable).
    pub fn size(&self) -> u64 {
        match &self.remote {
            Some(r) => r.size,
            None => std::fs::metadata(&self.path).map_or(0, |m| m.len()),
        }
    }
}

impl InputFile {
    /// The input a plan names (a file, or an object by its URL), found again by a shard.
    pub(crate) fn planned(path: &Path, display: &str) -> io::Result<InputFile> {
        if !object::is_url(display) {
            return Ok(InputFile::local(
                path.to_path_buf(),
                display.to_string(),
                false,
            ));
        }
        let mut objects = objects_of(display)?;
        match objects.len() {
            1 => Ok(objects.remove(0)),
            _ => Err(io::Error::other(format!(
                "{display} no longer names one object"
            ))),
        }
    }
}

/// The inputs a URL names: the objects under a prefix (a URL ending in `/`), or one object.
pub fn objects_of(url: &str) -> io::Result<Vec<InputFile>> {
    Ok(object::list(url)?
        .into_iter()
        .map(InputFile::object)
        .collect())
}

/// What the input paths name: the files to read, and what was found but is not read, with why.
#[derive(Debug, Clone, Default)]
pub struct FoundInputs {
    pub files: Vec<InputFile>,
    /// (path, reason) of each entry passed over: not a regular file, a dangling link, a loop, a
    /// folder that cannot be listed.
    pub skipped: Vec<(String, String)>,
}

/// The name of standard input among the inputs.
pub const STDIN: &str = "-";

/// Every file under the given paths: directories are walked recursively (following links to
/// folders, each folder once), files sorted and de-duplicated. A pipe or FIFO given explicitly,
/// or `-` for standard input, is read once as a stream; one found inside a folder is passed over
/// with a note (reading it could block forever).
pub fn find_inputs(inputs: &[PathBuf]) -> io::Result<FoundInputs> {
    let mut found = FoundInputs::default();
    let mut streams = Vec::new();
    let mut visited = HashSet::new();
    for input in inputs {
        let text = input.to_str().unwrap_or("");
        if object::is_url(text) {
            found.files.extend(objects_of(text)?);
            continue;
        }
        let local;
        let input = match object::local_path(text) {
            Some(path) => {
                local = path;
                &local
            }
            None => input,
        };
        if input.as_os_str() == STDIN {
            if !streams.iter().any(|s: &InputFile| s.path == *input) {
                streams.push(InputFile::local(input.clone(), "<stdin>".into(), true));
            }
            continue;
        }
        let meta = std::fs::metadata(input).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("cannot read input {}: {e}", input.display()),
            )
        })?;
        if meta.is_dir() {
            walk(input, &mut found, &mut visited);
        } else if meta.is_file() {
            found.files.push(InputFile::local(
                input.clone(),
                input.display().to_string(),
                false,
            ));
        } else {
            streams.push(InputFile::local(
                input.clone(),
                input.display().to_string(),
                true,
            ));
        }
    }
    found.files.sort_by(|a, b| a.path.cmp(&b.path));
    found.files.dedup();
    drop_companions(&mut found.files);
    // Streams keep the order they were given in, after the files.
    found.files.extend(streams);
    Ok(found)
}

/// Files that another input reads through itself (a dir layout's record files beside their
/// index, [`crate::ingest::Adapter::companions`]) are not read on their own as well. A
/// compressed index claims none: its set is read file by file, each decompressed on its own.
fn drop_companions(files: &mut Vec<InputFile>) {
    let claimed: HashSet<PathBuf> = files
        .iter()
        .filter(|f| f.remote.is_none())
        .map(|f| {
            let companions: Vec<PathBuf> = crate::ingest::Format::ALL
                .iter()
                .flat_map(|format| format.adapter().companions(&f.path))
                .collect();
            (f, companions)
        })
        // Only an index that claims files is opened to see whether it is compressed.
        .filter(|(f, companions)| {
            !companions.is_empty()
                && !matches!(crate::source::Compression::of_file(&f.path), Ok(Some(_)))
        })
        .flat_map(|(_, companions)| companions)
        .map(|p| p.canonicalize().unwrap_or(p))
        .collect();
    if claimed.is_empty() {
        return;
    }
    files.retain(|f| {
        let real = f.path.canonicalize().unwrap_or_else(|_| f.path.clone());
        !claimed.contains(&real)
    });
}

/// Every regular file under the given paths, sorted, de-duplicated (what `find_inputs` finds,
/// without the streams and the notes).
pub fn expand_inputs(inputs: &[PathBuf]) -> io::Result<Vec<PathBuf>> {
    Ok(find_inputs(inputs)?
        .files
        .into_iter()
        .filter(|f| !f.stream && f.remote.is_none())
        .map(|f| f.path)
        .collect())
}

fn walk(dir: &Path, found: &mut FoundInputs, visited: &mut HashSet<PathBuf>) {
    let skip = |found: &mut FoundInputs, path: &Path, why: String| {
        found.skipped.push((path.display().to_string(), why));
    };
    // A folder reached twice (through a link, or a link loop) is read once.
    match dir.canonicalize() {
        Ok(real) => {
            if !visited.insert(real) {
                skip(
                    found,
                    dir,
                    "a link to a folder already read (a link loop, or the same folder twice)"
                        .into(),
                );
                return;
            }
        }
        Err(e) => return skip(found, dir, format!("folder cannot be resolved: {e}")),
    }
    let entries = match std::fs::read_dir(dir).and_then(|r| r.collect::<Result<Vec<_>, _>>()) {
        Ok(entries) => entries,
        Err(e) => return skip(found, dir, format!("folder cannot be listed: {e}")),
    };
    let mut entries = entries;
    entries.sort_by_key(|e| e.file_name());
    for entry in entries {
        let path = entry.path();
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        let meta = match std::fs::metadata(&path) {
            Ok(meta) => meta,
            Err(e) if link => {
                skip(found, &path, format!("dangling symbolic link: {e}"));
                continue;
            }
            Err(e) => {
                skip(found, &path, format!("cannot be read: {e}"));
                continue;
            }
        };
        if meta.is_dir() {
            walk(&path, found, visited);
        } else if meta.is_file() {
            found.files.push(InputFile::local(
                path.clone(),
                path.display().to_string(),
                false,
            ));
        } else {
            skip(
                found,
                &path,
                "not a regular file (a FIFO, socket or device); such an input is read only \
                 when named on the command line"
                    .into(),
            );
        }
    }
}

/// Copy a stream input into `dir` (the ingest's staging directory), reading it once; the copy
/// is what the adapters read, and what the manifest's size and hash describe.
pub(crate) fn spool(input: &InputFile, dir: &Path, n: usize) -> io::Result<PathBuf> {
    std::fs::create_dir_all(dir).map_err(|e| atomic::with_path(e, "cannot create", dir))?;
    let to = dir.join(format!("input-{n:05}"));
    let mut out =
        std::fs::File::create(&to).map_err(|e| atomic::with_path(e, "cannot write", &to))?;
    let copied = if input.path.as_os_str() == STDIN {
        io::copy(&mut io::stdin().lock(), &mut out)
    } else {
        std::fs::File::open(&input.path).and_then(|mut f| io::copy(&mut f, &mut out))
    };
    copied.map_err(|e| {
        io::Error::new(
            e.kind(),
            format!("cannot read input {}: {e}", input.display),
        )
    })?;
    Ok(to)
}
