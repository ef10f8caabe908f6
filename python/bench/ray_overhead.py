"""Ray's overhead on the audit (a benchmark, not a test): run by hand, prints a table.

    python python/bench/ray_overhead.py --size 512MB [--part-mb 128] [--cli PATH] [--gen PATH]

1. Per-part overhead: Ray tasks shaped like traceaudit.ray.audit_store's (one ``ray.remote``
   task of 1 CPU per part) that do nothing, at 8, 32 and 128 parts: the fixed cost and the cost
   per part.
2. The audit of a generated store (tau2 and agentfootprint from traceaudit-gen, --size each,
   ingested by the command line; with --part-mb by traceaudit.ingest at that part size) with Ray
   at 2 CPUs (2 tasks of 1 CPU) against the command line at 2 threads, the cluster started
   beforehand (not counted).

Use a release build of both (cargo build --release; maturin build --release) for figures that
mean something.
"""

import argparse
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tempfile
import time

import ray

import traceaudit.ray as tray


def _nothing(part):
    return {"part": part}


def pipeline_seconds(parts: int) -> float:
    started = time.monotonic()
    task = ray.remote(_nothing).options(num_cpus=1)
    rows = ray.get([task.remote(p) for p in range(parts)])
    assert len(rows) == parts
    return time.monotonic() - started


def run(cmd):
    started = time.monotonic()
    subprocess.run([str(c) for c in cmd], check=True, stdout=subprocess.DEVNULL)
    return time.monotonic() - started


def main() -> int:
    here = pathlib.Path(__file__).resolve().parents[2]
    target = pathlib.Path(os.environ.get("CARGO_TARGET_DIR", here / "target"))
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="200MB", help="generated input per format (traceaudit-gen --size)")
    ap.add_argument("--cli", default=str(target / "release" / "traceaudit"))
    ap.add_argument("--gen", default=str(target / "release" / "traceaudit-gen"))
    ap.add_argument("--work", default=None, help="where the generated store is kept")
    ap.add_argument("--part-mb", type=int, default=None, help="input MB per store part")
    ap.add_argument("--repeat", type=int, default=2)
    args = ap.parse_args()
    work = pathlib.Path(args.work or tempfile.mkdtemp(prefix="traceaudit-bench-"))
    store = work / "store"
    if not (store / "manifest.json").exists():
        inputs = []
        for fmt in ("tau2", "agentfootprint"):
            out = work / f"gen-{fmt}"
            if not out.exists():
                run([args.gen, "--format", fmt, "--size", args.size, "--out", out])
            inputs.append(out / "input")
        if args.part_mb is None:
            t = run([args.cli, "ingest", *inputs, "--out", store, "--quiet", "--threads", "2"])
            print(f"ingest (command line, 2 threads): {t:.1f} s")
        else:
            import traceaudit

            traceaudit.ingest(inputs, store, threads=2, part_bytes=args.part_mb << 20)
    manifest = json.loads((store / "manifest.json").read_text())
    parts = len(manifest["parts"])
    size = manifest["counts"]["bytes"] / 1e6
    print(f"store: {size:.0f} MB of input, {parts} parts, {manifest['counts']['runs']} runs")

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    started = time.monotonic()
    ray.init(num_cpus=2, include_dashboard=False, _node_ip_address="127.0.0.1",
             log_to_driver=False, configure_logging=False)
    print(f"cluster start: {time.monotonic() - started:.1f} s (not counted below)")
    pipeline_seconds(2)  # warm the workers
    empty = {n: min(pipeline_seconds(n) for _ in range(args.repeat)) for n in (8, 32, 128)}
    per_part = (empty[128] - empty[8]) / 120
    print(f"empty pipeline: " + ", ".join(f"{n} parts {s:.2f} s" for n, s in empty.items()))
    print(f"  fixed {empty[8] - 8 * per_part:.2f} s + {per_part * 1000:.0f} ms per part")

    cli_s, ray_s = [], []
    for i in range(args.repeat):
        out = work / "cli-corpus"
        cli_s.append(run([args.cli, "audit", store, "--out", out, "--quiet", "--threads", "2"]))
        out = work / "ray-corpus"
        t = time.monotonic()
        tray.audit_store(store, out, cpus_per_task=1)
        ray_s.append(time.monotonic() - t)
    c, r = min(cli_s), min(ray_s)
    print(f"audit, command line 2 threads: {c:.1f} s ({size / c:.0f} MB/s of input)")
    print(f"audit, Ray 2 x 1 CPU:           {r:.1f} s ({size / r:.0f} MB/s of input), "
          f"{(r - c) / parts * 1000:.0f} ms per part over the command line")
    ray.shutdown()
    if args.work is None:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
