"""traceaudit over a Ray cluster: one task per store part, no shuffle.

A store's parts hold whole conversations (a conversation never spans two parts), so the part is
the unit of distribution: :func:`audit_store` runs one Ray task per part (``ray.remote``, in
Ray's pooled worker processes), each writing that part of every corpus table as
``OUT/<table>/part-NNNNN.parquet`` and giving back its findings' JSON lines; the driver writes
those lines into ``findings.jsonl`` in part order as the tasks finish, then the ledger and the
manifest, which lists every part file with its size and rows. :func:`ingest` builds a store
with one task per input file, then one per store part.

Paths may be local or any pyarrow filesystem URI (``s3://...``, ``gs://...``, ``file://...``);
on a real cluster the store and the corpus must be where every node can reach them.

Equality with the command line: a corpus written here holds the rows of the command line's
corpus of the same store, table by table, in the same order once the part files its manifest
lists are read in that order (:func:`traceaudit.read_table` reads them so, and ``traceaudit
report``, ``diff``, ``trend`` and ``explain`` read it as they read the command line's, to the
byte). The Parquet bytes differ (one file per part instead of one per table);
``ledger.parquet`` and ``findings.jsonl`` are the command line's files.

Command line, for nightly jobs::

    python -m traceaudit.ray audit STORE --out CORPUS --address auto
    python -m traceaudit.ray ingest INPUTS... --out STORE --address auto
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

import traceaudit

__all__ = ["audit_store", "ingest", "main"]

# The files finish_corpus writes, copied in this order (the manifest last) from a local
# temporary folder into a corpus on a remote filesystem.
_FINISHED_FILES = ("ledger.parquet", "manifest.json")

# Fault injection for tests: "PART:MARKER" kills the worker auditing PART once (the first time,
# when MARKER does not exist yet) after it wrote the part, before it reports back, so Ray
# retries the task.
_KILL_ENV = "TRACEAUDIT_RAY_KILL_AFTER_PART"


class _Location:
    """A directory given as a local path or a pyarrow filesystem URI."""

    def __init__(self, where: Union[str, "os.PathLike[str]"]):
        text = os.fspath(where)
        self.given = text
        if "://" in text:
            self.fs, self.path = pafs.FileSystem.from_uri(text)
            self.local = False
        else:
            self.fs = pafs.LocalFileSystem()
            self.path = os.path.abspath(text)
            self.local = True

    @property
    def for_workers(self) -> str:
        """How workers are told where it is: an absolute path (their working directory is not
        the driver's), or the URI."""
        return self.path if self.local else self.given

    def join(self, *names: str) -> str:
        return "/".join([self.path.rstrip("/"), *names])

    def read_text(self, *names: str) -> str:
        with self.fs.open_input_stream(self.join(*names)) as f:
            return f.read().decode("utf-8")

    def exists(self, *names: str) -> bool:
        return self.fs.get_file_info(self.join(*names)).type != pafs.FileType.NotFound

    def write_atomically(self, data: bytes, *names: str) -> None:
        """Write a file under a hidden temporary name, then move it into place."""
        self.write_pieces_atomically([data], *names)

    def write_pieces_atomically(self, pieces: Iterable[bytes], *names: str) -> None:
        """Write ``pieces`` one after another into a file under a hidden temporary name, then
        move it into place (only one piece is held at a time)."""
        final = self.join(*names)
        parent, base = final.rsplit("/", 1)
        self.fs.create_dir(parent, recursive=True)
        tmp = f"{parent}/.{base}.{os.getpid()}-{time.time_ns()}.partial"
        try:
            with self.fs.open_output_stream(tmp) as f:
                for piece in pieces:
                    f.write(piece)
        except BaseException:
            self.fs.delete_file(tmp)
            raise
        self.fs.move(tmp, final)

    def read_parquet(self, *names: str) -> pa.Table:
        """The Parquet file at ``names``, opened by its literal path (no dataset discovery, no
        pattern, no partition folders)."""
        with self.fs.open_input_file(self.join(*names)) as f:
            return pq.ParquetFile(f).read()

    def listing(self) -> List[pafs.FileInfo]:
        if not self.exists():
            return []
        return self.fs.get_file_info(pafs.FileSelector(self.path, recursive=True))


def _config_source(
    config: Optional[Union[str, "os.PathLike[str]"]],
) -> Tuple[Optional[str], Optional[str]]:
    """Where the workers read the configuration: a local path, absolute (a configuration names
    other files, JSON schemas, by paths relative to itself, so it is read where it lies; on a
    cluster, a path every node mounts), or for a remote URI its text (then it may name no
    other file)."""
    if config is None:
        return None, None
    where = _Location(config)
    if where.local or isinstance(where.fs, pafs.LocalFileSystem):
        return where.path, None
    with where.fs.open_input_stream(where.path) as f:
        return None, f.read().decode("utf-8")


class _ConfigFile:
    """The configuration as a local file, for the library's functions (which take one): the
    path given, or the text written to a temporary file."""

    def __init__(self, path: Optional[str], text: Optional[str]):
        self.path: Optional[str] = path
        self.temporary = False
        if path is None and text is not None:
            fd, self.path = tempfile.mkstemp(prefix="traceaudit-", suffix=".toml")
            self.temporary = True
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)

    def close(self) -> None:
        if self.temporary and self.path is not None and os.path.exists(self.path):
            os.remove(self.path)
        self.path = None


