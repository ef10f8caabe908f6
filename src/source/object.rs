//! Inputs in object storage: `s3://`, `gs://` and `az://` URLs (and the other spellings the
//! `object_store` crate knows, such as `s3a://`, `gcs://`, `abfss://`), read through the Arrow
//! project's `object_store` crate and configured from the providers' usual environment
//! (`AWS_ACCESS_KEY_ID`, `AWS_REGION`, `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`,
//! `GOOGLE_APPLICATION_CREDENTIALS`, `AZURE_STORAGE_ACCOUNT_NAME` and the like).
//!
//! A URL ending in `/` is a prefix, listed like a folder; any other names one object. An object
//! is fetched as a stream into a file of the ingest's staging directory while it is read (the
//! readers seek, and some formats need a file), hashed on the way, and the file is removed once
//! read, so memory is one buffer whatever the object's size.
//!
//! What is shown of a URL anywhere (manifests, errors, progress, reports) is [`Remote::display`]:
//! scheme, bucket and key only. A `user:password@` part and a query string (a presigned URL's
//! signature) never leave this module, and errors of the object store are reduced to their
//! kind, since their text can hold the request URL.

use super::compression::{probe_prefix, probe_start, Compression, Probe, GZIP_SMALLEST};
use sha2::Digest;
use std::io::{self, Write};
use std::path::Path as FsPath;
use std::sync::Arc;

use object_store::path::Path as ObjectPath;
use object_store::{ObjectStore, ObjectStoreExt, ObjectStoreScheme};

/// The URL schemes read as object storage (`file://` is a local path, see [`local_path`]).
const SCHEMES: &[&str] = &[
    "s3://", "s3a://", "gs://", "gcs://", "az://", "adl://", "azure://", "abfs://", "abfss://",
];

/// Is `input` an object-storage URL?
pub fn is_url(input: &str) -> bool {
    let lower = input.to_ascii_lowercase();
    SCHEMES.iter().any(|s| lower.starts_with(s))
}

/// The local path a `file://` URL names, if `input` is one.
pub fn local_path(input: &str) -> Option<std::path::PathBuf> {
    let url = url::Url::parse(input).ok()?;
    (url.scheme() == "file").then(|| url.to_file_path().ok())?
}

/// One bucket (or container) and the way to reach it.
#[derive(Clone)]
pub struct Bucket {
    store: Arc<dyn ObjectStore>,
    /// `scheme://bucket/`, as shown.
    base: String,
}

impl std::fmt::Debug for Bucket {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Bucket({})", self.base)
    }
}

#[cfg(test)]
impl Bucket {
    /// A bucket held in this process (`object_store`'s in-memory store) with `objects` in it,
    /// for tests that need no server.
    pub(crate) fn in_memory(objects: &[(&str, &[u8])]) -> Bucket {
        let store = object_store::memory::InMemory::new();
        let rt = runtime().expect("a runtime");
        for (key, body) in objects {
            let payload = object_store::PutPayload::from(body.to_vec());
            rt.block_on(store.put(&ObjectPath::from(*key), payload))
                .expect("an object put in memory");
        }
        Bucket {
            store: Arc::new(store),
            base: "memory://test/".into(),
        }
    }
}

/// One object to read.
#[derive(Debug, Clone)]
pub struct Remote {
    pub bucket: Bucket,
    pub location: ObjectPath,
    pub size: u64,
    pub etag: Option<String>,
}

/// Two listings of one object are equal when they name it at the same size and version.
impl PartialEq for Remote {
    fn eq(&self, other: &Remote) -> bool {
        (self.display(), self.size, &self.etag) == (other.display(), other.size, &other.etag)
    }
}

impl Eq for Remote {}

impl Remote {
    /// The object's URL as shown everywhere: `scheme://bucket/key`, nothing secret.
    pub fn display(&self) -> String {
        format!("{}{}", self.bucket.base, self.location)
    }

    /// The object's name (its key's last segment).
    pub fn file_name(&self) -> String {
        self.location
            .filename()
            .filter(|n| !n.is_empty())
            .unwrap_or("object")
            .to_string()
    }
}

