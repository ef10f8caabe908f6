//! Parts cut by rows as well as by input bytes.
//!
//! An ingest decides its part count before reading, from the input bytes (and the rows the
//! formats that declare their density are expected to give), and files each conversation by
//! the hash of its id ([`super::write::part_of`]). Rows per input byte vary a hundredfold
//! between formats and between recordings of one format (a tau2 tool result is kilobytes, a
//! tiny message a few dozen bytes), and the audit holds a part's conversations at about 1.2 KB
//! a row, so once every conversation is stored a part that still holds more than [`PART_ROWS`]
//! rows is split: its
//! conversations, in the order of their hash (then id), are cut into runs of consecutive
//! conversations of at most that many rows each (a conversation larger than that is a piece of
//! its own). The split depends on the stored rows only, never on the order they came in, so a
//! store merged from shards splits as the command line's ingest does.
//!
//! The first of a split part's pieces keeps its number; the others take the numbers after the
//! last part, in the order of the parts split. A part's runs file is split as its events file
//! is, each run given its piece's number.

use super::parquet_file::ParquetFile;
use super::write::{part_file_name, runs_part_name, store_writer_properties, to_io, RUNS_DIR};
use arrow::array::{Array, AsArray, BooleanArray, UInt32Array};
use arrow::datatypes::UInt32Type;
use arrow::record_batch::RecordBatch;
use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;
use parquet::arrow::{ArrowWriter, ProjectionMask};
use std::collections::{BTreeMap, HashMap};
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The most rows (runs plus events) a part holds, unless one conversation holds more: about
/// 250 MB held by the audit of the part.
pub const PART_ROWS: u64 = 200_000;

/// Which parts were split, and where their conversations went.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Split {
    /// Per part split, the part numbers of its pieces (the first is its own).
    pub pieces: BTreeMap<u32, Vec<u32>>,
    /// The part of each conversation of a split part.
    moved: HashMap<String, u32>,
    /// The part count after the split.
    pub parts: u32,
}

impl Split {
    /// The part a conversation of part `part` is in after the split.
    pub fn part_of(&self, conversation_id: &str, part: u32) -> u32 {
        if self.pieces.contains_key(&part) {
            if let Some(&p) = self.moved.get(conversation_id) {
                return p;
            }
        }
        part
    }

    /// Whether any part was split.
    pub fn is_empty(&self) -> bool {
        self.pieces.is_empty()
    }
}

/// How to split the parts of a store of `parts` parts, given the rows of each conversation of
/// each part over `max_rows` rows (`over`, by part).
fn plan(parts: u32, over: BTreeMap<u32, HashMap<String, u64>>, max_rows: u64) -> Split {
    let mut split = Split {
        pieces: BTreeMap::new(),
        moved: HashMap::new(),
        parts,
    };
    for (part, conversations) in over {
        let mut order: Vec<(u32, String, u64)> = conversations
            .into_iter()
            .map(|(id, rows)| (crate::js::fnv1a(&id), id, rows))
            .collect();
        order.sort_unstable();
        let mut pieces = vec![part];
        let mut held = 0u64;
        for (_, id, rows) in order {
            if held > 0 && held + rows > max_rows {
                pieces.push(split.parts);
                split.parts += 1;
                held = 0;
            }
            held += rows;
            split.moved.insert(id, *pieces.last().expect("a piece"));
        }
        split.pieces.insert(part, pieces);
    }
    split
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> io::Result<&'a Arc<dyn Array>> {
    batch
        .column_by_name(name)
        .ok_or_else(|| io::Error::other(format!("the store's table has no column `{name}`")))
}

/// The rows a Parquet file holds, from its footer.
fn rows_in(path: &Path) -> io::Result<u64> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(path)?).map_err(to_io)?;
    Ok(builder.metadata().file_metadata().num_rows().max(0) as u64)
}

/// Rows (runs plus events) of each of the `parts` parts of the store in `dir`, from the
/// footers of its runs and events files.
fn rows_per_part(dir: &Path, parts: u32) -> io::Result<Vec<u64>> {
    (0..parts)
        .map(|p| {
            Ok(rows_in(&dir.join(runs_part_name(p)))?
                + rows_in(&dir.join("events").join(part_file_name(p)))?)
        })
        .collect()
}

/// Rows of each conversation of the parts in `over`, from their runs files.
fn rows_per_conversation(
    dir: &Path,
    over: &[u32],
) -> io::Result<BTreeMap<u32, HashMap<String, u64>>> {
    let mut out = BTreeMap::new();
    for &part in over {
        let builder = ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(
            &dir.join(runs_part_name(part)),
        )?)
        .map_err(to_io)?;
        let wanted = builder
            .parquet_schema()
            .columns()
            .iter()
            .enumerate()
            .filter(|(_, c)| matches!(c.name(), "conversation_id" | "events"))
            .map(|(i, _)| i);
        let projection = ProjectionMask::leaves(builder.parquet_schema(), wanted);
        let reader = builder
            .with_projection(projection)
            .with_batch_size(8192)
            .build()
            .map_err(to_io)?;
        let conversations: &mut HashMap<String, u64> = out.entry(part).or_default();
        for batch in reader {
            let batch = batch.map_err(to_io)?;
            let ids = column(&batch, "conversation_id")?.as_string::<i32>();
            let events = column(&batch, "events")?.as_primitive::<UInt32Type>();
            for i in 0..batch.num_rows() {
                *conversations.entry(ids.value(i).to_string()).or_default() +=
                    1 + u64::from(events.value(i));
            }
        }
    }
    Ok(out)
}

