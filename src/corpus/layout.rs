//! Where a corpus keeps its tables, for every reader (the reports, the Python module). A corpus
//! comes in one of two layouts:
//! - one file per table, `CORPUS/<table>.parquet`, as `traceaudit audit` writes it;
//! - each table a part at a time, `CORPUS/<table>/part-NNNNN.parquet` (one file per store
//!   part), as an audit distributed over the store's parts writes it; its manifest lists every
//!   file of every table under `tables`, with the bytes and rows each holds.
//!
//! The manifest is the truth. A corpus whose manifest lists its files is read from those files,
//! in the order listed, and from no other: a listed file that is missing, of another size, or
//! whose footer counts other rows is refused with its path, before anything is counted, and
//! files lying beside them are never read. Paths are taken literally: nothing here expands a
//! pattern, and a listed path must be a plain relative path inside the corpus.

use crate::store::parquet_file::ParquetFile;
use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::io;
use std::path::{Component, Path, PathBuf};

/// One file of a table, as a corpus manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableFile {
    /// Inside the corpus, `/`-separated: `findings/part-00003.parquet`, `ledger.parquet`.
    pub path: String,
    pub bytes: u64,
    pub rows: u64,
}

/// A table and its files, in the order its rows are read.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TableFiles {
    pub table: String,
    pub files: Vec<TableFile>,
}

/// How a corpus lays out its tables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Layout {
    /// `<table>.parquet`, one file per table (the command line's).
    Single,
    /// The files the manifest lists, every one checked to be there whole.
    Listed(Vec<TableFiles>),
}

/// The manifest field listing a corpus's files.
pub const TABLES_FIELD: &str = "tables";

fn invalid(why: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, why)
}

/// Is `rel` a plain relative path to a Parquet file, every component a name?
fn plain_relative(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.is_empty()
        && !rel.contains('\\')
        && rel.ends_with(".parquet")
        && path.components().all(|c| matches!(c, Component::Normal(_)))
}

impl Layout {
    /// The layout of the corpus in `dir` whose manifest is `manifest`. A listed layout is
    /// checked whole here: each file there, of the size listed, with a Parquet footer counting
    /// the rows listed (the footers only are read, in parallel).
    pub fn of(dir: &Path, manifest: &Value) -> io::Result<Layout> {
        let Some(listed) = manifest.get(TABLES_FIELD) else {
            if !dir.join("dispositions.parquet").exists() && dir.join("dispositions").is_dir() {
                return Err(invalid(format!(
                    "{} holds its tables a part at a time, but its manifest does not list their \
                     files (a corpus written by traceaudit.ray before it recorded them); \
                     refusing to guess which files are whole: audit the store again",
                    dir.display()
                )));
            }
            return Ok(Layout::Single);
        };
        let manifest_path = dir.join("manifest.json");
        let tables: Vec<TableFiles> = serde_json::from_value(listed.clone()).map_err(|e| {
            invalid(format!(
                "{}: field `{TABLES_FIELD}` is not a list of tables and their files: {e}",
                manifest_path.display()
            ))
        })?;
        let mut seen = std::collections::HashSet::new();
        for t in &tables {
            if !seen.insert(t.table.as_str()) {
                return Err(invalid(format!(
                    "{} lists table {:?} twice",
                    manifest_path.display(),
                    t.table
                )));
            }
            if let Some(bad) = t.files.iter().find(|f| !plain_relative(&f.path)) {
                return Err(invalid(format!(
                    "{} lists {:?} as a file of table {:?}, which is not a Parquet file's path \
                     inside the corpus",
                    manifest_path.display(),
                    bad.path,
                    t.table
                )));
            }
        }
        let files: Vec<&TableFile> = tables.iter().flat_map(|t| &t.files).collect();
        files
            .par_iter()
            .map(|f| check_listed(dir, f))
            .collect::<io::Result<Vec<()>>>()?;
        Ok(Layout::Listed(tables))
    }

    /// The files of `table` in `dir`, in the order its rows are read. `NotFound` when the
    /// corpus has no such table (a check's own table, when that check did not run).
    pub fn files(&self, dir: &Path, table: &str) -> io::Result<Vec<PathBuf>> {
        let missing = || {
            io::Error::new(
                io::ErrorKind::NotFound,
                format!("{} has no table {table:?}", dir.display()),
            )
        };
        match self {
            Layout::Single => {
                let path = dir.join(format!("{table}.parquet"));
                if !path.is_file() {
                    return Err(missing());
                }
                Ok(vec![path])
            }
            Layout::Listed(tables) => {
                let t = tables
                    .iter()
                    .find(|t| t.table == table)
                    .ok_or_else(missing)?;
                Ok(t.files.iter().map(|f| dir.join(&f.path)).collect())
            }
        }
    }

    /// Every file the layout lists, table by table; `None` for the single-file layout, whose
    /// tables are the Parquet files of the corpus folder.
    pub fn listed_files(&self, dir: &Path) -> Option<Vec<PathBuf>> {
        match self {
            Layout::Single => None,
            Layout::Listed(tables) => Some(
                tables
                    .iter()
                    .flat_map(|t| &t.files)
                    .map(|f| dir.join(&f.path))
                    .collect(),
            ),
        }
    }
}

