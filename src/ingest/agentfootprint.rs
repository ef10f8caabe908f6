//! (being written)
use crate::ingest::{Input, Sink};

pub fn read_ndjson(_input: &Input<'_>, _sink: &mut dyn Sink) -> std::io::Result<()> {
    Ok(())
}
pub fn read_recording(_input: &Input<'_>, _sink: &mut dyn Sink) -> std::io::Result<()> {
    Ok(())
}
