//! One table file of a store's part, written in pieces and given one footer when closed.
//!
//! A Parquet writer keeps the metadata of every row group it has written until its file is
//! closed (about 16 KB a row group of the events' 24 columns), and a store writer keeps all its
//! parts open until the last input is read. Its memory then grew with the number of row groups,
//! so with the input. [`PieceWriter::roll`] closes the writer of the piece written so far, which
//! frees that metadata, and goes on with a new writer. Every piece's row groups go into the
//! part's own file, one after the other; what a piece's writer writes besides them (its leading
//! magic, after the first piece, and its footer) does not: the footer goes to a small file
//! beside the part. [`PieceWriter::close`] reads those footers back and writes the one footer
//! of the whole file after the row groups. The file has the same bytes one writer would have
//! written, so no reader of a store knows pieces existed, and no row group is copied.

use arrow::datatypes::SchemaRef;
use arrow::record_batch::RecordBatch;
use bytes::Bytes;
use parquet::arrow::{add_encoded_arrow_schema_to_metadata, ArrowSchemaConverter, ArrowWriter};
use parquet::column::writer::ColumnCloseResult;
use parquet::file::metadata::{ColumnChunkMetaData, ParquetMetaDataOptions, ParquetMetaDataReader};
use parquet::file::properties::WriterProperties;
use parquet::file::reader::{ChunkReader, Length};
use parquet::file::statistics::Statistics;
use parquet::file::writer::SerializedFileWriter;
use std::fs::File;
use std::io::{self, BufWriter, Read, Seek, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn to_io(e: impl Into<Box<dyn std::error::Error + Send + Sync>>) -> io::Error {
    io::Error::other(e)
}

/// The bytes of a Parquet file's leading magic, which only the first piece puts in the file.
const MAGIC_BYTES: u64 = 4;

/// A Parquet file written as a row group at a time, in pieces (see the module's note).
pub struct PieceWriter {
    /// The part's file: every piece's row groups, then the footer.
    path: PathBuf,
    /// The part's file, positioned after the row groups written to it.
    file: File,
    schema: SchemaRef,
    props: WriterProperties,
    writer: ArrowWriter<PieceSink>,
    /// The closed pieces' footers, in the order written.
    pieces: Vec<PathBuf>,
    columns: usize,
}

impl PieceWriter {
    /// Start writing `path` (created, or emptied).
    pub fn create(path: &Path, schema: SchemaRef, props: WriterProperties) -> io::Result<Self> {
        let file = File::create(path)?;
        let writer = Self::writer(&file, 0, &schema, &props)?;
        Ok(PieceWriter {
            path: path.to_path_buf(),
            file,
            columns: schema.fields().len(),
            schema,
            props,
            writer,
            pieces: Vec::new(),
        })
    }

    /// A writer of one piece into `file`, leaving out the first `skip` bytes it writes.
    fn writer(
        file: &File,
        skip: u64,
        schema: &SchemaRef,
        props: &WriterProperties,
    ) -> io::Result<ArrowWriter<PieceSink>> {
        let sink = PieceSink {
            file: file.try_clone()?,
            at: 0,
            skip,
            footer_from: u64::MAX,
            footer: None,
        };
        ArrowWriter::try_new(sink, schema.clone(), Some(props.clone())).map_err(to_io)
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
        // The new writer puts nothing in the file before its first row group (its magic is
        // left out), so the piece closed after it is made still ends the file.
        let next = Self::writer(&self.file, MAGIC_BYTES, &self.schema, &self.props)?;
        let done = std::mem::replace(&mut self.writer, next);
        close_piece(&self.path, &mut self.pieces, done)
    }

    /// Close the file: when pieces were rolled before, the last is closed as they were and
    /// the footer of the whole file is written from theirs (which are then removed).
    pub fn close(self) -> io::Result<()> {
        let PieceWriter {
            path,
            mut file,
            schema,
            props,
            writer,
            mut pieces,
            ..
        } = self;
        if pieces.is_empty() {
            return writer.close().map(drop).map_err(to_io);
        }
        close_piece(&path, &mut pieces, writer)?;
        let rows_end = file.stream_position()?;
        write_footer(&pieces, file, rows_end, &schema, props)
            .map_err(|e| io::Error::new(e.kind(), format!("{}: {e}", path.display())))?;
        for piece in &pieces {
            std::fs::remove_file(piece)?;
        }
        Ok(())
    }
}

/// Close `writer`, the writer of the part at `path` after `pieces`: its row groups end the
/// part's file, and its footer is put aside as the next piece's.
fn close_piece(
    path: &Path,
    pieces: &mut Vec<PathBuf>,
    mut writer: ArrowWriter<PieceSink>,
) -> io::Result<()> {
    let piece = piece_path(path, pieces.len());
    let footer = File::create(&piece)?;
    pieces.push(piece);
    // Every row group is flushed: what the writer writes from here on is its footer.
    let rows_written = writer.bytes_written() as u64;
    let sink = writer.inner_mut();
    sink.footer = Some(BufWriter::new(footer));
    sink.footer_from = rows_written;
    let sink = writer.into_inner().map_err(to_io)?;
    writer_done(sink)
}

/// Where the footer of the piece `k` of the part at `path` waits: a hidden file beside it.
fn piece_path(path: &Path, k: usize) -> PathBuf {
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    path.with_file_name(format!(".{name}.piece-{k}"))
}

/// The end of a writer's sink: its footer, if it had one, on disk.
fn writer_done(sink: PieceSink) -> io::Result<()> {
    match sink.footer {
        Some(footer) => footer.into_inner().map(drop).map_err(|e| e.into_error()),
        None => Ok(()),
    }
}

/// Where one piece's writer writes: its row groups to the part's file (after the pieces
/// before it), its leading magic nowhere (after the first piece), its footer to `footer`.
struct PieceSink {
    /// The part's file; every piece's handle shares its position.
    file: File,
    /// Bytes the writer has written here.
    at: u64,
    /// The writer's first bytes, left out: its magic, which the file already begins with.
    skip: u64,
    /// From this count of bytes on, the writer writes its footer.
    footer_from: u64,
    footer: Option<BufWriter<File>>,
}

impl Write for PieceSink {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let mut rest = buf;
        let left_out = rest.len().min(self.skip.saturating_sub(self.at) as usize);
        rest = &rest[left_out..];
        let rows = rest
            .len()
            .min(self.footer_from.saturating_sub(self.at + left_out as u64) as usize);
        self.file.write_all(&rest[..rows])?;
        rest = &rest[rows..];
        if !rest.is_empty() {
            let footer = self
                .footer
                .as_mut()
                .ok_or_else(|| io::Error::other("a piece's footer has nowhere to go"))?;
            footer.write_all(rest)?;
        }
        self.at += buf.len() as u64;
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        match &mut self.footer {
            Some(footer) => footer.flush(),
            None => Ok(()),
        }
    }
}