/// Is the listed file `f` in `dir` there whole? `Err` names it and says how it differs.
fn check_listed(dir: &Path, f: &TableFile) -> io::Result<()> {
    let path = dir.join(&f.path);
    let refuse = |why: String| invalid(format!("{} {why}; refusing to read it", path.display()));
    let meta = match std::fs::metadata(&path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "{} is not a whole corpus: {}, which its manifest lists, is missing",
                    dir.display(),
                    path.display()
                ),
            ))
        }
        Err(e) => return Err(refuse(format!("cannot be read ({e})"))),
    };
    if !meta.is_file() {
        return Err(refuse("is not a regular file".into()));
    }
    if meta.len() != f.bytes {
        return Err(refuse(format!(
            "holds {} bytes where the corpus manifest records {}: it is truncated or was \
             written again",
            meta.len(),
            f.bytes
        )));
    }
    let footer = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&ParquetFile::open(&path)?)
        .map_err(|e| refuse(format!("has no readable Parquet footer ({e})")))?;
    let rows = footer.file_metadata().num_rows();
    if u64::try_from(rows).ok() != Some(f.rows) {
        return Err(refuse(format!(
            "holds {rows} rows where the corpus manifest records {}",
            f.rows
        )));
    }
    Ok(())
}

/// The manifest's record of the file `rel` inside `dir`, once it is final: its size and the
/// rows its footer counts.
pub fn describe(dir: &Path, rel: &str) -> io::Result<TableFile> {
    let path = dir.join(rel);
    let bytes = std::fs::metadata(&path)
        .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?
        .len();
    let footer = parquet::file::metadata::ParquetMetaDataReader::new()
        .parse_and_finish(&ParquetFile::open(&path)?)
        .map_err(|e| invalid(format!("{}: {e}", path.display())))?;
    Ok(TableFile {
        path: rel.to_string(),
        bytes,
        rows: footer.file_metadata().num_rows().max(0) as u64,
    })
}

/// The manifest of the corpus in `dir`, which must be a traceaudit corpus's (it names the
/// checks run).
pub fn read_manifest(dir: &Path) -> io::Result<Value> {
    let manifest_path = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest_path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{} is not a traceaudit corpus (no readable manifest.json: {e})",
                dir.display()
            ),
        )
    })?;
    let manifest: Value = serde_json::from_str(&text)
        .map_err(|e| invalid(format!("{}: {e}", manifest_path.display())))?;
    if manifest.get("checks").is_none() {
        return Err(not_a_corpus(dir));
    }
    Ok(manifest)
}

/// The refusal of a folder that is not a corpus (a store, most likely).
pub fn not_a_corpus(dir: &Path) -> io::Error {
    io::Error::other(format!(
        "{} is not a traceaudit corpus (a store? run `traceaudit audit` on it first)",
        dir.display()
    ))
}

/// The files of table `table` of the corpus in `dir`, in the order its rows are read, the
/// corpus checked as [`Layout::of`] checks it.
pub fn table_files(dir: &Path, table: &str) -> io::Result<Vec<PathBuf>> {
    let manifest = read_manifest(dir)?;
    Layout::of(dir, &manifest)?.files(dir, table)
}

/// Table `table` of the corpus in `dir`, read whole from its files in order: its schema (the
/// first file's; every other must have the same fields) and its batches.
pub fn read_table(dir: &Path, table: &str) -> io::Result<(SchemaRef, Vec<RecordBatch>)> {
    let mut schema: Option<SchemaRef> = None;
    let mut batches = Vec::new();
    for path in table_files(dir, table)? {
        let named =
            |e: &dyn std::fmt::Display| invalid(format!("{} is unreadable: {e}", path.display()));
        let builder = ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(&path)?)
            .map_err(|e| named(&e))?;
        let file_schema = builder.schema().clone();
        let reader = builder.build().map_err(|e| named(&e))?;
        match &schema {
            None => schema = Some(file_schema),
            Some(first) if first.fields() != file_schema.fields() => {
                return Err(invalid(format!(
                    "{} has other columns than the first file of table {table:?}",
                    path.display()
                )))
            }
            Some(_) => {}
        }
        for batch in reader {
            batches.push(batch.map_err(|e| named(&e))?);
        }
    }
    let schema = schema.ok_or_else(|| {
        invalid(format!(
            "{} lists no file of table {table:?}",
            dir.display()
        ))
    })?;
    Ok((schema, batches))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_plain_relative_parquet_paths_are_listed() {
        for ok in [
            "findings/part-00000.parquet",
            "ledger.parquet",
            "a b/c[1]*.parquet",
        ] {
            assert!(plain_relative(ok), "{ok}");
        }
        for bad in [
            "",
            "/etc/findings.parquet",
            "../other/findings.parquet",
            "findings/../../x.parquet",
            "./findings.parquet",
            "findings\\part.parquet",
            "findings/part-00000.json",
        ] {
            assert!(!plain_relative(bad), "{bad}");
        }
    }
}