def _prepare_output(out: _Location) -> None:
    """Make ``out`` ready for a new corpus: absent, empty, or an earlier traceaudit corpus,
    whose manifest is removed first (a corpus without one is incomplete) and then its tables,
    so no part of the earlier corpus can be read as part of the new one."""
    listing = out.listing()
    if not listing:
        out.fs.create_dir(out.path, recursive=True)
        return
    if not out.exists("manifest.json"):
        raise ValueError(
            f"{out.given} exists and is not a traceaudit corpus (no manifest.json); "
            "give an empty or new directory"
        )
    manifest = json.loads(out.read_text("manifest.json"))
    if manifest.get("engine") != "traceaudit" or "checks" not in manifest:
        raise ValueError(f"{out.given} holds a manifest.json that is not a traceaudit corpus's")
    out.fs.delete_file(out.join("manifest.json"))
    for info in out.fs.get_file_info(pafs.FileSelector(out.path)):
        if info.type == pafs.FileType.Directory:
            out.fs.delete_dir(info.path)
        else:
            out.fs.delete_file(info.path)


def _remove_partials(out: _Location) -> None:
    """Remove the temporary files of attempts that were killed before they could rename."""
    for info in out.listing():
        if info.type == pafs.FileType.File and info.base_name.endswith(".partial"):
            out.fs.delete_file(info.path)


