//! Opening a corpus for reading: where its tables are (in either layout, see
//! [`crate::corpus::layout`]) and where its store is, what its manifest says, and lazy Polars
//! scans over them. Every report reads the Parquet files through these scans, so a notebook and
//! a report see the same data.

use crate::corpus::layout::{not_a_corpus, read_manifest, Layout};
use crate::corpus::CHECK_COLUMN;
use crate::error::Error;
use crate::model::vocab::Disposition;
use crate::model::PLAUSIBLE_WALL_CLOCK_MS;
use polars::prelude::*;
use serde_json::Value;
use std::collections::BTreeMap;
use std::io;
use std::path::{Path, PathBuf};

/// A corpus directory written by `traceaudit audit`, or a part at a time by a distributed audit.
pub struct CorpusDir {
    pub dir: PathBuf,
    pub manifest: Value,
    /// Where its tables are.
    pub layout: Layout,
    /// Its store fetched from object storage, when the corpus names one there (fetched on
    /// first use, removed with the corpus value); `Err` says why it could not be.
    fetched_store: std::sync::OnceLock<io::Result<(PathBuf, crate::pipeline::remote::TempFolder)>>,
    /// Rows of the dispositions table per (check, disposition), read and checked when the
    /// corpus is opened.
    dispositions: BTreeMap<(String, String), u64>,
}

/// Polars errors as I/O errors, the crate's error currency, marked as Polars' (see
/// [`CorpusDir::name_the_unreadable`]).
pub fn pl(e: PolarsError) -> io::Error {
    io::Error::other(PolarsFailure(e.to_string()))
}

/// A failure inside Polars. Its messages do not say which file it was reading ("The file must
/// end with PAR1"), so the error is kept recognisable until a reader that knows the corpus
/// names the file.
#[derive(Debug)]
pub struct PolarsFailure(String);

impl std::fmt::Display for PolarsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PolarsFailure {}

/// Run `f` with a panic inside it turned into a Polars failure: Polars panics on some corrupt
/// Parquet pages (an assertion in a reader task, raised again where the task is awaited), and a
/// damaged file must be refused by name, not end the process.
pub fn guarded<T>(f: impl FnOnce() -> io::Result<T>) -> io::Result<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|panic| {
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no reason given".into());
        // The first line only: a task's panic carries its whole report.
        let why = why.lines().next().unwrap_or_default().to_string();
        Err(io::Error::other(PolarsFailure(format!(
            "the Parquet reader gave up ({why})"
        ))))
    })
}

