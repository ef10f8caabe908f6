//! One table file of a store's part, written in pieces and joined into one file when closed.
//!
//! A Parquet writer keeps the metadata of every row group it has written until its file is
//! closed (about 16 KB a row group of the events' 24 columns), and a store writer keeps all its
//! parts open until the last input is read. Its memory then grew with the number of row groups,
//! so with the input. [`PieceWriter::roll`] closes the file written so far as a piece, which
//! frees that metadata, and goes on in a new file; [`PieceWriter::close`] joins the pieces
//! (their column chunks copied as they are, one footer written for all) into the part's file.
//! The joined file has the same bytes one writer would have written, so no reader of a store
//! knows pieces existed; a part never rolled is closed in place, with nothing copied.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter, ArrowWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{
    ColumnChunkMetaData, ParquetMetaDataOptions, ParquetMetaDataReader, RowGroupMetaData,
};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::statistics::Statistics;
use parquet::file::writer::SerializedFileWriter;
use std::fs::File;
use std::io::{self, BufWriter};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn to_io(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::other(e)
}

/// A Parquet file written as a row group at a time, in pieces (see the module's note).
pub struct PieceWriter {
    /// The file being written; the pieces, once closed, are renamed out of its way.
    path: PathBuf,
    schema: SchemaRef,
    props: WriterProperties,
    writer: ArrowWriter<File>,
    /// The closed pieces, in the order written.
    pieces: Vec<PathBuf>,
    columns: usize,
}

impl PieceWriter {
    /// Start writing `path` (created, or emptied).
    pub fn create(path: &Path, schema: SchemaRef, props: WriterProperties) -> io::Result<Self> {
        let writer = Self::writer(path, &schema, &props)?;
        Ok(PieceWriter {
            path: path.to_path_buf(),
            columns: schema.fields().len(),
            schema,
            props,
            writer,
            pieces: Vec::new(),
        })
    }

    fn writer(
        path: &Path,
        schema: &SchemaRef,
        props: &WriterProperties,
    ) -> io::Result<ArrowWriter<File>> {
        let file = File::create(path)?;
        ArrowWriter::try_new(file, schema.clone(), Some(props.clone())).map_err(to_io)
    }

    /// Write `batch` as a row group (several when it has more rows than the properties' row
    /// group limit), and close it. Returns the column chunks written.
    pub fn write_row_group(&mut self, batch: &RecordBatch) -> io::Result<usize> {
        let before = self.open_chunks();
        self.writer.write(batch).map_err(to_io)?;
        self.writer.flush().map_err(to_io)?;
        Ok(self.open_chunks() - before)
    }

    /// The column chunks whose metadata the open piece holds: its row groups times its columns.
    pub fn open_chunks(&self) -> usize {
        self.writer.flushed_row_groups().len() * self.columns
    }

    /// Bytes of a row group begun and not yet closed (none between writes).
    #[cfg(test)]
    pub fn in_progress_size(&self) -> usize {
        self.writer.in_progress_size()
    }

    /// Close the open piece, freeing its row groups' metadata, and go on in a new one. A piece
    /// of no row groups is kept open.
    pub fn roll(&mut self) -> io::Result<()> {
        if self.writer.flushed_row_groups().is_empty() {
            return Ok(());
        }
        // The open piece is always the file at `path`: moved aside (its writer writes on to
        // the same file), so that the next piece, and in the end the joined file, can take it.
        let piece = self.piece_path(self.pieces.len());
        std::fs::rename(&self.path, &piece)?;
        self.pieces.push(piece);
        let next = Self::writer(&self.path, &self.schema, &self.props)?;
        std::mem::replace(&mut self.writer, next)
            .close()
            .map_err(to_io)?;
        Ok(())
    }

    /// Where piece `k` waits to be joined: a hidden file beside the part's.
    fn piece_path(&self, k: usize) -> PathBuf {
        let name = self.path.file_name().unwrap_or_default().to_string_lossy();
        self.path.with_file_name(format!(".{name}.piece-{k}"))
    }