class _PartAuditor:
    """Audits a store part in a Ray task (built there from the arguments the driver sends)."""

    def __init__(
        self,
        store: str,
        out: str,
        config_path: Optional[str],
        config_text: Optional[str],
        checks: Optional[List[str]],
        threads: int,
    ):
        self.store = _Location(store)
        self.out = _Location(out)
        self.config = _ConfigFile(config_path, config_text)
        self.checks = checks
        self.threads = threads

    def _generation_of(self, part: int):
        """The folder of the generation holding the store's part ``part``, the part's number
        there, and the conversations later generations supersede there (see
        ``schemas/store.md``, Generations)."""
        if not hasattr(self, "_manifest"):
            self._manifest = json.loads(self.store.read_text("manifest.json"))
        manifest = self._manifest
        listed = manifest.get("generations") or [
            {"number": 0, "dir": "", "parts": len(manifest["parts"])}
        ]
        first = 0
        for at, generation in enumerate(listed):
            if part < first + generation["parts"]:
                superseded = set()
                for later in listed[at + 1 :]:
                    names = [later["dir"], "superseded.jsonl"]
                    if not self.store.exists(*names):
                        continue
                    for line in self.store.read_text(*names).splitlines():
                        if line.strip():
                            entry = json.loads(line)
                            if entry["generation"] == generation["number"]:
                                superseded.add(entry["conversation_id"])
                by_part = bool(generation.get("runs_by_part"))
                return generation["dir"], part - first, superseded, by_part
            first += generation["parts"]
        raise ValueError(f"{self.store.given} has no part {part}")

    def _audit_remote(self, part: int) -> Tuple[Dict[str, Any], bytes]:
        """A part of a store on a remote filesystem: its rows read with pyarrow, audited in
        memory, the tables written back part file by part file; what it counted and its
        findings' lines."""
        import pyarrow.compute as pc

        name = f"part-{part:05d}.parquet"
        folder, local, superseded, by_part = self._generation_of(part)
        at = [folder] if folder else []
        events = pq.read_table(
            self.store.join(*at, "events", f"part-{local:05d}.parquet"),
            filesystem=self.store.fs,
        )
        if by_part:
            runs = pq.read_table(
                self.store.join(*at, "runs", f"part-{local:05d}.parquet"),
                filesystem=self.store.fs,
            )
        else:
            runs = pq.read_table(
                self.store.join(*at, "runs.parquet"),
                filesystem=self.store.fs,
                filters=[("part", "=", local)],
            )
        if superseded:
            dropped = pa.array(sorted(superseded), type=pa.string())
            events = events.filter(pc.invert(pc.is_in(events["conversation_id"], dropped)))
            runs = runs.filter(pc.invert(pc.is_in(runs["conversation_id"], dropped)))
        tables, counted = traceaudit._audit_tables(
            events, runs, self.config.path, self.checks, self.threads
        )
        # What it wrote, for the manifest's list of files (as audit_part reports it).
        counted["files"] = []
        for table, data in tables.items():
            if table == "ledger":
                continue
            sink = pa.BufferOutputStream()
            pq.write_table(data, sink, compression="zstd")
            written = sink.getvalue().to_pybytes()
            self.out.write_atomically(written, table, name)
            counted["files"].append(
                {
                    "table": table,
                    "files": [
                        {"path": f"{table}/{name}", "bytes": len(written), "rows": data.num_rows}
                    ],
                }
            )
        return counted, traceaudit.findings_jsonl(tables["findings"])

    def audit(self, part: int) -> Tuple[Dict[str, Any], bytes]:
        """Audit part ``part``; what was counted (as :func:`traceaudit.audit_part` gives it) and
        the part's lines of ``findings.jsonl``."""
        if self.store.local and self.out.local:
            audited = traceaudit._audit_part(
                self.store.path, part, self.out.path, self.config.path, self.checks, self.threads
            )
        else:
            audited = self._audit_remote(part)
        _maybe_die(part)
        return audited

    def close(self) -> None:
        self.config.close()


def _audit_one(auditor: Dict[str, Any], part: int) -> Tuple[Dict[str, Any], bytes]:
    """Audit store part ``part`` in a Ray task (``auditor``: the arguments of
    :class:`_PartAuditor`): what it counted, and its lines of ``findings.jsonl`` (the task's
    two return values). A configuration written to a temporary file is removed after."""
    worker = _PartAuditor(**auditor)
    try:
        return worker.audit(part)
    finally:
        worker.close()


def _maybe_die(part: int) -> None:
    spec = os.environ.get(_KILL_ENV)
    if not spec:
        return
    wanted, marker = spec.split(":", 1)
    if int(wanted) == part and not os.path.exists(marker):
        with open(marker, "w") as f:
            f.write(str(os.getpid()))
        os._exit(1)


def _findings_lines(lines: List[Any]) -> Iterator[bytes]:
    """The lines of ``findings.jsonl``: each part's, in part order, as its task gives them back
    (``lines``: their object refs). A part's lines are dropped from the object store once
    written, and writing goes on while later parts are still being audited."""
    import ray

    for at in range(len(lines)):
        piece = ray.get(lines[at])
        lines[at] = None
        yield piece


def _connect(address: Optional[str]) -> None:
    import ray

    if address is not None:
        ray.init(address=address, ignore_reinit_error=True)
    elif not ray.is_initialized():
        ray.init()


def _cluster_cpus() -> int:
    import ray

    return max(1, int(ray.cluster_resources().get("CPU", 1)))