fn is_polars_failure(e: &io::Error) -> bool {
    e.get_ref()
        .is_some_and(|inner| inner.downcast_ref::<PolarsFailure>().is_some())
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

/// One lazy scan of the Parquet files `paths`, in order, each taken literally.
pub fn scan_files(paths: &[PathBuf]) -> io::Result<LazyFrame> {
    let paths = paths
        .iter()
        .map(|p| polars_path(p))
        .collect::<io::Result<Vec<_>>>()?;
    LazyFrame::scan_parquet_files(paths.into_iter().collect(), literal_args()).map_err(pl)
}

impl CorpusDir {
    /// The corpus in `dir`, in either layout ([`Layout`]): a listed layout is checked whole
    /// first (every listed file there, of its size and rows), then the dispositions' values.
    pub fn open(dir: &Path) -> io::Result<CorpusDir> {
        let manifest = read_manifest(dir)?;
        let layout = Layout::of(dir, &manifest)?;
        if layout.files(dir, "dispositions").is_err() {
            return Err(not_a_corpus(dir));
        }
        let corpus = CorpusDir {
            dir: dir.to_path_buf(),
            manifest,
            layout,
            fetched_store: std::sync::OnceLock::new(),
            dispositions: BTreeMap::new(),
        };
        let dispositions = guarded(|| corpus.known_dispositions())
            .map_err(|e| name_the_unreadable(&[&corpus], e))?;
        Ok(CorpusDir {
            dispositions,
            ..corpus
        })
    }

    /// How errors name table `name`: its file, or its folder of part files.
    fn table_path(&self, name: &str) -> PathBuf {
        match self.layout {
            Layout::Single => self.dir.join(format!("{name}.parquet")),
            Layout::Listed(_) => self.dir.join(name),
        }
    }

    /// The rows of the dispositions table per (check, disposition); refused when it holds a
    /// check the manifest does not name, or a disposition this engine does not write (a newer
    /// vocabulary, nulls left by a rewrite): every count and gate is made of these values, and
    /// one that is not understood would count as zero of everything. Reads the two columns.
    fn known_dispositions(&self) -> io::Result<BTreeMap<(String, String), u64>> {
        let path = self.table_path("dispositions");
        let mut found: BTreeMap<(Option<String>, Option<String>), u64> = BTreeMap::new();
        let read = [col(CHECK_COLUMN), col("disposition")];
        self.for_each_slice("dispositions", &read, |slice| {
            let df = slice
                .lazy()
                .group_by([col(CHECK_COLUMN), col("disposition")])
                .agg([len().alias("rows")])
                .collect()
                .map_err(pl)?;
            for ((check, disposition), n) in strs(&df, CHECK_COLUMN)?
                .into_iter()
                .zip(strs(&df, "disposition")?)
                .zip(counts(&df, "rows")?)
            {
                *found.entry((check, disposition)).or_default() += n;
            }
            Ok(())
        })
        .map_err(|e| match self.layout {
            Layout::Single if is_polars_failure(&e) => io::Error::new(
                io::ErrorKind::InvalidData,
                format!("{} is unreadable: {e}", path.display()),
            ),
            // Which part failed is found by reading them (see `name_the_unreadable`).
            _ => e,
        })?;
        let checks = self.checks();
        let known: Vec<&str> = Disposition::ALL.iter().map(|d| d.as_str()).collect();
        let mut counted = BTreeMap::new();
        for ((check, disposition), n) in found {
            let refuse = |what: String| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!(
                        "{} holds {what} in {n} row(s), which this engine does not write; \
                         refusing to count it (was the table rewritten, or written by a newer \
                         traceaudit?)",
                        path.display()
                    ),
                )
            };
            let check = match check {
                None => return Err(refuse("a null `check`".into())),
                Some(c) if !checks.contains(&c) => {
                    return Err(refuse(format!(
                        "`check` {c:?}, which the corpus manifest does not list"
                    )))
                }
                Some(c) => c,
            };
            let disposition = match disposition {
                None => return Err(refuse("a null `disposition`".into())),
                Some(d) if !known.contains(&d.as_str()) => {
                    return Err(refuse(format!(
                        "`disposition` {d:?} (the vocabulary is {})",
                        known.join(", ")
                    )))
                }
                Some(d) => d,
            };
            counted.insert((check, disposition), n);
        }
        Ok(counted)
    }

    /// The rows of the dispositions table per (check, disposition), as read when the corpus was
    /// opened.
    pub fn disposition_counts(&self) -> &BTreeMap<(String, String), u64> {
        &self.dispositions
    }

    /// A lazy scan of table `name`: its file, or the part files the manifest lists, in order.
    pub fn table(&self, name: &str) -> io::Result<LazyFrame> {
        let mut lf = match self.layout {
            Layout::Single => scan(&self.table_path(name))?,
            Layout::Listed(_) => scan_files(&self.layout.files(&self.dir, name)?)?,
        };
        // A corpus written before the check column was renamed names it `check`.
        let names = columns(&mut lf)?;
        let old = "check";
        if names.iter().any(|c| c == old) && !names.iter().any(|c| c == CHECK_COLUMN) {
            lf = lf.rename([old], [CHECK_COLUMN], true);
        }
        Ok(lf)
    }

    /// Columns `columns` of table `name`, [`SLICE_ROWS`] rows at a time in table order, each
    /// slice handed to `each` as a frame. The tables with a row per run and check grow with the
    /// corpus; a report that reads them a slice at a time holds one slice, whatever the corpus
    /// size (the Parquet reader skips the row groups outside a slice).
    pub fn for_each_slice(
        &self,
        name: &str,
        columns: &[Expr],
        mut each: impl FnMut(DataFrame) -> io::Result<()>,
    ) -> io::Result<()> {
        let table = self.table(name)?;
        let rows = row_count(&table)?;
        let mut offset = 0u64;
        while offset < rows {
            let slice = table
                .clone()
                .slice(offset as i64, SLICE_ROWS)
                .select(columns)
                .collect()
                .map_err(pl)?;
            offset += SLICE_ROWS as u64;
            each(slice)?;
        }
        Ok(())
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
    /// A store found there is used only when it is the one the corpus manifest recorded (the
    /// same inputs, parts and counts): a corpus copied without its store must not take the
    /// runs of whatever store lies beside it. Corpora written before the record are taken at
    /// their word.
    pub fn store_dir(&self) -> io::Result<PathBuf> {
        let inside = self.dir.join("store");
        let recorded = PathBuf::from(self.str_field("store"));
        if crate::pipeline::remote::is_url(&recorded) && !inside.is_dir() {
            return self.store_in_bucket(&recorded);
        }
        let candidates = [
            inside,
            recorded.clone(),
            self.dir.parent().unwrap_or(Path::new(".")).join(&recorded),
        ];
        let mut other = None;
        for candidate in candidates {
            if !crate::store::generations::looks_like_store(&candidate) {
                continue;
            }
            match self.is_recorded_store(&candidate) {
                Ok(()) => return Ok(candidate),
                Err(why) => {
                    other.get_or_insert((candidate, why));
                }
            }
        }
        Err(match other {
            Some((found, why)) => self.not_its_store(&found, &why),
            None => io::Error::new(
                io::ErrorKind::NotFound,
                format!(
                    "the store of {} is not at {} (manifest field `store`)",
                    self.dir.display(),
                    recorded.display()
                ),
            ),
        })
    }

    /// The store found at `found` refused: not the one the corpus recorded (`why`).
    fn not_its_store(&self, found: &Path, why: &Error) -> io::Error {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "the store at {} is not the one {} was audited from ({why}); its runs are not \
                 used",
                found.display(),
                self.dir.display()
            ),
        )
    }

    /// The corpus's store in object storage, fetched and checked to be the one the corpus
    /// recorded, once (the generation it audited, or the whole store).
    fn store_in_bucket(&self, url: &Path) -> io::Result<PathBuf> {
        let fetched = self.fetched_store.get_or_init(|| {
            let pick = self.manifest["store_generation"]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .map(crate::store::generations::Pick::Number);
            let copy = match crate::pipeline::remote::fetched_store(url, pick) {
                Ok(Some(copy)) => copy,
                Ok(None) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "the store of {} is not at {} (manifest field `store`): it holds no \
                             store's manifest",
                            self.dir.display(),
                            url.display()
                        ),
                    ))
                }
                Err(e) => {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "the store of {} cannot be read from {}: {e}",
                            self.dir.display(),
                            url.display()
                        ),
                    ))
                }
            };
            self.is_recorded_store(&copy.0)
                .map_err(|why| self.not_its_store(url, &why))?;
            Ok(copy)
        });
        match fetched {
            Ok((local, _)) => Ok(local.clone()),
            Err(e) => Err(io::Error::new(e.kind(), e.to_string())),
        }
    }

    /// Is the store at `dir` the one the corpus manifest recorded? `Err` says how it differs.
    fn is_recorded_store(&self, dir: &Path) -> crate::error::Result<()> {
        let Some(recorded) = self.manifest.get("store_manifest") else {
            return Ok(());
        };
        let text = std::fs::read_to_string(dir.join("manifest.json"))
            .map_err(|e| Error::Refused(format!("its manifest.json cannot be read: {e}")))?;
        let found: Value = serde_json::from_str(&text)
            .map_err(|e| Error::Refused(format!("its manifest.json is not JSON: {e}")))?;
        // A store that has grown since (appends, compactions) keeps its id and holds every run
        // it held then.
        if let (Some(id), Some(then)) = (
            recorded.get("store_id").and_then(Value::as_str),
            recorded.get("generations").and_then(Value::as_array),
        ) {
            let last = |list: &[Value]| {
                list.iter()
                    .filter_map(|g| g.get("number").and_then(Value::as_u64))
                    .max()
            };
            let now = found.get("generations").and_then(Value::as_array);
            if found.get("store_id").and_then(Value::as_str) != Some(id) {
                return Err(Error::Refused("its manifest names another store id".into()));
            }
            return match (now.and_then(|n| last(n)), last(then)) {
                (Some(now), Some(then)) if now >= then => Ok(()),
                _ => Err(Error::Refused(
                    "it holds fewer generations than the corpus's record".into(),
                )),
            };
        }
        for field in ["store_schema_version", "parts", "counts", "inputs"] {
            if found.get(field) != recorded.get(field) {
                return Err(Error::Refused(format!(
                    "its manifest's `{field}` differs from the corpus's record"
                )));
            }
        }
        Ok(())
    }

    /// The parts the store's manifest lists, each there (the manifest is the truth: other
    /// files lying in `events/` are not read).
    fn store_parts(&self, store: &Path) -> io::Result<Vec<PathBuf>> {
        Ok(self
            .store_generations(store)?
            .into_iter()
            .flat_map(|g| (0..g.parts).map(move |p| g.part_path(p)))
            .collect())
    }

    /// The store's generations as its manifest lists them, each listed part there, with the
    /// conversations later generations supersede.
    fn store_generations(
        &self,
        store: &Path,
    ) -> io::Result<Vec<crate::store::generations::GenerationFiles>> {
        let manifest = crate::store::StoreManifest::read(store)?;
        if manifest.parts.is_empty() {
            return Err(io::Error::other(format!(
                "{} lists no events parts",
                store.join("manifest.json").display()
            )));
        }
        // The manifest's parts are its generations' (checked there), so every path is ours.
        let mut generations = crate::store::generations::resolve(store, &manifest)?;
        // A corpus of one generation reads that generation's rows, as the store held them
        // then; once compacted away, the live rows (the same runs) stand in for them.
        let audited = self.manifest["store_generation"].as_u64();
        if let Some(n) = audited.filter(|&n| generations.iter().any(|g| u64::from(g.number) == n)) {
            generations.retain(|g| u64::from(g.number) == n);
            for g in &mut generations {
                g.superseded.clear();
            }
        }
        for g in &generations {
            for p in 0..g.parts {
                let path = g.part_path(p);
                if !path.is_file() {
                    return Err(io::Error::new(
                        io::ErrorKind::NotFound,
                        format!(
                            "{} is not a whole store: {}, which its manifest lists, is missing",
                            store.display(),
                            path.strip_prefix(store).unwrap_or(&path).display()
                        ),
                    ));
                }
            }
        }
        Ok(generations)
    }

    /// The first Parquet file this corpus reads that cannot be read whole (its tables, then its
    /// store's runs and listed parts), named with its own error. See [`name_the_unreadable`].
    fn find_unreadable(&self) -> Option<io::Error> {
        let mut files = self.layout.listed_files(&self.dir).unwrap_or_else(|| {
            let mut files: Vec<PathBuf> = std::fs::read_dir(&self.dir)
                .map(|entries| {
                    entries
                        .filter_map(|e| e.ok().map(|e| e.path()))
                        .filter(|p| p.is_file() && p.extension().is_some_and(|x| x == "parquet"))
                        .collect()
                })
                .unwrap_or_default();
            files.sort();
            files
        });
        if let Ok(store) = self.store_dir() {
            let generations = self.store_generations(&store).unwrap_or_default();
            files.extend(generations.iter().flat_map(|g| g.runs_files()));
            files.extend(self.store_parts(&store).unwrap_or_default());
        }
        files.into_iter().find_map(|file| {
            let read = guarded(|| scan(&file)?.collect().map_err(pl));
            read.err().map(|e| {
                io::Error::new(
                    io::ErrorKind::InvalidData,
                    format!("{} is unreadable: {e}", file.display()),
                )
            })
        })
    }

    /// The live runs of the store: every generation's runs files, without the rows of
    /// conversations a later generation supersedes.
    pub fn runs(&self) -> io::Result<LazyFrame> {
        let generations = self.store_generations(&self.store_dir()?)?;
        let scans = generations
            .iter()
            .map(|g| Ok(live(scan_files(&g.runs_files())?, g)))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(only_plausible_times(
            concat_scans(scans)?,
            &["started_at", "ended_at"],
        ))
    }

    /// The live runs of the store as one scan per runs file (a part's, in stores written since
    /// schema 10), for readers that hold one file's rows at a time.
    pub fn runs_by_file(&self) -> io::Result<Vec<LazyFrame>> {
        let generations = self.store_generations(&self.store_dir()?)?;
        let mut scans = Vec::new();
        for g in &generations {
            for file in g.runs_files() {
                let live = live(scan(&file)?, g);
                scans.push(only_plausible_times(live, &["started_at", "ended_at"]));
            }
        }
        Ok(scans)
    }

    /// The live events of the store as one scan per events part.
    pub fn events_by_file(&self) -> io::Result<Vec<LazyFrame>> {
        let generations = self.store_generations(&self.store_dir()?)?;
        let mut scans = Vec::new();
        for g in &generations {
            for p in 0..g.parts {
                let live = live(scan(&g.part_path(p))?, g);
                scans.push(only_plausible_times(live, &["timestamp"]));
            }
        }
        Ok(scans)
    }

    /// The live events of every part of the store's manifest, as one scan.
    pub fn events(&self) -> io::Result<LazyFrame> {
        let generations = self.store_generations(&self.store_dir()?)?;
        let scans = generations
            .iter()
            .map(|g| {
                let parts: Vec<PathBuf> = (0..g.parts).map(|p| g.part_path(p)).collect();
                Ok(live(scan_files(&parts)?, g))
            })
            .collect::<io::Result<Vec<_>>>()?;
        Ok(only_plausible_times(concat_scans(scans)?, &["timestamp"]))
    }
}