/// `url` without a `user:password@` part or a query string or fragment.
pub fn redacted(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(u) => {
            let host = u.host_str().unwrap_or("");
            format!("{}://{host}{}", u.scheme(), u.path())
        }
        // Not a URL at all: shown up to the first sign of a query or credentials.
        Err(_) => {
            let end = url.find(['?', '#']).unwrap_or(url.len());
            let shown = &url[..end];
            match (shown.find("://"), shown.rfind('@')) {
                (Some(s), Some(at)) if at > s => format!("{}{}", &shown[..s + 3], &shown[at + 1..]),
                _ => shown.to_string(),
            }
        }
    }
}

fn runtime() -> io::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| io::Error::other(format!("cannot start the object-storage client: {e}")))
}

/// An error of the object store, said without its text (which can hold the request's URL).
fn store_error(what: &str, shown: &str, e: &object_store::Error) -> io::Error {
    use object_store::Error as E;
    let (kind, why) = match e {
        E::NotFound { .. } => (io::ErrorKind::NotFound, "no such object or prefix"),
        E::PermissionDenied { .. } => (io::ErrorKind::PermissionDenied, "permission denied"),
        E::Unauthenticated { .. } => (
            io::ErrorKind::PermissionDenied,
            "not authenticated (check the provider's credentials in the environment)",
        ),
        E::Precondition { .. } | E::NotModified { .. } => {
            (io::ErrorKind::Other, "the object changed while it was read")
        }
        E::NotSupported { .. } | E::NotImplemented { .. } => {
            (io::ErrorKind::Unsupported, "not supported by this store")
        }
        _ => (
            io::ErrorKind::Other,
            "the request failed (network, endpoint or configuration)",
        ),
    };
    io::Error::new(kind, format!("cannot {what} {shown}: {why}"))
}

/// The bucket a URL names and the key or prefix inside it, configured from the environment.
fn open(url: &str) -> io::Result<(Bucket, ObjectPath)> {
    let shown = redacted(url);
    let bad = |why: String| io::Error::new(io::ErrorKind::InvalidInput, format!("{shown}: {why}"));
    let parsed = url::Url::parse(url).map_err(|e| bad(format!("not a URL ({e})")))?;
    let (scheme, key) = ObjectStoreScheme::parse(&parsed)
        .map_err(|_| bad("not an object-storage URL this build reads".into()))?;
    let key =
        ObjectPath::parse(key).map_err(|_| bad("the key is not a valid object path".into()))?;
    // Credentials come from the environment only: a URL's own user and password are not used.
    let clean = format!(
        "{}://{}{}",
        parsed.scheme(),
        parsed.host_str().unwrap_or(""),
        parsed.path()
    );
    let built: Result<Arc<dyn ObjectStore>, object_store::Error> = match scheme {
        ObjectStoreScheme::AmazonS3 => object_store::aws::AmazonS3Builder::from_env()
            .with_url(clean.clone())
            .build()
            .map(|s| Arc::new(s) as _),
        ObjectStoreScheme::GoogleCloudStorage => {
            object_store::gcp::GoogleCloudStorageBuilder::from_env()
                .with_url(clean.clone())
                .build()
                .map(|s| Arc::new(s) as _)
        }
        ObjectStoreScheme::MicrosoftAzure => object_store::azure::MicrosoftAzureBuilder::from_env()
            .with_url(clean.clone())
            .build()
            .map(|s| Arc::new(s) as _),
        _ => return Err(bad("not an object-storage URL this build reads".into())),
    };
    let store = built.map_err(|e| match e {
        // A configuration error names what is missing (a region, a bucket), not secrets.
        object_store::Error::Generic { source, .. } => bad(format!(
            "cannot be opened: {}",
            redacted(&source.to_string())
        )),
        other => store_error("open", &shown, &other),
    })?;
    let base = format!("{}://{}/", parsed.scheme(), parsed.host_str().unwrap_or(""));
    Ok((Bucket { store, base }, key))
}

/// The objects a URL names: every object under it, sorted by key, when it ends in `/`; else
/// the one object.
pub fn list(url: &str) -> io::Result<Vec<Remote>> {
    let shown = redacted(url);
    let (bucket, key) = open(url)?;
    if url.ends_with('/') {
        return list_under(&bucket, &key, &shown);
    }
    let meta = runtime()?
        .block_on(bucket.store.head(&key))
        .map_err(|e| store_error("read", &shown, &e))?;
    Ok(vec![Remote {
        bucket,
        location: meta.location,
        size: meta.size,
        etag: meta.e_tag,
    }])
}