def audit_store(
    store: Union[str, "os.PathLike[str]"],
    out: Union[str, "os.PathLike[str]"],
    *,
    config: Optional[Union[str, "os.PathLike[str]"]] = None,
    checks: Optional[Union[str, Sequence[str]]] = None,
    cpus_per_task: int = 1,
    address: Optional[str] = None,
) -> Dict[str, Any]:
    """Audit the store ``store`` into the corpus ``out`` on a Ray cluster.

    One Ray task per store part (no shuffle), each given ``cpus_per_task`` CPUs and as many
    threads; the driver writes ``findings.jsonl`` from the lines each task gives back, in part
    order, as the tasks finish, then ``ledger.parquet`` and ``manifest.json``, the manifest
    last, listing every table's part files with their sizes and rows (the readers take the
    corpus only whole, and only those files). Connects to ``address`` (``"auto"`` for a running cluster), else uses the Ray
    already initialised, else starts a local one. ``config`` is a ``traceaudit.toml``, read by
    the workers where it lies (on a cluster, a path every node mounts, as it may name schema
    files beside it), or given as a URI, whose text is sent to them; ``checks`` as for
    :func:`traceaudit.audit`.

    A task that is retried (a worker killed) writes the same part files again under the same
    names, each through a temporary name and a rename, so the corpus has no duplicate or partial
    rows. Returns the corpus manifest as a dict.
    """
    import ray

    started = time.monotonic()
    store_at, out_at = _Location(store), _Location(out)
    if not store_at.exists("manifest.json"):
        # As the command line says it.
        raise FileNotFoundError(
            f"{store_at.given} is not a complete traceaudit store (no manifest.json)"
        )
    manifest_text = store_at.read_text("manifest.json")
    _connect(address)
    parts = len(json.loads(manifest_text)["parts"])
    config_path, config_text = _config_source(config)
    check_list = traceaudit._checks(checks)
    _prepare_output(out_at)
    cpus_per_task = max(1, int(cpus_per_task))
    # One Ray task a part. Tasks run in Ray's pooled worker processes, which stay up between
    # calls: a Ray Data actor pool started two new processes (importing pyarrow and the native
    # module) on every call, and its executor added about a second more on a 4 GB store. A task
    # whose worker dies is retried (`max_retries`), writing the same part files again.
    # Its two return values are separate objects: the counts, and the findings' lines, which the
    # driver writes and drops one part at a time (the findings parts are not read back).
    audit_one = ray.remote(_audit_one).options(
        num_cpus=cpus_per_task, max_retries=3, num_returns=2
    )
    auditor = {
        "store": store_at.for_workers,
        "out": out_at.for_workers,
        "config_path": config_path,
        "config_text": config_text,
        "checks": check_list,
        "threads": cpus_per_task,
    }
    # In part order; `ray.get` raises if a part failed for good (and the unfinished
    # findings.jsonl is removed).
    counts, lines = [], []
    for p in range(parts):
        count, line = audit_one.remote(auditor, p)
        counts.append(count)
        lines.append(line)
    out_at.write_pieces_atomically(_findings_lines(lines), "findings.jsonl")
    counted = ray.get(counts)
    _remove_partials(out_at)
    local_config = _ConfigFile(config_path, config_text)
    try:
        seconds = time.monotonic() - started
        if out_at.local:
            return traceaudit.finish_corpus(
                out_at.path,
                store_at.given,
                manifest_text,
                counted,
                seconds,
                config=local_config.path,
                checks=check_list,
                threads=cpus_per_task,
            )
        with tempfile.TemporaryDirectory(prefix="traceaudit-corpus-") as tmp:
            manifest = traceaudit.finish_corpus(
                tmp,
                store_at.given,
                manifest_text,
                counted,
                seconds,
                config=local_config.path,
                checks=check_list,
                threads=cpus_per_task,
            )
            for name in _FINISHED_FILES:
                with open(os.path.join(tmp, name), "rb") as f:
                    out_at.write_atomically(f.read(), name)
            return manifest
    finally:
        local_config.close()