/// Write the footer of the file whose row groups are the `pieces`' (footers read from those
/// files, in order) and end at `rows_end` of `file`: the footer of one [`ArrowWriter`] with
/// `props` (the same Parquet schema, converted from `schema`, and the same Arrow schema in its
/// metadata). The footer is made by a file writer that is handed every column chunk again as
/// if it were copying it, while what it writes before the footer is left out: its offsets
/// are those the chunks already have in the file, which is checked before the footer is
/// written.
fn write_footer(
    pieces: &[PathBuf],
    file: File,
    rows_end: u64,
    schema: &SchemaRef,
    mut props: WriterProperties,
) -> io::Result<()> {
    let descr = ArrowSchemaConverter::new()
        .with_coerce_types(props.coerce_types())
        .convert(schema)
        .map_err(to_io)?;
    let descr = Arc::new(descr);
    add_encoded_arrow_schema_to_metadata(schema, &mut props);
    // Until the offsets are checked, a byte past the row groups has nowhere to go.
    let sink = PieceSink {
        file: file.try_clone()?,
        at: 0,
        skip: rows_end,
        footer_from: rows_end,
        footer: None,
    };
    let mut writer =
        SerializedFileWriter::new(sink, descr.root_schema_ptr(), Arc::new(props)).map_err(to_io)?;
    // Pieces are read with the writer's own Parquet schema (their footers' would read back
    // with types the writer compares as different), and their encoding statistics as they are
    // (by default they are read as a mask, which a footer cannot hold).
    let options = ParquetMetaDataOptions::new()
        .with_schema(descr.clone())
        .with_encoding_stats_as_mask(false);
    for piece in pieces {
        let footer = File::open(piece)?;
        let meta = ParquetMetaDataReader::new()
            .with_metadata_options(Some(options.clone()))
            .parse_and_finish(&footer)
            .map_err(|e| io::Error::other(format!("{}: {e}", piece.display())))?;
        for group in meta.row_groups() {
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
                to.append_column(&InPlace, close).map_err(to_io)?;
            }
            to.close().map_err(to_io)?;
        }
    }
    let counted = writer.bytes_written() as u64;
    if counted != rows_end {
        return Err(io::Error::other(format!(
            "the pieces' footers give {counted} bytes of row groups where the file has \
             {rows_end}; no footer was written"
        )));
    }
    writer.inner_mut().footer = Some(BufWriter::new(file));
    let sink = writer.into_inner().map_err(to_io)?;
    writer_done(sink)
}

/// The column chunks as [`write_footer`]'s writer reads them: already in place in the file,
/// so nothing is read. Its reads return as many bytes as asked without writing them, and the
/// writer's sink leaves out everything it is given before the footer.
struct InPlace;

impl Length for InPlace {
    fn len(&self) -> u64 {
        u64::MAX
    }
}

impl Read for InPlace {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        Ok(buf.len())
    }
}

impl ChunkReader for InPlace {
    type T = InPlace;

    fn get_read(&self, _start: u64) -> parquet::errors::Result<Self::T> {
        Ok(InPlace)
    }

    fn get_bytes(&self, _start: u64, _length: usize) -> parquet::errors::Result<Bytes> {
        Err(parquet::errors::ParquetError::General(
            "a column chunk in place is not read".to_string(),
        ))
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

    /// Footers that do not add up to the row groups in the file (here one piece's footer put
    /// in place of another's) leave the file without a footer rather than with a wrong one.
    #[test]
    fn footers_that_do_not_match_the_file_write_no_footer() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("part-00000.parquet");
        let mut writer = PieceWriter::create(&path, schema(), store_writer_properties()).unwrap();
        for group in 0..3 {
            writer
                .write_row_group(&batch(group, 40 + group * 30))
                .unwrap();
            writer.roll().unwrap();
        }
        let piece = |k: usize| dir.path().join(format!(".part-00000.parquet.piece-{k}"));
        std::fs::copy(piece(2), piece(0)).unwrap();
        let rows_end = std::fs::metadata(&path).unwrap().len();
        let err = writer.close().unwrap_err().to_string();
        assert!(err.contains("no footer was written"), "{err}");
        assert_eq!(std::fs::metadata(&path).unwrap().len(), rows_end);
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
