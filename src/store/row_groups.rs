//! Reading a store table's row groups: footers checked against the schema the store writes,
//! row groups picked by their statistics, and rows picked by conversation before the other
//! columns are decoded.

use crate::store::parquet_file::{ParquetFile, ReadAhead};
use crate::store::write::to_io;
use arrow::array::{Array, AsArray, LargeStringArray, StringArray};
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::{
    ArrowPredicateFn, ArrowReaderMetadata, ParquetRecordBatchReaderBuilder, RowFilter,
};
use parquet::arrow::ProjectionMask;
use std::collections::HashSet;
use std::io;
use std::path::Path;

pub(super) fn col<'a, T: 'static>(batch: &'a RecordBatch, name: &str) -> io::Result<&'a T> {
    batch
        .column_by_name(name)
        .and_then(|c| c.as_any().downcast_ref::<T>())
        .ok_or_else(|| io::Error::other(format!("store column {name} is missing or mistyped")))
}

pub(super) fn opt_str(a: &StringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_string())
}

pub(super) fn opt_large(a: &LargeStringArray, i: usize) -> Option<String> {
    (!a.is_null(i)).then(|| a.value(i).to_string())
}

/// The footer of the Parquet file at `path`.
pub(super) fn load_metadata(path: &Path) -> io::Result<ArrowReaderMetadata> {
    ArrowReaderMetadata::load(&ParquetFile::open(path)?, Default::default()).map_err(to_io)
}

/// The footer of a store file, checked against the schema the store writes: a file that is not
/// Parquet, or a column of another type (a part written back by pandas or pyarrow keeps its
/// timestamps in nanoseconds), is refused with the file and the column, before any row is
/// decoded.
pub(super) fn load_checked(
    path: &Path,
    expected: &arrow::datatypes::Schema,
) -> io::Result<ArrowReaderMetadata> {
    let bad = |why: String| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("{} cannot be read as a store table: {why}", path.display()),
        )
    };
    let metadata = load_metadata(path).map_err(|e| bad(format!("it is unreadable ({e})")))?;
    let schema = metadata.schema();
    for field in expected.fields() {
        let Ok(found) = schema.field_with_name(field.name()) else {
            return Err(bad(format!("it has no column `{}`", field.name())));
        };
        if found.data_type() != field.data_type() {
            return Err(bad(format!(
                "column `{}` is {}, where traceaudit writes {} (was it written back by another \
                 tool, such as a pandas round trip?); ingest its inputs again",
                field.name(),
                found.data_type(),
                field.data_type()
            )));
        }
    }
    Ok(metadata)
}

/// The record batches of the row groups of `path` that `keep` selects (by the row group's
/// metadata), given the file's footer.
/// The row groups `keep` picks, without the columns named in `leave_out`.
pub(super) fn read_row_groups(
    path: &Path,
    metadata: &ArrowReaderMetadata,
    keep: impl Fn(&parquet::file::metadata::RowGroupMetaData) -> bool,
    leave_out: &[&str],
) -> io::Result<Vec<RecordBatch>> {
    read_row_groups_of(path, metadata, keep, leave_out, None)
}

/// [`read_row_groups`], of the rows whose `conversation_id` is in `only` when it is given
/// (the ids are decoded first, the other columns, answers and user messages among them, for
/// the rows kept only).
pub(super) fn read_row_groups_of(
    path: &Path,
    metadata: &ArrowReaderMetadata,
    keep: impl Fn(&parquet::file::metadata::RowGroupMetaData) -> bool,
    leave_out: &[&str],
    only: Option<&std::sync::Arc<HashSet<String>>>,
) -> io::Result<Vec<RecordBatch>> {
    let groups: Vec<usize> = metadata
        .metadata()
        .row_groups()
        .iter()
        .enumerate()
        .filter(|(_, g)| keep(g))
        .map(|(i, _)| i)
        .collect();
    let schema = metadata.parquet_schema();
    let columns: Vec<usize> = (schema.columns().iter().enumerate())
        .filter(|(_, c)| !leave_out.contains(&c.name()))
        .map(|(i, _)| i)
        .collect();
    let mut builder = ParquetRecordBatchReaderBuilder::new_with_metadata(
        read_ahead(path, metadata.metadata(), &groups, &columns)?,
        metadata.clone(),
    )
    .with_projection(ProjectionMask::leaves(schema, columns.iter().copied()))
    .with_row_groups(groups)
    .with_batch_size(8192);
    if let Some(only) = only {
        builder = builder.with_row_filter(conversation_filter(schema, only.clone())?);
    }
    let reader = builder.build().map_err(|e| corrupt(path, e))?;
    reader.map(|b| b.map_err(|e| corrupt(path, e))).collect()
}

/// The column chunks of `columns` (leaf indices) in row groups `groups` of the file at `path`,
/// read ahead ([`ReadAhead`]) for a reader that decodes just those. A footer naming bytes past
/// the file's end is reported as a corrupt file, and any other error names the file.
pub(super) fn read_ahead(
    path: &Path,
    metadata: &parquet::file::metadata::ParquetMetaData,
    groups: &[usize],
    columns: &[usize],
) -> io::Result<ReadAhead> {
    let ranges = groups.iter().flat_map(|&g| {
        let chunks = metadata.row_group(g).columns();
        columns.iter().map(move |&c| {
            let (start, length) = chunks[c].byte_range();
            start..start.saturating_add(length)
        })
    });
    ReadAhead::read(path, ranges).map_err(|e| match e.kind() {
        io::ErrorKind::InvalidData => corrupt(path, e),
        kind => io::Error::new(kind, format!("{}: {e}", path.display())),
    })
}

/// A Parquet file of the store whose pages the decoder refused, named.
pub(super) fn corrupt(path: &Path, e: impl std::fmt::Display) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "{} is corrupt: its pages cannot be decoded ({e}); ingest its inputs again",
            path.display()
        ),
    )
}

/// A row filter keeping the rows whose `conversation_id` is in `only`.
pub(super) fn conversation_filter(
    schema: &parquet::schema::types::SchemaDescriptor,
    only: std::sync::Arc<HashSet<String>>,
) -> io::Result<RowFilter> {
    let column = schema
        .columns()
        .iter()
        .position(|c| c.name() == "conversation_id")
        .ok_or_else(|| io::Error::other("store column conversation_id is missing"))?;
    let ids = ProjectionMask::leaves(schema, [column]);
    let keep = ArrowPredicateFn::new(ids, move |batch: RecordBatch| {
        let ids = batch.column(0).as_string::<i32>();
        Ok(ids
            .iter()
            .map(|id| Some(id.is_some_and(|id| only.contains(id))))
            .collect())
    });
    Ok(RowFilter::new(vec![Box::new(keep)]))
}

/// Can the row group hold runs of `part`? The writer gives each part row groups of its own,
/// so the `part` column's statistics say; a row group without them is read and filtered.
pub fn may_hold_part(group: &parquet::file::metadata::RowGroupMetaData, part: u32) -> bool {
    use parquet::file::statistics::Statistics;
    let Some(column) = group
        .columns()
        .iter()
        .find(|c| c.column_path().string() == "part")
    else {
        return true;
    };
    match column.statistics() {
        Some(Statistics::Int32(s)) => match (s.min_opt(), s.max_opt()) {
            (Some(&min), Some(&max)) => (min as u32) <= part && part <= (max as u32),
            _ => true,
        },
        _ => true,
    }
}
