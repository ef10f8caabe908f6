//! Stored rows made whole conversations again: a part's decoded events handed to their runs
//! ([`gather`]), the runs table's rows ([`RunRow`]), and the two tables of a store held in
//! memory ([`conversations_from_batches`]).

use crate::model::digest::{DigestKind, DigestValue, Digests, EvidenceDigest};
use crate::model::{Conversation, Event, EventKind, Role, Run};
use crate::store::row_groups::{col, opt_large, opt_str};
use crate::store::write::{to_io, Origin};
use crate::store::StoreSpec;
use arrow::array::{
    Array, AsArray, BooleanArray, Float64Array, LargeStringArray, StringArray,
    TimestampMillisecondArray, UInt32Array, UInt64Array,
};
use arrow::record_batch::RecordBatch;
use hashbrown::HashMap;
use rayon::prelude::*;
use std::collections::HashSet;
use std::io;

/// A run as the runs table describes it (events not loaded).
#[derive(Debug, Clone)]
pub struct RunRow {
    pub run: Run,
    pub part: u32,
    pub origin: Origin,
    pub landings: u32,
    pub events: u32,
}

/// The rows of `batches` (of `only_part` when given); answers carry their evidence digest
/// under `evidence` when it is given (the name of the evidence digest asked for and held).
pub(super) fn runs_from(
    batches: Vec<RecordBatch>,
    only_part: Option<u32>,
    evidence: Option<&'static str>,
    superseded: &HashSet<String>,
) -> io::Result<Vec<RunRow>> {
    // Sized up front: a part's runs are tens of thousands of rows, grown by doubling otherwise.
    let mut rows = Vec::with_capacity(batches.iter().map(RecordBatch::num_rows).sum());
    for batch in batches {
        let run_id = col::<StringArray>(&batch, "run_id")?;
        let conversation_id = col::<StringArray>(&batch, "conversation_id")?;
        let turn = col::<UInt32Array>(&batch, "turn")?;
        let format = col::<StringArray>(&batch, "format")?;
        let source = col::<StringArray>(&batch, "source")?;
        let agent = col::<StringArray>(&batch, "agent")?;
        let model = col::<StringArray>(&batch, "model")?;
        let started = col::<TimestampMillisecondArray>(&batch, "started_at")?;
        let ended = col::<TimestampMillisecondArray>(&batch, "ended_at")?;
        let duration = col::<Float64Array>(&batch, "duration_ms")?;
        // Absent when the read leaves it out.
        let user_message = batch
            .column_by_name("user_message")
            .map(|_| col::<LargeStringArray>(&batch, "user_message"))
            .transpose()?;
        let answer = batch
            .column_by_name("answer")
            .map(|_| col::<LargeStringArray>(&batch, "answer"))
            .transpose()?;
        let answer_forms = col::<LargeStringArray>(&batch, "answer_forms")?;
        let answer_offers = col::<UInt32Array>(&batch, "answer_offers")?;
        let landings = col::<UInt32Array>(&batch, "landings")?;
        let events = col::<UInt32Array>(&batch, "events")?;
        let part = col::<UInt32Array>(&batch, "part")?;
        let input_index = col::<UInt32Array>(&batch, "input_index")?;
        let record_index = col::<UInt64Array>(&batch, "record_index")?;
        for i in 0..batch.num_rows() {
            if only_part.is_some_and(|p| p != part.value(i))
                || (!superseded.is_empty() && superseded.contains(conversation_id.value(i)))
            {
                continue;
            }
            let mut answer_digests = Digests::default();
            if let (Some(name), false) = (evidence, answer_forms.is_null(i)) {
                let digest = EvidenceDigest {
                    forms: answer_forms.value(i).to_string(),
                    offered: answer_offers.value(i),
                };
                answer_digests.set(name, DigestValue::Evidence(digest));
            }
            rows.push(RunRow {
                run: Run {
                    run_id: run_id.value(i).to_string(),
                    conversation_id: conversation_id.value(i).to_string(),
                    turn: turn.value(i),
                    format: format.value(i).to_string(),
                    source: source.value(i).to_string(),
                    agent: opt_str(agent, i),
                    model: opt_str(model, i),
                    started_ms: (!started.is_null(i)).then(|| started.value(i)),
                    ended_ms: (!ended.is_null(i)).then(|| ended.value(i)),
                    duration_ms: (!duration.is_null(i)).then(|| duration.value(i)),
                    user_message: user_message.and_then(|u| opt_large(u, i)),
                    answer: answer.and_then(|a| opt_large(a, i)),
                    events: Vec::new(),
                    answer_digests,
                },
                part: part.value(i),
                origin: Origin {
                    input_index: input_index.value(i),
                    record_index: record_index.value(i),
                },
                landings: landings.value(i),
                events: events.value(i),
            });
        }
    }
    Ok(rows)
}

