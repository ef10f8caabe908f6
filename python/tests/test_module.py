"""The module's jobs and audit_tables against the command line's corpus of testdata/."""

import json
import pathlib

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

import traceaudit
from conftest import CONFIG, TABLES, TESTDATA, assert_same_table, cli, read_table


def store_tables(store: pathlib.Path):
    events = pa.concat_tables(
        [pq.read_table(f) for f in sorted((store / "events").glob("part-*.parquet"))]
    )
    runs = pq.read_table(store / "runs")
    return events, runs


def recast_text(table: pa.Table, text_type: pa.DataType) -> pa.Table:
    """Every text column as `text_type`."""
    fields = [
        pa.field(f.name, text_type, f.nullable)
        if pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def assert_corpus(tables, corpus: pathlib.Path):
    assert sorted(tables) == sorted([*TABLES, "ledger"])
    for name in [*TABLES, "ledger"]:
        assert_same_table(tables[name], read_table(corpus, name), name)


def test_audit_tables_on_pyarrow_equals_the_cli(testdata_store, testdata_corpus):
    events, runs = store_tables(testdata_store)
    assert runs.num_rows > 50
    tables = traceaudit.audit_tables(events, runs, config=CONFIG)
    assert tables["findings"].num_rows > 0
    assert_corpus(tables, testdata_corpus)


@pytest.mark.parametrize("text", [pa.large_utf8(), pa.string_view()], ids=["large_utf8", "utf8_view"])
def test_audit_tables_reads_every_text_type(testdata_store, testdata_corpus, text):
    events, runs = store_tables(testdata_store)
    events, runs = recast_text(events, text), recast_text(runs, text)
    assert events.schema.field("run_id").type == text
    tables = traceaudit.audit_tables(events, runs, config=CONFIG)
    assert_corpus(tables, testdata_corpus)


def test_audit_tables_on_a_record_batch_reader(testdata_store, testdata_corpus):
    events, runs = store_tables(testdata_store)
    reader = pa.RecordBatchReader.from_batches(events.schema, events.to_batches(max_chunksize=100))
    tables = traceaudit.audit_tables(reader, runs, config=CONFIG)
    assert_corpus(tables, testdata_corpus)


def test_audit_tables_on_polars_equals_the_cli(testdata_store, testdata_corpus):
    pl = pytest.importorskip("polars")
    events = pl.concat(
        [pl.read_parquet(f) for f in sorted((testdata_store / "events").glob("part-*.parquet"))]
    )
    runs = pl.read_parquet(testdata_store / "runs" / "*.parquet")
    # Polars hands text over as utf8_view.
    exported = pa.table(events)
    assert exported.schema.field("run_id").type in (pa.string_view(), pa.large_utf8())
    tables = traceaudit.audit_tables(events, runs, config=CONFIG)
    assert_corpus(tables, testdata_corpus)


def test_audit_tables_refuses_a_missing_column(testdata_store):
    events, runs = store_tables(testdata_store)
    with pytest.raises(ValueError, match="the events table has no column `seq`"):
        traceaudit.audit_tables(events.drop_columns(["seq"]), runs)
    with pytest.raises(ValueError, match="the runs table has no column `part`"):
        traceaudit.audit_tables(events, runs.drop_columns(["part"]))


def test_audit_tables_refuses_a_value_that_does_not_fit(testdata_store):
    events, runs = store_tables(testdata_store)
    seq = pc.subtract(events["seq"].cast(pa.int64()), 1_000_000)
    bad = events.set_column(events.schema.get_field_index("seq"), "seq", seq)
    with pytest.raises(ValueError, match="column `seq` of the events table"):
        traceaudit.audit_tables(bad, runs)


def first_conversation_with_two_runs(runs: pa.Table) -> str:
    counts = pc.value_counts(runs["conversation_id"]).to_pylist()
    return sorted(c["values"] for c in counts if c["counts"] >= 2)[0]


def test_audit_tables_refuses_a_split_conversation(testdata_store):
    events, runs = store_tables(testdata_store)
    conversation = first_conversation_with_two_runs(runs)
    of_it = pc.equal(events["conversation_id"], conversation)
    rows = pc.indices_nonzero(of_it).to_pylist()
    # The conversation's events split between two calls: each half is incomplete.
    keep = pa.array([i not in set(rows[: len(rows) // 2]) for i in range(events.num_rows)])
    with pytest.raises(ValueError, match=f'conversation "{conversation}" is incomplete'):
        traceaudit.audit_tables(events.filter(keep), runs)


def test_audit_tables_refuses_an_event_whose_run_is_missing(testdata_store):
    events, runs = store_tables(testdata_store)
    conversation = first_conversation_with_two_runs(runs)
    of_it = pc.equal(runs["conversation_id"], conversation)
    first_run = runs.filter(of_it)["run_id"][0].as_py()
    without = runs.filter(pc.invert(pc.equal(runs["run_id"], first_run)))
    with pytest.raises(ValueError, match=f'conversation "{conversation}" is incomplete: an event of run'):
        traceaudit.audit_tables(events, without)


def test_audit_tables_refuses_what_is_not_arrow():
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        traceaudit.audit_tables([{"run_id": "r"}], [])


def test_ingest_and_audit_return_what_the_cli_writes(tmp_path, testdata_store, testdata_corpus):
    store = traceaudit.ingest(TESTDATA, tmp_path / "store", threads=2)
    expected = json.loads((testdata_store / "manifest.json").read_text())
    assert store["counts"] == expected["counts"]
    assert store["inputs"] == expected["inputs"]
    corpus = traceaudit.audit(tmp_path / "store", tmp_path / "corpus", config=CONFIG, threads=2)
    cli_manifest = json.loads((testdata_corpus / "manifest.json").read_text())
    for key in ("checks", "conversations", "runs", "findings", "counts", "config_hash"):
        assert corpus[key] == cli_manifest[key], key
    for name in [*TABLES, "ledger"]:
        assert_same_table(read_table(tmp_path / "corpus", name), read_table(testdata_corpus, name), name)


def test_errors_carry_the_cli_reason(tmp_path, testdata_store):
    with pytest.raises(FileNotFoundError, match="no input files found|does not exist|No such file"):
        traceaudit.ingest(tmp_path / "nothing-here", tmp_path / "store")
    with pytest.raises(ValueError, match='unknown check "no-such-check"'):
        traceaudit.audit(testdata_store, tmp_path / "corpus", checks=["no-such-check"])
    with pytest.raises(ValueError, match="unknown format"):
        traceaudit.ingest(TESTDATA, tmp_path / "store", format="nope")


def test_audit_part_writes_each_table_of_one_part(tmp_path, testdata_store, testdata_corpus):
    manifest = json.loads((testdata_store / "manifest.json").read_text())
    parts = len(manifest["parts"])
    counted = [
        traceaudit.audit_part(testdata_store, p, tmp_path / "out", config=CONFIG, threads=1)
        for p in range(parts)
    ]
    # Again: the same files, no duplicate rows.
    traceaudit.audit_part(testdata_store, 0, tmp_path / "out", config=CONFIG, threads=1)
    for name in TABLES:
        assert_same_table(read_table(tmp_path / "out", name), read_table(testdata_corpus, name), name)
    assert not list((tmp_path / "out").rglob("*.partial"))
    done = traceaudit.finish_corpus(
        tmp_path / "out", str(testdata_store), (testdata_store / "manifest.json").read_text(),
        counted, 1.0, config=CONFIG,
    )
    cli_manifest = json.loads((testdata_corpus / "manifest.json").read_text())
    assert done["counts"] == cli_manifest["counts"]
    assert (tmp_path / "out" / "ledger.parquet").read_bytes() == (
        testdata_corpus / "ledger.parquet"
    ).read_bytes()
    with pytest.raises(ValueError, match=f"there is no part {parts}"):
        traceaudit.audit_part(testdata_store, parts, tmp_path / "out")
    # Read through its manifest, the part corpus is the command line's; a stray file in a
    # table's folder is not read.
    out = tmp_path / "out"
    (out / "findings" / "part-99999.parquet").write_bytes(
        (out / "findings" / "part-00000.parquet").read_bytes()
    )
    assert traceaudit.table_files(out, "findings") == [
        str(out / "findings" / f"part-{p:05d}.parquet") for p in range(parts)
    ]
    for name in [*TABLES, "ledger"]:
        assert_same_table(traceaudit.read_table(out, name), read_table(testdata_corpus, name), name)


def test_the_corpus_readers_read_the_command_lines_layout(testdata_corpus):
    for name in [*TABLES, "ledger"]:
        assert traceaudit.table_files(testdata_corpus, name) == [
            str(testdata_corpus / f"{name}.parquet")
        ]
        assert_same_table(
            traceaudit.read_table(testdata_corpus, name),
            pq.read_table(testdata_corpus / f"{name}.parquet"),
            name,
        )
    with pytest.raises(FileNotFoundError, match='has no table "nothing"'):
        traceaudit.read_table(testdata_corpus, "nothing")
    with pytest.raises(OSError, match="is not a traceaudit corpus"):
        traceaudit.table_files(testdata_corpus / "store-that-is-not", "findings")


def test_findings_jsonl_is_the_command_lines(testdata_corpus):
    findings = pq.read_table(testdata_corpus / "findings.parquet")
    assert findings.num_rows > 0
    expected = (testdata_corpus / "findings.jsonl").read_bytes()
    assert traceaudit.findings_jsonl(findings) == expected
    # Batch by batch, the lines join up to the same file.
    pieces = [traceaudit.findings_jsonl(pa.Table.from_batches([b]))
              for b in findings.to_batches(max_chunksize=7)]
    assert b"".join(pieces) == expected
    with pytest.raises(TypeError, match="__arrow_c_stream__"):
        traceaudit.findings_jsonl([{"finding_id": "x"}])


def test_audit_part_refuses_a_folder_of_other_files(tmp_path, testdata_store):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "notes.txt").write_text("keep")
    with pytest.raises(OSError, match="not part of a traceaudit corpus"):
        traceaudit.audit_part(testdata_store, 0, theirs)
    assert sorted(p.name for p in theirs.iterdir()) == ["notes.txt"]