/// Every object under `key` of `bucket`, sorted by key, folder markers left out.
fn list_under(bucket: &Bucket, key: &ObjectPath, shown: &str) -> io::Result<Vec<Remote>> {
    use futures::TryStreamExt;
    let prefix = (!key.as_ref().is_empty()).then_some(key);
    let metas: Vec<object_store::ObjectMeta> = runtime()?
        .block_on(bucket.store.list(prefix).try_collect())
        .map_err(|e| store_error("list", shown, &e))?;
    // Empty keys ending in `/` are folder markers some tools write, not objects; the client
    // lists them without their `/`, as the name of a folder that holds other objects (or the
    // prefix itself).
    let folders: std::collections::HashSet<String> = metas
        .iter()
        .flat_map(|m| {
            let key = m.location.as_ref();
            key.match_indices('/')
                .map(move |(at, _)| key[..at].to_string())
        })
        .collect();
    let mut found: Vec<Remote> = metas
        .into_iter()
        .filter(|m| !(m.size == 0 && (m.location == *key || folders.contains(m.location.as_ref()))))
        .map(|m| Remote {
            bucket: bucket.clone(),
            location: m.location,
            size: m.size,
            etag: m.e_tag,
        })
        .collect();
    found.sort_by(|a, b| a.location.cmp(&b.location));
    Ok(found)
}

/// Objects probed at once by [`probe_objects`]: each probe is a small request, so latency,
/// not bandwidth, is what they cost.
const PROBES_AT_ONCE: usize = 16;

/// What an ingest's plan reads of each of `remotes` before any is fetched, as
/// [`crate::source::compression::probe`] reads of a local file: the first `head_bytes` of it
/// decompressed (a ranged request for its first [`probe_prefix`] bytes), and a gzip'd object's
/// last four bytes (a second one). `None` for an object these requests fail on: the plan
/// counts it as it counts the objects it did not probe, and its fetch reports the failure.
pub fn probe_objects(remotes: &[&Remote], head_bytes: usize) -> Vec<Option<Probe>> {
    use futures::StreamExt;
    if remotes.is_empty() {
        return Vec::new();
    }
    let Ok(rt) = runtime() else {
        return remotes.iter().map(|_| None).collect();
    };
    let probes = remotes.iter().map(|remote| async move {
        let store = &remote.bucket.store;
        let size = remote.size;
        let want = probe_prefix(head_bytes) as u64;
        let start = match size {
            0 => bytes::Bytes::new(),
            _ => store
                .get_range(&remote.location, 0..size.min(want))
                .await
                .ok()?,
        };
        let trailer = match Compression::sniff(&start) {
            Some(Compression::Gzip) if size >= GZIP_SMALLEST => {
                let last = store
                    .get_range(&remote.location, size - 4..size)
                    .await
                    .ok()?;
                Some(<[u8; 4]>::try_from(last.as_ref()).ok()?)
            }
            _ => None,
        };
        Some(probe_start(&start, trailer, size, head_bytes))
    });
    rt.block_on(
        futures::stream::iter(probes)
            .buffered(PROBES_AT_ONCE)
            .collect(),
    )
}

/// What fetching an object gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    pub bytes: u64,
    pub sha256: String,
}

/// Fetch `remote` into a new file `to` as a stream, hashing it on the way.
pub fn fetch(remote: &Remote, to: &FsPath) -> io::Result<Fetched> {
    use futures::StreamExt;
    let shown = remote.display();
    let mut out = std::fs::File::create_new(to)
        .map_err(|e| io::Error::new(e.kind(), format!("cannot create {}: {e}", to.display())))?;
    let rt = runtime()?;
    let mut hasher = sha2::Sha256::new();
    let mut bytes = 0u64;
    rt.block_on(async {
        let got = remote
            .bucket
            .store
            .get(&remote.location)
            .await
            .map_err(|e| store_error("read", &shown, &e))?;
        let mut stream = got.into_stream();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| store_error("read", &shown, &e))?;
            hasher.update(&chunk);
            bytes += chunk.len() as u64;
            out.write_all(&chunk).map_err(|e| {
                io::Error::new(e.kind(), format!("cannot write {}: {e}", to.display()))
            })?;
        }
        Ok::<(), io::Error>(())
    })?;
    out.flush()?;
    if bytes != remote.size {
        return Err(io::Error::other(format!(
            "cannot read {shown}: it was listed at {} bytes and {bytes} arrived (changed while read?)",
            remote.size
        )));
    }
    Ok(Fetched {
        bytes,
        sha256: super::hashing::hex(&hasher.finalize()),
    })
}

