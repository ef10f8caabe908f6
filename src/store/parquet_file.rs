//! A Parquet file opened for the parquet crate to read, with reads past its end refused.
//!
//! The crate reads a page header through a `Read`, and skips a Thrift list it does not need
//! element by element; a skip that meets the end of the file succeeds having read nothing. A
//! corrupt header naming a list of 2^31 elements then takes minutes to refuse (seen on a
//! fuzzed events part: over 300 s). Here every read that meets the end of the file is an error,
//! so the same header is refused at its first element past the end. A sound file is never read
//! past its end: every header and page lies inside it.

use std::fs::File;
use std::io::{self, Read};
use std::path::Path;

use bytes::Bytes;
use parquet::file::reader::{ChunkReader, Length};

/// A Parquet file whose reads stop with an error at its end (see the module's note).
#[derive(Debug)]
pub struct ParquetFile(File);

impl ParquetFile {
    pub fn open(path: &Path) -> io::Result<ParquetFile> {
        File::open(path).map(ParquetFile)
    }
}

impl Length for ParquetFile {
    fn len(&self) -> u64 {
        self.0.len()
    }
}

impl ChunkReader for ParquetFile {
    type T = UpToTheEnd<<File as ChunkReader>::T>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        self.0.get_read(start).map(UpToTheEnd)
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.0.get_bytes(start, length)
    }
}

/// A reader for which the end of its file is an error.
pub struct UpToTheEnd<R>(R);

impl<R: Read> Read for UpToTheEnd<R> {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let n = self.0.read(out)?;
        if n == 0 && !out.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "a page header runs past the end of the file",
            ));
        }
        Ok(n)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_read_at_the_end_is_an_error_and_one_before_it_is_not() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"abcdef").unwrap();
        let file = ParquetFile::open(&path).unwrap();
        assert_eq!(file.len(), 6);
        let mut read = file.get_read(2).unwrap();
        let mut four = [0u8; 4];
        read.read_exact(&mut four).unwrap();
        assert_eq!(&four, b"cdef");
        let err = read.read(&mut four).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        // An empty read asks for nothing and is not the end.
        assert_eq!(read.read(&mut []).unwrap(), 0);
        // A skip through `take`, as the crate's Thrift reader skips, now fails at the end.
        let mut read = file.get_read(4).unwrap();
        let copied = io::copy(&mut read.by_ref().take(8), &mut io::sink());
        assert_eq!(copied.unwrap_err().kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(&file.get_bytes(1, 3).unwrap()[..], b"bcd");
    }
}