/// Split every part of the complete store in `dir` (its manifest not yet written) that holds
/// more than `max_rows` rows. Returns what was split; a store with no such part is left as it
/// is and costs a read of its files' footers.
pub fn split_large_parts(dir: &Path, parts: u32, max_rows: u64) -> io::Result<Split> {
    let over: Vec<u32> = rows_per_part(dir, parts)?
        .iter()
        .enumerate()
        .filter(|(_, &rows)| rows > max_rows)
        .map(|(p, _)| p as u32)
        .collect();
    let split = match over.is_empty() {
        true => Split {
            parts,
            ..Split::default()
        },
        false => plan(parts, rows_per_conversation(dir, &over)?, max_rows),
    };
    for (&part, pieces) in &split.pieces {
        split_file(&dir.join("events"), &split, part, pieces, false)?;
        split_file(&dir.join(RUNS_DIR), &split, part, pieces, true)?;
    }
    Ok(split)
}

/// The rows of `batch` (of part `part`) whose conversation goes to each of `pieces`.
fn by_piece(
    batch: &RecordBatch,
    split: &Split,
    part: u32,
    pieces: &[u32],
) -> io::Result<Vec<RecordBatch>> {
    let ids = column(batch, "conversation_id")?.as_string::<i32>();
    let to: Vec<u32> = (0..ids.len())
        .map(|i| split.part_of(ids.value(i), part))
        .collect();
    pieces
        .iter()
        .map(|&piece| {
            let keep: BooleanArray = to.iter().map(|&p| Some(p == piece)).collect();
            arrow::compute::filter_record_batch(batch, &keep).map_err(to_io)
        })
        .collect()
}

/// `rows` with every value of its `part` column set to `part`.
fn renumbered(rows: &RecordBatch, part: u32) -> io::Result<RecordBatch> {
    let at = rows.schema().index_of("part").map_err(to_io)?;
    let mut columns = rows.columns().to_vec();
    columns[at] = Arc::new(UInt32Array::from(vec![part; rows.num_rows()]));
    RecordBatch::try_new(rows.schema(), columns).map_err(to_io)
}

/// Write the file of part `part` in `folder` (its events or its runs) into its pieces'
/// files, through temporary names, then put them in place. Runs take their piece's number in
/// their `part` column (`runs`).
fn split_file(
    folder: &Path,
    split: &Split,
    part: u32,
    pieces: &[u32],
    runs: bool,
) -> io::Result<()> {
    let source = folder.join(part_file_name(part));
    let tmp = |p: u32| folder.join(format!(".{}.split", part_file_name(p)));
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(&source)?).map_err(to_io)?;
    let schema = builder.schema().clone();
    let reader = builder.with_batch_size(8192).build().map_err(to_io)?;
    let mut writers = pieces
        .iter()
        .map(|&p| {
            ArrowWriter::try_new(
                File::create(tmp(p))?,
                schema.clone(),
                Some(store_writer_properties()),
            )
            .map_err(to_io)
        })
        .collect::<io::Result<Vec<_>>>()?;
    // Each writer holds its row group until it is flushed: together they hold what one part's
    // writer would.
    let row_group_bytes = (32usize << 20) / pieces.len();
    for batch in reader {
        let batch = batch.map_err(to_io)?;
        for ((writer, rows), &piece) in writers
            .iter_mut()
            .zip(by_piece(&batch, split, part, pieces)?)
            .zip(pieces)
        {
            if rows.num_rows() == 0 {
                continue;
            }
            let rows = if runs {
                renumbered(&rows, piece)?
            } else {
                rows
            };
            writer.write(&rows).map_err(to_io)?;
            if writer.in_progress_size() >= row_group_bytes {
                writer.flush().map_err(to_io)?;
            }
        }
    }
    for writer in writers {
        writer.close().map_err(to_io)?;
    }
    for &p in pieces {
        std::fs::rename(tmp(p), folder.join(part_file_name(p)))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rows(list: &[(&str, u64)]) -> HashMap<String, u64> {
        list.iter().map(|(id, n)| (id.to_string(), *n)).collect()
    }

    /// Conversations in hash order are cut into pieces of at most the limit, a conversation
    /// over it alone; new pieces are numbered after the last part, part by part.
    #[test]
    fn parts_over_the_row_limit_are_cut_into_pieces_numbered_after_the_last_part() {
        let ids = ["a", "b", "c", "d", "e", "f"];
        let mut order: Vec<&str> = ids.to_vec();
        order.sort_by_key(|id| (crate::js::fnv1a(id), id.to_string()));
        let sizes = [4, 4, 4, 25, 1, 1];
        let of_part: Vec<(&str, u64)> = order.iter().copied().zip(sizes).collect();
        let over = BTreeMap::from([(1, rows(&of_part)), (3, rows(&[("x", 11), ("y", 1)]))]);
        let split = plan(4, over, 10);
        // Part 1: 4+4 | 4 | 25 | 1+1; part 3: 11 | 1.
        assert_eq!(
            split.pieces.clone().into_iter().collect::<Vec<_>>(),
            [(1, vec![1, 4, 5, 6]), (3, vec![3, 7])]
        );
        assert_eq!(split.parts, 8);
        let placed: Vec<u32> = order.iter().map(|id| split.part_of(id, 1)).collect();
        assert_eq!(placed, [1, 1, 4, 5, 6, 6]);
        // A conversation of a part not split stays where it is.
        assert_eq!(split.part_of("a", 0), 0);
    }
}