/// The conversations of one part from its runs and their decoded events (`groups`: what each
/// row group holds of each run, in row-group order; pieces of runs not among `part_runs` are
/// dropped), in the store's order (by origin, then id; runs by turn, start time, origin, id;
/// events by `seq`), each with its origin (the earliest of its runs').
///
/// The pieces are handed to their runs and each run's events put in order on the pool, so the
/// other core does not wait while a part's runs are assembled.
pub(super) fn gather(
    part_runs: Vec<RunRow>,
    groups: Vec<Vec<(String, Pieces)>>,
) -> Vec<(Origin, Conversation)> {
    // Where each run's pieces go. Of two rows with one id (no store written here has them),
    // the first takes the events, whatever the thread count.
    let mut place: HashMap<&str, usize> = HashMap::with_capacity(part_runs.len());
    for (i, row) in part_runs.iter().enumerate() {
        place.entry(row.run.run_id.as_str()).or_insert(i);
    }
    let slots: Vec<std::sync::Mutex<Pieces>> =
        part_runs.iter().map(|_| Default::default()).collect();
    // Group by group, so a run split across row groups keeps its stored order.
    for group in groups {
        group.into_par_iter().for_each(|(run_id, pieces)| {
            if let Some(&i) = place.get(run_id.as_str()) {
                let mut slot = slots[i].lock().unwrap_or_else(|e| e.into_inner());
                if slot.events.is_empty() {
                    slot.events = pieces.events;
                } else {
                    slot.events.extend(pieces.events);
                }
                slot.borrowed.extend(pieces.borrowed);
            }
        });
    }
    drop(place);
    let runs: Vec<(Origin, Run)> = part_runs
        .into_par_iter()
        .zip(slots)
        .map(|(row, slot)| {
            let pieces = slot.into_inner().unwrap_or_else(|e| e.into_inner());
            let mut run = row.run;
            run.events = pieces.events;
            // Pieces mostly arrive in order already; checking is cheaper than sorting events.
            if !run.events.is_sorted_by_key(|e| e.seq) {
                run.events.sort_by_key(|e| e.seq);
            }
            if !pieces.borrowed.is_empty() {
                lend_texts(&mut run.events, &pieces.borrowed);
            }
            (row.origin, run)
        })
        .collect();
    // The runs are moved into their conversations, not copied.
    type Gathered = (Origin, Vec<(Origin, Run)>);
    let mut conversations: HashMap<String, Gathered> = HashMap::new();
    for (origin, run) in runs {
        let entry = match conversations.get_mut(run.conversation_id.as_str()) {
            Some(entry) => entry,
            None => conversations
                .entry(run.conversation_id.clone())
                .or_insert((origin, Vec::new())),
        };
        entry.0 = entry.0.min(origin);
        entry.1.push((origin, run));
    }
    let mut list: Vec<(String, Gathered)> = conversations.into_iter().collect();
    list.sort_by(|a, b| (a.1 .0, &a.0).cmp(&(b.1 .0, &b.0)));
    list.into_par_iter()
        .map(|(id, (origin, mut runs))| {
            runs.sort_by(|(oa, a), (ob, b)| {
                (a.turn, a.started_ms, oa, &a.run_id).cmp(&(b.turn, b.started_ms, ob, &b.run_id))
            });
            let conversation = Conversation {
                id,
                runs: runs.into_iter().map(|(_, r)| r).collect(),
            };
            (origin, conversation)
        })
        .collect()
}

