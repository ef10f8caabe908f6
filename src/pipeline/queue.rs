//! The byte-bounded queues between the pipeline's threads: a reader's channel to the writer
//! and the queue of stored conversations waiting for the tap are bounded by the bytes they
//! hold, not by their number of items (conversations differ in size a hundredfold).

use crate::model::Conversation;
use crate::store::Origin;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};

/// Bytes of conversations (texts and envelopes) waiting for the tap: the writer waits
/// while more are queued, so one very large conversation at a time at most goes past it.
pub(crate) const TAP_QUEUE_BYTES: usize = 32 << 20;

/// Bytes in flight between threads, up to a ceiling: a sender waits while more than the ceiling
/// would be held, except that one item always goes (an item larger than the ceiling passes
/// alone).
pub(crate) struct ByteBound {
    ceiling: usize,
    held: std::sync::Mutex<usize>,
    freed: std::sync::Condvar,
}

impl ByteBound {
    pub(crate) fn new(ceiling: usize) -> ByteBound {
        ByteBound {
            ceiling,
            held: std::sync::Mutex::new(0),
            freed: std::sync::Condvar::new(),
        }
    }

    /// Take `size` bytes, first waiting while they would not fit.
    pub(crate) fn acquire(&self, size: usize) {
        let mut held = self.held.lock().expect("byte bound lock");
        while *held > 0 && *held + size > self.ceiling {
            held = self.freed.wait(held).expect("byte bound lock");
        }
        *held += size;
    }

    /// Give back `size` bytes taken by [`ByteBound::acquire`].
    pub(crate) fn release(&self, size: usize) {
        *self.held.lock().expect("byte bound lock") -= size;
        self.freed.notify_one();
    }
}

/// The tap's queue: a channel, and the bytes it holds.
pub(crate) struct TapQueue {
    tx: std::sync::Mutex<Option<SyncSender<(Conversation, Origin, usize)>>>,
    rx: std::sync::Mutex<Receiver<(Conversation, Origin, usize)>>,
    bound: ByteBound,
}

impl TapQueue {
    pub(crate) fn new() -> TapQueue {
        // The byte budget bounds the queue; the channel's own bound only has to be above it.
        let (tx, rx) = sync_channel(4096);
        TapQueue {
            tx: std::sync::Mutex::new(Some(tx)),
            rx: std::sync::Mutex::new(rx),
            bound: ByteBound::new(TAP_QUEUE_BYTES),
        }
    }

    /// Queue a conversation, first waiting while the queue holds more than its budget.
    pub(crate) fn push(&self, conversation: Conversation, origin: Origin) {
        let size = conversation_bytes(&conversation);
        self.bound.acquire(size);
        if let Some(tx) = self.tx.lock().expect("tap queue lock").as_ref() {
            let _ = tx.send((conversation, origin, size));
        }
    }

    /// The next queued conversation, or `None` once the queue is closed and empty.
    pub(crate) fn pop(&self) -> Option<(Conversation, Origin, usize)> {
        self.rx.lock().expect("tap queue lock").recv().ok()
    }

    /// A popped conversation is done with: its bytes leave the budget.
    pub(crate) fn done(&self, size: usize) {
        self.bound.release(size);
    }

    pub(crate) fn close(&self) {
        self.tx.lock().expect("tap queue lock").take();
    }
}

/// The bytes a conversation takes (the measure of the tap queue's budget), counted as the store
/// writer counts its rows.
pub(crate) fn conversation_bytes(conversation: &Conversation) -> usize {
    use crate::store::write::{event_bytes, run_bytes};
    conversation
        .runs
        .iter()
        .map(|r| run_bytes(r) + r.events.iter().map(event_bytes).sum::<usize>())
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A sender waits while its bytes would go over the ceiling, and goes once enough are given
    /// back; an item over the ceiling waits for an empty bound and then goes alone.
    #[test]
    fn a_byte_bound_holds_senders_at_its_ceiling() {
        use std::time::Duration;
        let bound = ByteBound::new(10);
        bound.acquire(6);
        bound.acquire(4);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::scope(|s| {
            s.spawn(|| {
                bound.acquire(3);
                tx.send(3).unwrap();
                bound.acquire(25);
                tx.send(25).unwrap();
            });
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            bound.release(6);
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(3));
            // 7 held: the large item waits until nothing is.
            bound.release(4);
            assert!(rx.recv_timeout(Duration::from_millis(200)).is_err());
            bound.release(3);
            assert_eq!(rx.recv_timeout(Duration::from_secs(30)), Ok(25));
        });
        assert_eq!(*bound.held.lock().unwrap(), 25);
    }
}
