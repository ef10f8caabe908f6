"""traceaudit: audit recorded AI-agent runs offline, in batch, from Python.

The same Rust core as the ``traceaudit`` command line: :func:`ingest` and :func:`audit` are its
two jobs, :func:`audit_tables` runs the checks over Arrow data held in memory, and
:func:`audit_part` audits one part of a store (the unit :mod:`traceaudit.ray` distributes).
:func:`read_table` and :func:`table_files` read a corpus in either layout: the command line's
(``CORPUS/<table>.parquet``) or one written a part at a time (``CORPUS/<table>/part-NNNNN.parquet``,
the files its manifest lists), by the rules the reports read it by.

Errors raise Python exceptions carrying the command line's one-line reason: bad arguments or
input data raise :class:`ValueError`, a missing input :class:`FileNotFoundError`, anything else
:class:`OSError`. Rust works with the GIL released.
"""

from __future__ import annotations

import json
import os
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from . import _native

__version__: str = _native.__version__

__all__ = [
    "ingest",
    "audit",
    "compact",
    "audit_tables",
    "audit_part",
    "finish_corpus",
    "read_table",
    "table_files",
    "findings_jsonl",
    "__version__",
]

PathLike = Union[str, "os.PathLike[str]"]


def _paths(inputs: Union[PathLike, Iterable[PathLike]]) -> list:
    if isinstance(inputs, (str, bytes, os.PathLike)):
        return [os.fspath(inputs)]
    return [os.fspath(p) for p in inputs]


def _checks(checks: Optional[Union[str, Sequence[str]]]) -> Optional[list]:
    if checks is None:
        return None
    if isinstance(checks, str):
        return [c for c in checks.split(",") if c.strip()]
    return list(checks)


def _opt_path(path: Optional[PathLike]) -> Optional[str]:
    return None if path is None else os.fspath(path)


def ingest(
    inputs: Union[PathLike, Iterable[PathLike]],
    out: PathLike,
    *,
    format: Optional[str] = None,
    threads: Optional[int] = None,
    part_bytes: Optional[int] = None,
    append: bool = False,
) -> Dict[str, Any]:
    """Read recorded runs (files or directories) into a store at ``out``.

    With ``append=True``, as ``traceaudit ingest INPUTS --out OUT --append``: the inputs are
    added to the store as a new generation (the store is created when absent); the manifest
    returned then has an ``appended`` entry with the ``generation`` added (``None`` when every
    input was in the store already), ``skipped_as_ingested``, ``created`` and
    ``parts_fetched``. ``out`` can be a prefix in object storage (``s3://stores/nightly/``):
    only the new generation's files are uploaded, then the manifest, under the prefix's lock
    object; ``parts_fetched`` is then ``[fetched, of]``, the store's events parts read because
    the night continues their conversations (``None`` for a local store).

    As ``traceaudit ingest INPUTS --out OUT``. ``format`` reads every input as that format
    (a name as ``--format`` takes it) instead of detecting it; ``threads`` defaults to the cores
    available; ``part_bytes`` is the input bytes per store part (128 MiB by default; smaller
    parts are smaller units for :mod:`traceaudit.ray`). Returns the store's manifest (what the command line prints: files, bytes,
    conversations, runs, records read = stored + quarantined, ...) as a dict.
    """
    text = _native.ingest(
        _paths(inputs), os.fspath(out), format, threads, part_bytes, bool(append)
    )
    return json.loads(text)


def compact(store: PathLike, *, part_bytes: Optional[int] = None) -> Dict[str, Any]:
    """Rewrite a store's generations into one, as ``traceaudit compact STORE``: superseded rows
    gone, parts near the part size. Returns the store's manifest after it."""
    return json.loads(_native.compact(os.fspath(store), part_bytes))


def audit(
    inputs: Union[PathLike, Iterable[PathLike]],
    out: PathLike,
    *,
    config: Optional[PathLike] = None,
    checks: Optional[Union[str, Sequence[str]]] = None,
    threads: Optional[int] = None,
    generation: Optional[Union[int, str]] = None,
) -> Dict[str, Any]:
    """Run the checks over a store (or raw inputs) and write a corpus at ``out``.

    As ``traceaudit audit INPUTS --out OUT``. ``config`` is a path to a ``traceaudit.toml``;
    ``checks`` names the checks to run (a list, or comma-separated), all by default;
    ``generation`` (a number, or ``"last"``) audits only that generation of the store, as
    ``--generation``. Returns the corpus manifest (counts per check, conversations, runs,
    findings, ...) as a dict.
    """
    text = _native.audit(
        _paths(inputs),
        os.fspath(out),
        _opt_path(config),
        _checks(checks),
        threads,
        None if generation is None else str(generation),
    )
    return json.loads(text)


def _audit_tables(events, runs, config=None, checks=None, threads=None):
    """:func:`audit_tables`, and what it counted (the part's counts, for a corpus manifest)."""
    for name, table in (("events", events), ("runs", runs)):
        if not hasattr(table, "__arrow_c_stream__"):
            raise TypeError(
                f"{name} must be Arrow data with __arrow_c_stream__ (a pyarrow Table or "
                f"RecordBatchReader, a polars DataFrame), not {type(table).__name__}"
            )
    tables, counted = _native.audit_tables(
        events, runs, _opt_path(config), _checks(checks), threads
    )
    return dict(tables), json.loads(counted)