/// Files larger than this are uploaded in parts (S3's smallest part is 5 MiB).
const MULTIPART_BYTES: u64 = 16 << 20;

/// A prefix of a bucket an output is written under: `url` must end in `/` (a folder of objects).
pub struct Prefix {
    bucket: Bucket,
    key: ObjectPath,
    shown: String,
}

impl Prefix {
    pub fn open(url: &str) -> io::Result<Prefix> {
        let shown = redacted(url);
        if !url.ends_with('/') {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{shown}: an output in object storage is a prefix: end it with `/`"),
            ));
        }
        let (bucket, key) = open(url)?;
        Ok(Prefix { bucket, key, shown })
    }

    /// The prefix as shown (`scheme://bucket/key/`).
    pub fn shown(&self) -> &str {
        &self.shown
    }

    fn child(&self, rel: &str) -> ObjectPath {
        let mut path = self.key.clone();
        for part in rel.split('/').filter(|p| !p.is_empty()) {
            path = path.clone().join(part);
        }
        path
    }

    /// The objects under the prefix, with their keys relative to it.
    pub fn objects(&self) -> io::Result<Vec<(String, Remote)>> {
        let base = self.key.as_ref();
        Ok(list_under(&self.bucket, &self.key, &self.shown)?
            .into_iter()
            .filter_map(|r| {
                let key = r.location.as_ref();
                let rel = if base.is_empty() {
                    key
                } else {
                    key.strip_prefix(base)?.strip_prefix('/')?
                };
                Some((rel.to_string(), r))
            })
            .collect())
    }

    /// Take the lock object `<prefix>.traceaudit-lock` (beside the prefix, not in it), made only
    /// when it does not exist (a conditional put), so that a second writer is refused.
    pub fn lock(&self) -> io::Result<PrefixLock> {
        let name = format!("{}.traceaudit-lock", self.key.as_ref());
        let location = ObjectPath::from(name.as_str());
        let shown = format!("{}{}", self.bucket.base, location);
        let rt = runtime()?;
        let opts = object_store::PutOptions {
            mode: object_store::PutMode::Create,
            ..Default::default()
        };
        let body = format!("{{\"pid\": {}}}\n", std::process::id());
        match rt.block_on(
            self.bucket
                .store
                .put_opts(&location, body.into_bytes().into(), opts),
        ) {
            Ok(_) => Ok(PrefixLock {
                bucket: self.bucket.clone(),
                location,
            }),
            Err(object_store::Error::AlreadyExists { .. }) => Err(io::Error::new(
                io::ErrorKind::AlreadyExists,
                format!(
                    "another traceaudit run is writing {} (its lock object {shown} exists; \
                     delete it if no run is)",
                    self.shown
                ),
            )),
            Err(e) => Err(store_error("lock", &shown, &e)),
        }
    }

    /// Upload every file under the local folder `dir` to the prefix, each at its relative path,
    /// with `last` (the manifest) after all others: a reader that finds the manifest finds
    /// every file it lists.
    pub fn upload(&self, dir: &FsPath, last: &str) -> io::Result<u64> {
        self.upload_files(dir, relative_files(dir)?, last)
    }

    /// Upload the files `files` (paths relative to the local folder `dir`) to the prefix, each
    /// at its relative path, with `last` after all others.
    pub fn upload_files(
        &self,
        dir: &FsPath,
        mut files: Vec<String>,
        last: &str,
    ) -> io::Result<u64> {
        files.sort();
        files.sort_by_key(|rel| rel == last);
        let rt = runtime()?;
        let mut bytes = 0;
        for rel in files {
            let location = self.child(&rel);
            let shown = format!("{}{}", self.bucket.base, location);
            let local = dir.join(&rel);
            bytes += rt.block_on(put_file(&self.bucket, &location, &local, &shown))?;
        }
        Ok(bytes)
    }

    /// Fetch every object under the prefix into the local folder `dir`, at its relative path
    /// (for the reports, which read corpora from a bucket); how many there were.
    #[cfg(feature = "reports")]
    pub fn download(&self, dir: &FsPath) -> io::Result<usize> {
        let objects = self.objects()?;
        for (rel, remote) in &objects {
            if rel.split('/').any(|p| p == ".." || p == ".") {
                continue;
            }
            let to = dir.join(rel);
            if let Some(parent) = to.parent() {
                std::fs::create_dir_all(parent).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot create {}: {e}", parent.display()))
                })?;
            }
            fetch(remote, &to)?;
        }
        Ok(objects.len())
    }
}

