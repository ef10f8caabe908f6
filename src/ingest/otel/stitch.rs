//! The spans of one trace, joined across the files of an ingest until the trace is complete.

use std::collections::{BTreeMap, HashMap, HashSet};

use super::assemble::{assemble, note, Built};
use super::span::{is_complete, Span, SpanBatch};
use crate::ingest::{Severity, Sink};

/// Joins the spans of each trace across the files of one ingest, and builds a trace's runs once
/// it is complete. Batches must be given in input order; the output then does not depend on
/// how files were read.
#[derive(Debug, Default)]
pub struct Stitcher {
    /// Incomplete traces, by arrival.
    pending: BTreeMap<u64, Pending>,
    by_trace: HashMap<String, u64>,
    next: u64,
    /// The span ids of every trace already built.
    built: HashMap<String, HashSet<String>>,
}

#[derive(Debug)]
struct Pending {
    trace_id: String,
    spans: Vec<Span>,
    ids: HashSet<String>,
}

impl Pending {
    fn is_complete(&self) -> bool {
        is_complete(self.spans.iter())
    }
}

impl Stitcher {
    /// Take one file's spans; build every trace that is now complete.
    pub fn add(&mut self, batch: SpanBatch, sink: &mut dyn Sink) {
        let mut built = Built::default();
        for (trace_id, spans) in batch.traces {
            if let Some(seen) = self.built.get(&trace_id) {
                let late: Vec<&Span> = spans
                    .iter()
                    .filter(|s| !seen.contains(&s.span_id))
                    .collect();
                if late.is_empty() {
                    // The same spans again (one export given twice, or as JSON and as JSONL):
                    // build them again; the ingest keeps the first copy of each run and says so.
                    assemble(&trace_id, spans, sink, &mut built);
                } else {
                    for s in late {
                        sink.quarantine(note(
                            s,
                            Severity::Dropped,
                            format!(
                                "span {} ({:?}) of trace {trace_id} was read after the trace had \
                                 been assembled from earlier input; it is not merged",
                                s.span_id, s.name
                            ),
                        ));
                    }
                }
                continue;
            }
            let key = match self.by_trace.get(&trace_id) {
                Some(&k) => k,
                None => {
                    let k = self.next;
                    self.next += 1;
                    self.by_trace.insert(trace_id.clone(), k);
                    self.pending.insert(
                        k,
                        Pending {
                            trace_id: trace_id.clone(),
                            spans: Vec::new(),
                            ids: HashSet::new(),
                        },
                    );
                    k
                }
            };
            let piece = self.pending.get_mut(&key).expect("pending trace");
            for s in spans {
                // A span read twice inside one trace: the first copy is kept, and the second is
                // a record not stored, so it is said to be dropped (the counts reconcile).
                if piece.ids.insert(s.span_id.clone()) {
                    piece.spans.push(s);
                } else {
                    sink.quarantine(note(
                        &s,
                        Severity::Dropped,
                        format!(
                            "span {} ({:?}) of trace {trace_id} was read before in this ingest; \
                             the first copy is kept and this one is not merged",
                            s.span_id, s.name
                        ),
                    ));
                }
            }
            if piece.is_complete() {
                let piece = self.pending.remove(&key).expect("pending trace");
                self.close(piece, sink, &mut built);
            }
        }
        built.flush(sink);
    }

    /// Every input has been read: build the traces that never became complete.
    pub fn finish(&mut self, sink: &mut dyn Sink) {
        let mut built = Built::default();
        for (_, piece) in std::mem::take(&mut self.pending) {
            let ids: HashSet<&str> = piece.ids.iter().map(String::as_str).collect();
            let orphans: Vec<&Span> = piece
                .spans
                .iter()
                .filter(|s| {
                    !s.remote_parent
                        && s.parent_id
                            .as_ref()
                            .is_some_and(|p| !ids.contains(p.as_str()))
                })
                .collect();
            if let Some(first) = orphans.first() {
                let mut parents: Vec<&str> = orphans
                    .iter()
                    .filter_map(|s| s.parent_id.as_deref())
                    .collect();
                parents.sort_unstable();
                parents.dedup();
                sink.quarantine(note(
                    first,
                    Severity::Partial,
                    format!(
                        "trace {}: {} span(s) name parent span(s) {} that no input held; the \
                         trace was assembled from the spans present (a part of it may be in a \
                         file not given to this ingest)",
                        piece.trace_id,
                        orphans.len(),
                        parents.join(", ")
                    ),
                ));
            }
            self.close(piece, sink, &mut built);
        }
        self.by_trace.clear();
        built.flush(sink);
    }

    fn close(&mut self, piece: Pending, sink: &mut dyn Sink, built: &mut Built) {
        self.by_trace.remove(&piece.trace_id);
        self.built.insert(piece.trace_id.clone(), piece.ids);
        assemble(&piece.trace_id, piece.spans, sink, built);
    }
}

/// Build one file's traces at once, as if no other input existed.
#[cfg(test)]
pub fn assemble_batch(batch: SpanBatch, sink: &mut dyn Sink) {
    let mut stitcher = Stitcher::default();
    stitcher.add(batch, sink);
    stitcher.finish(sink);
}

impl crate::ingest::Stitch for Stitcher {
    fn add(&mut self, fragment: crate::ingest::Fragment, sink: &mut dyn Sink) {
        match fragment.data.downcast::<SpanBatch>() {
            Ok(batch) => Stitcher::add(self, *batch, sink),
            Err(_) => {
                unreachable!("only the OpenTelemetry reader hands fragments to this stitcher")
            }
        }
    }
    fn finish(&mut self, sink: &mut dyn Sink) {
        Stitcher::finish(self, sink)
    }
    fn keys(&self, fragment: &crate::ingest::Fragment) -> Vec<String> {
        match fragment.data.downcast_ref::<SpanBatch>() {
            Some(batch) => batch.traces.iter().map(|(id, _)| id.clone()).collect(),
            None => Vec::new(),
        }
    }
}