/// A column's values as the store's `schema` types it (the other columns are dropped). Text may
/// come as utf8, large_utf8 or utf8_view, numbers as any type that holds the value. A column
/// missing, a value that does not fit, or a null where the store has none is an error naming
/// the column of `table`.
pub(super) fn conform(
    batch: &RecordBatch,
    schema: &arrow::datatypes::Schema,
    table: &str,
) -> io::Result<RecordBatch> {
    let bad = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    let options = arrow::compute::CastOptions {
        // A value that does not fit is an error, never a null.
        safe: false,
        ..Default::default()
    };
    let mut columns = Vec::with_capacity(schema.fields().len());
    for field in schema.fields() {
        let name = field.name();
        let column = batch
            .column_by_name(name)
            .ok_or_else(|| bad(format!("the {table} table has no column `{name}`")))?;
        let column = if column.data_type() == field.data_type() {
            column.clone()
        } else {
            arrow::compute::cast_with_options(column, field.data_type(), &options).map_err(|e| {
                bad(format!(
                    "column `{name}` of the {table} table ({}) cannot be read as {}: {e}",
                    column.data_type(),
                    field.data_type()
                ))
            })?
        };
        if !field.is_nullable() && column.null_count() > 0 {
            return Err(bad(format!(
                "column `{name}` of the {table} table holds {} null(s); the store has none there",
                column.null_count()
            )));
        }
        columns.push(column);
    }
    RecordBatch::try_new(std::sync::Arc::new(schema.clone()), columns).map_err(to_io)
}

/// Whole conversations from the two tables of a store held in memory, in the store's schema:
/// events of any number of parts and the rows of their runs. Given back in the store's order
/// (by part, then as [`crate::store::Store::read_part_ordered`] orders a part), with their parts and origins.
///
/// The tables must hold whole conversations: an event whose run is not among the runs, or a run
/// with more or fewer events than its row counts (`events`), is an error of kind
/// `InvalidInput` naming the conversation, as is a column that is missing or cannot be read
/// as the store's (see `conform`). Events carry the digests of `spec`.
pub fn conversations_from_batches(
    runs: &[RecordBatch],
    events: &[RecordBatch],
    spec: &StoreSpec,
) -> io::Result<Vec<(u32, Origin, Conversation)>> {
    let bad = |msg: String| io::Error::new(io::ErrorKind::InvalidInput, msg);
    let runs_schema = super::schema::runs_read_schema();
    let all_events = super::schema::events_schema();
    // Archived envelopes are never read back (see `StoreSpec::envelope_is_checked`).
    let events_schema = arrow::datatypes::Schema::new(
        all_events
            .fields()
            .iter()
            .filter(|f| f.name() != "archived_payload")
            .cloned()
            .collect::<Vec<_>>(),
    );
    let runs = runs
        .iter()
        .map(|b| conform(b, &runs_schema, "runs"))
        .collect::<io::Result<Vec<_>>>()?;
    let events = events
        .iter()
        .map(|b| conform(b, &events_schema, "events"))
        .collect::<io::Result<Vec<_>>>()?;
    let names = DigestNames {
        fingerprint: spec.digest_of(DigestKind::Fingerprint).map(|d| d.name()),
        arguments: spec
            .digest_of(DigestKind::ArgumentsFingerprint)
            .map(|d| d.name()),
        evidence: spec.digest_of(DigestKind::Evidence).map(|d| d.name()),
    };
    let mut rows = runs_from(runs, None, names.evidence, &HashSet::new())?;
    let mut expected: HashMap<&str, (&RunRow, u32)> = HashMap::with_capacity(rows.len());
    for row in &rows {
        if expected.insert(row.run.run_id.as_str(), (row, 0)).is_some() {
            return Err(bad(format!(
                "run {:?} (conversation {:?}) is listed twice in the runs table",
                row.run.run_id, row.run.conversation_id
            )));
        }
    }
    // Every event must belong to a listed run of its conversation, and every run must be whole.
    for batch in &events {
        let run_id = batch
            .column_by_name("run_id")
            .expect("conformed")
            .as_string::<i32>();
        let conversation = batch
            .column_by_name("conversation_id")
            .expect("conformed")
            .as_string::<i32>();
        for i in 0..batch.num_rows() {
            let (run, conversation) = (run_id.value(i), conversation.value(i));
            match expected.get_mut(run) {
                Some((row, n)) if row.run.conversation_id == conversation => *n += 1,
                Some((row, _)) => {
                    return Err(bad(format!(
                        "conversation {conversation:?} is incomplete: its event names run \
                         {run:?}, which the runs table gives to conversation {:?}",
                        row.run.conversation_id
                    )))
                }
                None => {
                    return Err(bad(format!(
                        "conversation {conversation:?} is incomplete: an event of run {run:?} \
                         has no row in the runs table"
                    )))
                }
            }
        }
    }
    let mut short: Vec<(&RunRow, u32)> = expected
        .into_values()
        .filter(|(row, n)| row.events != *n)
        .collect();
    short.sort_by(|a, b| a.0.run.run_id.cmp(&b.0.run.run_id));
    if let Some((row, n)) = short.first() {
        return Err(bad(format!(
            "conversation {:?} is incomplete: run {:?} has {n} of the {} events its row counts",
            row.run.conversation_id, row.run.run_id, row.events
        )));
    }
    let mut pieces_by_run: HashMap<String, Pieces> = HashMap::new();
    for batch in &events {
        append_events(batch, names, &mut pieces_by_run)?;
    }
    // A conversation of the store lies in one part; tables that say otherwise are not a store's.
    let mut part_of: HashMap<&str, u32> = HashMap::new();
    for row in &rows {
        if let Some(&p) = part_of.get(row.run.conversation_id.as_str()) {
            if p != row.part {
                return Err(bad(format!(
                    "conversation {:?} lies in parts {p} and {} of the runs table; a store keeps \
                     a conversation in one part",
                    row.run.conversation_id, row.part
                )));
            }
        }
        part_of.insert(row.run.conversation_id.as_str(), row.part);
    }
    // The map borrows the rows, which are sorted next.
    drop(part_of);
    rows.sort_by_key(|r| r.part);
    let mut by_part: Vec<Vec<RunRow>> = Vec::new();
    for row in rows {
        match by_part.last_mut() {
            Some(last) if last[0].part == row.part => last.push(row),
            _ => by_part.push(vec![row]),
        }
    }
    let mut out = Vec::new();
    for chunk in by_part {
        let part = chunk[0].part;
        let pieces: Vec<(String, Pieces)> = chunk
            .iter()
            .filter_map(|row| pieces_by_run.remove_entry(row.run.run_id.as_str()))
            .collect();
        out.extend(
            gather(chunk, vec![pieces])
                .into_iter()
                .map(|(origin, c)| (part, origin, c)),
        );
    }
    Ok(out)
}

