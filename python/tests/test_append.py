"""The nightly job from Python: ingest(append=True), audit(generation=...), compact()."""

import json

import traceaudit
from conftest import CONFIG, TABLES, TESTDATA, read_table


def test_append_audit_a_generation_and_compact(tmp_path):
    store = tmp_path / "store"
    first = traceaudit.ingest(TESTDATA / "agentfootprint", store, threads=2, append=True)
    assert first["appended"]["created"] is True
    assert first["appended"]["generation"]["number"] == 0
    second = traceaudit.ingest(TESTDATA / "tau2", store, threads=2, append=True)
    added = second["appended"]["generation"]
    assert added["number"] == 1
    assert added["dir"] == "generations/00001"
    assert second["counts"]["runs"] == first["counts"]["runs"] + added["counts"]["runs"]
    assert [g["number"] for g in second["generations"]] == [0, 1]
    # The same inputs again: nothing is added, every input is skipped (a dir layout's
    # simulation files are read through its results.json, which is the input).
    again = traceaudit.ingest(TESTDATA / "tau2", store, append=True)
    assert again["appended"]["generation"] is None
    assert again["appended"]["skipped_as_ingested"] == added["inputs"] == 12
    assert again["counts"] == second["counts"]

    night = traceaudit.audit(store, tmp_path / "night", config=CONFIG, generation="last")
    assert night["store_generation"] == 1
    assert night["runs"] == added["counts"]["runs"]
    whole = traceaudit.audit(store, tmp_path / "whole", config=CONFIG, threads=2)
    assert "store_generation" not in whole
    assert whole["runs"] == second["counts"]["runs"]

    compacted = traceaudit.compact(store)
    assert [g["compacted_from"] for g in compacted["generations"]] == [[0, 1]]
    assert compacted["counts"] == second["counts"]
    after = traceaudit.audit(store, tmp_path / "after", config=CONFIG, threads=2)
    for key in ("runs", "findings", "counts"):
        assert after[key] == whole[key], key
    # The same rows (the compacted store may hand conversations out in another order).
    def rows(corpus, name):
        return sorted(json.dumps(r, sort_keys=True, default=str) for r in read_table(corpus, name).to_pylist())

    for name in TABLES:
        assert rows(tmp_path / "after", name) == rows(tmp_path / "whole", name), name
    manifest = json.loads((store / "manifest.json").read_text())
    assert manifest["retired"] == ["runs/", "events/", "quarantine.jsonl", "generations/00001/"]
