//! (being written)
use crate::ingest::{Input, Sink};

pub fn read(_input: &Input<'_>, _sink: &mut dyn Sink) -> std::io::Result<()> {
    Ok(())
}
