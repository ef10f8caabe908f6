//! Inputs in object storage, read from a real S3-compatible server on the loopback (moto's
//! server, `pip install "moto[server]"`): a prefix listed like a folder, one object by its URL,
//! compressed objects, the same store a local copy of the objects gives, and no secret (keys in
//! the environment, a URL's password, a presigned query) in anything a run writes or prints.
//! Without `moto_server` on the PATH these tests say so and pass, except under CI (`CI` set),
//! where they fail.

mod common;

use common::*;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const SECRET: &str = "planted-secret-Zq81x";
const KEY_ID: &str = "AKIAPLANTED0000KEY";
const PASSWORD: &str = "planted-password-77";
const SIGNATURE: &str = "planted-signature-5151";

struct Moto {
    child: Child,
    port: u16,
    // One server at a time: two picking ports at once could pick the same one.
    _one: std::sync::MutexGuard<'static, ()>,
}

static ONE_SERVER: std::sync::Mutex<()> = std::sync::Mutex::new(());

impl Drop for Moto {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn moto() -> Option<Moto> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|p| p.join("moto_server"))
            .find(|p| p.is_file())
    });
    let Some(binary) = found else {
        assert!(
            std::env::var_os("CI").is_none(),
            "moto_server is not on the PATH (pip install \"moto[server]\")"
        );
        eprintln!("skipped: moto_server is not on the PATH (pip install \"moto[server]\")");
        return None;
    };
    let one = ONE_SERVER.lock().unwrap_or_else(|e| e.into_inner());
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let child = Command::new(binary)
        .args(["-H", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut server = Moto {
        child,
        port,
        _one: one,
    };
    let start = Instant::now();
    while TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            start.elapsed() < Duration::from_secs(60),
            "moto did not start"
        );
        assert!(server.child.try_wait().unwrap().is_none(), "moto exited");
        std::thread::sleep(Duration::from_millis(100));
    }
    Some(server)
}

