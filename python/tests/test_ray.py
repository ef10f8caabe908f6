"""traceaudit.ray on a local Ray cluster (2 CPUs, 127.0.0.1, no dashboard, no usage stats):
the distributed audit and ingest equal the command line's."""

import json
import os
import pathlib
import re
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import traceaudit
from conftest import TABLES, TESTDATA, assert_same_table, cli, generate, read_table

ray = pytest.importorskip("ray")
import traceaudit.ray as tray  # noqa: E402


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    marker = tmp_path_factory.mktemp("fault") / "killed"
    # The kill hook (see traceaudit.ray) fires only once the marker is removed.
    marker.write_text("disarmed")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    os.environ[tray._KILL_ENV] = f"3:{marker}"
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        _node_ip_address="127.0.0.1",
        log_to_driver=False,
        configure_logging=False,
    )
    yield marker
    ray.shutdown()


@pytest.fixture(scope="module")
def generated(tmp_path_factory):
    """A generated store of at least 8 parts, and the command line's corpus of it."""
    root = tmp_path_factory.mktemp("generated")
    generate("--format", "tau2", "--size", "3MB", "--shard-size", "512KB", "--out", root / "gen")
    store = root / "store"
    manifest = traceaudit.ingest(root / "gen" / "input", store, part_bytes=320_000, threads=2)
    assert len(manifest["parts"]) >= 8
    corpus = root / "cli-corpus"
    cli("audit", store, "--config", root / "gen" / "traceaudit.toml", "--out", corpus, "--quiet")
    return store, corpus, root / "gen" / "traceaudit.toml"


def assert_same_corpus(got: pathlib.Path, expected: pathlib.Path):
    for name in TABLES:
        assert_same_table(read_table(got, name), read_table(expected, name), name)
        # The module's reader, which follows the manifest, reads the same rows.
        assert_same_table(traceaudit.read_table(got, name), read_table(expected, name), name)
    for name in ("ledger.parquet", "findings.jsonl"):
        assert (got / name).read_bytes() == (expected / name).read_bytes(), name
    a = json.loads((got / "manifest.json").read_text())
    b = json.loads((expected / "manifest.json").read_text())
    for key in ("checks", "config", "config_hash", "conversations", "runs", "findings", "counts",
                "store_manifest"):
        assert a[key] == b[key], key
    assert not list(got.rglob("*.partial"))
    # The manifest lists every part file, and each is there as listed.
    parts = len(a["store_manifest"]["parts"])
    listed = {t["table"]: t["files"] for t in a["tables"]}
    assert sorted(listed) == sorted([*TABLES, "ledger"])
    for name in TABLES:
        assert [f["path"] for f in listed[name]] == [
            f"{name}/part-{p:05d}.parquet" for p in range(parts)
        ]
        for f in listed[name]:
            assert (got / f["path"]).stat().st_size == f["bytes"]
        assert sum(f["rows"] for f in listed[name]) == read_table(expected, name).num_rows
    assert "tables" not in b


def test_audit_store_equals_the_cli(cluster, generated, tmp_path):
    store, corpus, config = generated
    out = tmp_path / "corpus"
    manifest = tray.audit_store(store, out, config=config, cpus_per_task=1)
    parts = len(json.loads((store / "manifest.json").read_text())["parts"])
    assert len(list((out / "findings").glob("part-*.parquet"))) == parts
    assert manifest["findings"] > 0
    assert_same_corpus(out, corpus)


def test_audit_store_through_a_filesystem_uri_equals_the_cli(cluster, generated, tmp_path):
    store, corpus, config = generated
    out = tmp_path / "corpus"
    tray.audit_store(f"file://{store}", f"file://{out}", config=config)
    assert_same_corpus(out, corpus)


def test_a_killed_task_is_retried_and_the_corpus_is_unchanged(cluster, generated, tmp_path):
    store, corpus, config = generated
    out = tmp_path / "corpus"
    cluster.unlink()  # arm: the worker auditing part 3 dies once, after writing it
    tray.audit_store(store, out, config=config)
    assert cluster.exists(), "no worker was killed"
    assert cluster.read_text() != "disarmed"
    assert_same_corpus(out, corpus)


