//! Output directories that appear complete or not at all.
//!
//! Everything is written into a sibling staging directory (`NAME.tmp-<pid>`); `commit` renames
//! it into place. An interrupted run leaves only the staging directory, which has no manifest
//! and does not carry the final name, so nothing looks complete. A previous output at the same
//! path is replaced only when it carries our marker file (a store or corpus manifest), so a
//! mistyped `--out` never deletes somebody's directory.

use std::io;
use std::path::{Path, PathBuf};

pub struct AtomicDir {
    staging: PathBuf,
    target: PathBuf,
    committed: bool,
}

impl AtomicDir {
    /// Prepare to write `target`. Fails when `target` exists, is not empty and has no
    /// `marker` file (it is not ours to replace).
    pub fn create(target: &Path, marker: &str) -> io::Result<AtomicDir> {
        if target.exists() {
            let ours = target.join(marker).exists();
            let empty = target.is_dir() && std::fs::read_dir(target)?.next().is_none();
            if !ours && !empty {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!(
                        "{} exists and is not a traceaudit output (no {marker}); refusing to \
                         replace it",
                        target.display()
                    ),
                ));
            }
        }
        let name = target
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "out".into());
        let parent = target
            .parent()
            .filter(|p| !p.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        std::fs::create_dir_all(parent)?;
        let staging = parent.join(format!("{name}.tmp-{}", std::process::id()));
        if staging.exists() {
            std::fs::remove_dir_all(&staging)?;
        }
        std::fs::create_dir_all(&staging)?;
        Ok(AtomicDir {
            staging,
            target: target.to_path_buf(),
            committed: false,
        })
    }

    /// Where to write files now.
    pub fn path(&self) -> &Path {
        &self.staging
    }

    /// Move the finished directory into place, replacing a previous output.
    pub fn commit(mut self) -> io::Result<PathBuf> {
        if self.target.exists() {
            let old = self.target.with_file_name(format!(
                "{}.old-{}",
                self.target
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default(),
                std::process::id()
            ));
            std::fs::rename(&self.target, &old)?;
            std::fs::rename(&self.staging, &self.target)?;
            std::fs::remove_dir_all(&old)?;
        } else {
            std::fs::rename(&self.staging, &self.target)?;
        }
        self.committed = true;
        Ok(self.target.clone())
    }
}

impl Drop for AtomicDir {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_dir_all(&self.staging);
        }
    }
}

/// Write a file inside an output directory via a temporary name and a rename.
pub fn write_file(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let tmp = path.with_extension("partial");
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commit_replaces_only_our_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("out");
        let a = AtomicDir::create(&target, "manifest.json").unwrap();
        std::fs::write(a.path().join("manifest.json"), "{}").unwrap();
        a.commit().unwrap();
        assert!(target.join("manifest.json").exists());
        // Ours: replaced.
        let b = AtomicDir::create(&target, "manifest.json").unwrap();
        std::fs::write(b.path().join("manifest.json"), "{\"v\":2}").unwrap();
        b.commit().unwrap();
        assert_eq!(
            std::fs::read_to_string(target.join("manifest.json")).unwrap(),
            "{\"v\":2}"
        );
        // Not ours: refused.
        let foreign = dir.path().join("foreign");
        std::fs::create_dir(&foreign).unwrap();
        std::fs::write(foreign.join("notes.txt"), "keep").unwrap();
        assert!(AtomicDir::create(&foreign, "manifest.json").is_err());
        // Dropped without commit: the staging directory goes away, nothing appears.
        let never = dir.path().join("never");
        let c = AtomicDir::create(&never, "manifest.json").unwrap();
        let staging = c.path().to_path_buf();
        drop(c);
        assert!(!staging.exists());
        assert!(!never.exists());
    }
}