def _local_path(where: Union[str, "os.PathLike[str]"]) -> str:
    """A local path for the ingest's inputs and store (the reader reads local files: on a
    cluster, a filesystem every node mounts); ``file://`` URIs are accepted."""
    text = os.fspath(where)
    if "://" not in text:
        return os.path.abspath(text)
    fs, path = pafs.FileSystem.from_uri(text)
    if not isinstance(fs, pafs.LocalFileSystem):
        raise ValueError(
            f"{text}: an ingest reads and writes local (or mounted) paths; copy the inputs to "
            "a filesystem every node mounts, or ingest with traceaudit.ingest"
        )
    return path


# The object-storage URLs the engine reads itself (listing a prefix, fetching each object).
_OBJECT_SCHEMES = ("s3://", "s3a://", "gs://", "gcs://", "az://", "adl://", "azure://", "abfs://", "abfss://")


def _input_path(where: Union[str, "os.PathLike[str]"]) -> str:
    """An input as the engine takes it: an object-storage URL unchanged (each worker fetches
    its objects with the provider's credentials from its own environment), else a local path."""
    text = os.fspath(where)
    if text.lower().startswith(_OBJECT_SCHEMES):
        return text
    return _local_path(text)


def _keys_of(row: Dict[str, Any], format: Optional[str]) -> Dict[str, Any]:
    return {
        "index": row["index"],
        "keys": traceaudit._native.join_keys(row["path"], format),
    }


def _groups(count: int, keys: Dict[int, List[str]]) -> List[List[int]]:
    """Input numbers grouped so that files sharing a join key are in one group (union-find),
    each group in input order, groups by their first input."""
    parent = list(range(count))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner: Dict[str, int] = {}
    for i in range(count):
        for key in keys.get(i, []):
            if key in owner:
                a, b = find(owner[key]), find(i)
                if a != b:
                    parent[max(a, b)] = min(a, b)
            else:
                owner[key] = i
    groups: Dict[int, List[int]] = {}
    for i in range(count):
        groups.setdefault(find(i), []).append(i)
    return [groups[r] for r in sorted(groups)]


def _packed(groups: List[List[int]], sizes: List[int], shard_bytes: int) -> List[List[int]]:
    """Groups packed in input order into shards of about ``shard_bytes`` of input (a group is
    never split): every shard holds a file per store part, and each part's merge reads one from
    every shard, so for a large night shards should be few and large. With ``shard_bytes`` 0,
    each group is a shard of its own."""
    if shard_bytes <= 0:
        return [sorted(g) for g in groups]
    shards: List[List[int]] = []
    size = 0
    for group in groups:
        bytes_ = sum(sizes[i] for i in group)
        if shards and size + bytes_ <= shard_bytes:
            shards[-1].extend(group)
            size += bytes_
        else:
            shards.append(list(group))
            size = bytes_
    return [sorted(s) for s in shards]


class _ShardIngester:
    """Ingests a group of input files into a shard store on a Ray worker."""

    def __init__(self, plan: str, scratch: str, format: Optional[str], threads: int):
        self.plan, self.scratch, self.format, self.threads = plan, scratch, format, threads

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        shards, dirs = [], []
        for shard, files in zip(batch["shard"], batch["files"]):
            out = os.path.join(self.scratch, f"shard-{int(shard):05d}")
            traceaudit._native.ingest_shard(
                self.plan, [int(f) for f in files], out, self.format, self.threads
            )
            shards.append(int(shard))
            dirs.append(out)
        return {"shard": shards, "dir": dirs}


def _duplicates_in(row: Dict[str, Any], plan: str, shards: List[Any], buckets: int) -> Dict[str, Any]:
    """The duplicate runs of one bucket of run ids, per shard (JSON), on a Ray worker."""
    bucket = int(row["bucket"])
    listed = traceaudit._native.shard_duplicates(
        plan, [(d, list(g)) for d, g in shards], bucket, buckets
    )
    return {"bucket": bucket, "dropped": json.dumps(listed)}


