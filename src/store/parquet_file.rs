//! A Parquet file opened for the parquet crate to read, with reads past its end refused.
//!
//! The crate reads a page header through a `Read`, and skips a Thrift list it does not need
//! element by element; a skip that meets the end of the file succeeds having read nothing. A
//! corrupt header naming a list of 2^31 elements then takes minutes to refuse (seen on a
//! fuzzed events part: over 300 s). Here every read that meets the end of the file is an error,
//! so the same header is refused at its first element past the end. A sound file is never read
//! past its end: every header and page lies inside it.
//!
//! [`ReadAhead`] serves the column chunks a reader will decode from memory, each run of
//! adjacent chunks read with one call: the crate otherwise opens a handle, seeks, reads and
//! closes twice for every page (its header, then its bytes).

use std::fs::File;
use std::io::{self, Read};
use std::ops::Range;
use std::path::Path;

use bytes::{Buf, Bytes};
use parquet::errors::ParquetError;
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

/// Byte ranges of a Parquet file (the column chunks of the row groups and columns a reader
/// decodes) held in memory, for the parquet crate to read its pages from. Reads are served
/// from the ranges only, and one that meets a range's end is an error (see [`UpToTheEnd`]):
/// a sound file's pages and headers lie inside their column chunk.
#[derive(Debug)]
pub struct ReadAhead {
    len: u64,
    /// Runs of adjacent ranges, by where they start in the file; none overlaps another.
    spans: Vec<(u64, Bytes)>,
}

impl ReadAhead {
    /// Read `ranges` of the file at `path`, one read for each run of adjacent or overlapping
    /// ranges (so what is held is at most the file's size). A range past the file's end (a
    /// corrupt footer) is an error of kind `InvalidData`, found before anything is read.
    pub fn read(path: &Path, ranges: impl IntoIterator<Item = Range<u64>>) -> io::Result<Self> {
        let file = File::open(path)?;
        let len = file.metadata()?.len();
        let mut ranges: Vec<Range<u64>> = ranges.into_iter().filter(|r| !r.is_empty()).collect();
        ranges.sort_by_key(|r| r.start);
        let mut runs: Vec<Range<u64>> = Vec::with_capacity(ranges.len());
        for range in ranges {
            if range.end > len {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "a column chunk ends at byte {}, past the file's end ({len})",
                        range.end
                    ),
                ));
            }
            match runs.last_mut() {
                Some(last) if range.start <= last.end => last.end = last.end.max(range.end),
                _ => runs.push(range),
            }
        }
        let spans = runs
            .into_iter()
            .map(|run| {
                let mut buffer = vec![0u8; (run.end - run.start) as usize];
                read_exact_at(&file, &mut buffer, run.start)?;
                Ok((run.start, Bytes::from(buffer)))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(ReadAhead { len, spans })
    }

    /// The bytes from `start` to the end of the span that holds it.
    fn from(&self, start: u64) -> parquet::errors::Result<Bytes> {
        let i = self.spans.partition_point(|(s, _)| *s <= start);
        match i.checked_sub(1).map(|i| &self.spans[i]) {
            Some((s, bytes)) if start - s < bytes.len() as u64 => {
                Ok(bytes.slice((start - s) as usize..))
            }
            _ => Err(ParquetError::General(format!(
                "a read at byte {start} lies outside the column chunks the file's footer names"
            ))),
        }
    }
}

impl Length for ReadAhead {
    fn len(&self) -> u64 {
        self.len
    }
}

impl ChunkReader for ReadAhead {
    type T = UpToTheEnd<bytes::buf::Reader<Bytes>>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        Ok(UpToTheEnd(self.from(start)?.reader()))
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        let rest = self.from(start)?;
        if length > rest.len() {
            return Err(ParquetError::General(format!(
                "a page of {length} bytes at byte {start} runs past its column chunk"
            )));
        }
        Ok(rest.slice(..length))
    }
}

/// Read `buffer.len()` bytes of `file` at `offset`, without moving a shared cursor.
#[cfg(unix)]
pub(crate) fn read_exact_at(file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    std::os::unix::fs::FileExt::read_exact_at(file, buffer, offset)
}

#[cfg(not(unix))]
pub(crate) fn read_exact_at(mut file: &File, buffer: &mut [u8], offset: u64) -> io::Result<()> {
    use std::io::Seek;
    file.seek(io::SeekFrom::Start(offset))?;
    file.read_exact(buffer)
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

    /// Ranges are served from memory, adjacent ones joined; a read outside them, or running
    /// past the end of one, is an error, as is a range past the file's end.
    #[test]
    fn read_ahead_serves_its_ranges_and_nothing_else() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        std::fs::write(&path, b"0123456789abcdef").unwrap();
        let ahead = ReadAhead::read(&path, [2..4, 4..6, 10..12, 11..13, 7..7]).unwrap();
        assert_eq!(ahead.len(), 16);
        assert_eq!(ahead.spans.len(), 2, "2..6 and 10..13");
        assert_eq!(&ahead.get_bytes(3, 3).unwrap()[..], b"345");
        assert_eq!(&ahead.get_bytes(10, 3).unwrap()[..], b"abc");
        let mut rest = Vec::new();
        let mut read = ahead.get_read(4).unwrap();
        let err = read.read_to_end(&mut rest).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::UnexpectedEof);
        assert_eq!(rest, b"45");
        for (start, length) in [(6, 1), (0, 1), (9, 1), (13, 1), (12, 2), (5, 2)] {
            assert!(ahead.get_bytes(start, length).is_err(), "{start}+{length}");
        }
        for start in [0, 1, 6, 9, 13, 16] {
            assert!(ahead.get_read(start).is_err(), "{start}");
        }
        let past = ReadAhead::read(&path, [4..8, 12..17]).unwrap_err();
        assert_eq!(past.kind(), io::ErrorKind::InvalidData);
        assert!(
            past.to_string().contains("past the file's end (16)"),
            "{past}"
        );
    }
}
