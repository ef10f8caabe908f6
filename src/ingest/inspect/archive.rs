//! Inspect `.eval` archives: the header, then each sample member decompressed on its own.

use crate::error::Error;
use std::collections::HashMap;
use std::fs::File;
use std::io::{self, BufReader, Read};

use crate::ingest::json_pick::{dropped, partial, whole_file, Pick, Picked, Shape};
use crate::ingest::json_scan::parse_python_lenient;
use crate::ingest::limits::{read_bounded, strip_bom};
use crate::ingest::{Input, Limits, Locator, Sink};

use super::sample::*;

// ---------------------------------------------------------------------------------------------
// `.eval` archives.
// ---------------------------------------------------------------------------------------------

/// Is this archive member a sample (`samples/<id>_epoch_<n>.json`)? Inspect writes the sample
/// id into the name as it is, so an id holding `/` (`suite/task/issue_3603`) nests folders under
/// `samples/`: everything between `samples/` and the last `_epoch_<n>.json` is the id.
pub(super) fn is_sample_member(name: &str) -> bool {
    name.strip_prefix("samples/")
        .and_then(|rest| rest.strip_suffix(".json"))
        .and_then(|stem| stem.rsplit_once("_epoch_"))
        .is_some_and(|(id, epoch)| {
            !id.is_empty() && !epoch.is_empty() && epoch.bytes().all(|b| b.is_ascii_digit())
        })
}

/// The prefix `samples/<id>_epoch_<n>` of a sample stored in Inspect's chunked layout, from
/// its shell member `samples/<id>_epoch_<n>/sample.json` (its messages, events and attachments
/// are numbered chunks under the same prefix).
pub(super) fn chunked_sample(name: &str) -> Option<&str> {
    let prefix = name.strip_suffix("/sample.json")?;
    is_sample_member(&format!("{prefix}.json")).then_some(prefix)
}

/// Read one JSON member into a `T`: the value, and how many of Python's special numbers were
/// read as `null` in it. `Err` is why it could not be read. The member is decompressed into
/// memory only when it fits the record limit (its declared size is checked first, and the read
/// is bounded whatever it declares).
pub(super) fn read_member<R, T>(
    zip: &mut zip::ZipArchive<R>,
    index: usize,
    limits: &Limits,
) -> crate::error::Result<(Shape<T>, u64)>
where
    R: Read + io::Seek,
    T: Pick + Default,
{
    let member = zip
        .by_index(index)
        .map_err(|e| Error::Malformed(format!("cannot be opened: {e}")))?;
    let declared = member.size();
    if declared > limits.record_bytes {
        return Err(Error::Malformed(format!(
            "decompresses to {}",
            limits.too_large(declared)
        )));
    }
    let bytes = match read_bounded(member, limits.record_bytes, declared) {
        Ok(Ok(bytes)) => bytes,
        Ok(Err(_)) => {
            return Err(Error::Malformed(format!(
                "decompresses to more than it declares ({declared} bytes), {}",
                limits.over()
            )))
        }
        Err(e) => return Err(Error::Malformed(format!("cannot be decompressed: {e}"))),
    };
    let text = strip_bom(&bytes);
    parse_python_lenient(text, || Picked(T::default()))
        .map_err(|e| Error::Malformed(format!("is not readable JSON: {e}")))
}

pub(super) fn read_archive(input: &Input<'_>, sink: &mut dyn Sink) -> io::Result<()> {
    let file = File::open(input.path)?;
    let mut zip = match zip::ZipArchive::new(BufReader::new(file)) {
        Ok(zip) => zip,
        Err(e) => {
            whole_file(
                input,
                sink,
                FORMAT,
                format!("not a readable .eval archive: {e}"),
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
    // The header is written last (when the eval finishes); a running eval has only its journal.
    let mut problems = Vec::new();
    let mut found = false;
    for name in ["header.json", "_journal/start.json"] {
        let Some(index) = zip.index_for_name(name) else {
            continue;
        };
        let problem = match read_member::<_, HeaderDoc>(&mut zip, index, &input.limits) {
            Ok((
                Ok(HeaderDoc {
                    eval: Some(Ok(spec)),
                    outcome,
                }),
                _,
            )) => {
                log.spec = spec;
                log.outcome = outcome;
                found = true;
                break;
            }
            Ok((Ok(_), _)) => "holds no eval spec".to_string(),
            Ok((Err(kind), _)) => format!("is {kind}, not an object"),
            Err(reason) => reason.to_string(),
        };
        problems.push(format!("{name} {problem}"));
    }
    if !problems.is_empty() {
        let outcome = if found {
            "the eval spec was read from the journal instead"
        } else {
            "the task and model are unknown"
        };
        log.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            format!("{}; {outcome}", problems.join("; ")),
        ));
    }
    let names: Vec<(usize, String)> = (0..zip.len())
        .filter_map(|i| zip.name_for_index(i).map(|n| (i, n.to_string())))
        .filter(|(_, name)| name.starts_with("samples/"))
        .collect();
    let chunked: Vec<&str> = names
        .iter()
        .filter_map(|(_, n)| chunked_sample(n))
        .collect();
    // Samples, whole or chunked, in the archive's order; a chunked sample is one record.
    let mut samples = Vec::new();
    let mut unknown = Vec::new();
    for (index, name) in &names {
        if is_sample_member(name) {
            samples.push((*index, name.as_str(), false));
        } else if chunked_sample(name).is_some() {
            samples.push((*index, name.as_str(), true));
        } else if !chunked.iter().any(|prefix| {
            name.strip_prefix(prefix)
                .is_some_and(|r| r.starts_with('/'))
        }) {
            unknown.push(name.as_str());
        }
    }
    if !unknown.is_empty() {
        log.sink.quarantine(partial(
            input,
            FORMAT,
            Locator::File,
            format!(
                "{} member(s) under samples/ are not named samples/<id>_epoch_<n>.json and \
                 belong to no chunked sample; not read: {}",
                unknown.len(),
                unknown
                    .iter()
                    .take(3)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ));
    }
    if samples.is_empty() {
        let reason = log
            .outcome
            .no_samples("it has no samples/<id>_epoch_<n>.json member");
        whole_file(input, log.sink, FORMAT, reason);
        return Ok(());
    }
    for (record, (index, name, chunks)) in samples.into_iter().enumerate() {
        let record = record as u64;
        log.sink.records_read(1);
        let what = format!("member {name}");
        if chunks {
            log.sink.quarantine(dropped(
                input,
                FORMAT,
                Locator::Record(record),
                format!(
                    "{what}: the sample is stored in Inspect's chunked layout (this shell, with \
                     its messages, events and attachments in numbered chunks beside it), which \
                     this reader does not read"
                ),
            ));
            continue;
        }
        match read_member::<_, RawSample>(&mut zip, index, &input.limits) {
            Ok((sample, python)) => log.sample(record, &what, sample, python),
            Err(reason) => {
                log.sink.quarantine(dropped(
                    input,
                    FORMAT,
                    Locator::Record(record),
                    format!("{what} {reason}"),
                ));
            }
        }
    }
    Ok(())
}
