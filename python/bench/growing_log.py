"""A growing log on real recordings (a check, not a test): each file shipped cut at 25%, 50%
and 75% of its lines one night and whole the next, appended to a store, audited with
`--generation last`; prints whether the latest dispositions and the counts equal one ingest and
audit of the whole files.

    python python/bench/growing_log.py BIN FILE...
"""
import json
import pathlib
import shutil
import subprocess
import sys
import tempfile

B = sys.argv[1]
files = [pathlib.Path(p) for p in sys.argv[2:]]
root = pathlib.Path(tempfile.mkdtemp(prefix="growing-log-"))
def run(*a):
    r = subprocess.run([B, *map(str, a)], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        raise SystemExit(f"{a}: {r.returncode} {r.stderr}")
    return r.stdout
def dispositions(corpus):
    import pyarrow.parquet as pq
    t = pq.read_table(corpus / "dispositions.parquet").to_pylist()
    return {(r["run_id"], r["check_name"]): r["disposition"] for r in t}
for frac in (0.25, 0.5, 0.75):
    w = root / str(frac)
    half, whole = w / "n1", w / "n2"
    half.mkdir(parents=True); whole.mkdir(parents=True)
    for f in files:
        lines = f.read_text().splitlines(keepends=True)
        (half / f.name).write_text("".join(lines[: int(len(lines) * frac)]))
        shutil.copy(f, whole / f.name)
    run("ingest", whole, "--out", w / "once", "-q")
    run("audit", w / "once", "--out", w / "once-c", "-q")
    want = dispositions(w / "once-c")
    run("ingest", half, "--out", w / "store", "--append", "-q")
    run("audit", w / "store", "--generation", "last", "--out", w / "c1", "-q")
    out = run("ingest", whole, "--out", w / "store", "--append")
    run("audit", w / "store", "--generation", "last", "--out", w / "c2", "-q")
    got = dispositions(w / "c1"); got.update(dispositions(w / "c2"))
    m1 = json.loads((w / "store" / "manifest.json").read_text())
    m0 = json.loads((w / "once" / "manifest.json").read_text())
    gen = m1["generations"][-1]
    same_counts = all(m1["counts"][k] == m0["counts"][k] for k in ("runs", "events", "landings", "conversations"))
    print(f"cut at {frac:.0%}: runs {m0['counts']['runs']}, replaced {gen.get('replaced_runs', 0)}, "
          f"counts equal {same_counts}, latest dispositions equal {got == want} ({len(want)} rows)")