/// The run order within a conversation read back from the store: turn, start time, then (runs
/// of one stored message share their origin) run id.
pub(super) fn run_order(run: &Run) -> (u32, Option<i64>, &str) {
    (run.turn, run.started_ms, &run.run_id)
}

/// `conversation` exactly as [`crate::store::Store::read_part`] would hand it back, if it were stored alone
/// as one message: events kind-tagged and in `seq` order, runs in stored order, and envelopes
/// the checks do not read left out. Reshaped in place, never copied: the caller is done with
/// it (an audit of raw inputs checks a conversation once the writer has stored it, and gets
/// what an audit of the store gets). `None` when the store could not give it back as one
/// conversation (a run names another conversation).
pub fn into_stored(mut conversation: Conversation, spec: &StoreSpec) -> Option<Conversation> {
    if conversation
        .runs
        .iter()
        .any(|r| r.conversation_id != conversation.id)
    {
        return None;
    }
    // Stable sorts: already-ordered runs and events (the common case) cost one pass.
    conversation
        .runs
        .sort_by(|a, b| run_order(a).cmp(&run_order(b)));
    for run in &mut conversation.runs {
        run.events.sort_by_key(|e| e.seq);
        for e in &mut run.events {
            let kind = e.kind();
            if e.payload.is_some() && !spec.envelope_is_checked(kind, e.source_type.as_deref()) {
                e.payload = None;
            }
            e.kind = Some(kind);
        }
    }
    Some(conversation)
}

/// A tool message stored without its text because a landing of its run holds the same
/// (`result_text_of`): the event at `seq` of run `run_id` takes the text of the one at `from`.
/// What a row group (or a table held in memory) holds of one run: its events in stored order,
/// and which of them borrow the text of another event of the run, as (seq, from).
#[derive(Default)]
pub(super) struct Pieces {
    pub(super) events: Vec<Event>,
    pub(super) borrowed: Vec<(u32, u32)>,
}

