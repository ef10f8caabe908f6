//! Opening a corpus for reading: where its tables and its store are, what its manifest says,
//! and lazy Polars scans over them. Every report reads the Parquet files through these scans,
//! so a notebook and a report see the same data.

use polars::prelude::*;
use serde_json::Value;
use std::io;
use std::path::{Path, PathBuf};

/// A corpus directory written by `traceaudit audit`.
pub struct CorpusDir {
    pub dir: PathBuf,
    pub manifest: Value,
}

/// Polars errors as I/O errors, the crate's error currency.
pub fn pl(e: PolarsError) -> io::Error {
    io::Error::other(e.to_string())
}

/// How every report scans a file: its path taken literally (a folder named `nights*` or
/// `run[1]` is a name, not a pattern) and no columns made from `key=value` folder names.
pub fn literal_args() -> ScanArgsParquet {
    ScanArgsParquet {
        glob: false,
        hive_options: HiveOptions {
            enabled: Some(false),
            ..HiveOptions::default()
        },
        ..ScanArgsParquet::default()
    }
}

/// `path` as Polars takes it. Polars reads only UTF-8 paths, which is why `audit` and `ingest`
/// refuse to write an output elsewhere; a path that is not is refused here by name.
pub fn polars_path(path: &Path) -> io::Result<PlRefPath> {
    if path.to_str().is_none() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{} is not a UTF-8 path, which the reports cannot read; rename it",
                path.display()
            ),
        ));
    }
    PlRefPath::try_from_path(path).map_err(|e| io::Error::other(format!("{}: {e}", path.display())))
}

/// A lazy scan of one Parquet file.
pub fn scan(path: &Path) -> io::Result<LazyFrame> {
    if !path.exists() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("{} does not exist", path.display()),
        ));
    }
    LazyFrame::scan_parquet(polars_path(path)?, literal_args()).map_err(pl)
}

impl CorpusDir {
    pub fn open(dir: &Path) -> io::Result<CorpusDir> {
        let manifest_path = dir.join("manifest.json");
        let text = std::fs::read_to_string(&manifest_path).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!(
                    "{} is not a traceaudit corpus (no readable manifest.json: {e})",
                    dir.display()
                ),
            )
        })?;
        let manifest: Value = serde_json::from_str(&text)
            .map_err(|e| io::Error::other(format!("{}: {e}", manifest_path.display())))?;
        if manifest.get("checks").is_none() || !dir.join("dispositions.parquet").exists() {
            return Err(io::Error::other(format!(
                "{} is not a traceaudit corpus (a store? run `traceaudit audit` on it first)",
                dir.display()
            )));
        }
        Ok(CorpusDir {
            dir: dir.to_path_buf(),
            manifest,
        })
    }

    pub fn table(&self, name: &str) -> io::Result<LazyFrame> {
        scan(&self.dir.join(format!("{name}.parquet")))
    }

    /// The checks the audit ran, in registry order.
    pub fn checks(&self) -> Vec<String> {
        self.manifest["checks"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|v| v.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn count(&self, field: &str) -> u64 {
        self.manifest[field].as_u64().unwrap_or(0)
    }

    pub fn str_field(&self, field: &str) -> String {
        self.manifest[field].as_str().unwrap_or("").to_string()
    }

    /// The store the corpus was audited from: `store/` inside it, else the manifest's `store`
    /// path (relative paths are taken from the corpus's parent, then the working directory).
    pub fn store_dir(&self) -> io::Result<PathBuf> {
        let inside = self.dir.join("store");
        if inside.join("runs.parquet").exists() {
            return Ok(inside);
        }
        let recorded = PathBuf::from(self.str_field("store"));
        let candidates = [
            recorded.clone(),
            self.dir.parent().unwrap_or(Path::new(".")).join(&recorded),
        ];
        candidates
            .into_iter()
            .find(|p| p.join("runs.parquet").exists())
            .ok_or_else(|| {
                io::Error::new(
                    io::ErrorKind::NotFound,
                    format!(
                        "the store of {} is not at {} (manifest field `store`)",
                        self.dir.display(),
                        recorded.display()
                    ),
                )
            })
    }

    /// `runs.parquet` of the store.
    pub fn runs(&self) -> io::Result<LazyFrame> {
        scan(&self.store_dir()?.join("runs.parquet"))
    }

    /// Every events part of the store, as one scan.
    pub fn events(&self) -> io::Result<LazyFrame> {
        let dir = self.store_dir()?.join("events");
        let mut parts: Vec<PathBuf> = std::fs::read_dir(&dir)?
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.extension().is_some_and(|x| x == "parquet"))
            .collect();
        parts.sort();
        if parts.is_empty() {
            return Err(io::Error::other(format!(
                "{} has no events parts",
                dir.display()
            )));
        }
        let paths = parts
            .iter()
            .map(|p| polars_path(p))
            .collect::<io::Result<Vec<_>>>()?;
        LazyFrame::scan_parquet_files(paths.into_iter().collect(), literal_args()).map_err(pl)
    }
}

/// `column` is one of `values` (an exact string match), for scans that read a few runs.
pub fn one_of(column: &str, values: &[String]) -> Expr {
    let list = Series::new(PlSmallStr::EMPTY, values);
    col(column).is_in(lit(list).implode(false), false)
}

/// The rows of a collected frame whose `column` equals `value`.
pub fn rows_where(df: &DataFrame, column: &str, value: &str) -> io::Result<DataFrame> {
    df.clone()
        .lazy()
        .filter(col(column).eq(lit(value)))
        .collect()
        .map_err(pl)
}

/// The column names of a lazy frame (reads the Parquet footer only).
pub fn columns(lf: &mut LazyFrame) -> io::Result<Vec<String>> {
    Ok(lf
        .collect_schema()
        .map_err(pl)?
        .iter_names()
        .map(|n| n.to_string())
        .collect())
}

/// Column `name` of `df` as optional strings.
pub fn strs(df: &DataFrame, name: &str) -> io::Result<Vec<Option<String>>> {
    let c = df
        .column(name)
        .map_err(pl)?
        .cast(&DataType::String)
        .map_err(pl)?;
    Ok(c.str()
        .map_err(pl)?
        .iter()
        .map(|v| v.map(str::to_string))
        .collect())
}

/// Column `name` of `df` as strings, null as empty.
pub fn strings(df: &DataFrame, name: &str) -> io::Result<Vec<String>> {
    Ok(strs(df, name)?
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

/// Column `name` of `df` as optional unsigned integers.
pub fn u64s(df: &DataFrame, name: &str) -> io::Result<Vec<Option<u64>>> {
    let c = df
        .column(name)
        .map_err(pl)?
        .cast(&DataType::UInt64)
        .map_err(pl)?;
    Ok(c.u64().map_err(pl)?.iter().collect())
}

/// Column `name` of `df` as unsigned integers, null as 0.
pub fn counts(df: &DataFrame, name: &str) -> io::Result<Vec<u64>> {
    Ok(u64s(df, name)?
        .into_iter()
        .map(Option::unwrap_or_default)
        .collect())
}

/// Column `name` of `df` as optional floats.
pub fn f64s(df: &DataFrame, name: &str) -> io::Result<Vec<Option<f64>>> {
    let c = df
        .column(name)
        .map_err(pl)?
        .cast(&DataType::Float64)
        .map_err(pl)?;
    Ok(c.f64().map_err(pl)?.iter().collect())
}