def test_a_part_that_fails_leaves_no_findings_file(cluster, generated, tmp_path):
    store, _, config = generated
    damaged = tmp_path / "store"
    shutil.copytree(store, damaged)
    events = damaged / "events" / "part-00002.parquet"
    events.write_bytes(events.read_bytes()[: events.stat().st_size // 2])
    out = tmp_path / "corpus"
    with pytest.raises(ray.exceptions.RayTaskError, match="part-00002"):
        tray.audit_store(damaged, out, config=config)
    # findings.jsonl is written as parts finish, under a temporary name: none is left.
    assert not (out / "findings.jsonl").exists()
    assert not (out / "manifest.json").exists()
    assert not [p.name for p in out.iterdir() if p.name.endswith(".partial")]


def test_a_corpus_is_replaced_whole(cluster, generated, tmp_path):
    store, corpus, config = generated
    out = tmp_path / "corpus"
    (out / "findings").mkdir(parents=True)
    (out / "stray.txt").write_text("not a corpus")
    with pytest.raises(ValueError, match="is not a traceaudit corpus"):
        tray.audit_store(store, out, config=config)
    (out / "stray.txt").unlink()
    shutil.rmtree(out / "findings")
    tray.audit_store(store, out, config=config, checks=["repeated-call"])
    # An earlier corpus (with other checks) leaves nothing behind.
    tray.audit_store(store, out, config=config)
    assert_same_corpus(out, corpus)


def split_spans(source: pathlib.Path, into: pathlib.Path, pieces: int):
    """The spans of an OTLP JSON export dealt over `pieces` files (each trace split)."""
    doc = json.loads(source.read_text())
    resource = doc["resourceSpans"][0]
    scope = resource["scopeSpans"][0]
    for k in range(pieces):
        spans = scope["spans"][k::pieces]
        part = {"resourceSpans": [{**resource, "scopeSpans": [{**scope, "spans": spans}]}]}
        (into / f"{source.stem}.{k}.json").write_text(json.dumps(part))


def store_rows(store: pathlib.Path):
    # Each part's runs, as each part's events: the same rows in each file.
    runs = {}
    for f in sorted((store / "runs").glob("part-*.parquet")):
        runs[f.name] = pq.read_table(f).sort_by("run_id")
    parts = {}
    for f in sorted((store / "events").glob("part-*.parquet")):
        parts[f.name] = pq.read_table(f).sort_by([("run_id", "ascending"), ("seq", "ascending")])
    quarantine = sorted((store / "quarantine.jsonl").read_text().splitlines())
    return runs, parts, quarantine


@pytest.mark.parametrize("part_bytes", [None, 60_000], ids=["one-part", "many-parts"])
def test_distributed_ingest_of_split_traces_equals_the_cli(cluster, tmp_path, part_bytes):
    inputs = tmp_path / "inputs"
    inputs.mkdir()
    otel = TESTDATA / "otel"
    # Traces split over files, one conversation of two traces split, the same spans exported
    # twice (JSON and JSON lines), and files of formats whose conversations stay in one file.
    split_spans(otel / "pydantic-ai-v5-content" / "s3_followup_from_history.json", inputs, 3)
    split_spans(otel / "openinference-v5-content" / "s3_followup_from_history.json", inputs, 2)
    for f in ("s1_repeated_identical_call.json", "s1_repeated_identical_call.jsonl"):
        shutil.copy(otel / "pydantic-ai-v5-content" / f, inputs / f)
    shutil.copytree(TESTDATA / "tau2", inputs / "tau2")
    shutil.copytree(TESTDATA / "bad", inputs / "bad")
    # The same runs in a second file, read by another task: kept from the earlier input.
    tau = TESTDATA / "tau-bench" / "gpt-4o-airline.first3.json"
    shutil.copy(tau, inputs / "a-tau.json")
    shutil.copy(tau, inputs / "z-tau-again.json")

    if part_bytes is None:
        cli("ingest", inputs, "--out", tmp_path / "cli-store", "--quiet")
    else:
        # The command line has no part size; the library's ingest is the job it runs.
        traceaudit.ingest(inputs, tmp_path / "cli-store", part_bytes=part_bytes)
    # Many-parts also packs the files into shards of about 40 kB (groups kept whole).
    shard_bytes = 0 if part_bytes is None else 40_000
    manifest = tray.ingest(
        inputs, tmp_path / "ray-store", part_bytes=part_bytes, shard_bytes=shard_bytes
    )
    expected = json.loads((tmp_path / "cli-store" / "manifest.json").read_text())
    assert len(expected["parts"]) >= (1 if part_bytes is None else 4)
    assert manifest["parts"] == expected["parts"]
    assert manifest["counts"]["duplicate_runs"] > 0
    for key in ("inputs", "counts", "digests", "envelope_types", "store_schema_version"):
        assert manifest[key] == expected[key], key
    got, want = store_rows(tmp_path / "ray-store"), store_rows(tmp_path / "cli-store")
    assert sorted(got[0]) == sorted(want[0])
    for name in want[0]:
        assert_same_table(got[0][name], want[0][name], f"runs/{name}")
    assert sorted(got[1]) == sorted(want[1])
    for name in want[1]:
        assert_same_table(got[1][name], want[1][name], name)
    assert got[2] == want[2]
    # Read back and audited, the two stores give the same corpus.
    cli("audit", tmp_path / "cli-store", "--out", tmp_path / "a", "--quiet")
    cli("audit", tmp_path / "ray-store", "--out", tmp_path / "b", "--quiet")
    for name in TABLES:
        assert_same_table(read_table(tmp_path / "b", name), read_table(tmp_path / "a", name), name)


def test_the_command_line_entry_point(cluster, generated, tmp_path, capsys):
    store, corpus, config = generated
    out = tmp_path / "corpus"
    code = tray.main(["audit", str(store), "--out", str(out), "--config", str(config)])
    assert code == 0
    assert "conversations" in capsys.readouterr().out
    assert_same_corpus(out, corpus)
    assert tray.main(["audit", str(tmp_path / "missing"), "--out", str(out)]) == 2
    assert "is not a complete traceaudit store (no manifest.json)" in capsys.readouterr().err


def test_files_sharing_a_key_are_read_by_one_task():
    # 0-3-5 share keys through 3; 1, 2 and 4 stand alone.
    keys = {0: ["a"], 2: ["b"], 3: ["a", "c"], 5: ["c"]}
    groups = tray._groups(6, keys)
    assert groups == [[0, 3, 5], [1], [2], [4]]
    assert tray._packed(groups, [10] * 6, 0) == groups
    # Packed in input order up to 25 bytes, a group never split.
    assert tray._packed(groups, [10] * 6, 25) == [[0, 3, 5], [1, 2], [4]]


def test_audit_store_with_a_config_that_names_files_beside_it(
    cluster, testdata_store, testdata_corpus, tmp_path
):
    # testdata/traceaudit.toml names JSON schemas by paths relative to itself.
    from conftest import CONFIG

    tray.audit_store(testdata_store, tmp_path / "corpus", config=CONFIG)
    assert_same_corpus(tmp_path / "corpus", testdata_corpus)


def cli_status(*args: str):
    """Run the traceaudit command line: its exit status, standard output and error."""
    import subprocess

    from conftest import _built

    done = subprocess.run(
        [str(_built("TRACEAUDIT_CLI", "traceaudit")), *map(str, args)],
        capture_output=True,
        text=True,
    )
    return done.returncode, done.stdout, done.stderr


def notebook_output(corpus: pathlib.Path) -> str:
    import subprocess
    import sys

    from conftest import ROOT

    done = subprocess.run(
        [sys.executable, str(ROOT / "docs" / "notebook_example.py"), str(corpus)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_reports_read_a_ray_corpus_as_the_cli_corpus(
    cluster, generated, testdata_corpus, tmp_path
):
    store, corpus, config = generated
    # The same folder name for both: a diff and a trend show corpus names.
    ray_corpus = tmp_path / "ray" / "night"
    cli_corpus = tmp_path / "cli" / "night"
    shutil.copytree(corpus, cli_corpus)
    tray.audit_store(store, ray_corpus, config=config)
    both = (cli_corpus, ray_corpus)

    for fmt in ("table", "markdown", "json", "html"):
        a, b = (cli("report", c, "--format", fmt) for c in both)
        assert a == b, fmt
    for by in ("model", "tool"):
        a, b = (cli("report", c, "--by", by) for c in both)
        assert a == b, by
    for fmt in ("markdown", "json", "html"):
        # Against another corpus, either way round, and against each other.
        outs = [cli_status("diff", testdata_corpus, c, "--format", fmt) for c in both]
        assert outs[0] == outs[1], fmt
        outs = [cli_status("diff", c, testdata_corpus, "--format", fmt) for c in both]
        assert outs[0] == outs[1], fmt
    assert cli_status("diff", cli_corpus, ray_corpus)[0] == 0
    assert cli_status("diff", ray_corpus, cli_corpus)[0] == 0
    for fmt in ("table", "json"):
        # The exit status is the gate's on the last night, the same for both layouts.
        a, b = (cli_status("trend", testdata_corpus, c, "--format", fmt)[:2] for c in both)
        assert a == b, fmt
    run_id = json.loads((cli_corpus / "findings.jsonl").read_text().splitlines()[0])["run_id"]
    for fmt in ("text", "json"):
        a, b = (cli("explain", c, run_id, "--format", fmt) for c in both)
        assert a == b, fmt

    # The notebook example reads both the same (only the file counts it prints differ).
    notebook = [notebook_output(c) for c in both]
    assert re.sub(r"in \d+ file\(s\)", "", notebook[0]) == re.sub(
        r"in \d+ file\(s\)", "", notebook[1]
    )
    assert "dispositions: " in notebook[1] and "in 1 file(s)" not in notebook[1].split("\n")[1]

    # A part missing or truncated: every reader refuses it by name, no gate passes.
    part = ray_corpus / "findings" / "part-00002.parquet"
    whole = part.read_bytes()
    part.write_bytes(whole[: len(whole) // 2])
    for args in (("report", ray_corpus), ("diff", cli_corpus, ray_corpus),
                 ("diff", ray_corpus, cli_corpus, "--fail-on", "none"),
                 ("trend", cli_corpus, ray_corpus), ("explain", ray_corpus, run_id)):
        status, _, err = cli_status(*args)
        assert status == 2, args
        assert f"{part} holds" in err and "truncated" in err, err
    with pytest.raises(ValueError, match="truncated"):
        traceaudit.read_table(ray_corpus, "dispositions")
    part.unlink()
    status, _, err = cli_status("diff", cli_corpus, ray_corpus)
    assert status == 2
    assert f"{part}, which its manifest lists, is missing" in err, err
    with pytest.raises(FileNotFoundError, match="is missing"):
        traceaudit.table_files(ray_corpus, "findings")


def nights_of(tmp_path: pathlib.Path):
    """Two nights of generated agentfootprint logs whose sessions go on past midnight (the
    runs' lines split by run, in order), night 2 with night 1's file delivered again and a
    file of runs night 1 held already under another name."""
    generate("--format", "agentfootprint", "--runs", "80", "--seed", "4", "--out", tmp_path / "gen")
    lines, sessions = [], {}
    for f in sorted((tmp_path / "gen" / "input").iterdir()):
        for line in f.read_text().splitlines():
            try:
                meta = json.loads(line)["meta"]
                run, session = meta["runId"], meta["sessionId"]
            except (ValueError, KeyError, TypeError):
                run, session = "", ""
            if run and run not in sessions.setdefault(session, []):
                sessions[session].append(run)
            lines.append((run, line))
    # The first half of each session's runs on night 1, the rest on night 2.
    night_of = {r: 2 * i // len(runs) for runs in sessions.values() for i, r in enumerate(runs)}
    last, texts = 0, ["", ""]
    for run, line in lines:
        last = night_of.get(run, last)
        texts[last] += line + "\n"
    nights = [tmp_path / "day=01", tmp_path / "day=02"]
    for n, (folder, text) in enumerate(zip(nights, texts)):
        folder.mkdir()
        (folder / f"night-{n + 1}.ndjson").write_text(text)
    shutil.copy(nights[0] / "night-1.ndjson", nights[1] / "night-1-again.ndjson")
    # The same runs again, in a file of another digest: each run is a duplicate.
    (nights[1] / "night-1-resent.ndjson").write_text(texts[0] + "\n")
    return nights, tmp_path / "gen" / "traceaudit.toml"


def test_distributed_append_equals_the_command_line_append(cluster, tmp_path):
    nights, config = nights_of(tmp_path)
    cli_store, ray_store = tmp_path / "cli-store", tmp_path / "ray-store"
    for n, night in enumerate(nights):
        want = traceaudit.ingest(night, cli_store, append=True, part_bytes=30_000)
        got = tray.ingest(night, ray_store, append=True, part_bytes=30_000)
        assert got["appended"]["created"] == want["appended"]["created"] == (n == 0)
        assert got["appended"]["skipped_as_ingested"] == want["appended"]["skipped_as_ingested"]
        a, b = got["appended"]["generation"], want["appended"]["generation"]
        for key in ("number", "dir", "inputs", "first_input", "new_conversations",
                    "superseded_conversations", "copied_runs", "copied_events", "counts"):
            assert a[key] == b[key], (n, key, a[key], b[key])
        for key in ("inputs", "counts", "digests", "envelope_types", "store_schema_version"):
            assert got[key] == want[key], key
    assert want["appended"]["skipped_as_ingested"] == 1
    added = want["appended"]["generation"]
    assert added["superseded_conversations"] > 0, "no session crossed midnight"
    assert added["counts"]["duplicate_runs"] > 0, "no duplicate run was sent"
    # The same conversations and runs, audited whole and night by night, give the same rows.
    for pick in (None, "last"):
        extra = [] if pick is None else ["--generation", pick]
        name = pick or "whole"
        cli("audit", cli_store, *extra, "--config", config, "--out", tmp_path / f"a-{name}", "--quiet")
        cli("audit", ray_store, *extra, "--config", config, "--out", tmp_path / f"b-{name}", "--quiet")
        for table in TABLES:
            got = read_table(tmp_path / f"b-{name}", table)
            want_t = read_table(tmp_path / f"a-{name}", table)
            assert sorted(map(repr, got.to_pylist())) == sorted(map(repr, want_t.to_pylist())), (
                name,
                table,
            )
    # Everything again: nothing is added.
    again = tray.ingest(nights[1], ray_store, append=True)
    assert again["appended"]["generation"] is None
    assert again["appended"]["skipped_as_ingested"] == 3
    assert again["counts"] == json.loads((cli_store / "manifest.json").read_text())["counts"]