    /// Close the file: the open piece, then, when pieces were rolled before it, join them all
    /// into the part's path and remove them.
    pub fn close(self) -> io::Result<()> {
        if self.pieces.is_empty() {
            return self.writer.close().map(drop).map_err(to_io);
        }
        let last = self.piece_path(self.pieces.len());
        let PieceWriter {
            path,
            schema,
            props,
            writer,
            mut pieces,
            ..
        } = self;
        std::fs::rename(&path, &last)?;
        writer.close().map_err(to_io)?;
        pieces.push(last);
        join(&pieces, &path, &schema, props)?;
        for piece in &pieces {
            std::fs::remove_file(piece)?;
        }
        Ok(())
    }
}

/// Write the row groups of `pieces`, in order, to `out` as one Parquet file of `schema`: every
/// column chunk's bytes copied as written, and the footer of one [`ArrowWriter`] with `props`
/// (the same Parquet schema, converted from `schema`, and the same Arrow schema in its metadata).
pub fn join(
    pieces: &[PathBuf],
    out: &Path,
    schema: &SchemaRef,
    mut props: WriterProperties,
) -> io::Result<()> {
    let descr = ArrowSchemaConverter::new()
        .with_coerce_types(props.coerce_types())
        .convert(schema)
        .map_err(to_io)?;
    let descr = Arc::new(descr);
    add_encoded_arrow_schema_to_metadata(schema, &mut props);
    let sink = BufWriter::with_capacity(1 << 20, File::create(out)?);
    let mut writer =
        SerializedFileWriter::new(sink, descr.root_schema_ptr(), Arc::new(props)).map_err(to_io)?;
    // Pieces are read with the writer's own Parquet schema (their footers' would read back
    // with types the writer compares as different), and their encoding statistics as they are
    // (by default they are read as a mask, which a footer cannot hold).
    let options = ParquetMetaDataOptions::new()
        .with_schema(descr.clone())
        .with_encoding_stats_as_mask(false);
    for piece in pieces {
        let file = File::open(piece)?;
        let meta = ParquetMetaDataReader::new()
            .with_metadata_options(Some(options.clone()))
            .parse_and_finish(&file)
            .map_err(|e| io::Error::other(format!("{}: {e}", piece.display())))?;
        for group in meta.row_groups() {
            let window = Window::read(&file, group)?;
            let mut to = writer.next_row_group().map_err(to_io)?;
            for chunk in group.columns() {
                let close = ColumnCloseResult {
                    bytes_written: chunk.compressed_size() as u64,
                    rows_written: group.num_rows() as u64,
                    metadata: as_written(chunk)?,
                    bloom_filter: None,
                    column_index: None,
                    offset_index: None,
                };
                to.append_column(&window, close).map_err(to_io)?;
            }
            to.close().map_err(to_io)?;
        }
    }
    let sink = writer.into_inner().map_err(to_io)?;
    sink.into_inner().map(drop).map_err(|e| e.into_error())
}

/// The bytes of one row group of a file, read at once (a column chunk read through the file
/// itself costs a descriptor, a seek and a read every 8 KB), at the file's offsets.
struct Window {
    start: u64,
    bytes: Bytes,
}

impl Window {
    fn read(file: &File, group: &RowGroupMetaData) -> io::Result<Window> {
        let (mut start, mut end) = (u64::MAX, 0u64);
        for chunk in group.columns() {
            let (from, len) = chunk.byte_range();
            start = start.min(from);
            end = end.max(from + len);
        }
        if start > end {
            return Ok(Window {
                start: 0,
                bytes: Bytes::new(),
            });
        }
        let bytes = file
            .get_bytes(start, (end - start) as usize)
            .map_err(to_io)?;
        Ok(Window { start, bytes })
    }

    fn slice(&self, start: u64, len: Option<usize>) -> parquet::errors::Result<Bytes> {
        let outside = || {
            parquet::errors::ParquetError::General(format!(
                "offset {start} is outside the row group read ({} bytes at {})",
                self.bytes.len(),
                self.start
            ))
        };
        let from = start.checked_sub(self.start).ok_or_else(outside)? as usize;
        let to = from.checked_add(len.unwrap_or(self.bytes.len().saturating_sub(from)));
        match to {
            Some(to) if to <= self.bytes.len() => Ok(self.bytes.slice(from..to)),
            _ => Err(outside()),
        }
    }
}

impl Length for Window {
    fn len(&self) -> u64 {
        self.start + self.bytes.len() as u64
    }
}

