#!/usr/bin/env python3
"""Damage one file of a corpus at a time and run a report on it, as a notebook or a bad copy
might leave it: the report must exit 0, 1 or 2, never panic, and an exit 2 must name the file.

Polars reads the corpus tables, and an instrumented Polars build is most of a fuzz build, so the
corpus and store readers of the reports are exercised here, from outside, instead of by a
libFuzzer target.

    fuzz/mutate_outputs.py BIN CORPUS [SEED [RUNS]]

BIN is a release traceaudit, CORPUS one `traceaudit audit` wrote (its store inside it). Failing
cases are copied to $TMPDIR/mutate-outputs/bad-SEED-N.
"""
import collections
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile

FILES = ['dispositions.parquet', 'findings.parquet', 'agreement.parquet', 'attempts.parquet',
         'ledger.parquet', 'manifest.json', 'store/runs.parquet',
         'store/events/part-00000.parquet', 'store/manifest.json']
COMMANDS = [['report', '--format', 'json'], ['report', '--format', 'html'],
            ['report', '--by', 'tool'], ['report', '--by', 'day'], ['explain'], ['diff'],
            ['trend']]


def damage(rng, data):
    kind = rng.choice(['flip', 'flip', 'cut', 'bytes', 'zero'])
    if kind == 'flip':
        for _ in range(rng.randint(1, 8)):
            j = rng.randrange(len(data))
            data[j] ^= 1 << rng.randrange(8)
    elif kind == 'cut':
        del data[rng.randrange(len(data)):]
    elif kind == 'bytes':
        j = rng.randrange(len(data))
        data[j:j + 4] = bytes(rng.randrange(256) for _ in range(4))
    else:
        j = rng.randrange(len(data))
        k = rng.randint(1, 64)
        data[j:j + k] = bytes(k)
    return kind


def main():
    bin_, base = sys.argv[1], sys.argv[2]
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 1
    runs = int(sys.argv[4]) if len(sys.argv) > 4 else 100
    run_id = json.loads(open(os.path.join(base, 'findings.jsonl')).readline())['run_id']
    work = os.path.join(tempfile.gettempdir(), 'mutate-outputs')
    os.makedirs(work, exist_ok=True)
    rng = random.Random(seed)
    outcomes = collections.Counter()
    bad = []
    for i in range(runs):
        case = os.path.join(work, 'case')
        shutil.rmtree(case, ignore_errors=True)
        shutil.copytree(base, case)
        name = rng.choice(FILES)
        path = os.path.join(case, name)
        data = bytearray(open(path, 'rb').read())
        kind = damage(rng, data)
        open(path, 'wb').write(data)
        command = rng.choice(COMMANDS)
        if command[0] == 'diff':
            args = [bin_, 'diff', base, case]
        elif command[0] == 'trend':
            nights = os.path.join(work, 'nights')
            shutil.rmtree(nights, ignore_errors=True)
            os.makedirs(nights)
            shutil.copytree(base, os.path.join(nights, '2026-12-01'))
            shutil.copytree(case, os.path.join(nights, '2026-12-02'))
            args = [bin_, 'trend', nights]
        elif command[0] == 'explain':
            args = [bin_, 'explain', case, run_id]
        else:
            args = [bin_, command[0], case] + command[1:]
        try:
            done = subprocess.run(args + ['--out', os.path.join(work, 'out')],
                                  capture_output=True, timeout=120)
            code, err = done.returncode, done.stderr.decode(errors='replace')
        except subprocess.TimeoutExpired:
            code, err = 'timeout', ''
        outcomes[(command[0], code)] += 1
        # A store whose manifest was damaged is refused as "not the one ... audited from".
        named = os.path.basename(name) in err or 'audited from' in err
        if code not in (0, 1, 2) or (code == 2 and not named):
            bad.append((i, name, kind, command[0], code, err[-400:]))
            shutil.copytree(case, os.path.join(work, f'bad-{seed}-{i}'), dirs_exist_ok=True)
    print(dict(outcomes))
    for b in bad:
        print(b)
    print(f'{len(bad)} of {runs} failed')
    sys.exit(1 if bad else 0)


if __name__ == '__main__':
    main()