class _PartMerger:
    """Merges store parts from the shard stores on a Ray worker."""

    def __init__(self, shards: List[str], dropped: List[List[str]], out: str):
        self.shards, self.dropped, self.out = shards, dropped, out

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, Any]:
        parts = [int(p) for p in batch["part"]]
        for part in parts:
            traceaudit._native.merge_part(self.shards, self.dropped, part, self.out)
        return {"part": parts}


def ingest(
    inputs: Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]],
    store: Union[str, "os.PathLike[str]"],
    *,
    format: Optional[str] = None,
    cpus_per_task: int = 1,
    part_bytes: Optional[int] = None,
    shard_bytes: int = 0,
    address: Optional[str] = None,
    append: bool = False,
    scratch: Optional[Union[str, "os.PathLike[str]"]] = None,
) -> Dict[str, Any]:
    """Ingest ``inputs`` (files and folders) into the store ``store`` on a Ray cluster.

    One task per input file reads it into a shard store with the whole store's parts; the files
    whose conversations can span files (OpenTelemetry traces split over exports) are first
    grouped by the keys that join them (one task per file lists a file's trace ids), and each
    group is read by one task, so every trace is joined as the command line joins it. With
    ``shard_bytes``, files (whole groups) are packed in input order into shards of about that
    much input instead: each store part's merge reads one file from every shard, so a night of
    many files wants fewer, larger shards. Tasks then survey the duplicate runs (one per
    bucket of run ids), and one task per store part gathers that part's events and runs from
    every shard (a conversation's part depends on its id only, so each part holds whole
    conversations) with what it counted; the driver, which reads no run rows, moves the parts
    in and writes the quarantine and the manifest into ``store`` (written atomically). The store holds the conversations, runs, counts and quarantine records of the
    command line's ingest of the same inputs. Returns the store's manifest as a dict.

    Inputs and the store are local paths (on a cluster: a filesystem every node mounts) or
    ``file://`` URIs. ``part_bytes`` as for :func:`traceaudit.ingest`.

    The store can also be a prefix in object storage (``s3://stores/nightly/``, ending in
    ``/``), written as ``traceaudit ingest --out`` writes one: the shards and the merged store
    are written under ``scratch`` (a local folder; by default the system's temporary folder,
    which serves a one-machine cluster: on a larger one give a folder every node mounts), and
    the store is uploaded with its manifest last, under the prefix's lock object, to an empty
    prefix only. With ``append=True`` the night is ingested on the cluster into ``scratch`` and
    added to the store in the bucket as ``traceaudit ingest --append`` adds one: the new
    generation's files uploaded, then the manifest.

    With ``append=True``, as ``traceaudit ingest --append``: the inputs the store holds already
    are left out, the others are ingested on the cluster as above into a store of their own
    beside ``store``, and the driver adds that store to ``store`` as a new generation (a part
    at a time: runs the store holds are left out as duplicates, conversations it holds that
    gain runs are written whole into the generation). The store is created when absent. The
    manifest returned then has an ``appended`` entry, as :func:`traceaudit.ingest` gives.
    """
    started = time.monotonic()
    _connect(address)
    paths = [_input_path(p) for p in traceaudit._paths(inputs)]
    remote = _is_object_url(store)
    out = os.fspath(store) if remote else _local_path(store)
    if remote:
        where = _local_path(scratch) if scratch is not None else tempfile.gettempdir()

        def scratch_for(what: str) -> str:
            return os.path.join(where, f".traceaudit-{what}-{os.getpid()}-{time.time_ns()}")

    else:

        def scratch_for(what: str) -> str:
            return _beside(out, what)

    # A store to add to (a bucket's prefix is checked by the append itself): the night is
    # ingested on its own, then added as a generation.
    if append and (remote or os.path.exists(os.path.join(out, "manifest.json"))):
        fresh, skipped = traceaudit._native.fresh_inputs(paths, out)
        if not fresh:
            # Every input is held: nothing is written; the store's manifest is the answer.
            if remote:
                return traceaudit.ingest(
                    paths, out, format=format, part_bytes=part_bytes, append=True
                )
            with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
                return _appended(json.load(f), None, skipped, created=False)
        night = scratch_for("night")
        try:
            _ingest_on_cluster(
                fresh,
                night,
                scratch_for("shards"),
                format,
                cpus_per_task,
                part_bytes,
                shard_bytes,
                started,
            )
            return json.loads(traceaudit._native.append_store(night, out, skipped))
        finally:
            import shutil

            shutil.rmtree(night, ignore_errors=True)
    manifest = _ingest_on_cluster(
        paths, out, scratch_for("shards"), format, cpus_per_task, part_bytes, shard_bytes, started
    )
    if append:
        return _appended(manifest, manifest["generations"][-1], 0, created=True)
    return manifest