/// The lock object of an output prefix, deleted by [`PrefixLock::release`] (a run that dies
/// leaves it, and the next run says so).
pub struct PrefixLock {
    bucket: Bucket,
    location: ObjectPath,
}

impl PrefixLock {
    pub fn release(self) -> io::Result<()> {
        let shown = format!("{}{}", self.bucket.base, self.location);
        runtime()?
            .block_on(self.bucket.store.delete(&self.location))
            .map_err(|e| store_error("delete", &shown, &e))
    }
}

/// Every file under the local folder `dir`, as a path relative to it with `/` between names.
pub fn relative_files(dir: &FsPath) -> io::Result<Vec<String>> {
    let mut files = Vec::new();
    walk_files(dir, dir, &mut files)?;
    Ok(files)
}

fn walk_files(root: &FsPath, dir: &FsPath, out: &mut Vec<String>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            walk_files(root, &path, out)?;
        } else {
            let rel = path.strip_prefix(root).expect("under the root");
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

async fn put_file(
    bucket: &Bucket,
    location: &ObjectPath,
    local: &FsPath,
    shown: &str,
) -> io::Result<u64> {
    use std::io::Read;
    let read_err =
        |e: io::Error| io::Error::new(e.kind(), format!("cannot read {}: {e}", local.display()));
    let mut file = std::fs::File::open(local).map_err(read_err)?;
    let len = file.metadata().map_err(read_err)?.len();
    if len <= MULTIPART_BYTES {
        let mut body = Vec::with_capacity(len as usize);
        file.read_to_end(&mut body).map_err(read_err)?;
        bucket
            .store
            .put(location, body.into())
            .await
            .map_err(|e| store_error("write", shown, &e))?;
        return Ok(len);
    }
    let upload = bucket
        .store
        .put_multipart(location)
        .await
        .map_err(|e| store_error("write", shown, &e))?;
    let mut writer = object_store::WriteMultipart::new(upload);
    let mut buf = vec![0u8; 8 << 20];
    loop {
        let n = file.read(&mut buf).map_err(read_err)?;
        if n == 0 {
            break;
        }
        writer
            .wait_for_capacity(4)
            .await
            .map_err(|e| store_error("write", shown, &e))?;
        writer.write(&buf[..n]);
    }
    writer
        .finish()
        .await
        .map_err(|e| store_error("write", shown, &e))?;
    Ok(len)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_shown_without_credentials_or_queries() {
        assert_eq!(
            redacted("s3://AKIDEXAMPLE:s3cr3t@logs/otel/a.json.gz?X-Amz-Signature=abc#frag"),
            "s3://logs/otel/a.json.gz"
        );
        assert_eq!(redacted("gs://bucket/prefix/"), "gs://bucket/prefix/");
        assert_eq!(redacted("not a url user:pw@x?sig=1"), "not a url user:pw@x");
        assert_eq!(redacted("weird://u:p@host/k"), "weird://host/k");
    }

    #[test]
    fn object_storage_urls_are_told_from_paths() {
        for url in [
            "s3://b/k",
            "S3://b/",
            "gs://b/k",
            "az://c/k",
            "abfss://c@a.dfs.core.windows.net/k",
        ] {
            assert!(is_url(url), "{url}");
        }
        for path in [
            "logs/s3://x",
            "./s3",
            "file:///tmp/x",
            "-",
            "http://example.com/x",
        ] {
            assert!(!is_url(path), "{path}");
        }
        assert_eq!(
            local_path("file:///tmp/a%20b.jsonl"),
            Some(std::path::PathBuf::from("/tmp/a b.jsonl"))
        );
        assert_eq!(local_path("/tmp/x"), None);
    }
}