impl ChunkReader for Window {
    type T = bytes::buf::Reader<Bytes>;

    fn get_read(&self, start: u64) -> parquet::errors::Result<Self::T> {
        use bytes::Buf;
        Ok(self.slice(start, None)?.reader())
    }

    fn get_bytes(&self, start: u64, length: usize) -> parquet::errors::Result<Bytes> {
        self.slice(start, Some(length))
    }
}

/// `chunk` as its writer held it. One thing a footer does not say is kept apart: whether the
/// writer also filled the deprecated `min` and `max` fields of its statistics, which it does for
/// a column of signed order; read back, statistics say no.
fn as_written(chunk: &ColumnChunkMetaData) -> io::Result<ColumnChunkMetaData> {
    let Some(stats) = chunk.statistics() else {
        return Ok(chunk.clone());
    };
    let signed = chunk.column_descr().sort_order().is_signed();
    let stats = match stats.clone() {
        Statistics::Boolean(s) => Statistics::Boolean(s.with_backwards_compatible_min_max(signed)),
        Statistics::Int32(s) => Statistics::Int32(s.with_backwards_compatible_min_max(signed)),
        Statistics::Int64(s) => Statistics::Int64(s.with_backwards_compatible_min_max(signed)),
        Statistics::Int96(s) => Statistics::Int96(s.with_backwards_compatible_min_max(signed)),
        Statistics::Float(s) => Statistics::Float(s.with_backwards_compatible_min_max(signed)),
        Statistics::Double(s) => Statistics::Double(s.with_backwards_compatible_min_max(signed)),
        Statistics::ByteArray(s) => {
            Statistics::ByteArray(s.with_backwards_compatible_min_max(signed))
        }
        Statistics::FixedLenByteArray(s) => {
            Statistics::FixedLenByteArray(s.with_backwards_compatible_min_max(signed))
        }
    };
    chunk
        .clone()
        .into_builder()
        .set_statistics(stats)
        .build()
        .map_err(to_io)
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::{LargeStringArray, StringArray, TimestampMillisecondArray, UInt32Array};
    use arrow::datatypes::{DataType, Field, Schema, TimeUnit};

    /// Settings of the kinds the store's own use: chunk statistics and no offset index, zstd
    /// for the text, delta-encoded counters, dictionaries elsewhere.
    fn store_writer_properties() -> WriterProperties {
        use parquet::basic::{Compression, Encoding, ZstdLevel};
        use parquet::file::properties::EnabledStatistics;
        use parquet::schema::types::ColumnPath;
        let zstd = Compression::ZSTD(ZstdLevel::try_new(1).unwrap());
        WriterProperties::builder()
            .set_compression(Compression::UNCOMPRESSED)
            .set_statistics_enabled(EnabledStatistics::Chunk)
            .set_offset_index_disabled(true)
            .set_column_compression(ColumnPath::from("text"), zstd)
            .set_column_dictionary_enabled(ColumnPath::from("text"), false)
            .set_column_statistics_enabled(ColumnPath::from("text"), EnabledStatistics::None)
            .set_column_dictionary_enabled(ColumnPath::from("seq"), false)
            .set_column_encoding(ColumnPath::from("seq"), Encoding::DELTA_BINARY_PACKED)
            .build()
    }

    /// Columns of the kinds the store writes: dictionary-encoded names, zstd text, delta
    /// counters, a timestamp with its zone (kept in the Arrow schema of the footer).
    fn schema() -> SchemaRef {
        Arc::new(Schema::new(vec![
            Field::new("kind", DataType::Utf8, true),
            Field::new("text", DataType::LargeUtf8, true),
            Field::new("seq", DataType::UInt32, false),
            Field::new(
                "timestamp",
                DataType::Timestamp(TimeUnit::Millisecond, Some("UTC".into())),
                true,
            ),
        ]))
    }

    fn batch(group: u32, rows: u32) -> RecordBatch {
        let kinds: StringArray = (0..rows)
            .map(|i| Some(["call", "result", "answer"][(i % 3) as usize]))
            .collect();
        let text: LargeStringArray = (0..rows)
            .map(|i| {
                (i % 5 != 0)
                    .then(|| format!("group {group} row {i} {}", "x".repeat(i as usize % 40)))
            })
            .collect();
        let seq = UInt32Array::from_iter_values((0..rows).map(|i| group * 1000 + i));
        let times =
            TimestampMillisecondArray::from_iter((0..rows).map(|i| {
                (i % 7 != 0).then_some(1_700_000_000_000 + i as i64 * 1000 + group as i64)
            }))
            .with_timezone("UTC");
        RecordBatch::try_new(
            schema(),
            vec![
                Arc::new(kinds),
                Arc::new(text),
                Arc::new(seq),
                Arc::new(times),
            ],
        )
        .unwrap()
    }

    /// How many entries `dir` holds.
    fn entries(dir: &Path) -> usize {
        std::fs::read_dir(dir).unwrap().count()
    }

    /// Write `groups` row groups, rolling a piece after the row groups `roll_after` names.
    fn write(dir: &Path, groups: u32, roll_after: &[u32]) -> Vec<u8> {
        let path = dir.join("part-00000.parquet");
        let mut writer = PieceWriter::create(&path, schema(), store_writer_properties()).unwrap();
        for group in 0..groups {
            assert_eq!(
                writer
                    .write_row_group(&batch(group, 50 + group * 13))
                    .unwrap(),
                4
            );
            if roll_after.contains(&group) {
                writer.roll().unwrap();
                assert_eq!(writer.open_chunks(), 0);
            }
        }
        writer.close().unwrap();
        assert_eq!(entries(dir), 1, "no piece is left beside the part");
        std::fs::read(path).unwrap()
    }

    /// Pieces joined are byte for byte the file one writer writes: offsets, row group
    /// ordinals, statistics and the Arrow schema in the footer alike.
    #[test]
    fn joined_pieces_are_the_bytes_of_one_file() {
        let whole = tempfile::tempdir().unwrap();
        let whole = write(whole.path(), 6, &[]);
        for roll_after in [&[0, 1, 2, 3, 4][..], &[2], &[0, 4], &[5], &[0, 1, 5]] {
            let dir = tempfile::tempdir().unwrap();
            assert!(
                write(dir.path(), 6, roll_after) == whole,
                "rolled after {roll_after:?}"
            );
        }
        // And it reads back as written.
        let file = bytes::Bytes::from(whole);
        let reader =
            parquet::arrow::arrow_reader::ParquetRecordBatchReader::try_new(file, 1024).unwrap();
        let read: Vec<RecordBatch> = reader.map(Result::unwrap).collect();
        let read = arrow::compute::concat_batches(&schema(), &read).unwrap();
        let written: Vec<RecordBatch> = (0..6).map(|g| batch(g, 50 + g * 13)).collect();
        let written = arrow::compute::concat_batches(&schema(), &written).unwrap();
        assert_eq!(read, written);
    }

    /// A roll with no row group since the last is nothing; a piece is only ever a file with
    /// row groups in it.
    #[test]
    fn an_empty_piece_is_not_rolled() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-00000.parquet");
        let mut writer = PieceWriter::create(&path, schema(), store_writer_properties()).unwrap();
        writer.roll().unwrap();
        writer.write_row_group(&batch(0, 10)).unwrap();
        writer.roll().unwrap();
        writer.roll().unwrap();
        assert!(dir.path().join(".part-00000.parquet.piece-0").exists());
        assert_eq!(entries(dir.path()), 2, "one piece and the open file");
        writer.close().unwrap();
        assert!(path.exists());
        assert_eq!(entries(dir.path()), 1);
    }

    /// A piece that is not the Parquet it should be stops the join, named.
    #[test]
    fn a_damaged_piece_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-00000.parquet");
        let mut writer = PieceWriter::create(&path, schema(), store_writer_properties()).unwrap();
        writer.write_row_group(&batch(0, 10)).unwrap();
        writer.roll().unwrap();
        writer.write_row_group(&batch(1, 10)).unwrap();
        let piece = dir.path().join(".part-00000.parquet.piece-0");
        let len = std::fs::metadata(&piece).unwrap().len();
        std::fs::OpenOptions::new()
            .write(true)
            .open(&piece)
            .unwrap()
            .set_len(len - 3)
            .unwrap();
        let err = writer.close().unwrap_err().to_string();
        assert!(err.contains(".part-00000.parquet.piece-0"), "{err}");
    }
}