def _appended(
    manifest: Dict[str, Any], generation: Optional[Dict[str, Any]], skipped: int, *, created: bool
) -> Dict[str, Any]:
    """The store's manifest with the ``appended`` entry :func:`traceaudit.ingest` gives."""
    manifest["appended"] = {
        "generation": generation,
        "skipped_as_ingested": skipped,
        "created": created,
        # Only an append to a store in a bucket fetches parts.
        "parts_fetched": None,
    }
    return manifest


def _beside(out: str, what: str) -> str:
    """A new scratch folder's path beside ``out`` (on its filesystem, so files move in)."""
    parent, base = os.path.split(out.rstrip("/"))
    return os.path.join(parent, f".{base}.{what}-{os.getpid()}-{time.time_ns()}")


def _is_object_url(where: Union[str, "os.PathLike[str]"]) -> bool:
    return os.fspath(where).lower().startswith(_OBJECT_SCHEMES)


def _shown(where: Union[str, "os.PathLike[str]"]) -> str:
    """A URL as it may be printed: without a ``user:password@`` part or a query."""
    text = os.fspath(where).split("?", 1)[0].split("#", 1)[0]
    scheme, sep, rest = text.partition("://")
    host, slash, path = rest.partition("/")
    return f"{scheme}{sep}{host.rpartition('@')[2]}{slash}{path}" if sep else text


