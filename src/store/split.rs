//! Parts cut by rows as well as by input bytes.
//!
//! An ingest decides its part count before reading, from the input bytes, and files each
//! conversation by the hash of its id ([`super::write::part_of`]). Rows per input byte vary a
//! hundredfold between formats (a tau2 tool result is kilobytes, a tiny message a few dozen
//! bytes), and the audit holds a part's conversations at about 1.2 KB a row, so once every
//! conversation is stored a part holding more than [`PART_ROWS`] rows is split: its
//! conversations, in the order of their hash (then id), are cut into runs of consecutive
//! conversations of at most that many rows each (a conversation larger than that is a piece of
//! its own). The split depends on the stored rows only, never on the order they came in, so a
//! store merged from shards splits as the command line's ingest does.
//!
//! The first of a split part's pieces keeps its number; the others take the numbers after the
//! last part, in the order of the parts split. `runs.parquet` is rewritten with the new part
//! numbers, each row group still holding the runs of one part.

use super::parquet_file::ParquetFile;
use super::write::{part_file_name, store_writer_properties, to_io};
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

/// `runs.parquet` read batch by batch, only the columns named.
fn runs_columns(
    runs: &Path,
    names: &[&str],
) -> io::Result<parquet::arrow::arrow_reader::ParquetRecordBatchReader> {
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(runs)?).map_err(to_io)?;
    let wanted = builder
        .parquet_schema()
        .columns()
        .iter()
        .enumerate()
        .filter(|(_, c)| names.contains(&c.name()))
        .map(|(i, _)| i);
    let projection = ProjectionMask::leaves(builder.parquet_schema(), wanted);
    builder
        .with_projection(projection)
        .with_batch_size(8192)
        .build()
        .map_err(to_io)
}

/// Rows (runs plus their events) of each of the `parts` parts, from `runs.parquet`.
fn rows_per_part(runs: &Path, parts: u32) -> io::Result<Vec<u64>> {
    let mut rows = vec![0u64; parts as usize];
    for batch in runs_columns(runs, &["part", "events"])? {
        let batch = batch.map_err(to_io)?;
        let part = column(&batch, "part")?.as_primitive::<UInt32Type>();
        let events = column(&batch, "events")?.as_primitive::<UInt32Type>();
        for (p, e) in part.values().iter().zip(events.values().iter()) {
            let slot = rows.get_mut(*p as usize).ok_or_else(|| {
                io::Error::other(format!("runs.parquet names part {p} of {parts}"))
            })?;
            *slot += 1 + u64::from(*e);
        }
    }
    Ok(rows)
}

/// Rows of each conversation of the parts in `over`, from `runs.parquet`.
fn rows_per_conversation(
    runs: &Path,
    over: &[u32],
) -> io::Result<BTreeMap<u32, HashMap<String, u64>>> {
    let mut out: BTreeMap<u32, HashMap<String, u64>> =
        over.iter().map(|&p| (p, HashMap::new())).collect();
    for batch in runs_columns(runs, &["conversation_id", "part", "events"])? {
        let batch = batch.map_err(to_io)?;
        let ids = column(&batch, "conversation_id")?.as_string::<i32>();
        let part = column(&batch, "part")?.as_primitive::<UInt32Type>();
        let events = column(&batch, "events")?.as_primitive::<UInt32Type>();
        for i in 0..batch.num_rows() {
            if let Some(conversations) = out.get_mut(&part.value(i)) {
                *conversations.entry(ids.value(i).to_string()).or_default() +=
                    1 + u64::from(events.value(i));
            }
        }
    }
    Ok(out)
}

/// Split every part of the complete store in `dir` (its manifest not yet written) that holds
/// more than `max_rows` rows. Returns what was split; a store with no such part is left as it
/// is and costs one read of `runs.parquet`'s two count columns' pages.
pub fn split_large_parts(dir: &Path, parts: u32, max_rows: u64) -> io::Result<Split> {
    let runs = dir.join("runs.parquet");
    let over: Vec<u32> = rows_per_part(&runs, parts)?
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
        false => plan(parts, rows_per_conversation(&runs, &over)?, max_rows),
    };
    if split.is_empty() {
        return Ok(split);
    }
    for (&part, pieces) in &split.pieces {
        split_events(dir, &split, part, pieces)?;
    }
    renumber_runs(&runs, &split)?;
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

/// Write part `part`'s events into its pieces, through temporary names, then put them in place.
fn split_events(dir: &Path, split: &Split, part: u32, pieces: &[u32]) -> io::Result<()> {
    let events = dir.join("events");
    let source = events.join(part_file_name(part));
    let tmp = |p: u32| events.join(format!(".{}.split", part_file_name(p)));
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
        for (writer, rows) in writers
            .iter_mut()
            .zip(by_piece(&batch, split, part, pieces)?)
        {
            if rows.num_rows() == 0 {
                continue;
            }
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
        std::fs::rename(tmp(p), events.join(part_file_name(p)))?;
    }
    Ok(())
}

/// Rewrite `runs.parquet` with the part numbers after the split, row group by row group; the
/// runs of a split part's row group go into one row group per piece.
fn renumber_runs(runs: &Path, split: &Split) -> io::Result<()> {
    let tmp = runs.with_file_name(".runs.parquet.split");
    let builder =
        ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(runs)?).map_err(to_io)?;
    let schema = builder.schema().clone();
    let groups = builder.metadata().num_row_groups();
    let mut writer = ArrowWriter::try_new(
        File::create(&tmp)?,
        schema.clone(),
        Some(store_writer_properties()),
    )
    .map_err(to_io)?;
    let part_at = schema.index_of("part").map_err(to_io)?;
    for group in 0..groups {
        let reader = ParquetRecordBatchReaderBuilder::try_new(ParquetFile::open(runs)?)
            .map_err(to_io)?
            .with_row_groups(vec![group])
            .build()
            .map_err(to_io)?;
        let mut batches: BTreeMap<u32, Vec<RecordBatch>> = BTreeMap::new();
        for batch in reader {
            let batch = batch.map_err(to_io)?;
            let ids = column(&batch, "conversation_id")?.as_string::<i32>();
            let old = column(&batch, "part")?.as_primitive::<UInt32Type>();
            let new: UInt32Array = (0..batch.num_rows())
                .map(|i| Some(split.part_of(ids.value(i), old.value(i))))
                .collect();
            let mut columns = batch.columns().to_vec();
            columns[part_at] = Arc::new(new.clone());
            let renumbered = RecordBatch::try_new(schema.clone(), columns).map_err(to_io)?;
            let mut numbers: Vec<u32> = new.values().to_vec();
            numbers.sort_unstable();
            numbers.dedup();
            for p in numbers {
                let keep: BooleanArray = new.values().iter().map(|&n| Some(n == p)).collect();
                let rows =
                    arrow::compute::filter_record_batch(&renumbered, &keep).map_err(to_io)?;
                batches.entry(p).or_default().push(rows);
            }
        }
        for (_, list) in batches {
            for rows in list {
                writer.write(&rows).map_err(to_io)?;
            }
            writer.flush().map_err(to_io)?;
        }
    }
    writer.close().map_err(to_io)?;
    std::fs::rename(&tmp, runs)
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
