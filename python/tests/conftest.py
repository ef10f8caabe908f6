"""Shared fixtures: the command line's store and corpus of testdata/, and helpers comparing
corpus tables. The command line is the `traceaudit` binary cargo built (TRACEAUDIT_CLI, else
$CARGO_TARGET_DIR/debug/traceaudit); the generator likewise (TRACEAUDIT_GEN)."""

import os
import pathlib
import subprocess

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TESTDATA = ROOT / "testdata"
CONFIG = TESTDATA / "traceaudit.toml"
# The tables every audit writes, and the checks' own (schema-attempt's attempts).
TABLES = ("findings", "dispositions", "agreement", "attempts")


def _built(env: str, name: str) -> pathlib.Path:
    given = os.environ.get(env)
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target"))
    path = pathlib.Path(given) if given else target / "debug" / name
    if not path.is_file():
        pytest.fail(
            f"{path} not found: build it with `cargo build --bin {name}` "
            f"(or set {env} to the binary)"
        )
    return path


def cli(*args: str) -> str:
    """Run the traceaudit command line; its standard output."""
    done = subprocess.run(
        [str(_built("TRACEAUDIT_CLI", "traceaudit")), *map(str, args)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def generate(*args: str) -> None:
    """Run the workspace's corpus generator (traceaudit-gen)."""
    done = subprocess.run(
        [str(_built("TRACEAUDIT_GEN", "traceaudit-gen")), *map(str, args)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


def read_table(corpus: pathlib.Path, name: str) -> pa.Table:
    """A corpus table: one file as the command line writes it, or its part files read in
    part order as a distributed audit writes them."""
    single = corpus / f"{name}.parquet"
    if single.is_file():
        return pq.read_table(single)
    files = sorted((corpus / name).glob("part-*.parquet"))
    assert files, f"{corpus} has no table {name}"
    return pa.concat_tables([pq.read_table(f) for f in files])


def assert_same_table(got: pa.Table, expected: pa.Table, what: str) -> None:
    assert got.schema.equals(expected.schema, check_metadata=False), (
        f"{what}: schema\n{got.schema}\n!=\n{expected.schema}"
    )
    assert got.num_rows == expected.num_rows, f"{what}: {got.num_rows} != {expected.num_rows} rows"
    assert got.to_pylist() == expected.to_pylist(), f"{what}: rows differ"


@pytest.fixture(scope="session")
def testdata_store(tmp_path_factory) -> pathlib.Path:
    store = tmp_path_factory.mktemp("cli") / "store"
    cli("ingest", TESTDATA, "--out", store, "--quiet")
    return store


@pytest.fixture(scope="session")
def testdata_corpus(testdata_store, tmp_path_factory) -> pathlib.Path:
    corpus = tmp_path_factory.mktemp("cli") / "corpus"
    cli("audit", testdata_store, "--config", CONFIG, "--out", corpus, "--quiet")
    return corpus
