"""Inputs in a bucket, from Python and from Ray: a prefix on a real S3-compatible server on the
loopback (moto's, `pip install "moto[server]"`) ingests into the store its local copy gives,
through `traceaudit.ingest` and through `traceaudit.ray.ingest` (whose workers fetch their own
objects, gzip'd OTLP files whose traces are split across objects among them)."""

import gzip
import json
import os
import shutil
import socket
import subprocess
import time

import pytest

import traceaudit
from conftest import CONFIG, TABLES, TESTDATA, assert_same_table, cli, read_table

boto3 = pytest.importorskip("boto3")
ray = pytest.importorskip("ray")
import traceaudit.ray as tray  # noqa: E402
from test_ray import split_spans, store_rows  # noqa: E402

BUCKET = "nightly"


@pytest.fixture(scope="module")
def bucket():
    """moto's server on a free loopback port, its address and planted credentials in the
    environment (set before Ray starts, so its workers have them), an empty bucket."""
    server = shutil.which("moto_server")
    if server is None:
        if os.environ.get("CI"):
            pytest.fail('moto_server is not on the PATH (pip install "moto[server]")')
        pytest.skip('moto_server is not on the PATH (pip install "moto[server]")')
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen(
        [server, "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    endpoint = f"http://127.0.0.1:{port}"
    env = {
        "AWS_ACCESS_KEY_ID": "testing",
        "AWS_SECRET_ACCESS_KEY": "testing",
        "AWS_REGION": "us-east-1",
        "AWS_ENDPOINT_URL": endpoint,
        "AWS_ALLOW_HTTP": "true",
    }
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    try:
        start = time.monotonic()
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, "moto exited"
                assert time.monotonic() - start < 60, "moto did not start"
                time.sleep(0.1)
        client = boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1")
        client.create_bucket(Bucket=BUCKET)
        yield client
    finally:
        proc.kill()
        proc.wait()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


@pytest.fixture(scope="module")
def cluster(bucket):
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    yield
    ray.shutdown()


def upload_night(client, local, prefix):
    """A night of logs under `local`, gzip'd and not, and the same objects under `prefix`."""
    otel = TESTDATA / "otel"
    split_spans(otel / "pydantic-ai-v5-content" / "s3_followup_from_history.json", local, 3)
    shutil.copy(otel / "pydantic-ai-v5-content" / "s1_repeated_identical_call.jsonl", local)
    shutil.copytree(TESTDATA / "tau-bench", local / "tau-bench")
    for i, path in enumerate(sorted(p for p in local.rglob("*") if p.is_file())):
        if i % 2 == 0:
            # Every other file gzip'd, as a collector's exporter writes them.
            packed = path.with_name(path.name + ".gz")
            packed.write_bytes(gzip.compress(path.read_bytes()))
            path.unlink()
    for path in sorted(p for p in local.rglob("*") if p.is_file()):
        key = f"{prefix}{path.relative_to(local).as_posix()}"
        client.put_object(Bucket=BUCKET, Key=key, Body=path.read_bytes())


def same_inputs(got, want, url, local):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g["path"].removeprefix(url) == os.path.relpath(w["path"], local)
        for field in ("size", "sha256", "format", "records", "quarantined"):
            assert g[field] == w[field], (g["path"], field)
        assert g.get("compression") == w.get("compression")
        assert g["etag"]


def test_the_module_ingests_a_prefix_as_its_local_copy(bucket, tmp_path):
    local = tmp_path / "night"
    local.mkdir()
    upload_night(bucket, local, "module/")
    url = f"s3://{BUCKET}/module/"
    got = traceaudit.ingest(url, tmp_path / "from-bucket")
    want = traceaudit.ingest(local, tmp_path / "from-disk")
    assert got["counts"] == want["counts"]
    same_inputs(got["inputs"], want["inputs"], url, local)


def test_the_ray_ingest_of_a_prefix_equals_the_local_ingest(bucket, cluster, tmp_path):
    local = tmp_path / "night"
    local.mkdir()
    upload_night(bucket, local, "ray/")
    url = f"s3://{BUCKET}/ray/"
    want = traceaudit.ingest(local, tmp_path / "from-disk", part_bytes=40_000)
    got = tray.ingest(url, tmp_path / "ray-store", part_bytes=40_000, shard_bytes=20_000)
    assert got["counts"] == want["counts"]
    assert got["parts"] == want["parts"]
    same_inputs(got["inputs"], want["inputs"], url, local)
    g, w = store_rows(tmp_path / "ray-store"), store_rows(tmp_path / "from-disk")
    # Rows name their source: the bucket's URL and the local path of the same file.
    prefix = str(local) + "/"
    assert sorted(g[0]) == sorted(w[0])
    for name in w[0]:
        assert g[0][name].num_rows == w[0][name].num_rows, name
        sources = [s.removeprefix(url) for s in g[0][name].column("source").to_pylist()]
        assert sources == [s.removeprefix(prefix) for s in w[0][name].column("source").to_pylist()]
    for name in w[1]:
        assert_same_table(g[1][name], w[1][name], name)
    assert json.dumps(got).find("testing") == -1


def test_the_ray_ingest_writes_its_store_to_a_bucket(bucket, cluster, tmp_path):
    """`traceaudit.ray.ingest` to a prefix: the store it merges is uploaded there (manifest
    last, no lock object left), and its audit is the audit of the store the same ingest writes
    to a local folder. A prefix holding objects is refused and keeps them."""
    inputs = [TESTDATA / "agentfootprint", TESTDATA / "tau-bench"]
    url = f"s3://{BUCKET}/ray-store/"
    want = tray.ingest(inputs, tmp_path / "ray-local", part_bytes=40_000)
    got = tray.ingest(inputs, url, part_bytes=40_000, scratch=tmp_path / "scratch")
    assert got["counts"] == want["counts"]
    assert got["parts"] == want["parts"] and len(got["parts"]) > 1
    assert got["inputs"] == want["inputs"]
    assert json.dumps(got).find("testing") == -1
    # Nothing of the shards is left in the scratch folder.
    assert list((tmp_path / "scratch").iterdir()) == []

    listed = bucket.list_objects_v2(Bucket=BUCKET, Prefix="ray-store")["Contents"]
    keys = sorted(o["Key"] for o in listed)
    local_files = sorted(
        "ray-store/" + p.relative_to(tmp_path / "ray-local").as_posix()
        for p in (tmp_path / "ray-local").rglob("*")
        if p.is_file()
    )
    assert keys == local_files
    assert "ray-store/manifest.json" in keys
    assert not any("traceaudit-lock" in k for k in keys)
    # The manifest went up last (the listing's times are to the second).
    written = {o["Key"]: o["LastModified"] for o in listed}
    assert all(t <= written["ray-store/manifest.json"] for t in written.values())

    for name, store in (("bucket", url), ("local", tmp_path / "ray-local")):
        cli("audit", store, "--config", CONFIG, "--out", tmp_path / f"corpus-{name}", "--quiet")
    for table in TABLES:
        got_t = read_table(tmp_path / "corpus-bucket", table)
        want_t = read_table(tmp_path / "corpus-local", table)
        assert got_t.num_rows == want_t.num_rows, table
        assert_same_table(got_t, want_t, table)
    assert read_table(tmp_path / "corpus-bucket", "findings").num_rows > 0

    with pytest.raises(OSError, match="already holds"):
        tray.ingest(inputs, url)
    again = bucket.list_objects_v2(Bucket=BUCKET, Prefix="ray-store")["Contents"]
    assert {o["Key"]: o["ETag"] for o in again} == {o["Key"]: o["ETag"] for o in listed}


def test_the_ray_ingest_appends_to_a_store_in_a_bucket_as_to_a_local_one(
    bucket, cluster, tmp_path
):
    """`traceaudit.ray.ingest(..., append=True)` to a prefix: a first night creates the store,
    a second (one file held, one new) adds a generation whose files alone are uploaded, and a
    third holding only held files writes nothing; each manifest is the one two Ray appends to
    a local folder give, and the bucket store audits as the local one does."""
    ndjson = TESTDATA / "agentfootprint" / "ndjson"
    nights = [
        [ndjson / "a_repeated_identical_call.ndjson", ndjson / "f_prior_turn_evidence.ndjson"],
        [ndjson / "a_repeated_identical_call.ndjson", ndjson / "b_polling_progress.ndjson"],
        [ndjson / "b_polling_progress.ndjson"],
    ]
    url = f"s3://{BUCKET}/ray-append/"
    versions = []
    for n, night in enumerate(nights):
        got = tray.ingest(night, url, append=True, scratch=tmp_path / "scratch")
        want = tray.ingest(night, tmp_path / "local", append=True)
        assert got["appended"]["created"] == want["appended"]["created"] == (n == 0), n
        assert got["appended"]["skipped_as_ingested"] == want["appended"]["skipped_as_ingested"]
        assert (got["appended"]["generation"] is None) == (n == 2)
        assert want["appended"]["parts_fetched"] is None
        if n == 1:
            # The second night continues no conversation: no events part was fetched.
            fetched, of = got["appended"]["parts_fetched"]
            assert fetched == 0 and of == len(got["parts"]) - 1, got["appended"]
        for key in ("counts", "parts"):
            assert got[key] == want[key], (n, key)
        assert [i["sha256"] for i in got["inputs"]] == [i["sha256"] for i in want["inputs"]]
        listed = bucket.list_objects_v2(Bucket=BUCKET, Prefix="ray-append/")["Contents"]
        versions.append({o["Key"]: o["ETag"] for o in listed})
    assert len(versions[1]) > len(versions[0])
    for key, etag in versions[0].items():
        if key != "ray-append/manifest.json":
            assert versions[1][key] == etag, key
    added = set(versions[1]) - set(versions[0])
    assert added and all(k.startswith("ray-append/generations/00001/") for k in added)
    assert versions[2] == versions[1]
    assert list((tmp_path / "scratch").iterdir()) == []

    for name, store in (("bucket", url), ("local", tmp_path / "local")):
        cli("audit", store, "--config", CONFIG, "--out", tmp_path / f"corpus-{name}", "--quiet")
    for table in TABLES:
        assert_same_table(
            read_table(tmp_path / "corpus-bucket", table),
            read_table(tmp_path / "corpus-local", table),
            table,
        )
    assert read_table(tmp_path / "corpus-bucket", "findings").num_rows > 0


def test_the_module_appends_to_a_store_in_a_bucket_as_to_a_local_one(bucket, tmp_path):
    """`traceaudit.ingest(..., append=True)` to a prefix: two nights, the second holding the
    first's files again, give the manifest two appends to a local folder give, and the second
    night leaves the first night's objects as they were."""
    ndjson = TESTDATA / "agentfootprint" / "ndjson"
    nights = [
        [ndjson / "a_repeated_identical_call.ndjson"],
        [ndjson / "a_repeated_identical_call.ndjson", ndjson / "b_polling_progress.ndjson"],
    ]
    url = f"s3://{BUCKET}/module-store/"
    versions = []
    for n, night in enumerate(nights):
        got = traceaudit.ingest(night, url, append=True)
        want = traceaudit.ingest(night, tmp_path / "local", append=True)
        assert got["appended"]["created"] == want["appended"]["created"] == (n == 0)
        assert got["appended"]["skipped_as_ingested"] == want["appended"]["skipped_as_ingested"]
        for key in ("inputs", "counts", "parts"):
            assert got[key] == want[key], (n, key)
        listed = bucket.list_objects_v2(Bucket=BUCKET, Prefix="module-store/")["Contents"]
        versions.append({o["Key"]: o["ETag"] for o in listed})
    assert want["appended"]["skipped_as_ingested"] == 1
    for key, etag in versions[0].items():
        if key != "module-store/manifest.json":
            assert versions[1][key] == etag, key
    added = set(versions[1]) - set(versions[0])
    assert added and all(k.startswith("module-store/generations/00001/") for k in added)
