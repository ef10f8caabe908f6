//! End to end: `ingest`, `audit` on the store and `audit` on raw inputs over generated corpora,
//! each timed against a baseline that only parses the same bytes into `serde_json::Value` on
//! one thread, in the same run.
//!
//! ```text
//! cargo bench --bench end_to_end
//! TRACEAUDIT_BENCH_SIZES=100MB,1GB cargo bench --bench end_to_end
//! ```
//!
//! Environment (all optional):
//! - `TRACEAUDIT_BENCH_SIZES`   corpus sizes, comma-separated (default `20MB`)
//! - `TRACEAUDIT_BENCH_FORMATS` `agentfootprint,tau2` (default both)
//! - `TRACEAUDIT_BENCH_REPEATS` timings per measurement; the median is reported (default 3)
//! - `TRACEAUDIT_BENCH_THREADS` thread counts for the engine (default `1,2`)
//! - `TRACEAUDIT_BENCH_STEPS`   `baseline,baseline-sonic,ingest,audit-store,audit-raw,audit-gzip,
//!   audit-s3` (default all): `baseline-sonic` parses as `baseline` does with sonic-rs (SIMD)
//!   into its own DOM; `audit-gzip` audits a gzip'd copy of the inputs (made once, beside them);
//!   `audit-s3` audits the plain inputs uploaded to moto's S3 server, started on the loopback
//!   (`pip install "moto[server]"`; without `moto_server` on the PATH the step is left out)
//! - `TRACEAUDIT_BENCH_SEED`    generator seed (default 1)
//! - `TRACEAUDIT_BENCH_DIR`     where corpora are cached and outputs written (default
//!   `<target>/bench-corpora`)
//! - `TRACEAUDIT_BENCH_SHAPES`  `generated,replicated` (default `generated`): `replicated`
//!   corpora are real recordings copied with fresh ids (`traceaudit-gen replicate`), from
//! - `TRACEAUDIT_BENCH_REAL_DATA` the shared data folder (default `../shared/data` beside the
//!   checkout): tau2 from `tau2-grok/` and `tau2-leaderboard/` into 16 files per 512 MB,
//!   agentfootprint from `agentfootprint/ndjson/` into 8 files per 512 MB
//! - `TRACEAUDIT_BENCH_ENGINE_B` a second `traceaudit` binary: every engine step is timed for
//!   both, alternately, and a table gives B over A (an A/B comparison of two builds)
//!
//! Every command runs as a child process (the release `traceaudit` binary, or this binary in
//! `--baseline` mode), so its wall time and peak resident memory (`wait4` rusage) are its own.
//! A child run at N threads is confined to N CPUs (`sched_setaffinity`): "1 thread" means one
//! core, whatever helper threads the engine starts.
//! Repetitions are interleaved (baseline, then every engine step, then again) so drift on a
//! shared machine hits all of them alike; ratios are computed from medians of the same run.
//! Inputs are read once before timing, so every step starts from a warm page cache.
//! After timing, the corpora written at 1 and at 2 threads are compared byte for byte, and the
//! audit's findings are compared with the generator's `expected.json`.

use std::collections::BTreeMap;
use std::io::{BufRead, Read, Write};

// The engine's allocator, so the baseline parse is not slowed by one the engine does not use.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;
use traceaudit_gen::{self as gen, GenFormat, GenOptions};

mod common;
use common::{env_list, median, target_dir, timed, Sample};

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Step {
    Baseline,
    BaselineSonic,
    Ingest,
    AuditStore,
    AuditRaw,
    AuditGzip,
    AuditS3,
}

impl Step {
    fn name(self) -> &'static str {
        match self {
            Step::Baseline => "baseline parse",
            Step::BaselineSonic => "sonic-rs parse",
            Step::Ingest => "ingest",
            Step::AuditStore => "audit STORE",
            Step::AuditRaw => "audit RAW",
            Step::AuditGzip => "audit RAW gzip",
            Step::AuditS3 => "audit RAW S3",
        }
    }

    fn parse(s: &str) -> Option<Step> {
        match s.trim() {
            "baseline" => Some(Step::Baseline),
            "baseline-sonic" => Some(Step::BaselineSonic),
            "ingest" => Some(Step::Ingest),
            "audit-store" => Some(Step::AuditStore),
            "audit-raw" => Some(Step::AuditRaw),
            "audit-gzip" => Some(Step::AuditGzip),
            "audit-s3" => Some(Step::AuditS3),
            _ => None,
        }
    }
}