/// Rows a report reads of a corpus table at once ([`CorpusDir::for_each_slice`]): 64k rows of
/// dispositions are some 10 MB decoded. (Unit tests use a few rows, so their small corpora are
/// read in many slices too.)
pub const SLICE_ROWS: u32 = if cfg!(test) { 5 } else { 1 << 16 };

/// The rows of a scan (from the Parquet footers; nothing else is read).
pub fn row_count(lf: &LazyFrame) -> io::Result<u64> {
    let df = lf
        .clone()
        .select([len().alias("rows")])
        .collect()
        .map_err(pl)?;
    Ok(counts(&df, "rows")?.first().copied().unwrap_or(0))
}

/// `err` with the file it came from named, when Polars raised it: each Parquet file of
/// `corpora` is read whole until one fails, and that one is named with its own error (the cost
/// is paid only once reading has failed). Other errors are returned as they are.
pub fn name_the_unreadable(corpora: &[&CorpusDir], err: io::Error) -> io::Error {
    if !is_polars_failure(&err) {
        return err;
    }
    if let Some(named) = corpora.iter().find_map(|c| c.find_unreadable()) {
        return named;
    }
    let dirs: Vec<String> = corpora
        .iter()
        .map(|c| c.dir.display().to_string())
        .collect();
    io::Error::new(err.kind(), format!("reading {}: {err}", dirs.join(" and ")))
}

