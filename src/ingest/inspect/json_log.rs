//! Inspect JSON logs, walked with the scanner one sample at a time.

use std::cell::Cell;
use std::collections::HashMap;
use std::io::{self, Read, Seek};
use std::marker::PhantomData;

use serde_json::Value;

use crate::ingest::json_pick::{
    broken_at, dropped, partial, python_note, whole_file, Picked, Shape, Tracked,
};
use crate::ingest::json_scan::{ScanError, Scanner};
use crate::ingest::{Input, Locator, Sink};

use super::sample::*;

// ---------------------------------------------------------------------------------------------
// JSON logs.
// ---------------------------------------------------------------------------------------------

pub(super) fn read_json(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let mut scan = match Scanner::open(input.path, &input.limits)? {
        Ok(scan) => scan,
        Err(not_json) => {
            whole_file(
                input,
                sink,
                FORMAT,
                not_json.reason("nothing but blanks", "a JSON document"),
            );
            return Ok(());
        }
    };
    let mut log = Log {
        input,
        sink,
        spec: EvalSpec::default(),
        outcome: Outcome::default(),
        seen: HashMap::new(),
    };
    let mut top = TopState {
        current: Cell::new(None),
        next: 0,
        samples: None,
        top_kind: None,
        python_outside: 0,
    };
    let outcome = top.document(&mut scan, &mut log).and_then(|()| scan.end());
    top.python_outside += scan.take_python_numbers();
    if top.python_outside > 0 {
        log.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            python_note(top.python_outside, "outside the samples"),
        ));
    }
    if let Err(err) = outcome {
        let (err, offset) = scan.describe(err)?;
        broken_at(
            input,
            log.sink,
            FORMAT,
            ["sample", "log"],
            &err,
            top.current.get(),
            offset,
        );
        return Ok(());
    }
    if let Some(kind) = top.top_kind {
        whole_file(
            input,
            log.sink,
            FORMAT,
            format!("the document is {kind}, not an Inspect log object"),
        );
        return Ok(());
    }
    match top.samples {
        Some(Ok(())) if top.next > 0 => {}
        Some(Ok(())) => {
            let reason = log.outcome.no_samples("its samples list is empty");
            whole_file(input, log.sink, FORMAT, reason)
        }
        None | Some(Err("null")) => {
            let reason = log.outcome.no_samples("it has no samples list");
            whole_file(input, log.sink, FORMAT, reason)
        }
        Some(Err(kind)) => whole_file(
            input,
            log.sink,
            FORMAT,
            format!("the log's samples is {kind}, not a list"),
        ),
    }
    Ok(())
}

/// Where the walk of a JSON log stands.
pub(super) struct TopState {
    /// The sample being parsed, while it is parsed.
    current: Cell<Option<u64>>,
    next: u64,
    samples: Option<Shape<()>>,
    top_kind: Option<&'static str>,
    /// Python's special numbers read as `null` outside any sample.
    python_outside: u64,
}

impl TopState {
    /// The log's top level: an object whose `eval` names the task and whose `samples` are read
    /// one at a time; everything else is skipped unbuilt.
    fn document<R: Read + Seek>(
        &mut self,
        scan: &mut Scanner<R>,
        log: &mut Log<'_, '_>,
    ) -> Result<(), ScanError> {
        if scan.peek()? == Some(b'[') {
            scan.drain_list()?;
            self.top_kind = Some("a list");
            return Ok(());
        }
        let mut object = scan.enter();
        while let Some(key) = scan.next_key(&mut object)? {
            match key.as_str() {
                "eval" => match scan.parse(Picked(EvalSpec::default())) {
                    Ok(Ok(spec)) => log.spec = spec,
                    Ok(Err(_)) => {}
                    Err(ScanError::Skipped(reason)) => log.sink.quarantine(partial(
                        log.input,
                        FORMAT,
                        Locator::File,
                        format!(
                            "the log's eval {reason}; it was passed over, and the task and model \
                             are unknown"
                        ),
                    )),
                    Err(err) => return Err(err),
                },
                "samples" => {
                    let shape = self.samples(scan, log)?;
                    self.samples = Some(shape);
                }
                "status" | "error" => match scan.parse(PhantomData::<Value>) {
                    Ok(value) => log.outcome.take(&key, value),
                    Err(ScanError::Skipped(_)) => {}
                    Err(err) => return Err(err),
                },
                _ => scan.skip()?,
            }
        }
        Ok(())
    }

    /// The `samples` list, one sample at a time.
    fn samples<R: Read + Seek>(
        &mut self,
        scan: &mut Scanner<R>,
        log: &mut Log<'_, '_>,
    ) -> Result<Shape<()>, ScanError> {
        let kind = match scan.peek()? {
            Some(b'[') => None,
            Some(b'{') => Some("an object"),
            Some(b'"') => Some("a string"),
            Some(b'n') => Some("null"),
            Some(b't' | b'f') => Some("a boolean"),
            _ => Some("a number"),
        };
        if let Some(kind) = kind {
            scan.skip()?;
            return Ok(Err(kind));
        }
        let mut list = scan.enter();
        while scan.next_element(&mut list)? {
            let index = self.next;
            self.python_outside += scan.take_python_numbers();
            let item = scan.parse(Tracked {
                current: &self.current,
                index,
                inner: Picked(RawSample::default()),
            });
            match item {
                Ok(sample) => {
                    self.next += 1;
                    log.sink.records_read(1);
                    let python = scan.take_python_numbers();
                    log.sample(index, &format!("sample {index}"), sample, python);
                }
                Err(ScanError::Skipped(reason)) => {
                    self.next += 1;
                    self.current.set(None);
                    log.sink.records_read(1);
                    log.sink.quarantine(dropped(
                        log.input,
                        FORMAT,
                        Locator::Record(index),
                        format!("sample {index} {reason}; it was passed over"),
                    ));
                }
                Err(err) => return Err(err),
            }
        }
        Ok(Ok(()))
    }
}
