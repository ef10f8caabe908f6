//! The keys of the runs an ingest has stored, to tell a run read twice: a night holds millions
//! of runs, so the keys do not all stay in memory. The newest are held in a hash set; when it
//! is full they are sorted into a spill file (unnamed, in the store's folder, gone when closed)
//! and only a Bloom filter of them stays in memory, about 1.25 bytes a key where the set took
//! about 20. A key the filter may hold is looked up in its spilled keys by binary search, so
//! the answer is always exact: a filter's false positive costs a few reads, never a run.

use hashbrown::HashSet;
use std::fs::File;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

/// Keys held in the hash set before they are spilled: seven eighths of 2^18, the most a table
/// of 2^18 slots (4.5 MB) holds before it grows.
const SPILL_AT: usize = 229_376;
/// Bits of Bloom filter a spilled key: with [`PROBES`] probes in one block of [`BLOCK_WORDS`],
/// about 1% false positives, and a lookup touches one cache line.
const BITS_PER_KEY: usize = 10;
const PROBES: u64 = 7;
const BLOCK_WORDS: usize = 8;
/// A spilled key as stored: its 16 bytes, little-endian.
const KEY_BYTES: u64 = 16;

/// A set of run keys (128-bit prefixes of SHA-256, so their bits are uniform and serve as
/// the filters' hashes directly). Insertion tells whether the key is new.
pub(super) struct RunKeys {
    recent: HashSet<u128>,
    spill_at: usize,
    /// Where spill files are made (the store being written).
    dir: PathBuf,
    spilled: Vec<Spilled>,
}

/// Keys sorted into a file, with a Bloom filter of them.
struct Spilled {
    file: File,
    keys: u64,
    bits: Vec<u64>,
}

impl RunKeys {
    /// An empty set spilling into files in `dir`.
    pub(super) fn new(dir: &Path) -> RunKeys {
        RunKeys::spilling_at(dir, SPILL_AT)
    }

    fn spilling_at(dir: &Path, spill_at: usize) -> RunKeys {
        RunKeys {
            recent: HashSet::new(),
            spill_at: spill_at.max(1),
            dir: dir.to_path_buf(),
            spilled: Vec::new(),
        }
    }

    /// Add `key`; `Ok(false)` when the set held it already. An error is a spill file that could
    /// not be written or read.
    pub(super) fn insert(&mut self, key: u128) -> io::Result<bool> {
        if self.recent.contains(&key) {
            return Ok(false);
        }
        for spilled in &self.spilled {
            if spilled.holds(key)? {
                return Ok(false);
            }
        }
        self.recent.insert(key);
        if self.recent.len() >= self.spill_at {
            self.spill()?;
        }
        Ok(true)
    }

    /// Keys held in memory and spilled, together.
    #[cfg(test)]
    fn len(&self) -> u64 {
        self.recent.len() as u64 + self.spilled.iter().map(|s| s.keys).sum::<u64>()
    }

    fn spill(&mut self) -> io::Result<()> {
        // The table's slots are given back: the next keys fill a table grown anew.
        let mut keys: Vec<u128> = std::mem::take(&mut self.recent).into_iter().collect();
        keys.sort_unstable();
        let file = tempfile::tempfile_in(&self.dir).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "cannot make a file in {} for the keys of the runs stored so far: {e}",
                    self.dir.display()
                ),
            )
        })?;
        let mut out = io::BufWriter::with_capacity(1 << 16, &file);
        for key in &keys {
            out.write_all(&key.to_le_bytes())?;
        }
        out.flush()?;
        drop(out);
        let blocks = (keys.len() * BITS_PER_KEY)
            .div_ceil(BLOCK_WORDS * 64)
            .max(1);
        let words = blocks * BLOCK_WORDS;
        let mut spilled = Spilled {
            file,
            keys: keys.len() as u64,
            bits: vec![0; words],
        };
        for &key in &keys {
            spilled.mark(key);
        }
        self.spilled.push(spilled);
        Ok(())
    }
}