/// `lf` with the times of `columns` outside [`PLAUSIBLE_WALL_CLOCK_MS`] made null. The ingest
/// stores such a time as absent, but a store written before that, or rewritten since, may hold
/// one, and Polars cannot turn it into a date (it panics): no report may fail on a recorded time.
pub fn only_plausible_times(lf: LazyFrame, columns: &[&str]) -> LazyFrame {
    let (low, high) = (
        *PLAUSIBLE_WALL_CLOCK_MS.start(),
        *PLAUSIBLE_WALL_CLOCK_MS.end(),
    );
    lf.with_columns(
        columns
            .iter()
            .map(|&name| {
                let ms = col(name).cast(DataType::Int64);
                when(ms.clone().gt_eq(lit(low)).and(ms.lt_eq(lit(high))))
                    .then(col(name))
                    .otherwise(lit(NULL))
                    .alias(name)
            })
            .collect::<Vec<_>>(),
    )
}

/// The rows of `scan`, of generation `g`, that a later generation does not supersede.
fn live(scan: LazyFrame, g: &crate::store::generations::GenerationFiles) -> LazyFrame {
    if g.superseded.is_empty() {
        return scan;
    }
    let mut ids: Vec<String> = g.superseded.iter().cloned().collect();
    ids.sort();
    scan.filter(one_of("conversation_id", &ids).not())
}