def _ingest_on_cluster(
    paths: List[str],
    out: str,
    scratch: str,
    format: Optional[str],
    cpus_per_task: int,
    part_bytes: Optional[int],
    shard_bytes: int,
    started: float,
) -> Dict[str, Any]:
    """The distributed ingest of ``paths`` into a new store at ``out`` (a local path or an
    object-storage prefix), its shards written under the new folder ``scratch``; its
    manifest."""
    import ray

    plan_text = traceaudit._native.plan_ingest(paths, part_bytes)
    plan = json.loads(plan_text)
    count = len(plan["inputs"])
    cpus_per_task = max(1, int(cpus_per_task))
    files = [{"index": i, "path": f["path"]} for i, f in enumerate(plan["inputs"])]
    keyed = (
        ray.data.from_items(files, override_num_blocks=count)
        .map(_keys_of, fn_kwargs={"format": format})
        .take_all()
    )
    keys = {int(r["index"]): list(r["keys"]) for r in keyed}
    sizes = [int(f["size"]) for f in plan["inputs"]]
    groups = _packed(_groups(count, keys), sizes, int(shard_bytes))
    os.makedirs(scratch)
    try:
        items = [{"shard": s, "files": g} for s, g in enumerate(groups)]
        actors = max(1, min(len(groups), _cluster_cpus() // cpus_per_task))
        done = (
            ray.data.from_items(items, override_num_blocks=len(items))
            .map_batches(
                _ShardIngester,
                fn_constructor_kwargs={
                    "plan": plan_text,
                    "scratch": scratch,
                    "format": format,
                    "threads": cpus_per_task,
                },
                batch_size=1,
                num_cpus=cpus_per_task,
                concurrency=actors,
            )
            .take_all()
        )
        dirs = {int(r["shard"]): r["dir"] for r in done}
        shards = [(dirs[s], g) for s, g in enumerate(groups)]
        # The duplicates: one task per bucket of run ids surveys every shard's run ids, so the
        # driver holds the duplicates only.
        parts = int(plan["parts"])
        buckets = max(1, min(parts, _cluster_cpus()))
        found = (
            ray.data.from_items([{"bucket": b} for b in range(buckets)], override_num_blocks=buckets)
            .map(
                _duplicates_in,
                fn_kwargs={"plan": plan_text, "shards": shards, "buckets": buckets},
            )
            .take_all()
        )
        dropped: List[List[str]] = [[] for _ in shards]
        for row in sorted(found, key=lambda r: int(r["bucket"])):
            for s, ids in enumerate(json.loads(row["dropped"])):
                dropped[s].extend(ids)
        dropped = [sorted(set(d)) for d in dropped]
        # The repartition: one task per store part gathers that part's rows from every shard.
        merged = os.path.join(scratch, "merged")
        (
            ray.data.from_items([{"part": p} for p in range(parts)], override_num_blocks=parts)
            .map_batches(
                _PartMerger,
                fn_constructor_kwargs={
                    "shards": [d for d, _ in shards],
                    "dropped": dropped,
                    "out": merged,
                },
                batch_size=1,
                num_cpus=1,
                concurrency=max(1, min(parts, _cluster_cpus())),
            )
            .take_all()
        )
        text = traceaudit._native.merge_shards(
            plan_text, shards, out, time.monotonic() - started, None, merged
        )
        return json.loads(text)
    finally:
        import shutil

        shutil.rmtree(scratch, ignore_errors=True)


def _summary_line(manifest: Dict[str, Any], out: str) -> str:
    return (
        f"{manifest['conversations']} conversations, {manifest['runs']} runs, "
        f"{manifest['findings']} findings -> {out} ({manifest['seconds']:.2f}s)"
    )


def main(argv: Optional[Sequence[str]] = None) -> int:
    """``python -m traceaudit.ray``: the nightly job's command line."""
    parser = argparse.ArgumentParser(
        prog="python -m traceaudit.ray",
        description="traceaudit over a Ray cluster: one task per store part (audit) or input "
        "file (ingest).",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    a = sub.add_parser("audit", help="audit a store into a corpus")
    a.add_argument("store", help="a store written by ingest (a path or a pyarrow URI)")
    a.add_argument("--out", "-o", required=True, help="the corpus directory to write")
    a.add_argument("--config", help="configuration file (TOML)")
    a.add_argument("--checks", help="run only these checks (comma-separated names)")
    a.add_argument("--cpus-per-task", type=int, default=1)
    a.add_argument("--address", help='Ray cluster address ("auto" for a running cluster)')
    i = sub.add_parser("ingest", help="read recorded runs into a store")
    i.add_argument("inputs", nargs="+", help="input files or directories (paths or URIs)")
    i.add_argument(
        "--out", "-o", required=True, help="the store directory (or bucket prefix) to write"
    )
    i.add_argument("--format", help="read every input as this format")
    i.add_argument(
        "--append",
        action="store_true",
        help="add the inputs to the store as a new generation (created when absent)",
    )
    i.add_argument(
        "--scratch",
        help="with a store in a bucket: the local folder the shards are written under "
        "(every node must mount it; default: the system's temporary folder)",
    )
    i.add_argument("--address", help='Ray cluster address ("auto" for a running cluster)')
    args = parser.parse_args(argv)
    try:
        if args.command == "audit":
            manifest = audit_store(
                args.store,
                args.out,
                config=args.config,
                checks=args.checks,
                cpus_per_task=args.cpus_per_task,
                address=args.address,
            )
            print(_summary_line(manifest, args.out))
        else:
            manifest = ingest(
                args.inputs,
                args.out,
                format=args.format,
                address=args.address,
                append=args.append,
                scratch=args.scratch,
            )
            c = manifest["counts"]
            print(
                f"{c['conversations']} conversations, {c['runs']} runs; records "
                f"{c['records_read']} read = {c['records_stored']} stored + "
                f"{c['records_quarantined']} quarantined -> {_shown(args.out)}"
            )
    except (ValueError, OSError) as e:
        print(f"traceaudit {args.command}: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    # Run from the importable module, so the workers unpickle its classes by reference.
    from traceaudit.ray import main as _main

    sys.exit(_main())