impl Spilled {
    /// The filter's bits for `key`: a block of 512 bits (a cache line) chosen by the key's low
    /// half, and [`PROBES`] bits in it chosen by nine bits each of its high half.
    fn positions(words: usize, key: u128) -> impl Iterator<Item = usize> {
        let blocks = (words / BLOCK_WORDS) as u64;
        let (low, high) = (key as u64, (key >> 64) as u64);
        // The low half scaled to the block count (a multiply, not a division).
        let block = ((low as u128 * blocks as u128) >> 64) as usize;
        (0..PROBES).map(move |i| block * BLOCK_WORDS * 64 + ((high >> (9 * i)) & 511) as usize)
    }

    fn mark(&mut self, key: u128) {
        for p in Spilled::positions(self.bits.len(), key) {
            self.bits[p / 64] |= 1 << (p % 64);
        }
    }

    fn may_hold(&self, key: u128) -> bool {
        Spilled::positions(self.bits.len(), key).all(|p| self.bits[p / 64] & (1 << (p % 64)) != 0)
    }

    /// Does the spill hold `key`? The filter first, then a binary search of the file.
    fn holds(&self, key: u128) -> io::Result<bool> {
        if !self.may_hold(key) {
            return Ok(false);
        }
        let (mut low, mut high) = (0u64, self.keys);
        let mut buffer = [0u8; KEY_BYTES as usize];
        while low < high {
            let middle = low + (high - low) / 2;
            crate::store::parquet_file::read_exact_at(&self.file, &mut buffer, middle * KEY_BYTES)?;
            match u128::from_le_bytes(buffer).cmp(&key) {
                std::cmp::Ordering::Equal => return Ok(true),
                std::cmp::Ordering::Less => low = middle + 1,
                std::cmp::Ordering::Greater => high = middle,
            }
        }
        Ok(false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Keys as an ingest makes them (SHA-256 prefixes), from numbers.
    fn key(n: u64) -> u128 {
        super::super::writer::id_key(&format!("run-{n}"))
    }

    #[test]
    fn a_key_is_new_once_whether_held_or_spilled() {
        let dir = tempfile::tempdir().unwrap();
        let mut keys = RunKeys::spilling_at(dir.path(), 1000);
        for n in 0..5_500 {
            assert!(keys.insert(key(n)).unwrap(), "key {n} was new");
        }
        assert_eq!(keys.spilled.len(), 5);
        assert_eq!(keys.recent.len(), 500);
        // Every key again, from each spill and from the set: none is new.
        for n in (0..5_500).rev() {
            assert!(!keys.insert(key(n)).unwrap(), "key {n} was held");
        }
        // Keys never added are new, whatever the filters say of them.
        let mut fresh = 0;
        for n in 5_500..15_500 {
            fresh += keys.insert(key(n)).unwrap() as u32;
        }
        assert_eq!(fresh, 10_000);
        assert_eq!(keys.len(), 15_500);
        // Spill files are unnamed: the folder is as it was.
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }

    #[test]
    fn filters_pass_few_keys_they_do_not_hold() {
        let dir = tempfile::tempdir().unwrap();
        let mut keys = RunKeys::spilling_at(dir.path(), 20_000);
        for n in 0..20_000 {
            keys.insert(key(n)).unwrap();
        }
        let spilled = &keys.spilled[0];
        let passed = (20_000..120_000)
            .filter(|&n| spilled.may_hold(key(n)))
            .count();
        // About 1% at 10 bits a key and 7 probes; 2% would mean the positions are not spread.
        assert!(
            passed < 2_000,
            "{passed} of 100,000 absent keys passed the filter"
        );
        assert!((0..20_000).all(|n| spilled.may_hold(key(n))));
    }

    #[test]
    fn a_folder_that_cannot_hold_the_spill_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let gone = dir.path().join("gone");
        let mut keys = RunKeys::spilling_at(&gone, 2);
        assert!(keys.insert(key(1)).unwrap());
        let err = keys.insert(key(2)).unwrap_err();
        assert!(err.to_string().contains("gone"), "{err}");
    }
}
