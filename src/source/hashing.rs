//! Hashing an input while it is read, so that the manifest's digest of a file costs no second
//! pass over it.

use std::io;
use std::path::Path;

/// A file read in one sequential pass that computes its sha256 on the way, so the manifest's
/// digest does not cost a second read of the input. The digest stands only when the whole file
/// went through in order: [`HashingFile::finish`] gives it then, and `None` after a seek or a
/// file left unread, so that the caller hashes the file separately.
pub struct HashingFile {
    file: std::fs::File,
    hasher: sha2::Sha256,
    read: u64,
    len: u64,
    in_order: bool,
}

thread_local! {
    static UNHASHED: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Run `read` with the files it opens through [`HashingFile`] on this thread left unhashed
/// (their [`HashingFile::finish`] gives `None`). For a copy whose digest is not the input's (a
/// compressed input's decompressed copy is named by the compressed file's digest), where
/// hashing would cost a SHA-256 pass over every decompressed byte for nothing.
pub fn unhashed<T>(read: impl FnOnce() -> T) -> T {
    let before = UNHASHED.with(|u| u.replace(true));
    let out = read();
    UNHASHED.with(|u| u.set(before));
    out
}

impl HashingFile {
    pub fn open(path: &Path) -> io::Result<HashingFile> {
        let file = std::fs::File::open(path)?;
        let len = file.metadata()?.len();
        Ok(HashingFile {
            file,
            hasher: sha2::Digest::new(),
            read: 0,
            len,
            in_order: !UNHASHED.with(|u| u.get()),
        })
    }

    /// The sha256 of the file as lower-case hex, when it was read whole, in order; `None`
    /// otherwise. Taken once: the hash is finished here.
    pub fn finish(&mut self) -> Option<String> {
        if !(self.in_order && self.read == self.len) {
            return None;
        }
        self.in_order = false;
        let digest = sha2::Digest::finalize(std::mem::take(&mut self.hasher));
        Some(hex(&digest))
    }
}

impl std::io::Read for HashingFile {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.file.read(buf)?;
        if self.in_order {
            sha2::Digest::update(&mut self.hasher, &buf[..n]);
            self.read += n as u64;
        }
        Ok(n)
    }
}

impl std::io::Seek for HashingFile {
    fn seek(&mut self, pos: std::io::SeekFrom) -> io::Result<u64> {
        self.in_order = false;
        self.file.seek(pos)
    }
}

/// The sha256 of a file as lower-case hex, in a pass of its own (for adapters that do not read
/// their file in one pass).
pub fn sha256_of(path: &Path) -> io::Result<String> {
    let mut reader = io::BufReader::with_capacity(1 << 20, HashingFile::open(path)?);
    io::copy(&mut reader, &mut io::sink())?;
    Ok(reader.get_mut().finish().unwrap_or_default())
}

/// Lower-case hex of a finished digest.
pub fn hex(digest: &[u8]) -> String {
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Seek, SeekFrom};

    #[test]
    fn a_file_read_whole_in_order_is_hashed_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f.ndjson");
        let text: Vec<u8> = (0..200_000u32).flat_map(|i| i.to_le_bytes()).collect();
        std::fs::write(&path, &text).unwrap();
        let expected: String =
            sha2::Digest::finalize(<sha2::Sha256 as sha2::Digest>::new_with_prefix(&text))
                .iter()
                .map(|b| format!("{b:02x}"))
                .collect();

        let mut reader = std::io::BufReader::new(HashingFile::open(&path).unwrap());
        let mut all = Vec::new();
        reader.read_to_end(&mut all).unwrap();
        let mut file = reader.into_inner();
        assert_eq!(file.finish(), Some(expected));
        // Taken once.
        assert_eq!(file.finish(), None);

        // Stopped early: no digest, the caller hashes the file itself.
        let mut part = [0u8; 1000];
        let mut f = HashingFile::open(&path).unwrap();
        f.read_exact(&mut part).unwrap();
        assert_eq!(f.finish(), None);

        // Read whole but out of order: no digest either.
        let mut f = HashingFile::open(&path).unwrap();
        f.seek(SeekFrom::Start(10)).unwrap();
        f.seek(SeekFrom::Start(0)).unwrap();
        let mut again = Vec::new();
        f.read_to_end(&mut again).unwrap();
        assert_eq!(f.finish(), None);
    }
}
