//! Test support: does the work on one record grow linearly with its items?
//!
//! A record may hold 100,000 items (spans, calls, messages), so every per-item lookup over a
//! run or trace must be indexed. The check times one shape at `n` and at `16 n` items, the best
//! of a few tries each (a loaded machine only slows single tries down), and requires the larger
//! to take under 60 times as long: linear work takes about 16 times, quadratic about 256.

use std::time::{Duration, Instant};

const FACTOR: usize = 16;
const LIMIT: f64 = 60.0;
const TRIES: usize = 3;

fn best_of(items: usize, work: &mut dyn FnMut(usize)) -> Duration {
    (0..TRIES)
        .map(|_| {
            let start = Instant::now();
            work(items);
            start.elapsed()
        })
        .min()
        .expect("one try at least")
}

/// Panics when `work(16 n)` takes 60 times as long as `work(n)` or more.
pub(crate) fn assert_linear(what: &str, n: usize, mut work: impl FnMut(usize)) {
    let small = best_of(n, &mut work).max(Duration::from_micros(100));
    let large = best_of(n * FACTOR, &mut work);
    let ratio = large.as_secs_f64() / small.as_secs_f64();
    assert!(
        ratio < LIMIT,
        "{what}: {} items took {large:?}, {n} took {small:?}: {ratio:.0} times as long for \
         {FACTOR} times the items (linear work: about {FACTOR})",
        n * FACTOR
    );
}