/// Give each borrowing event (`(seq, from)`) the text of the event it names. The events are in
/// `seq` order.
pub(super) fn lend_texts(events: &mut [Event], borrowed: &[(u32, u32)]) {
    for &(seq, from) in borrowed {
        let text = events
            .binary_search_by_key(&from, |e| e.seq)
            .ok()
            .and_then(|i| events[i].text.clone());
        if let Ok(i) = events.binary_search_by_key(&seq, |e| e.seq) {
            if events[i].text.is_none() {
                events[i].text = text;
            }
        }
    }
}

/// Digest names by the column they are read from; `None`: the column is not read into events.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct DigestNames {
    pub(super) fingerprint: Option<&'static str>,
    pub(super) arguments: Option<&'static str>,
    pub(super) evidence: Option<&'static str>,
}

pub(super) fn append_events(
    batch: &RecordBatch,
    names: DigestNames,
    out: &mut HashMap<String, Pieces>,
) -> io::Result<()> {
    let run_id = col::<StringArray>(batch, "run_id")?;
    let seq = col::<UInt32Array>(batch, "seq")?;
    let kind = col::<StringArray>(batch, "kind")?;
    let source_type = col::<StringArray>(batch, "source_type")?;
    let role = col::<StringArray>(batch, "role")?;
    let tool_name = col::<StringArray>(batch, "tool_name")?;
    let call_id = col::<StringArray>(batch, "call_id")?;
    // Absent when the read leaves it out for the arguments fingerprint digest.
    let arguments = batch
        .column_by_name("arguments")
        .map(|_| col::<LargeStringArray>(batch, "arguments"))
        .transpose()?;
    let text = col::<LargeStringArray>(batch, "text")?;
    // Absent when the read leaves the text of tool results and other messages out.
    let result_text = batch
        .column_by_name("result_text")
        .map(|_| col::<LargeStringArray>(batch, "result_text"))
        .transpose()?;
    let message_text = batch
        .column_by_name("message_text")
        .map(|_| col::<LargeStringArray>(batch, "message_text"))
        .transpose()?;
    let result_text_of = col::<UInt32Array>(batch, "result_text_of")?;
    let arguments_fingerprint = col::<StringArray>(batch, "arguments_fingerprint")?;
    let result_fingerprint = col::<StringArray>(batch, "result_fingerprint")?;
    let evidence_forms = col::<LargeStringArray>(batch, "evidence_forms")?;
    let evidence_offers = col::<UInt32Array>(batch, "evidence_offers")?;
    let error = col::<BooleanArray>(batch, "error")?;
    let flags = col::<UInt32Array>(batch, "flags")?;
    let iteration = col::<UInt32Array>(batch, "iteration")?;
    let timestamp = col::<TimestampMillisecondArray>(batch, "timestamp")?;
    let duration = col::<Float64Array>(batch, "duration_ms")?;
    // Only the checked envelopes: `archived_payload` is left out of the projection
    // (`Store::read_part_where`), so it is never decoded.
    let payload = col::<LargeStringArray>(batch, "payload")?;
    // One row as its run's event, and the event whose text it borrows, if any.
    let event_at = |i: usize| -> (Event, Option<(u32, u32)>) {
        let lends = (result_text.is_some() && !result_text_of.is_null(i))
            .then(|| (seq.value(i), result_text_of.value(i)));
        let event_kind = EventKind::parse(kind.value(i)).unwrap_or(EventKind::Other);
        let mut e = Event {
            seq: seq.value(i),
            kind: Some(event_kind),
            source_type: opt_str(source_type, i),
            role: (!role.is_null(i))
                .then(|| Role::parse(role.value(i)))
                .flatten(),
            tool_name: opt_str(tool_name, i),
            call_id: opt_str(call_id, i),
            arguments: arguments.and_then(|a| opt_large(a, i)),
            text: match (result_text, message_text) {
                _ if !text.is_null(i) => opt_large(text, i),
                (Some(results), _) if !results.is_null(i) => opt_large(results, i),
                (_, Some(messages)) => opt_large(messages, i),
                _ => None,
            },
            error: error.value(i),
            flags: flags.value(i),
            iteration: (!iteration.is_null(i)).then(|| iteration.value(i)),
            timestamp_ms: (!timestamp.is_null(i)).then(|| timestamp.value(i)),
            duration_ms: (!duration.is_null(i)).then(|| duration.value(i)),
            payload: opt_large(payload, i),
            digests: Digests::default(),
        };
        if let (Some(name), false) = (names.arguments, arguments_fingerprint.is_null(i)) {
            let value = arguments_fingerprint.value(i).to_string();
            e.digests
                .set(name, DigestValue::ArgumentsFingerprint(value));
        }
        if let (Some(name), false) = (names.fingerprint, result_fingerprint.is_null(i)) {
            let value = result_fingerprint.value(i).to_string();
            e.digests.set(name, DigestValue::Fingerprint(value));
        }
        if let (Some(name), false) = (names.evidence, evidence_forms.is_null(i)) {
            let digest = EvidenceDigest {
                forms: evidence_forms.value(i).to_string(),
                offered: evidence_offers.value(i),
            };
            e.digests.set(name, DigestValue::Evidence(digest));
        }
        (e, lends)
    };
    // A run's events usually lie together in a batch (the writer stores a conversation's runs
    // one after the other): each stretch of one run is looked up once, and a run first met in
    // a stretch gets a vector of that size, not one grown by doubling (a part's events are
    // most of a store audit's live memory).
    let rows = batch.num_rows();
    let mut start = 0;
    while start < rows {
        let id = run_id.value(start);
        let end = (start + 1..rows)
            .find(|&j| run_id.value(j) != id)
            .unwrap_or(rows);
        let pieces = match out.get_mut(id) {
            Some(pieces) => pieces,
            None => out.entry(id.to_string()).or_default(),
        };
        match pieces.events.is_empty() {
            true => pieces.events.reserve_exact(end - start),
            false => pieces.events.reserve(end - start),
        }
        for i in start..end {
            let (event, lends) = event_at(i);
            pieces.events.push(event);
            pieces.borrowed.extend(lends);
        }
        start = end;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::write::EventsBuilder;

    fn event(seq: u32, text: &str) -> Event {
        let mut e = Event::new(EventKind::Message);
        e.seq = seq;
        e.text = Some(text.into());
        e
    }

    /// Rows are given to their runs in row order whether a run's rows lie together or not, and
    /// a run first met in a stretch of rows gets a vector of that stretch's size.
    #[test]
    fn rows_go_to_their_runs_in_order_when_runs_interleave() {
        let mut builder = EventsBuilder::new(crate::pipeline::store_spec().clone(), 1 << 20);
        let run = |id: &str| Run {
            run_id: id.to_string(),
            conversation_id: "c".to_string(),
            ..Run::default()
        };
        let (a, b) = (run("a"), run("b"));
        builder.push(&a, &event(0, "a0"));
        builder.push(&a, &event(1, "a1"));
        builder.push(&b, &event(0, "b0"));
        builder.push(&a, &event(2, "a2"));
        builder.push(&b, &event(1, "b1"));
        builder.push(&b, &event(2, "b2"));
        builder.push(&b, &event(3, "b3"));
        let batch = builder.finish().unwrap();
        let mut out = HashMap::new();
        append_events(&batch, DigestNames::default(), &mut out).unwrap();
        let texts = |id: &str| -> Vec<String> {
            out[id]
                .events
                .iter()
                .map(|e| e.text.clone().unwrap())
                .collect()
        };
        assert_eq!(texts("a"), ["a0", "a1", "a2"]);
        assert_eq!(texts("b"), ["b0", "b1", "b2", "b3"]);
        assert_eq!(out.len(), 2);
        // `b` was first met in a stretch of one row, then grew as vectors do; a run met in one
        // stretch holds exactly its rows.
        let mut whole = HashMap::new();
        let mut builder = EventsBuilder::new(crate::pipeline::store_spec().clone(), 1 << 20);
        for seq in 0..5 {
            builder.push(&a, &event(seq, "x"));
        }
        append_events(
            &builder.finish().unwrap(),
            DigestNames::default(),
            &mut whole,
        )
        .unwrap();
        assert_eq!(whole["a"].events.capacity(), 5);
    }
}
