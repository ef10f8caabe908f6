"""The distributed ingest driver's memory (a benchmark, not a test): run by hand, prints a line.

    python python/bench/merge_memory.py --size 64MB --part-kb 1024 [--format F] [--gen PATH] [--keep DIR]

A generated corpus (tau2 or agentfootprint) (traceaudit-gen, --size, files of --file-mb) is planned into parts of
--part-kb of input, each file ingested into a shard store of its own (traceaudit's
``ingest_shard``), every part merged from the shards (``merge_part``, what the Ray tasks do),
and then, in a fresh process whose peak RSS is reported, what the Ray driver does last:
``merge_shards`` over the merged parts (it reads their tallies, not their rows; the survey of
duplicates is run before, a bucket of run ids at a time, as the Ray tasks run it). Also
reported: the shards' runs tables decoded whole in memory (the rows a driver holding every run
would hold).
"""

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile

import pyarrow.parquet as pq

import traceaudit


def _status_kb(field: str) -> int:
    for line in pathlib.Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise RuntimeError(f"no {field} in /proc/self/status")


def _driver(work: pathlib.Path) -> None:
    """The measured step: the driver's last call, in this process."""
    plan_text = (work / "plan.json").read_text()
    shards = json.loads((work / "shards.json").read_text())
    shards = [(d, g) for d, g in shards]
    # The peak resident set is reset (Linux: clear_refs 5), so what was mapped before the
    # call (Python, pyarrow, the module) is the base the merge's peak is read against.
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")
    before_kb = _status_kb("VmRSS")
    traceaudit._native.merge_shards(plan_text, shards, str(work / "store"), 0.0, None, str(work / "merged"))
    peak_kb = _status_kb("VmHWM")
    print(json.dumps({"peak_mb": peak_kb / 1024, "before_mb": before_kb / 1024}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", default="64MB")
    parser.add_argument("--format", default="tau2", choices=["tau2", "agentfootprint"])
    parser.add_argument("--file-mb", type=int, default=4)
    parser.add_argument("--part-kb", type=int, default=1024)
    parser.add_argument("--gen", default=os.environ.get("TRACEAUDIT_GEN", "target/release/traceaudit-gen"))
    parser.add_argument("--keep", help="work in this folder (kept) instead of a temporary one")
    parser.add_argument("--input", help="a folder of recordings to use instead of generating")
    parser.add_argument("--driver", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.driver:
        _driver(pathlib.Path(args.driver))
        return
    work = pathlib.Path(args.keep or tempfile.mkdtemp(prefix="merge-memory-"))
    gen = work / "gen"
    if args.input:
        gen = pathlib.Path(args.input).parent
    elif not (gen / "input").is_dir():
        subprocess.run(
            [args.gen, "--format", args.format, "--size", args.size, "--shard-size",
             f"{args.file_mb}MB", "--out", str(gen)],
            check=True, capture_output=True,
        )
    files = sorted(str(p) for p in (pathlib.Path(args.input) if args.input else gen / "input").iterdir())
    plan_text = traceaudit._native.plan_ingest(files, args.part_kb * 1024)
    plan = json.loads(plan_text)
    shards = []
    for i in range(len(plan["inputs"])):
        out = work / f"shard-{i:05d}"
        if not out.is_dir():
            traceaudit._native.ingest_shard(plan_text, [i], str(out), None, 2)
        shards.append((str(out), [i]))
    buckets = 4
    dropped = [[] for _ in shards]
    for bucket in range(buckets):
        for s, ids in enumerate(traceaudit._native.shard_duplicates(plan_text, shards, bucket, buckets)):
            dropped[s].extend(ids)
    dropped = [sorted(d) for d in dropped]
    merged = work / "merged"
    for part in range(int(plan["parts"])):
        traceaudit._native.merge_part([d for d, _ in shards], dropped, part, str(merged))
    (work / "plan.json").write_text(plan_text)
    (work / "shards.json").write_text(json.dumps(shards))
    import shutil

    shutil.rmtree(work / "store", ignore_errors=True)
    done = subprocess.run(
        [sys.executable, __file__, "--driver", str(work)], check=True, capture_output=True, text=True
    )
    measured = json.loads(done.stdout.strip().splitlines()[-1])
    peak, before = measured["peak_mb"], measured["before_mb"]
    runs_files = [f for d, _ in shards for f in sorted((pathlib.Path(d) / "runs").glob("part-*.parquet"))]
    decoded = sum(pq.read_table(f).nbytes for f in runs_files)
    runs = sum(pq.read_metadata(f).num_rows for f in runs_files)
    print(
        f"{len(files)} files, {plan['parts']} parts, {runs} runs: the runs decoded "
        f"{decoded / 2**20:.1f} MB; the driver's merge peaked at {peak:.1f} MB RSS "
        f"({peak - before:+.1f} MB over the {before:.1f} MB it had before)"
    )


if __name__ == "__main__":
    main()