def audit_tables(
    events: Any,
    runs: Any,
    *,
    config: Optional[PathLike] = None,
    checks: Optional[Union[str, Sequence[str]]] = None,
) -> Dict[str, "pyarrow.Table"]:  # noqa: F821
    """Run the checks over Arrow data of whole conversations held in memory.

    ``events`` and ``runs`` are the store's two tables (``events/part-*.parquet`` and
    ``runs/part-*.parquet``, columns as ``schemas/store.md`` gives them), as any object with
    ``__arrow_c_stream__``: a pyarrow Table or RecordBatchReader, a polars DataFrame. Text
    columns may be utf8, large_utf8 or utf8_view; numbers any type that holds the value.
    Extra columns are ignored.

    Returns the corpus tables by name (``findings``, ``dispositions``, ``agreement``,
    ``ledger``, and the checks' own tables such as ``attempts``) as pyarrow Tables, with the
    rows the command line writes for these conversations, in its order.

    Raises :class:`ValueError` naming the column when one is missing or cannot be read as the
    store's type, and naming the conversation when its rows are incomplete (an event whose run
    is not in ``runs``, a run with fewer events than its row counts): a conversation must be
    given whole, never split across calls.
    """
    tables, _ = _audit_tables(events, runs, config, checks)
    return tables


def audit_part(
    store: PathLike,
    part: int,
    out: PathLike,
    *,
    config: Optional[PathLike] = None,
    checks: Optional[Union[str, Sequence[str]]] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """Audit part ``part`` of the store ``store`` into ``out/<table>/part-NNNNN.parquet``.

    One file per corpus table (findings, dispositions, agreement and the checks' own tables),
    each written under a temporary name and renamed into place; the names and the content
    depend only on the store, the part and the options, so a part audited again (a retried
    task) leaves the same files and never a partial or duplicate one. Returns what the part
    counted, for :func:`finish_corpus`.
    """
    return _audit_part(store, part, out, config, checks, threads)[0]


def _audit_part(store, part, out, config, checks, threads) -> Tuple[Dict[str, Any], bytes]:
    """:func:`audit_part`, also giving the part's lines of ``findings.jsonl`` (what
    :func:`findings_jsonl` gives for the findings part it wrote, made without reading it back)."""
    text, lines = _native.audit_part(
        os.fspath(store), int(part), os.fspath(out), _opt_path(config), _checks(checks), threads
    )
    return json.loads(text), lines


def finish_corpus(
    out: PathLike,
    store_name: str,
    store_manifest: str,
    parts: Sequence[Dict[str, Any]],
    seconds: float,
    *,
    config: Optional[PathLike] = None,
    checks: Optional[Union[str, Sequence[str]]] = None,
    threads: Optional[int] = None,
) -> Dict[str, Any]:
    """Write ``ledger.parquet`` and ``manifest.json`` of a corpus audited a part at a time.

    ``parts`` are what :func:`audit_part` returned for every part, in part order;
    ``store_manifest`` is the text of the store's ``manifest.json`` and ``store_name`` how the
    corpus manifest names the store. The manifest is written last: a corpus is complete once
    it has one. Returns the manifest as a dict.
    """
    text = _native.finish_corpus(
        os.fspath(out),
        store_name,
        store_manifest,
        [json.dumps(p) for p in parts],
        float(seconds),
        _opt_path(config),
        _checks(checks),
        threads,
    )
    return json.loads(text)


def table_files(corpus: PathLike, table: str) -> List[str]:
    """The files of table ``table`` of the corpus ``corpus``, in the order its rows are read.

    The command line's corpus holds a table in one file, ``<table>.parquet``; a corpus written
    a part at a time (:mod:`traceaudit.ray`) in the part files its manifest lists, and only in
    those: files lying beside them are not part of it. Such a corpus is checked whole first, as
    ``traceaudit report`` checks it: a listed file that is missing, of another size than the
    manifest records, or whose footer counts other rows raises :class:`ValueError` (or
    :class:`FileNotFoundError`) naming it. A table the corpus does not have (a check's own
    table, when the check did not run) raises :class:`FileNotFoundError`. Paths are local and
    taken literally.
    """
    return [os.fspath(p) for p in _native.table_files(os.fspath(corpus), table)]


def read_table(corpus: PathLike, table: str) -> "pyarrow.Table":  # noqa: F821
    """Table ``table`` of the corpus ``corpus`` as one pyarrow Table, read from the files
    :func:`table_files` gives, in order: for either layout the rows the command line's corpus
    of the same store holds, in its order. Raises as :func:`table_files` does, and
    :class:`ValueError` naming a file that cannot be read.
    """
    return _native.read_table(os.fspath(corpus), table)


def findings_jsonl(findings: Any) -> bytes:
    """The ``findings.jsonl`` lines of a findings table (pyarrow, or anything with
    ``__arrow_c_stream__``): the bytes the command line writes for those findings."""
    if not hasattr(findings, "__arrow_c_stream__"):
        raise TypeError(
            f"findings must be Arrow data with __arrow_c_stream__, not {type(findings).__name__}"
        )
    return _native.findings_jsonl(findings)