/// Where a corpus's recordings come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Shape {
    /// `traceaudit-gen`'s own synthetic corpora, with the findings they must produce.
    Generated,
    /// Real recordings copied with fresh ids.
    Replicated,
}

struct Settings {
    sizes: Vec<(String, u64)>,
    formats: Vec<GenFormat>,
    shapes: Vec<Shape>,
    real_data: PathBuf,
    engine_b: Option<PathBuf>,
    repeats: usize,
    threads: Vec<usize>,
    steps: Vec<Step>,
    seed: u64,
    dir: PathBuf,
}

fn settings() -> Settings {
    let sizes = env_list("TRACEAUDIT_BENCH_SIZES", "20MB")
        .into_iter()
        .map(|s| {
            let bytes = gen::parse_size(&s).unwrap_or_else(|e| panic!("{e}"));
            (s.to_uppercase(), bytes)
        })
        .collect();
    let formats = env_list("TRACEAUDIT_BENCH_FORMATS", "agentfootprint,tau2")
        .iter()
        .map(|f| match f.as_str() {
            "agentfootprint" => GenFormat::Agentfootprint,
            "tau2" => GenFormat::Tau2,
            other => panic!("unknown format {other:?}"),
        })
        .collect();
    let repeats = std::env::var("TRACEAUDIT_BENCH_REPEATS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(3usize)
        .max(1);
    let threads = env_list("TRACEAUDIT_BENCH_THREADS", "1,2")
        .iter()
        .map(|t| t.parse().expect("thread count"))
        .collect();
    let mut steps: Vec<Step> = env_list(
        "TRACEAUDIT_BENCH_STEPS",
        "baseline,baseline-sonic,ingest,audit-store,audit-raw,audit-gzip,audit-s3",
    )
    .iter()
    .map(|s| Step::parse(s).unwrap_or_else(|| panic!("unknown step {s:?}")))
    .collect();
    steps.sort();
    steps.dedup();
    let seed = std::env::var("TRACEAUDIT_BENCH_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let dir = std::env::var_os("TRACEAUDIT_BENCH_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| target_dir().join("bench-corpora"));
    let shapes = env_list("TRACEAUDIT_BENCH_SHAPES", "generated")
        .iter()
        .map(|s| match s.as_str() {
            "generated" => Shape::Generated,
            "replicated" => Shape::Replicated,
            other => panic!("unknown shape {other:?} (generated, replicated)"),
        })
        .collect();
    let real_data = std::env::var_os("TRACEAUDIT_BENCH_REAL_DATA")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../shared/data"));
    let engine_b = std::env::var_os("TRACEAUDIT_BENCH_ENGINE_B").map(PathBuf::from);
    Settings {
        sizes,
        formats,
        shapes,
        real_data,
        engine_b,
        repeats,
        threads,
        steps,
        seed,
        dir,
    }
}

/// Let the child run on at most `cpus` CPUs (the first ones it is allowed), so a run at N threads
/// gets N cores. `--threads 1` still starts helper threads (ingest's store writer runs beside
/// the parser), which on an unconfined two-core machine would let the "one thread" run use
/// both cores and understate how throughput scales.
fn confine_to_cpus(cmd: &mut Command, cpus: usize) {
    use std::os::unix::process::CommandExt;
    // SAFETY: the hook runs in the forked child before exec and only makes two system calls
    // on a stack-held CPU set (async-signal-safe).
    unsafe {
        cmd.pre_exec(move || {
            let mut allowed: libc::cpu_set_t = std::mem::zeroed();
            let size = std::mem::size_of::<libc::cpu_set_t>();
            if libc::sched_getaffinity(0, size, &mut allowed) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            let mut chosen: libc::cpu_set_t = std::mem::zeroed();
            let mut taken = 0;
            for cpu in 0..libc::CPU_SETSIZE as usize {
                if taken == cpus {
                    break;
                }
                if libc::CPU_ISSET(cpu, &allowed) {
                    libc::CPU_SET(cpu, &mut chosen);
                    taken += 1;
                }
            }
            if libc::sched_setaffinity(0, size, &chosen) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// `--baseline FORMAT FILE...`: parse every file into `serde_json::Value` on this thread (NDJSON
/// line by line, a tau2 document whole) and report what was parsed.
fn baseline_main(args: &[String], sonic: bool) {
    let format = args.first().expect("--baseline FORMAT FILE...");
    // One value parsed on this thread, by serde_json or by sonic-rs, and dropped.
    let parse = |text: &[u8]| {
        if sonic {
            let v: sonic_rs::Value = sonic_rs::from_slice(text).expect("valid JSON");
            std::hint::black_box(&v);
        } else {
            let v: serde_json::Value = serde_json::from_slice(text).expect("valid JSON");
            std::hint::black_box(&v);
        }
    };
    let mut bytes = 0u64;
    let mut values = 0u64;
    let started = Instant::now();
    for file in &args[1..] {
        if format == "agentfootprint" || format == "otel" {
            let mut reader =
                std::io::BufReader::with_capacity(1 << 20, std::fs::File::open(file).unwrap());
            let mut line = Vec::with_capacity(1 << 16);
            loop {
                line.clear();
                let n = reader.read_until(b'\n', &mut line).unwrap();
                if n == 0 {
                    break;
                }
                bytes += n as u64;
                let text = trim(&line);
                if text.is_empty() {
                    continue;
                }
                parse(text);
                values += 1;
            }
        } else {
            let mut buf = Vec::new();
            std::fs::File::open(file)
                .unwrap()
                .read_to_end(&mut buf)
                .unwrap();
            bytes += buf.len() as u64;
            parse(&buf);
            values += 1;
        }
    }
    println!(
        "parsed {values} value(s), {bytes} bytes in {:.3}s",
        started.elapsed().as_secs_f64()
    );
}

fn trim(line: &[u8]) -> &[u8] {
    let mut end = line.len();
    while end > 0 && matches!(line[end - 1], b'\n' | b'\r' | b' ' | b'\t') {
        end -= 1;
    }
    &line[..end]
}

fn input_files(corpus: &Path) -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(corpus.join(gen::INPUT_DIR))
        .expect("input dir")
        .map(|e| e.expect("entry").path())
        .collect();
    files.sort();
    files
}

/// Generate the corpus, or reuse the cached one.
fn corpus(settings: &Settings, format: GenFormat, label: &str, bytes: u64) -> PathBuf {
    let dir = settings.dir.join(format!(
        "{}-{label}-seed{}-v{}",
        format.name(),
        settings.seed,
        gen::GENERATOR_VERSION
    ));
    if dir.join(gen::EXPECTED_FILE).exists() {
        eprintln!("reusing {}", dir.display());
        return dir;
    }
    eprintln!("generating {} ...", dir.display());
    let mut opts = GenOptions::new(format, settings.seed);
    opts.bytes = Some(bytes);
    let summary = gen::generate(&opts, &dir).expect("generate the corpus");
    eprintln!(
        "generated {:.1} MB in {:.1}s",
        summary.expected.totals.bytes as f64 / 1e6,
        summary.seconds
    );
    dir
}

/// Replicate the real recordings of `format` to about `bytes`, or reuse the cached copy.
fn replicated_corpus(settings: &Settings, format: GenFormat, label: &str, bytes: u64) -> PathBuf {
    use gen::replicate::{replicate, RealShape, ReplicateOptions, REPLICATED_FILE};
    let dir = settings
        .dir
        .join(format!("{}-{label}-replicated", format.name()));
    if dir.join(REPLICATED_FILE).exists() {
        eprintln!("reusing {}", dir.display());
        return dir;
    }
    // The file counts of the real-shaped measurements: tau2 results documents of about 33 MB,
    // agentfootprint logs of about 64 MB.
    let per_512mb = match format {
        GenFormat::Tau2 => 16,
        GenFormat::Agentfootprint => 8,
    };
    let files = ((bytes as f64 / 512e6 * per_512mb as f64).round() as usize).max(1);
    let (shape, sources) = match format {
        GenFormat::Tau2 => (
            RealShape::Tau2,
            vec![
                settings.real_data.join("tau2-grok"),
                settings.real_data.join("tau2-leaderboard"),
            ],
        ),
        GenFormat::Agentfootprint => (
            RealShape::Agentfootprint,
            vec![settings.real_data.join("agentfootprint/ndjson")],
        ),
    };
    for s in &sources {
        assert!(
            s.is_dir(),
            "{} is missing: replicated corpora need the shared data (TRACEAUDIT_BENCH_REAL_DATA)",
            s.display()
        );
    }
    eprintln!("replicating into {} ...", dir.display());
    let opts = ReplicateOptions {
        shape,
        sources,
        bytes,
        files,
    };
    let (summary, seconds) = replicate(&opts, &dir).expect("replicate the recordings");
    eprintln!(
        "replicated {} unit(s) into {:.1} MB ({} copies) in {seconds:.1}s",
        summary.units,
        summary.bytes as f64 / 1e6,
        summary.copies_written
    );
    dir
}

/// A gzip'd copy of the corpus's inputs (`gzip -6`), made once beside them.
fn gzip_inputs(corpus: &Path, files: &[PathBuf]) -> PathBuf {
    let dir = corpus.join("input-gz");
    let done = corpus.join("input-gz.done");
    if done.exists() {
        return dir;
    }
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    for file in files {
        let name = format!("{}.gz", file.file_name().unwrap().to_string_lossy());
        let out = std::fs::File::create(dir.join(name)).unwrap();
        let mut encoder = flate2::write::GzEncoder::new(out, flate2::Compression::new(6));
        std::io::copy(&mut std::fs::File::open(file).unwrap(), &mut encoder).unwrap();
        encoder.finish().unwrap();
    }
    std::fs::write(done, "").unwrap();
    dir
}

/// moto's S3 server on a port of the loopback, stopped when dropped.
struct S3Server {
    child: std::process::Child,
    port: u16,
}

impl Drop for S3Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl S3Server {
    /// Started if `moto_server` is on the PATH.
    fn start() -> Option<S3Server> {
        let binary = std::env::var_os("PATH").and_then(|paths| {
            std::env::split_paths(&paths)
                .map(|p| p.join("moto_server"))
                .find(|p| p.is_file())
        })?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .ok()?
            .local_addr()
            .ok()?
            .port();
        let child = Command::new(binary)
            .args(["-H", "127.0.0.1", "-p", &port.to_string()])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .ok()?;
        let server = S3Server { child, port };
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            if started.elapsed().as_secs() > 60 {
                return None;
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        Some(server)
    }

    /// PUT `body` at `path` (a bucket, or an object); moto takes unsigned requests.
    fn put(&self, path: &str, body: &[u8]) {
        let mut s = std::net::TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut reply = String::new();
        let _ = s.read_to_string(&mut reply);
        assert!(reply.starts_with("HTTP/1.1 200"), "PUT {path}: {reply}");
    }

    /// The corpus's inputs uploaded under `s3://bench/<name>/`, whose URL is returned.
    fn upload(&self, name: &str, files: &[PathBuf]) -> String {
        self.put("/bench", b"");
        for file in files {
            let key = file.file_name().unwrap().to_string_lossy();
            self.put(
                &format!("/bench/{name}/{key}"),
                &std::fs::read(file).unwrap(),
            );
        }
        format!("s3://bench/{name}/")
    }

    /// `cmd` given this server's settings (and credentials moto does not check).
    fn configure(&self, cmd: &mut Command) {
        cmd.env("AWS_ACCESS_KEY_ID", "bench")
            .env("AWS_SECRET_ACCESS_KEY", "bench")
            .env("AWS_REGION", "us-east-1")
            .env(
                "AWS_ENDPOINT_URL",
                format!("http://127.0.0.1:{}", self.port),
            )
            .env("AWS_ALLOW_HTTP", "true");
    }
}

/// The runs a store holds, from its manifest.
fn store_runs(store: &Path) -> Option<u64> {
    let text = std::fs::read_to_string(store.join("manifest.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v.get("counts")?.get("runs")?.as_u64()
}

#[derive(Debug, Clone)]
struct Row {
    step: Step,
    threads: usize,
    /// 0 for the engine under test (A), 1 for `TRACEAUDIT_BENCH_ENGINE_B`.
    engine: usize,
    median: f64,
    min: f64,
    max: f64,
    cpu: f64,
    rss_mb: f64,
}

/// Parquet and JSON-lines files under `dir` (recursively), relative path -> bytes.
fn output_files(dir: &Path) -> BTreeMap<String, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<String, Vec<u8>>) {
        for entry in std::fs::read_dir(dir).expect("read dir") {
            let path = entry.expect("entry").path();
            if path.is_dir() {
                walk(base, &path, out);
            } else if matches!(
                path.extension().and_then(|e| e.to_str()),
                Some("parquet" | "jsonl")
            ) {
                let rel = path.strip_prefix(base).unwrap().display().to_string();
                out.insert(rel, std::fs::read(&path).expect("read output"));
            }
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

fn same_outputs(a: &Path, b: &Path) -> Result<usize, String> {
    let (x, y) = (output_files(a), output_files(b));
    if x.keys().ne(y.keys()) {
        return Err(format!(
            "different files: {:?} vs {:?}",
            x.keys().collect::<Vec<_>>(),
            y.keys().collect::<Vec<_>>()
        ));
    }
    for (name, bytes) in &x {
        if y[name] != *bytes {
            return Err(format!("{name} differs"));
        }
    }
    Ok(x.len())
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|s| s.trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let mem_gib = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with("MemTotal"))
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|kb| kb.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0 / 1024.0)
        .unwrap_or(0.0);
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
        .unwrap_or_default()
        .trim()
        .to_string();
    let commit = Command::new("git")
        .args(["rev-parse", "--short", "HEAD"])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("{cores} cores ({cpu}), {mem_gib:.0} GiB RAM, Linux {kernel}, commit {commit}")
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(mode @ ("--baseline" | "--baseline-sonic")) = args.get(1).map(String::as_str) {
        baseline_main(&args[2..], mode == "--baseline-sonic");
        return;
    }
    if !args.iter().any(|a| a == "--bench") {
        // Built and run as a test (`cargo test --benches`): nothing to time.
        println!("end_to_end: run with `cargo bench --bench end_to_end`");
        return;
    }
    let settings = settings();
    let engine = PathBuf::from(env!("CARGO_BIN_EXE_traceaudit"));
    let me = std::env::current_exe().expect("current exe");
    let mut report = String::new();
    let header = format!(
        "# traceaudit end to end\n\nmachine: {}\nload average at start: {}\nrepeats: {} \
         (median reported), threads: {:?}, seed: {}\n",
        machine(),
        loadavg(),
        settings.repeats,
        settings.threads,
        settings.seed
    );
    let header = match &settings.engine_b {
        Some(b) => format!(
            "{header}engine A: {}\nengine B: {}\n",
            engine.display(),
            b.display()
        ),
        None => header,
    };
    println!("{header}");
    report.push_str(&header);

    let mut engines: Vec<PathBuf> = vec![engine.clone()];
    engines.extend(settings.engine_b.clone());
    // Output folders of engine B carry a prefix so the two never share one.
    let tag = |e: usize| if e == 0 { "" } else { "b-" };

    for (label, bytes) in &settings.sizes {
        for &shape in &settings.shapes {
            for &format in &settings.formats {
                let (corpus, expected) = match shape {
                    Shape::Generated => {
                        let c = corpus(&settings, format, label, *bytes);
                        let e = gen::Expected::load(&c).expect("expected.json");
                        (c, Some(e))
                    }
                    Shape::Replicated => {
                        (replicated_corpus(&settings, format, label, *bytes), None)
                    }
                };
                let shape_name = match shape {
                    Shape::Generated => "generated",
                    Shape::Replicated => "replicated",
                };
                let files = input_files(&corpus);
                let input = corpus.join(gen::INPUT_DIR);
                let config = corpus.join(gen::CONFIG_FILE);
                let total: u64 = files
                    .iter()
                    .map(|f| std::fs::metadata(f).map(|m| m.len()).unwrap_or(0))
                    .sum();
                let work = settings
                    .dir
                    .join(format!("runs-{}-{shape_name}-{label}", format.name()));
                let _ = std::fs::remove_dir_all(&work);
                std::fs::create_dir_all(&work).unwrap();
                // Warm the page cache.
                for f in &files {
                    let mut buf = vec![0u8; 1 << 20];
                    let mut file = std::fs::File::open(f).unwrap();
                    while file.read(&mut buf).unwrap() > 0 {}
                }
                let gz_input = settings
                    .steps
                    .contains(&Step::AuditGzip)
                    .then(|| gzip_inputs(&corpus, &files));
                // The server lives as long as this corpus's measurements.
                let s3 = match settings.steps.contains(&Step::AuditS3) {
                    true => S3Server::start().map(|server| {
                        let url = server.upload(&format!("{}-{label}", format.name()), &files);
                        (server, url)
                    }),
                    false => None,
                };
                if settings.steps.contains(&Step::AuditS3) && s3.is_none() {
                    eprintln!("audit RAW S3 left out: moto_server is not on the PATH");
                }
                let max_threads = *settings.threads.iter().max().unwrap_or(&1);
                // Each engine audits a store it wrote itself (the two may differ in layout).
                let store_of = |e: usize| work.join(format!("{}store-t{max_threads}", tag(e)));
                // audit STORE needs a store: the ingest step makes one; else make one untimed.
                if settings.steps.contains(&Step::AuditStore)
                    && !(settings.steps.contains(&Step::Ingest)
                        && settings.threads.contains(&max_threads))
                {
                    for (e, bin) in engines.iter().enumerate() {
                        timed(
                            Command::new(bin)
                                .arg("ingest")
                                .arg(&input)
                                .arg("--out")
                                .arg(store_of(e))
                                .args(["--threads", &max_threads.to_string(), "-q"]),
                            &work.join(format!("{}prepare.log", tag(e))),
                        );
                    }
                }
                let mut samples: BTreeMap<(Step, usize, usize), Vec<Sample>> = BTreeMap::new();
                for rep in 0..settings.repeats {
                    for &step in &settings.steps {
                        if step == Step::AuditS3 && s3.is_none() {
                            continue;
                        }
                        let baseline = matches!(step, Step::Baseline | Step::BaselineSonic);
                        let thread_counts: Vec<usize> = if baseline {
                            vec![1]
                        } else {
                            settings.threads.clone()
                        };
                        let engine_count = if baseline { 1 } else { engines.len() };
                        for &t in &thread_counts {
                            // Alternate A and B, starting with the other one on odd repetitions.
                            for k in 0..engine_count {
                                let e = (k + rep) % engine_count;
                                let bin = &engines[e];
                                let log = work.join(format!(
                                    "{}{}-t{t}-{rep}.log",
                                    tag(e),
                                    step.name().replace(' ', "-")
                                ));
                                let out = |what: &str| work.join(format!("{}{what}-t{t}", tag(e)));
                                let mut cmd;
                                match step {
                                    Step::Baseline | Step::BaselineSonic => {
                                        let mode = match step {
                                            Step::Baseline => "--baseline",
                                            _ => "--baseline-sonic",
                                        };
                                        cmd = Command::new(&me);
                                        cmd.arg(mode).arg(format.name()).args(&files);
                                    }
                                    Step::Ingest => {
                                        cmd = Command::new(bin);
                                        cmd.arg("ingest")
                                            .arg(&input)
                                            .arg("--out")
                                            .arg(out("store"))
                                            .args(["--threads", &t.to_string(), "-q"]);
                                    }
                                    Step::AuditStore => {
                                        cmd = Command::new(bin);
                                        cmd.arg("audit")
                                            .arg(store_of(e))
                                            .arg("--out")
                                            .arg(out("corpus-store"))
                                            .arg("--config")
                                            .arg(&config)
                                            .args(["--threads", &t.to_string(), "-q"]);
                                    }
                                    Step::AuditRaw | Step::AuditGzip | Step::AuditS3 => {
                                        let (from, corpus_name) = match step {
                                            Step::AuditGzip => (
                                                gz_input.clone().unwrap().into_os_string(),
                                                "corpus-gzip",
                                            ),
                                            Step::AuditS3 => {
                                                (s3.as_ref().unwrap().1.clone().into(), "corpus-s3")
                                            }
                                            _ => (input.clone().into_os_string(), "corpus-raw"),
                                        };
                                        cmd = Command::new(bin);
                                        cmd.arg("audit")
                                            .arg(from)
                                            .arg("--out")
                                            .arg(out(corpus_name))
                                            .arg("--config")
                                            .arg(&config)
                                            .args(["--threads", &t.to_string(), "-q"]);
                                        if let (Step::AuditS3, Some((server, _))) = (step, &s3) {
                                            server.configure(&mut cmd);
                                        }
                                    }
                                }
                                confine_to_cpus(&mut cmd, t);
                                let s = timed(&mut cmd, &log);
                                eprintln!(
                                "  {} {shape_name} {label} {:<14} t{t} {}rep {rep}: {:.2}s, {:.2} CPU s, {:.0} MB RSS",
                                format.name(),
                                step.name(),
                                if engine_count > 1 { ["A ", "B "][e] } else { "" },
                                s.seconds,
                                s.cpu_seconds,
                                s.max_rss_kb as f64 / 1024.0
                            );
                                samples.entry((step, t, e)).or_default().push(s);
                            }
                        }
                    }
                }
                let runs = expected
                    .as_ref()
                    .map(|e| e.totals.runs)
                    .or_else(|| store_runs(&store_of(0)));
                let conversations = expected.as_ref().map(|e| e.totals.conversations);

                let rows: Vec<Row> = samples
                    .iter()
                    .map(|(&(step, threads, engine), ss)| {
                        let mut secs: Vec<f64> = ss.iter().map(|s| s.seconds).collect();
                        let mut cpu: Vec<f64> = ss.iter().map(|s| s.cpu_seconds).collect();
                        Row {
                            step,
                            threads,
                            engine,
                            median: median(&mut secs),
                            min: secs[0],
                            max: secs[secs.len() - 1],
                            cpu: median(&mut cpu),
                            rss_mb: ss.iter().map(|s| s.max_rss_kb).max().unwrap_or(0) as f64
                                / 1024.0,
                        }
                    })
                    .collect();
                let find_of = |step: Step, t: usize, e: usize| {
                    rows.iter()
                        .find(|r| r.step == step && r.threads == t && r.engine == e)
                };
                let find = |step: Step, t: usize| find_of(step, t, 0);
                let baseline = find(Step::Baseline, 1).map(|r| r.median);
                let baseline_cpu = find(Step::Baseline, 1).map(|r| r.cpu);

                let count = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_else(|| "?".into());
                let mut text = format!(
                "\n## {} {shape_name} {label}: {:.1} MB in {} file(s), {} conversations, {} runs\n\n",
                format.name(),
                total as f64 / 1e6,
                files.len(),
                count(conversations),
                count(runs)
            );
                text.push_str(
                "| step | engine | threads | median s | min-max s | CPU s | MB/s | runs/s | max RSS MB | x baseline time | x baseline CPU |\n\
                 |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
            );
                for r in &rows {
                    let ratio = baseline
                        .map(|b| format!("{:.2}", r.median / b))
                        .unwrap_or_else(|| "-".into());
                    let cpu_ratio = baseline_cpu
                        .filter(|b| *b > 0.0)
                        .map(|b| format!("{:.2}", r.cpu / b))
                        .unwrap_or_else(|| "-".into());
                    text.push_str(&format!(
                    "| {} | {} | {} | {:.2} | {:.2}-{:.2} | {:.2} | {:.1} | {} | {:.0} | {} | {} |\n",
                    r.step.name(),
                    ["A", "B"][r.engine],
                    r.threads,
                    r.median,
                    r.min,
                    r.max,
                    r.cpu,
                    total as f64 / 1e6 / r.median,
                    runs.map(|n| format!("{:.0}", n as f64 / r.median))
                        .unwrap_or_else(|| "-".into()),
                    r.rss_mb,
                    ratio,
                    cpu_ratio
                ));
                }

                if engines.len() > 1 {
                    text.push_str(
                    "\n| step | threads | B / A median time | B / A CPU time |\n|---|---:|---:|---:|\n",
                );
                    for r in rows.iter().filter(|r| {
                        r.engine == 0 && !matches!(r.step, Step::Baseline | Step::BaselineSonic)
                    }) {
                        if let Some(b) = find_of(r.step, r.threads, 1) {
                            text.push_str(&format!(
                                "| {} | {} | {:.3} | {:.3} |\n",
                                r.step.name(),
                                r.threads,
                                b.median / r.median,
                                b.cpu / r.cpu
                            ));
                        }
                    }
                }

                // The targets (engine A).
                text.push_str("\n| target | measured | goal | verdict |\n|---|---:|---:|---|\n");
                let verdict = |ok: bool| if ok { "met" } else { "NOT met" };
                let t = max_threads;
                if let (Some(b), Some(raw)) = (baseline, find(Step::AuditRaw, t)) {
                    let x = raw.median / b;
                    text.push_str(&format!(
                    "| audit RAW ({t} threads) time / baseline parse time | {x:.2}x | <= 1.3x | {} |\n",
                    verdict(x <= 1.3)
                ));
                    // The baseline builds a large tree of values and is the most sensitive to the
                    // machine's state: the fastest of each, side by side, shows how much of the
                    // median ratio is that.
                    if let Some(fastest) = find(Step::Baseline, 1).map(|r| r.min) {
                        text.push_str(&format!(
                            "| the same, fastest run of each | {:.2}x | (info) | - |\n",
                            raw.min / fastest
                        ));
                    }
                }
                for (step, what) in [
                    (Step::AuditGzip, "gzip'd on disk"),
                    (Step::AuditS3, "plain from the local S3 server"),
                ] {
                    if let (Some(raw), Some(other)) = (find(Step::AuditRaw, t), find(step, t)) {
                        let x = other.median / raw.median;
                        text.push_str(&format!(
                            "| audit RAW {what} / plain on disk ({t} threads) | {x:.2}x | <= 1.3x | {} |\n",
                            verdict(x <= 1.3)
                        ));
                    }
                }
                if let (Some(sonic), Some(raw)) =
                    (find(Step::BaselineSonic, 1), find(Step::AuditRaw, t))
                {
                    let x = raw.median / sonic.median;
                    text.push_str(&format!(
                        "| audit RAW ({t} threads) time / sonic-rs parse time | {x:.2}x | <= 3x | {} |\n",
                        verdict(x <= 3.0)
                    ));
                }
                if let (Some(raw), Some(store)) =
                    (find(Step::AuditRaw, t), find(Step::AuditStore, t))
                {
                    let x = raw.median / store.median;
                    text.push_str(&format!(
                    "| audit RAW time / audit STORE time ({t} threads) | {x:.2}x | >= 8x | {} |\n",
                    verdict(x >= 8.0)
                ));
                }
                for step in [Step::Ingest, Step::AuditStore, Step::AuditRaw] {
                    if let (Some(one), Some(two)) = (find(step, 1), find(step, 2)) {
                        let x = one.median / two.median;
                        let goal = step == Step::AuditRaw;
                        text.push_str(&format!(
                            "| {} throughput, 2 threads / 1 thread | {x:.2}x | {} | {} |\n",
                            step.name(),
                            if goal { ">= 1.85x" } else { "(info)" },
                            if goal { verdict(x >= 1.85) } else { "-" }
                        ));
                    }
                }
                let engine_rss = rows
                    .iter()
                    .filter(|r| !matches!(r.step, Step::Baseline | Step::BaselineSonic))
                    .map(|r| r.rss_mb)
                    .fold(0.0f64, f64::max);
                if engine_rss > 0.0 {
                    text.push_str(&format!(
                        "| peak RSS, any engine step | {engine_rss:.0} MB | < 300 MB | {} |\n",
                        verdict(engine_rss < 300.0)
                    ));
                }
                for (what, a, b) in [
                    ("ingest store", "store-t1", "store-t2"),
                    ("audit STORE corpus", "corpus-store-t1", "corpus-store-t2"),
                    (
                        "audit RAW corpus (with its store)",
                        "corpus-raw-t1",
                        "corpus-raw-t2",
                    ),
                ] {
                    let (a, b) = (work.join(a), work.join(b));
                    if a.exists() && b.exists() {
                        let line = match same_outputs(&a, &b) {
                        Ok(n) => format!(
                            "| {what}: identical at 1 and 2 threads | {n} files equal | identical | met |\n"
                        ),
                        Err(e) => format!(
                            "| {what}: identical at 1 and 2 threads | {e} | identical | NOT met |\n"
                        ),
                    };
                        text.push_str(&line);
                    }
                }
                let audited = [
                    work.join(format!("corpus-raw-t{t}")),
                    work.join(format!("corpus-store-t{t}")),
                ]
                .into_iter()
                .find(|p| p.exists());
                if let (Some(audited), Some(expected)) = (audited, expected.as_ref()) {
                    let v = gen::verify::verify(expected, &audited).expect("read the corpus");
                    text.push_str(&format!(
                    "| findings = generator's expected.json | {} repeated-call, {} prior-turn fails, {} difference(s) | 0 differences | {} |\n",
                    v.repeated_call_found,
                    v.prior_turn_fail_found,
                    v.differences,
                    verdict(v.ok())
                ));
                    if !v.ok() {
                        eprintln!("{}", v.summary());
                    }
                }
                println!("{text}");
                report.push_str(&text);
            }
        }
    }
    let footer = format!("\nload average at end: {}\n", loadavg());
    println!("{footer}");
    report.push_str(&footer);
    let results = target_dir().join("bench-results");
    std::fs::create_dir_all(&results).unwrap();
    let stamp = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let path = results.join(format!("end_to_end-{stamp}.md"));
    std::fs::File::create(&path)
        .and_then(|mut f| f.write_all(report.as_bytes()))
        .expect("write the report");
    println!("report written to {}", path.display());
}
