"""Type stubs of the compiled module (Rust, pyo3). Records cross as JSON text; the typed API is
in ``traceaudit`` (``__init__.py``)."""

import pathlib
from typing import Any, List, Optional, Sequence, Tuple

import pyarrow

__version__: str

def ingest(
    inputs: Sequence[str],
    out: str,
    format: Optional[str] = None,
    threads: Optional[int] = None,
    part_bytes: Optional[int] = None,
) -> str: ...
def audit(
    inputs: Sequence[str],
    out: str,
    config: Optional[str] = None,
    checks: Optional[Sequence[str]] = None,
    threads: Optional[int] = None,
) -> str: ...
def audit_tables(
    events: Any,
    runs: Any,
    config: Optional[str] = None,
    checks: Optional[Sequence[str]] = None,
    threads: Optional[int] = None,
) -> Tuple[List[Tuple[str, pyarrow.Table]], str]: ...
def audit_part(
    store: str,
    part: int,
    out: str,
    config: Optional[str] = None,
    checks: Optional[Sequence[str]] = None,
    threads: Optional[int] = None,
) -> Tuple[str, bytes]: ...
def finish_corpus(
    out: str,
    store_name: str,
    store_manifest: str,
    parts: Sequence[str],
    seconds: float,
    config: Optional[str] = None,
    checks: Optional[Sequence[str]] = None,
    threads: Optional[int] = None,
) -> str: ...
def findings_jsonl(findings: Any) -> bytes: ...
def table_files(corpus: str, table: str) -> List[pathlib.Path]: ...
def read_table(corpus: str, table: str) -> pyarrow.Table: ...
def plan_ingest(inputs: Sequence[str], part_bytes: Optional[int] = None) -> str: ...
def join_keys(path: str, format: Optional[str] = None) -> List[str]: ...
def ingest_shard(
    plan: str,
    files: Sequence[int],
    out: str,
    format: Optional[str] = None,
    threads: Optional[int] = None,
) -> str: ...
def shard_duplicates(plan: str, shards: Sequence[Tuple[str, Sequence[int]]]) -> List[List[str]]: ...
def merge_part(
    shards: Sequence[str], dropped: Sequence[Sequence[str]], part: int, out: str
) -> None: ...
def merge_shards(
    plan: str,
    shards: Sequence[Tuple[str, Sequence[int]]],
    out: str,
    seconds_before: float,
    threads: Optional[int] = None,
    merged: Optional[str] = None,
) -> str: ...
