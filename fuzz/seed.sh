#!/usr/bin/env bash
# Fill corpus/<target>/ with seeds made from ../testdata: the files each target reads, shaped as
# its input (a selector byte in front where the target takes one). Seeds already there are kept
# (they are named by content), so a corpus grown by earlier runs only gains the seeds.
set -euo pipefail
cd "$(dirname "$0")"
exec python3 - "$@" <<'PY'
import hashlib, io, json, pathlib, zipfile

root = pathlib.Path("../testdata")
corpus = pathlib.Path("corpus")
added = {}

def put(target, data):
    d = corpus / target
    d.mkdir(parents=True, exist_ok=True)
    p = d / ("seed-" + hashlib.sha1(data).hexdigest())
    if not p.exists():
        p.write_bytes(data)
        added[target] = added.get(target, 0) + 1

def files(*patterns):
    out = []
    for pat in patterns:
        out += sorted(p for p in root.glob(pat) if p.is_file())
    return out

every = sorted(p for p in root.rglob("*") if p.is_file())
json_docs = files("**/*.json", "**/*.traj")
ndjson = files("**/*.ndjson", "otel/**/*.jsonl")

for p in every:
    put("detect", p.read_bytes())

# read_json_formats: the selector byte picks the reader (the target's FORMATS order).
selectors = [
    (0, files("agentfootprint/ndjson/*.ndjson", "bad/*.ndjson")),
    (1, files("agentfootprint/recordings/*.json")),
    (2, files("tau-bench/*.json")),
    (3, files("tau2/**/*.json")),
    (4, files("swe-agent/**/*.traj")),
    (5, files("inspect-ai/*.json")),
]
for sel, paths in selectors:
    for p in paths:
        put("read_json_formats", bytes([sel]) + p.read_bytes())

for p in files("otel/**/*.json", "otel/**/*.jsonl"):
    put("read_otel", p.read_bytes())

for p in files("cassettes/**/*.yaml"):
    put("read_vcr", p.read_bytes())

# read_inspect_eval: 0 + the archive as it stands; 1 + its members, NUL-separated, each its name,
# a newline and its content.
for p in files("inspect-ai/*.eval"):
    raw = p.read_bytes()
    put("read_inspect_eval", b"\x00" + raw)
    with zipfile.ZipFile(io.BytesIO(raw)) as z:
        members = [n.encode() + b"\n" + z.read(n) for n in z.namelist()]
    put("read_inspect_eval", b"\x01" + b"\x00".join(members))

for p in json_docs:
    put("json_scan", p.read_bytes())

# js_fingerprint: whole documents and single NDJSON lines.
for p in json_docs:
    put("js_fingerprint", p.read_bytes())
for p in ndjson:
    for line in p.read_bytes().splitlines()[:20]:
        if line.strip():
            put("js_fingerprint", line)

# evidence: a settings byte, an answer, then messages (role letter first), NUL-separated. Tool
# results are pieces of the JSON documents and NDJSON lines.
answers = [
    b"Order A-1042 totals $1,250.00 and 0xEF0101 ships 41,200 units from DEPOT-7",
    b"The flight HAT170 leaves at 2024-05-15 10:00; reservation 4WQ150, total 1,234.50 USD",
    b"ab12 and 9007199254740993, sku ef0101, 3 of them, 12.50%",
]
pieces = [p.read_bytes()[:6000] for p in json_docs[:24]]
for p in ndjson[:8]:
    pieces += [l for l in p.read_bytes().splitlines()[:4] if l.strip()]
for i, piece in enumerate(pieces):
    answer = answers[i % len(answers)]
    msgs = [b"sYou serve orders; account 0xAB12", b"uWhere is order A-1042?", b"t" + piece,
            b"aLet me check.", b"uAnd the total?", b"t" + pieces[(i + 1) % len(pieces)]]
    put("evidence", bytes([i % 32]) + answer + b"\x00" + b"\x00".join(msgs))

# config: the bundled configuration and a few variants of it.
for p in files("traceaudit.toml", "**/traceaudit.toml"):
    text = p.read_bytes()
    put("config", text)
    put("config", text.replace(b'schema = "schemas/storage_report.json"', b'schema = "storage_report.json"'))
put("config", b'[evidence]\nmin_digits = 2\nshapes = [{ name = "t", pattern = "tkt-[0-9]+" }]\n')
put("config", b'[[schemas]]\nagent = "a"\nschema_json = \'{"type":"object","required":["x"]}\'\nretries = 1\n')

# read_store: a selector byte (0 the events part, 1 its runs file, 2 manifest.json) and the file
# of a store ingested from testdata by the traceaudit binary: TRACEAUDIT_CLI, or the debug build
# in the main target directory. Without a binary these seeds are left out (the target then
# starts from scratch).
import os, shutil, subprocess, tempfile
candidates = [os.environ.get("TRACEAUDIT_CLI", "")]
for target_dir in [os.environ.get("MAIN_TARGET_DIR", ""), "../target",
                   os.path.expanduser("~/.cache/traceaudit-target")]:
    if target_dir:
        candidates += [os.path.join(target_dir, "debug", "traceaudit"),
                       os.path.join(target_dir, "release", "traceaudit")]
cli = next((c for c in candidates if c and os.access(c, os.X_OK)), None)
if cli:
    tmp = tempfile.mkdtemp()
    try:
        out = os.path.join(tmp, "store")
        subprocess.run([cli, "ingest", str(root / "agentfootprint/ndjson"), "--quiet", "--out", out],
                       check=True, stdout=subprocess.DEVNULL)
        for sel, name in enumerate(["events/part-00000.parquet", "runs/part-00000.parquet", "manifest.json"]):
            put("read_store", bytes([sel]) + pathlib.Path(out, name).read_bytes())
    finally:
        shutil.rmtree(tmp)
else:
    print("read_store: no traceaudit binary found (set TRACEAUDIT_CLI); its seeds are left out")

for t in sorted(added):
    print(f"seeded {added[t]:4d} new inputs into corpus/{t}")
PY