/// Scans of one schema, one after the other.
fn concat_scans(mut scans: Vec<LazyFrame>) -> io::Result<LazyFrame> {
    if scans.len() == 1 {
        return Ok(scans.remove(0));
    }
    concat(scans, UnionArgs::default()).map_err(pl)
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

/// Column `name` of `df`, a string column, to iterate without copying its values.
pub fn str_column<'a>(df: &'a DataFrame, name: &str) -> io::Result<&'a StringChunked> {
    df.column(name).map_err(pl)?.str().map_err(pl)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_impossible_time_becomes_null_not_a_panic() {
        // Nanoseconds where milliseconds belong, as a store written before the ingest cleared
        // them may hold; Polars panics turning such a value into a date.
        let ms = Series::new(
            "started_at".into(),
            [
                Some(1_795_968_647_243i64),
                Some(1_795_968_647_243_000_000),
                None,
            ],
        )
        .cast(&DataType::Datetime(TimeUnit::Milliseconds, None))
        .unwrap();
        let df = DataFrame::new(3, vec![ms.into()]).unwrap();
        let days = only_plausible_times(df.lazy(), &["started_at"])
            .select([col("started_at").dt().strftime("%Y-%m-%d").alias("day")])
            .collect()
            .unwrap();
        assert_eq!(
            strs(&days, "day").unwrap(),
            [Some("2026-11-29".to_string()), None, None]
        );
    }
}
