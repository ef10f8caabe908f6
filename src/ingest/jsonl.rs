//! Line-by-line JSON files whose lines are records (agent session logs): each non-blank line is
//! read under the record limit and parsed into a value, or handed back as the reason it could not
//! be, so that the reader quarantines that line and goes on with the next.

use std::io::{self, BufReader};

use serde_json::Value;

use crate::error::Error;
use crate::ingest::limits::{json_error, read_line_bounded, strip_bom, Line};
use crate::ingest::{Input, Sink};
use crate::source::HashingFile;

/// Call `each` with every non-blank line's 1-based number and its value (or why it is not one).
/// Every such line is counted as a record read; the file's digest goes to the sink when it was
/// read whole.
pub(crate) fn read_lines(
    input: &Input<'_>,
    sink: &mut dyn Sink,
    mut each: impl FnMut(u64, crate::error::Result<Value>, &mut dyn Sink),
) -> io::Result<()> {
    let mut reader = BufReader::new(HashingFile::open(input.path)?);
    let mut buf = Vec::new();
    let mut number = 0u64;
    loop {
        let line = read_line_bounded(&mut reader, &mut buf, input.limits.record_bytes)?;
        number += 1;
        let parsed = match line {
            Line::Held(0) => break,
            Line::TooLong(n) => Err(Error::Malformed(format!(
                "line is {}; it was read through without being held",
                input.limits.too_large(n)
            ))),
            Line::Held(_) => {
                let bytes = if number == 1 { strip_bom(&buf) } else { &buf };
                if bytes.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                serde_json::from_slice::<Value>(bytes)
                    .map_err(|e| Error::Malformed(format!("not a JSON line: {}", json_error(&e))))
            }
        };
        sink.records_read(1);
        each(number, parsed, sink);
    }
    if let Some(digest) = reader.into_inner().finish() {
        sink.file_digest(digest);
    }
    Ok(())
}
