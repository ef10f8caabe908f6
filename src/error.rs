//! The library's error: what failed, by the cause a front door acts on, with the one-line text a
//! person reads (the variants' text is the whole message; tests and users match on it).
//!
//! The jobs (`ingest`, `audit`, `append`, ...) return `io::Error`: most of what they do is
//! reading and writing, and their callers already hold `io::Result`s. An [`Error`] that is not
//! I/O travels inside one (`io::Error::from(Error)`, which keeps the `io::ErrorKind` callers
//! have always seen); [`Error::from`] an `io::Error` takes it back out, so a front door matches
//! once over [`Error`] whichever way it came.

use std::io;

/// A result of the library.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A configuration file, a schema it names, or an option value (checks, rules, a
    /// generation) that cannot be used: the text names which and why.
    #[error("{0}")]
    Config(String),
    /// A recorded record (or file) that cannot be read as what its format says: the reason,
    /// which is what quarantine records carry.
    #[error("{0}")]
    Malformed(String),
    /// A directory or file that is not the traceaudit output it is taken for (to read back, or to
    /// replace): why not.
    #[error("{0}")]
    Refused(String),
    /// Reading or writing failed.
    #[error(transparent)]
    Io(io::Error),
}

impl Error {
    /// The `io::ErrorKind` this error has when it travels as an `io::Error`: bad settings are
    /// invalid input, bad records invalid data, a refused output one that exists already.
    pub fn io_kind(&self) -> io::ErrorKind {
        match self {
            Error::Config(_) => io::ErrorKind::InvalidInput,
            Error::Malformed(_) => io::ErrorKind::InvalidData,
            Error::Refused(_) => io::ErrorKind::AlreadyExists,
            Error::Io(e) => e.kind(),
        }
    }
}

/// An `io::Error` that carries an [`Error`] gives it back; any other is [`Error::Io`].
impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        if e.get_ref().is_some_and(|inner| inner.is::<Error>()) {
            let inner = e.into_inner().expect("holds an error");
            return *inner.downcast::<Error>().expect("checked to be an Error");
        }
        Error::Io(e)
    }
}

impl From<Error> for io::Error {
    fn from(e: Error) -> io::Error {
        match e {
            Error::Io(e) => e,
            other => io::Error::new(other.io_kind(), other),
        }
    }
}

/// The kind of the I/O failure inside `e`, looking through the errors that wrap it (Parquet's
/// and Arrow's keep the `io::Error` they met as their source; serde_json's keeps only its kind).
pub fn io_kind_within(e: &io::Error) -> io::ErrorKind {
    let mut next: Option<&(dyn std::error::Error + 'static)> = e.get_ref().map(|e| e as _);
    while let Some(inner) = next {
        if let Some(io) = inner.downcast_ref::<io::Error>() {
            return io_kind_within(io);
        }
        if let Some(kind) = inner
            .downcast_ref::<serde_json::Error>()
            .and_then(serde_json::Error::io_error_kind)
        {
            return kind;
        }
        next = inner.source();
    }
    e.kind()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_error_round_trips_through_io_with_its_kind_and_text() {
        let e = io::Error::from(Error::Config("unknown check \"x\"".into()));
        assert_eq!(e.kind(), io::ErrorKind::InvalidInput);
        assert_eq!(e.to_string(), "unknown check \"x\"");
        assert!(matches!(Error::from(e), Error::Config(t) if t == "unknown check \"x\""));
        let plain = io::Error::new(io::ErrorKind::NotFound, "gone");
        let back = Error::from(plain);
        assert!(matches!(&back, Error::Io(e) if e.kind() == io::ErrorKind::NotFound));
        assert_eq!(back.to_string(), "gone");
    }

    #[test]
    fn the_io_kind_is_found_inside_parquet_and_arrow_errors() {
        let full = || io::Error::from(io::ErrorKind::StorageFull);
        let parquet = io::Error::other(parquet::errors::ParquetError::External(Box::new(full())));
        assert_eq!(io_kind_within(&parquet), io::ErrorKind::StorageFull);
        let arrow = io::Error::other(arrow::error::ArrowError::IoError("x".into(), full()));
        assert_eq!(io_kind_within(&arrow), io::ErrorKind::StorageFull);
        assert_eq!(
            io_kind_within(&io::Error::other("no input files found")),
            io::ErrorKind::Other
        );
    }
}
