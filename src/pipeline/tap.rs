//! The checking tap: work a caller wants done on each conversation once it is stored (the
//! audit of raw inputs checks conversations here), on threads of its own, with what it keeps
//! filed by store part.

use crate::model::Conversation;
use crate::store::split::Split;
use crate::store::Origin;
use std::collections::HashSet;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Work a caller wants done on each conversation once it is stored, on threads of its own and
/// so in parallel with reading and writing (an audit of raw inputs checks conversations here).
pub trait Tap: Sync {
    /// What to keep of `conversation`: one JSON value, written on one line. `None` when it
    /// cannot be done here (the caller then works from the store). The conversation is the
    /// tap's: the store has it already, so the tap may reshape it instead of copying it.
    fn conversation(&self, conversation: Conversation) -> Option<Vec<u8>>;
}

/// What a [`Tap`] kept, filed by store part.
pub struct Tapped {
    /// Per part, a file of lines `[input_index, record_index, conversation_id, kept]`, in no
    /// particular order (the tap runs on several threads).
    pub files: Vec<PathBuf>,
    /// Per part, the conversations whose kept value must not be used: stored in more than one
    /// piece (fragments, or a conversation id met again in a later input), stored without some
    /// of its runs (duplicates of runs read before), or not kept at all.
    pub stale: Vec<HashSet<String>>,
}

impl Tapped {
    /// The values filed again by store part once parts were split by rows
    /// ([`crate::store::split`]): a split part's file is shared out among its pieces' files.
    pub(crate) fn refile(mut self, split: &Split) -> io::Result<Tapped> {
        if split.is_empty() {
            return Ok(self);
        }
        let dir = match self.files.first().and_then(|f| f.parent()) {
            Some(dir) => dir.to_path_buf(),
            None => return Ok(self),
        };
        let file = |p: u32| dir.join(format!("part-{p:05}.jsonl"));
        self.files = (0..split.parts).map(file).collect();
        self.stale.resize(split.parts as usize, HashSet::new());
        for (&part, pieces) in &split.pieces {
            let stale: Vec<String> = self.stale[part as usize].drain().collect();
            for id in stale {
                self.stale[split.part_of(&id, part) as usize].insert(id);
            }
            let text = std::fs::read_to_string(file(part))?;
            let tmp = |p: u32| dir.join(format!(".part-{p:05}.jsonl.split"));
            let mut out = pieces
                .iter()
                .map(|&p| Ok((p, io::BufWriter::new(std::fs::File::create(tmp(p))?))))
                .collect::<io::Result<std::collections::HashMap<u32, _>>>()?;
            for line in text.lines().filter(|l| !l.is_empty()) {
                let (_, _, id, _): (u32, u64, String, serde::de::IgnoredAny) =
                    serde_json::from_str(line).map_err(io::Error::other)?;
                let w = out
                    .get_mut(&split.part_of(&id, part))
                    .expect("a piece of the part");
                w.write_all(line.as_bytes())?;
                w.write_all(b"\n")?;
            }
            for (p, mut w) in out {
                w.flush()?;
                drop(w);
                std::fs::rename(tmp(p), file(p))?;
            }
        }
        Ok(self)
    }
}

/// Where a tap's values are written during an ingest, a file per store part.
pub(crate) struct TapFiles {
    files: Vec<PathBuf>,
    writers: Vec<std::sync::Mutex<io::BufWriter<std::fs::File>>>,
    stale: std::sync::Mutex<Vec<HashSet<String>>>,
}

impl TapFiles {
    pub(crate) fn create(dir: &Path, parts: u32) -> io::Result<TapFiles> {
        std::fs::create_dir_all(dir)?;
        let files: Vec<PathBuf> = (0..parts)
            .map(|p| dir.join(format!("part-{p:05}.jsonl")))
            .collect();
        let writers = files
            .iter()
            .map(|f| {
                let file = std::fs::File::create(f)?;
                Ok(std::sync::Mutex::new(io::BufWriter::new(file)))
            })
            .collect::<io::Result<_>>()?;
        Ok(TapFiles {
            files,
            writers,
            stale: std::sync::Mutex::new(vec![HashSet::new(); parts as usize]),
        })
    }

    fn part(&self, conversation_id: &str) -> usize {
        crate::store::write::part_of(conversation_id, self.files.len() as u32) as usize
    }

    /// What was or will be kept of this conversation does not stand.
    pub(crate) fn mark_stale(&self, conversation_id: &str) {
        let p = self.part(conversation_id);
        self.stale.lock().expect("stale lock")[p].insert(conversation_id.to_string());
    }

    /// Run the tap on one stored conversation and file what it keeps (or, when it keeps
    /// nothing, mark the conversation stale).
    pub(crate) fn run(
        &self,
        tap: &dyn Tap,
        conversation: Conversation,
        origin: Origin,
    ) -> io::Result<()> {
        let id = conversation.id.clone();
        let Some(kept) = tap.conversation(conversation) else {
            self.mark_stale(&id);
            return Ok(());
        };
        let p = self.part(&id);
        let mut line = Vec::with_capacity(kept.len() + id.len() + 32);
        write!(line, "[{},{},", origin.input_index, origin.record_index)?;
        serde_json::to_writer(&mut line, &id).map_err(io::Error::other)?;
        line.push(b',');
        line.extend_from_slice(&kept);
        line.extend_from_slice(b"]\n");
        let mut out = self.writers[p].lock().expect("tap file lock");
        out.write_all(&line)
    }

    pub(crate) fn finish(self) -> io::Result<Tapped> {
        for w in self.writers {
            w.into_inner().expect("tap file lock").flush()?;
        }
        Ok(Tapped {
            files: self.files,
            stale: self.stale.into_inner().expect("stale lock"),
        })
    }
}