impl Moto {
    /// A plain PUT (moto takes unsigned requests): a bucket, or an object with its body.
    fn put(&self, path: &str, body: &[u8]) {
        // The server can refuse a connection while it settles after its first answer.
        let start = Instant::now();
        let mut s = loop {
            match TcpStream::connect(("127.0.0.1", self.port)) {
                Ok(s) => break s,
                Err(e) if start.elapsed() < Duration::from_secs(20) => {
                    eprintln!("retrying PUT {path}: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                }
                Err(e) => panic!("PUT {path}: {e}"),
            }
        };
        write!(
            s,
            "PUT {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
            self.port,
            body.len()
        )
        .unwrap();
        s.write_all(body).unwrap();
        let mut reply = String::new();
        s.read_to_string(&mut reply).unwrap();
        assert!(reply.starts_with("HTTP/1.1 200"), "PUT {path}: {reply}");
    }

    /// A GET: the status line and the body. Moto answers an anonymous GET of an object with
    /// 403 and does not check signatures, so the request carries an unchecked one.
    fn get(&self, path: &str) -> (String, Vec<u8>) {
        let mut s = TcpStream::connect(("127.0.0.1", self.port)).unwrap();
        write!(
            s,
            "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nAuthorization: AWS4-HMAC-SHA256 \
             Credential=AKIATESTREADER/20260101/us-east-1/s3/aws4_request, \
             SignedHeaders=host, Signature=0\r\nConnection: close\r\n\r\n",
            self.port
        )
        .unwrap();
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).unwrap();
        let split = reply.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
        let head = String::from_utf8_lossy(&reply[..split]).to_string();
        let mut body = reply[split + 4..].to_vec();
        if head
            .to_ascii_lowercase()
            .contains("transfer-encoding: chunked")
        {
            body = unchunk(&body);
        }
        (head.lines().next().unwrap_or("").to_string(), body)
    }

    /// The keys under `prefix` of `bucket`.
    fn keys(&self, bucket: &str, prefix: &str) -> Vec<String> {
        let (status, body) = self.get(&format!("/{bucket}?list-type=2&prefix={prefix}"));
        assert!(status.contains("200"), "{status}");
        let text = String::from_utf8_lossy(&body).to_string();
        text.split("<Key>")
            .skip(1)
            .map(|k| k.split("</Key>").next().unwrap().to_string())
            .collect()
    }

    /// The objects under `prefix` of `bucket`, each with its version: its ETag and when it was
    /// last written (to the second: an object put again with the same bytes keeps its ETag).
    fn versions(&self, bucket: &str, prefix: &str) -> Vec<(String, String)> {
        let (status, body) = self.get(&format!("/{bucket}?list-type=2&prefix={prefix}"));
        assert!(status.contains("200"), "{status}");
        let text = String::from_utf8_lossy(&body).to_string();
        let field = |block: &str, name: &str| {
            let open = format!("<{name}>");
            let from = block.find(&open).unwrap() + open.len();
            let to = block[from..].find(&format!("</{name}>")).unwrap();
            block[from..from + to].to_string()
        };
        text.split("<Contents>")
            .skip(1)
            .map(|block| {
                let version = format!("{} {}", field(block, "ETag"), field(block, "LastModified"));
                (field(block, "Key"), version)
            })
            .collect()
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Point this process's own object-store clients at this server: they read their
    /// settings from the environment. (The tests that start processes pass them theirs.)
    /// Tests that call this hold the one server at a time, so they do not race on the
    /// environment.
    fn serve_this_process(&self) {
        for (key, value) in [
            ("AWS_ACCESS_KEY_ID", KEY_ID),
            ("AWS_SECRET_ACCESS_KEY", SECRET),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ENDPOINT_URL", self.endpoint().as_str()),
            ("AWS_ALLOW_HTTP", "true"),
        ] {
            std::env::set_var(key, value);
        }
    }

    /// traceaudit with the S3 environment of this server and planted credentials.
    fn traceaudit(&self, args: &[&str]) -> Output {
        let out = Command::new(env!("CARGO_BIN_EXE_traceaudit"))
            .args(args)
            .env("AWS_ACCESS_KEY_ID", KEY_ID)
            .env("AWS_SECRET_ACCESS_KEY", SECRET)
            .env("AWS_REGION", "us-east-1")
            .env("AWS_ENDPOINT_URL", self.endpoint())
            .env("AWS_ALLOW_HTTP", "true")
            .output()
            .unwrap();
        Output {
            status: out.status.code().unwrap_or(-1),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }
}

fn unchunk(mut body: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = body.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&body[..line]).unwrap().trim(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&body[line + 2..line + 2 + size]);
        body = &body[line + 2 + size + 2..];
    }
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

/// The objects of a night: keys under time-partitioned prefixes, as the Collector's S3 exporter
/// writes them, some gzip'd; each also written under `local` with the same relative name.
fn objects(local: &Path) -> Vec<(String, Vec<u8>)> {
    let af = std::fs::read(testdata(
        "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
    ))
    .unwrap();
    let mut otel_files = Vec::new();
    files_under(&testdata("otel"), &mut otel_files);
    let otel = otel_files
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let mut tau = Vec::new();
    files_under(&testdata("tau2/grok"), &mut tau);
    let tau = tau
        .iter()
        .find(|p| p.extension().is_some_and(|e| e == "json"))
        .unwrap();
    let list = vec![
        (
            "logs/year=2026/month=12/day=01/hour=17/af.ndjson".to_string(),
            af.clone(),
        ),
        (
            "logs/year=2026/month=12/day=01/hour=18/af-2.ndjson.gz".to_string(),
            gzip(&af),
        ),
        (
            "logs/year=2026/month=12/day=01/hour=18/otel.json.gz".to_string(),
            gzip(&std::fs::read(otel).unwrap()),
        ),
        (
            "logs/year=2026/month=12/day=02/hour=01/tau2.json".to_string(),
            std::fs::read(tau).unwrap(),
        ),
    ];
    for (key, body) in &list {
        let to = local.join(key);
        std::fs::create_dir_all(to.parent().unwrap()).unwrap();
        std::fs::write(to, body).unwrap();
    }
    list
}

fn every_output_text(dir: &Path) -> String {
    let mut files = Vec::new();
    files_under(dir, &mut files);
    let mut all = String::new();
    for f in files {
        all.push_str(&String::from_utf8_lossy(&std::fs::read(f).unwrap()));
    }
    all
}

fn assert_no_secret(what: &str, text: &str) {
    for secret in [SECRET, KEY_ID, PASSWORD, SIGNATURE] {
        assert!(!text.contains(secret), "{what} holds {secret}");
    }
}

#[test]
fn a_prefix_in_a_bucket_reads_as_its_local_copy_and_keeps_no_secret() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    server.put("/nightly", b"");
    // A folder marker, as consoles write them: not an object to read.
    server.put("/nightly/logs/", b"");
    server.put("/nightly/logs/year=2026/", b"");
    for (key, body) in objects(&local) {
        server.put(&format!("/nightly/{key}"), &body);
    }
    // Outside the prefix: not read.
    server.put("/nightly/other/af.ndjson", b"{}\n");

    let remote_store = dir.path().join("remote-store");
    let url = format!("s3://{KEY_ID}:{PASSWORD}@nightly/logs/");
    let run = server.traceaudit(&["ingest", &url, "--quiet", "--out", path_str(&remote_store)]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_no_secret("stdout", &run.stdout);
    assert_no_secret("stderr", &run.stderr);
    assert_no_secret("the store", &every_output_text(&remote_store));

    let local_store = dir.path().join("local-store");
    let run = traceaudit(&[
        "ingest",
        path_str(&local.join("logs")),
        "--quiet",
        "--out",
        path_str(&local_store),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);

    let manifest = |store: &Path| -> serde_json::Value {
        serde_json::from_str(&std::fs::read_to_string(store.join("manifest.json")).unwrap())
            .unwrap()
    };
    let (remote, plain) = (manifest(&remote_store), manifest(&local_store));
    assert_eq!(remote["counts"], plain["counts"]);
    let inputs = remote["inputs"].as_array().unwrap();
    assert_eq!(inputs.len(), 4, "{inputs:?}");
    for (r, p) in inputs.iter().zip(plain["inputs"].as_array().unwrap()) {
        let key = r["path"]
            .as_str()
            .unwrap()
            .strip_prefix("s3://nightly/")
            .unwrap();
        assert!(p["path"].as_str().unwrap().ends_with(key), "{r} {p}");
        for field in [
            "size",
            "sha256",
            "format",
            "records",
            "quarantined",
            "compression",
            "decompressed_size",
        ] {
            assert_eq!(r[field], p[field], "{key}: {field}");
        }
        assert!(r["etag"].as_str().is_some_and(|e| !e.is_empty()), "{r}");
    }
    // Row for row, with the two prefixes named alike.
    let remote_tables = store_tables(&remote_store, Path::new("s3://nightly/logs"), ".never");
    let local_tables = store_tables(&local_store, &local.join("logs"), ".never");
    assert_eq!(remote_tables, local_tables);

    // The audit reads a bucket too; one object by its URL, a presigned query left out.
    let corpus = dir.path().join("corpus");
    let one = format!("s3://nightly/logs/year=2026/month=12/day=01/hour=18/af-2.ndjson.gz?X-Amz-Signature={SIGNATURE}");
    let run = server.traceaudit(&["audit", &one, "--quiet", "--out", path_str(&corpus)]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    assert_no_secret("audit output", &format!("{}{}", run.stdout, run.stderr));
    assert_no_secret("the corpus", &every_output_text(&corpus));
    let corpus_store: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(corpus.join("store").join("manifest.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(
        corpus_store["inputs"][0]["path"],
        "s3://nightly/logs/year=2026/month=12/day=01/hour=18/af-2.ndjson.gz"
    );
}

#[test]
fn a_missing_bucket_or_object_is_an_error_that_names_it_and_no_secret() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    server.put("/present", b"");
    // Each URL, and the words its refusal must hold.
    for (url, says) in [
        (
            format!("s3://{KEY_ID}:{PASSWORD}@absent/logs/"),
            "cannot list s3://absent/logs/",
        ),
        (
            format!("s3://present/none.ndjson?X-Amz-Signature={SIGNATURE}"),
            "cannot read s3://present/none.ndjson: no such object or prefix",
        ),
        (
            "s3://present/empty-prefix/".to_string(),
            "no input files found",
        ),
    ] {
        let out = dir.path().join("store");
        let run = server.traceaudit(&["ingest", &url, "--quiet", "--out", path_str(&out)]);
        assert_eq!(run.status, 2, "{url}: {}", run.stderr);
        assert_no_secret(&url, &format!("{}{}", run.stdout, run.stderr));
        assert!(!out.exists(), "{url}");
        assert!(run.stderr.contains(says), "{url}: {}", run.stderr);
    }
}

/// The nightly job on a bucket: logs read from one prefix, the store and the corpus written to
/// others (manifest last, nothing else under a prefix that holds objects, a second writer
/// refused by the lock object), and the reports read from the bucket what they read from the
/// local corpus of the same logs.
#[test]
fn a_night_in_a_bucket_writes_its_store_and_corpus_to_the_bucket() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    server.put("/nightly", b"");
    for (key, body) in objects(&local) {
        server.put(&format!("/nightly/{key}"), &body);
    }
    let logs = "s3://nightly/logs/";
    let corpus_url = "s3://nightly/nights/2026-12-02/";
    let run = server.traceaudit(&["audit", logs, "--quiet", "--out", corpus_url]);
    assert_eq!(run.status, 0, "{}", run.stderr);
    let local_corpus = dir.path().join("2026-12-02");
    let run = traceaudit(&[
        "audit",
        path_str(&local.join("logs")),
        "--quiet",
        "--out",
        path_str(&local_corpus),
    ]);
    assert_eq!(run.status, 0, "{}", run.stderr);

    // What the corpus holds in the bucket: the local corpus's files, and no lock left.
    let keys = server.keys("nightly", "nights/");
    let mut local_files = Vec::new();
    files_under(&local_corpus, &mut local_files);
    let mut expected: Vec<String> = local_files
        .iter()
        .map(|p| {
            format!(
                "nights/2026-12-02/{}",
                p.strip_prefix(&local_corpus).unwrap().display()
            )
        })
        .collect();
    expected.sort();
    assert_eq!(keys, expected);
    for key in &keys {
        let (_, body) = server.get(&format!("/nightly/{key}"));
        assert_no_secret(key, &String::from_utf8_lossy(&body));
    }

    // The reports read the bucket as the local corpus.
    for format in ["table", "json", "markdown"] {
        let remote = server.traceaudit(&[
            "report",
            corpus_url,
            "--format",
            format,
            "--by",
            "partition:day",
        ]);
        let plain = traceaudit(&[
            "report",
            path_str(&local_corpus),
            "--format",
            format,
            "--by",
            "partition:day",
        ]);
        assert_eq!(remote.status, 0, "{}", remote.stderr);
        let tidy = |s: &str| s.replace(path_str(&local.join("logs")), "s3://nightly/logs");
        assert_eq!(tidy(&plain.stdout), remote.stdout, "{format}");
    }
    let diff = server.traceaudit(&["diff", corpus_url, path_str(&local_corpus)]);
    assert_eq!(diff.status, 0, "{}{}", diff.stdout, diff.stderr);
    let trend = server.traceaudit(&["trend", "s3://nightly/nights/"]);
    assert_eq!(trend.status, 0, "{}", trend.stderr);
    assert!(trend.stdout.contains("2026-12-02"), "{}", trend.stdout);

    // A prefix that holds objects is not written to, and nothing in it changes.
    let again = server.traceaudit(&["audit", logs, "--quiet", "--out", corpus_url]);
    assert_eq!(again.status, 2);
    assert!(again.stderr.contains("already holds"), "{}", again.stderr);
    assert_eq!(server.keys("nightly", "nights/"), keys);

    // A second writer (its lock object present) is refused before anything is written.
    server.put("/nightly/nights/2026-12-03.traceaudit-lock", b"{}");
    let busy = server.traceaudit(&[
        "ingest",
        logs,
        "--quiet",
        "--out",
        "s3://nightly/nights/2026-12-03/",
    ]);
    assert_eq!(busy.status, 2);
    assert!(
        busy.stderr
            .contains("another traceaudit run is writing s3://nightly/nights/2026-12-03/"),
        "{}",
        busy.stderr
    );
    assert!(server.keys("nightly", "nights/2026-12-03/").is_empty());

    // An output URL must name a prefix.
    let bare = server.traceaudit(&["ingest", logs, "--quiet", "--out", "s3://nightly/store"]);
    assert_eq!(bare.status, 2);
    assert!(bare.stderr.contains("end it with `/`"), "{}", bare.stderr);
}

/// A store that grew night by night, kept in a bucket: `audit` of its prefix (the whole store,
/// or `--generation last`, which fetches that generation's files only) writes the corpus an
/// audit of its local copy writes, and `report --by` of that corpus reads the store from the
/// bucket. A store whose manifest lists a file the bucket lacks is refused by name.
#[test]
fn a_store_in_a_bucket_is_audited_as_its_local_copy() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    let store = dir.path().join("store");
    let testdata = Path::new(env!("CARGO_MANIFEST_DIR")).join("testdata");
    for night in ["agentfootprint", "tau2"] {
        let run = traceaudit(&[
            "ingest",
            path_str(&testdata.join(night)),
            "--out",
            path_str(&store),
            "--append",
            "--quiet",
        ]);
        assert_eq!(run.status, 0, "{}", run.stderr);
    }
    server.put("/stores", b"");
    let mut files = Vec::new();
    files_under(&store, &mut files);
    for file in &files {
        let rel = file.strip_prefix(&store).unwrap().display().to_string();
        server.put(
            &format!("/stores/nightly/{rel}"),
            &std::fs::read(file).unwrap(),
        );
    }
    let config = testdata.join("traceaudit.toml");
    for pick in [None, Some("last")] {
        let (remote, local) = (dir.path().join("remote"), dir.path().join("local"));
        let mut args = vec!["audit", "--config", path_str(&config), "--quiet"];
        if let Some(pick) = pick {
            args.extend(["--generation", pick]);
        }
        let with = |input: &str, out: &Path| -> Vec<String> {
            let mut a: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            a.push("--out".into());
            a.push(path_str(out).into());
            a.push(input.into());
            a
        };
        let run = server.traceaudit(
            &with("s3://stores/nightly/", &remote)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(run.status, 0, "{pick:?}: {}", run.stderr);
        let run = traceaudit(
            &with(path_str(&store), &local)
                .iter()
                .map(String::as_str)
                .collect::<Vec<_>>(),
        );
        assert_eq!(run.status, 0, "{}", run.stderr);
        let manifest: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(remote.join("manifest.json")).unwrap())
                .unwrap();
        assert_eq!(manifest["store"], "s3://stores/nightly/");
        assert_eq!(
            manifest["store_generation"].as_u64(),
            pick.map(|_| 1),
            "{pick:?}"
        );
        for name in ["dispositions.parquet", "findings.parquet", "findings.jsonl"] {
            assert_eq!(
                std::fs::read(remote.join(name)).unwrap(),
                std::fs::read(local.join(name)).unwrap(),
                "{name} ({pick:?})"
            );
        }
        // The report groups by agent with the runs of the store in the bucket.
        let by_bucket = server.traceaudit(&["report", path_str(&remote), "--by", "agent"]);
        assert_eq!(by_bucket.status, 0, "{}", by_bucket.stderr);
        let by_local = traceaudit(&["report", path_str(&local), "--by", "agent"]);
        let tidy = |s: &str, corpus: &Path| s.replace(path_str(corpus), "CORPUS");
        assert_eq!(
            tidy(&by_bucket.stdout, &remote),
            tidy(&by_local.stdout, &local),
            "{pick:?}"
        );
        assert!(by_bucket.stdout.contains("agent"), "{}", by_bucket.stdout);
        std::fs::remove_dir_all(&remote).unwrap();
        std::fs::remove_dir_all(&local).unwrap();
    }
    // The manifest alone: refused, naming the file the bucket lacks.
    server.put(
        "/stores/broken/manifest.json",
        &std::fs::read(store.join("manifest.json")).unwrap(),
    );
    let run = server.traceaudit(&[
        "audit",
        "s3://stores/broken/",
        "--quiet",
        "--out",
        path_str(&dir.path().join("broken")),
    ]);
    assert_eq!(run.status, 2, "{}", run.stdout);
    assert!(
        run.stderr
            .contains("s3://stores/broken/ is not a whole store")
            && run.stderr.contains("runs/part-00000.parquet"),
        "{}",
        run.stderr
    );
    assert!(!dir.path().join("broken").exists());
}

/// Two nights appended to a store in a bucket (`ingest --append --out s3://...`): the first to
/// an empty prefix writes a whole store, the second uploads its generation's files and then
/// the manifest, skipping the inputs the store holds (a local file by its SHA-256, an object by
/// its URL, size and ETag) and leaving every object of the first night as it was. The store's
/// audit is the audit of a local store grown by the same two appends; a night with nothing new
/// writes nothing.
#[test]
fn a_store_in_a_bucket_grows_night_by_night_as_its_local_copy() {
    let Some(server) = moto() else { return };
    let dir = tempfile::tempdir().unwrap();
    server.put("/nightly", b"");
    server.put("/stores", b"");
    let object = "s3://nightly/logs/af.ndjson";
    server.put(
        "/nightly/logs/af.ndjson",
        &std::fs::read(testdata(
            "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
        ))
        .unwrap(),
    );
    let file = |name: &str| testdata(&format!("agentfootprint/ndjson/{name}.ndjson"));
    let (a, b, g) = (
        file("a_repeated_identical_call"),
        file("b_polling_progress"),
        file("g_output_schema"),
    );
    let nights: [Vec<&str>; 2] = [
        vec![path_str(&a), object],
        vec![path_str(&a), object, path_str(&b), path_str(&g)],
    ];
    let url = "s3://stores/nightly/";
    let local = dir.path().join("local-store");
    let append = |inputs: &[&str], out: &str| {
        let mut args = vec!["ingest"];
        args.extend(inputs);
        args.extend(["--out", out, "--append", "--quiet"]);
        let run = server.traceaudit(&args);
        assert_eq!(run.status, 0, "{out}: {}", run.stderr);
        run
    };
    let manifest = || -> serde_json::Value {
        let (status, body) = server.get("/stores/nightly/manifest.json");
        assert!(status.contains("200"), "{status}");
        serde_json::from_slice(&body).unwrap()
    };

    let first = append(&nights[0], url);
    assert!(
        first.stdout.contains("the store was created"),
        "{}",
        first.stdout
    );
    assert!(
        first.stdout.contains(&format!("-> {url}")),
        "{}",
        first.stdout
    );
    append(&nights[0], path_str(&local));
    let night_one = server.versions("stores", "nightly/");
    assert!(night_one.iter().any(|(k, _)| k == "nightly/manifest.json"));
    assert!(night_one.len() > 3, "{night_one:?}");

    // A second passes, so that an object written again would show a new version.
    std::thread::sleep(Duration::from_millis(1100));
    let second = append(&nights[1], url);
    assert!(
        second
            .stdout
            .contains("already ingested 2 input(s) skipped"),
        "{}",
        second.stdout
    );
    // Its conversations are all new: no events part of the store was fetched to be read.
    assert_eq!(parts_fetched(&second.stdout), (0, 1), "{}", second.stdout);
    append(&nights[1], path_str(&local));
    let remote = manifest();
    let generations = remote["generations"].as_array().unwrap();
    assert_eq!(generations.len(), 2, "{remote}");
    assert_eq!(generations[1]["skipped_as_ingested"], 2);
    assert_eq!(generations[1]["inputs"], 2);
    assert_eq!(remote["inputs"].as_array().unwrap().len(), 4);
    assert_eq!(remote["inputs"][1]["path"], object);
    assert!(remote["inputs"][1]["etag"]
        .as_str()
        .is_some_and(|e| !e.is_empty()));
    let plain: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(local.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(remote["counts"], plain["counts"]);

    // The first night's objects are as they were; the new ones are the generation's, and the
    // manifest was replaced. No lock object is left.
    let night_two = server.versions("stores", "nightly/");
    for (key, version) in &night_one {
        let now = night_two.iter().find(|(k, _)| k == key).map(|(_, e)| e);
        match key.as_str() {
            "nightly/manifest.json" => assert_ne!(now, Some(version), "{key}"),
            _ => assert_eq!(now, Some(version), "{key}"),
        }
    }
    let added: Vec<&String> = night_two
        .iter()
        .map(|(k, _)| k)
        .filter(|k| !night_one.iter().any(|(n, _)| n == *k))
        .collect();
    assert!(!added.is_empty());
    for key in &added {
        assert!(key.starts_with("nightly/generations/00001/"), "{key}");
    }
    let mut local_files = Vec::new();
    files_under(&local.join("generations"), &mut local_files);
    assert_eq!(added.len(), local_files.len(), "{added:?} {local_files:?}");
    assert!(!server
        .keys("stores", "")
        .iter()
        .any(|k| k.contains("traceaudit-lock")));

    // The audit of the store in the bucket is the audit of the local one, whole or its last
    // generation.
    let config = testdata("traceaudit.toml");
    for pick in [None, Some("last")] {
        let (from_bucket, from_disk) = (dir.path().join("bucket"), dir.path().join("disk"));
        for (store, corpus) in [(url, &from_bucket), (path_str(&local), &from_disk)] {
            let mut args = vec!["audit", store, "--config", path_str(&config), "--quiet"];
            args.extend(["--out", path_str(corpus)]);
            if let Some(pick) = pick {
                args.extend(["--generation", pick]);
            }
            let run = server.traceaudit(&args);
            assert_eq!(run.status, 0, "{store} {pick:?}: {}", run.stderr);
        }
        let findings = std::fs::read_to_string(from_bucket.join("findings.jsonl")).unwrap();
        assert!(findings.lines().count() > 0, "{pick:?}");
        for name in ["dispositions.parquet", "findings.parquet", "findings.jsonl"] {
            assert_eq!(
                std::fs::read(from_bucket.join(name)).unwrap(),
                std::fs::read(from_disk.join(name)).unwrap(),
                "{name} ({pick:?})"
            );
        }
        std::fs::remove_dir_all(&from_bucket).unwrap();
        std::fs::remove_dir_all(&from_disk).unwrap();
    }

    // A night with nothing new writes nothing, the manifest included.
    let third = append(&nights[1], url);
    assert!(third.stdout.contains("nothing to add"), "{}", third.stdout);
    assert_eq!(parts_fetched(&third.stdout), (0, 2), "{}", third.stdout);
    assert_eq!(server.versions("stores", "nightly/"), night_two);

    // A night that continues a conversation of the first (a new run of `sess-a-1`): the one
    // part holding it is fetched, and the store grows as its local copy does.
    let next = dir.path().join("a-next.ndjson");
    let text = std::fs::read_to_string(&a).unwrap();
    std::fs::write(
        &next,
        text.replace("run-1795968647240-1", "run-1795968647240-2"),
    )
    .unwrap();
    let fourth = append(&[path_str(&next)], url);
    assert_eq!(parts_fetched(&fourth.stdout), (1, 2), "{}", fourth.stdout);
    assert!(fourth.stdout.contains("1 continued"), "{}", fourth.stdout);
    append(&[path_str(&next)], path_str(&local));
    let (from_bucket, from_disk) = (dir.path().join("bucket"), dir.path().join("disk"));
    for (store, corpus) in [(url, &from_bucket), (path_str(&local), &from_disk)] {
        let args = [
            "audit",
            store,
            "--config",
            path_str(&config),
            "--quiet",
            "--out",
        ];
        let run = server.traceaudit(&[&args[..], &[path_str(corpus)]].concat());
        assert_eq!(run.status, 0, "{store}: {}", run.stderr);
    }
    for name in ["dispositions.parquet", "findings.parquet", "findings.jsonl"] {
        assert_eq!(
            std::fs::read(from_bucket.join(name)).unwrap(),
            std::fs::read(from_disk.join(name)).unwrap(),
            "{name} after the fourth night"
        );
    }
}

/// The events parts an append to a bucket says it fetched, and of how many.
fn parts_fetched(summary: &str) -> (u64, u64) {
    let line = summary
        .lines()
        .find(|l| l.starts_with("bucket "))
        .unwrap_or_else(|| panic!("no bucket line in {summary}"));
    let words: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(&words[2..5], ["of", "the", "store's"], "{line}");
    (words[1].parse().unwrap(), words[5].parse().unwrap())
}

/// An append to a bucket writes nothing where it would replace objects it did not write: a
/// prefix holding objects but no store, or a `manifest.json` that is not a store's; a second
/// writer (the lock object present) is refused; `compact` of a store in a bucket is refused,
/// since it retires files. Each refusal is one line naming the prefix and no secret.
#[test]
fn an_append_to_a_bucket_is_refused_where_it_would_replace_objects() {
    let Some(server) = moto() else { return };
    server.put("/stores", b"");
    server.put("/stores/notes/readme.txt", b"not a store");
    server.put("/stores/odd/manifest.json", b"{\"hello\": 1}");
    let input = testdata("agentfootprint/ndjson/a_repeated_identical_call.ndjson");
    let append = |out: &str| {
        server.traceaudit(&[
            "ingest",
            path_str(&input),
            "--out",
            out,
            "--append",
            "--quiet",
        ])
    };
    for (prefix, holds) in [("notes", "readme.txt"), ("odd", "manifest.json")] {
        let before = server.versions("stores", "");
        let run = append(&format!("s3://{KEY_ID}:{PASSWORD}@stores/{prefix}/"));
        assert_eq!(run.status, 2, "{prefix}: {}", run.stdout);
        assert_no_secret(prefix, &format!("{}{}", run.stdout, run.stderr));
        assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
        assert!(
            run.stderr.contains(&format!(
                "s3://stores/{prefix}/ holds 1 object(s) ({holds}, ...) and no store's \
                 manifest.json"
            )),
            "{}",
            run.stderr
        );
        assert_eq!(server.versions("stores", ""), before, "{prefix}");
    }

    // A store there, and another run's lock object beside it: refused, nothing changes.
    assert_eq!(append("s3://stores/nightly/").status, 0);
    server.put("/stores/nightly.traceaudit-lock", b"{}");
    let before = server.versions("stores", "");
    let busy = append("s3://stores/nightly/");
    assert_eq!(busy.status, 2, "{}", busy.stdout);
    assert!(
        busy.stderr
            .contains("another traceaudit run is writing s3://stores/nightly/"),
        "{}",
        busy.stderr
    );
    assert_eq!(server.versions("stores", ""), before);

    let compact = server.traceaudit(&[
        "compact",
        &format!("s3://{KEY_ID}:{PASSWORD}@stores/nightly/"),
        "--quiet",
    ]);
    assert_eq!(compact.status, 2, "{}", compact.stdout);
    assert_no_secret("compact", &compact.stderr);
    assert_eq!(compact.stderr.lines().count(), 1, "{}", compact.stderr);
    assert!(
        compact
            .stderr
            .contains("s3://stores/nightly/ is in object storage, and a compaction retires"),
        "{}",
        compact.stderr
    );
    assert_eq!(server.versions("stores", ""), before);
}

/// The Ray driver's last step, `merge_shards`, called as the driver calls it: shards ingested
/// locally (each shard one input of a night's objects, read from the bucket), merged into a
/// prefix of the bucket. The bucket then holds the files a merge into a local folder writes,
/// with the manifest, and the audit of the bucket store equals the audit of the local one; a
/// second merge to the same prefix is refused and changes nothing.
#[test]
fn shards_merged_into_a_bucket_make_the_store_a_local_merge_makes() {
    use traceaudit::distributed::{ingest_shard, merge_shards, plan_ingest};
    let Some(server) = moto() else { return };
    server.serve_this_process();
    let dir = tempfile::tempdir().unwrap();
    let local = dir.path().join("local");
    server.put("/nightly", b"");
    server.put("/stores", b"");
    for (key, body) in objects(&local) {
        server.put(&format!("/nightly/{key}"), &body);
    }
    let opts = traceaudit::IngestOptions {
        threads: 2,
        ..traceaudit::IngestOptions::default()
    };
    let plan = plan_ingest(&["s3://nightly/logs/".into()], 0).unwrap();
    assert_eq!(plan.inputs.len(), 4);
    let mut shards = Vec::new();
    for i in 0..plan.inputs.len() as u32 {
        let out = dir.path().join(format!("shard-{i}"));
        ingest_shard(&plan, &[i], &out, &opts).unwrap();
        shards.push((out, vec![i]));
    }
    let url = Path::new("s3://stores/merged/");
    let in_bucket = merge_shards(&plan, &shards, url, &opts, 0.0, None).unwrap();
    let local_store = dir.path().join("merged");
    let in_folder = merge_shards(&plan, &shards, &local_store, &opts, 0.0, None).unwrap();
    assert_eq!(in_bucket.store, Path::new("s3://stores/merged/"));
    assert_eq!(in_bucket.manifest.counts, in_folder.manifest.counts);
    assert!(
        in_bucket.manifest.counts.runs > 5,
        "{:?}",
        in_bucket.manifest.counts
    );

    let mut files = Vec::new();
    files_under(&local_store, &mut files);
    let mut expected: Vec<String> = files
        .iter()
        .map(|p| format!("merged/{}", p.strip_prefix(&local_store).unwrap().display()))
        .collect();
    expected.sort();
    let keys = server.keys("stores", "merged/");
    assert_eq!(keys, expected);
    for key in &keys {
        let (_, body) = server.get(&format!("/stores/{key}"));
        assert_no_secret(key, &String::from_utf8_lossy(&body));
    }

    let from_bucket = dir.path().join("corpus-bucket");
    let from_folder = dir.path().join("corpus-folder");
    for (store, out) in [
        ("s3://stores/merged/", &from_bucket),
        (path_str(&local_store), &from_folder),
    ] {
        let run = server.traceaudit(&["audit", store, "--quiet", "--out", path_str(out)]);
        assert_eq!(run.status, 0, "{store}: {}", run.stderr);
    }
    for table in ["findings.jsonl", "findings.parquet", "dispositions.parquet"] {
        assert_eq!(
            std::fs::read(from_bucket.join(table)).unwrap(),
            std::fs::read(from_folder.join(table)).unwrap(),
            "{table}"
        );
    }

    let again = merge_shards(&plan, &shards, url, &opts, 0.0, None).unwrap_err();
    assert!(again.to_string().contains("already holds"), "{again}");
    assert_no_secret("the refusal", &again.to_string());
    assert_eq!(server.keys("stores", "merged/"), keys);
}

/// A night in a bucket is cut into the parts its local copy is, though an object is not read
/// before it is fetched: the plan reads each object's head with a ranged request (the format,
/// so dense logs get parts by rows) and a gzip'd object's trailer (the size it decompresses
/// to). Counted by their sizes alone, both nights below got one part, which the ingest then
/// read back and rewrote to cut it by rows.
#[test]
fn a_night_in_a_bucket_is_planned_as_its_local_copy() {
    use traceaudit::distributed::plan_ingest;
    let Some(server) = moto() else { return };
    server.serve_this_process();
    let dir = tempfile::tempdir().unwrap();
    // 80 MB of agentfootprint NDJSON (its head a real recording, the rest zeros: the plan
    // reads no further): 1 part by bytes, 222,222 rows of 360 bytes, so 2 parts by rows.
    let mut dense = std::fs::read(testdata(
        "agentfootprint/ndjson/f_prior_turn_evidence.ndjson",
    ))
    .unwrap();
    dense.resize(80_000_000, 0);
    // A gzip'd log that states 140 MB in its trailer: 2 parts of 128 MiB, where its 140 KB
    // counted six times over made 1.
    let mut gzipped = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    gzipped.write_all(b"{}\n").unwrap();
    gzipped.write_all(&vec![b' '; 140_000_000]).unwrap();
    let gzipped = gzipped.finish().unwrap();
    assert!(gzipped.len() < 1_000_000);
    // The same bytes in 100 objects: the plan probes 64 (142,222 rows), and counts the other
    // 36 as dense as those, not as bytes (which would make 185,143 rows, one part).
    let mut small = dense.clone();
    small.truncate(800_000);
    let many = (0..100).map(|i| (format!("many/af-{i:02}.ndjson"), &small));
    server.put("/plans", b"");
    let nights = [("dense/af.ndjson".to_string(), &dense)].into_iter();
    let nights = nights.chain([("gzip/log.jsonl.gz".to_string(), &gzipped)]);
    for (key, body) in nights.chain(many) {
        server.put(&format!("/plans/{key}"), body);
        let local = dir.path().join(key);
        std::fs::create_dir_all(local.parent().unwrap()).unwrap();
        std::fs::write(&local, body).unwrap();
    }
    for night in ["dense", "gzip", "many"] {
        let local = plan_ingest(&[dir.path().join(night)], 0).unwrap();
        let bucket = plan_ingest(&[format!("s3://plans/{night}/").into()], 0).unwrap();
        assert_eq!(local.parts, 2, "{night}");
        assert_eq!(bucket.parts, local.parts, "{night}");
    }
}
