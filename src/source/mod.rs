//! Where an input's bytes come from, below what they mean: hashing a file as it is read, and
//! decompressing the files that are compressed.

pub mod compression;
pub mod hashing;
pub mod object;

pub use compression::{decompress, Compression, Cut};
pub use hashing::{sha256_of, HashingFile};
