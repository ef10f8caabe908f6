#!/usr/bin/env python3
"""Open a traceaudit corpus the way a notebook does: findings and dispositions with Polars,
the run attributes from the store, a fail rate per check and model, and a plot of it.

    python docs/notebook_example.py CORPUS [--plot rates.png]

CORPUS is either layout: the command line's (`CORPUS/<table>.parquet`) or one written a part at
a time by traceaudit.ray (`CORPUS/<table>/part-NNNNN.parquet`, the files its manifest lists);
`table_files` below is the rule a notebook follows to read both.

It also checks what a notebook relies on: every table and column documented in
schemas/corpus.md and schemas/store.md reads with the documented type, non-nullable columns hold
no nulls, and the list and struct columns (subjects, witnesses, grounded_values) come back as
lists of structs. CI runs it on a corpus built from testdata.
"""

import argparse
import json
import pathlib
import re
import sys

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

REPO = pathlib.Path(__file__).resolve().parent.parent


def manifest(corpus: pathlib.Path) -> dict:
    return json.loads((corpus / "manifest.json").read_text())


def table_files(corpus: pathlib.Path, name: str) -> list:
    """The files of table `name`, in the order its rows are read: `<name>.parquet`, or the part
    files the manifest lists (and no other file: a folder may hold strays), each checked to be
    there with the size the manifest records. (The traceaudit module's `table_files` also
    checks each footer's row count.)"""
    listed = manifest(corpus).get("tables")
    if listed is None:
        return [corpus / f"{name}.parquet"]
    for table in listed:
        if table["table"] == name:
            files = []
            for f in table["files"]:
                path = corpus / f["path"]
                if not path.is_file() or path.stat().st_size != f["bytes"]:
                    raise ValueError(f"{path}: missing, or not of the size the manifest records")
                files.append(path)
            return files
    raise FileNotFoundError(f"{corpus} has no table {name}")


def scan(files: list) -> pl.LazyFrame:
    """One lazy scan of `files`, each path taken literally (no glob, no partition folders)."""
    return pl.scan_parquet([str(f) for f in files], glob=False, hive_partitioning=False)


def store_dir(corpus: pathlib.Path) -> pathlib.Path:
    """The store a corpus was audited from: `store/` inside it, else the manifest's `store`."""
    inside = corpus / "store"
    if (inside / "manifest.json").exists():
        return inside
    recorded = pathlib.Path(manifest(corpus)["store"])
    return recorded if recorded.is_absolute() else corpus.parent / recorded


def store_runs(store: pathlib.Path) -> list:
    """The runs files of a store written whole: one per part (`runs/`), or, written before
    store schema 10, one `runs.parquet`."""
    by_part = sorted((store / "runs").glob("part-*.parquet"))
    return by_part or [store / "runs.parquet"]


def fail_rates(corpus: pathlib.Path) -> pl.DataFrame:
    """checked-fail among checked runs, per check and model (the headline rate of the report)."""
    dispositions = scan(table_files(corpus, "dispositions"))
    runs = scan(store_runs(store_dir(corpus))).select("run_id", "model")
    return (
        dispositions.join(runs, on="run_id", how="left")
        .with_columns(pl.col("model").fill_null("(unrecorded)"))
        .filter(pl.col("disposition").is_in(["checked-pass", "checked-fail"]))
        .group_by("check_name", "model")
        .agg(
            checked=pl.len(),
            failed=(pl.col("disposition") == "checked-fail").sum(),
        )
        .with_columns(fail_rate=pl.col("failed") / pl.col("checked"))
        .sort("check_name", "model")
        .collect()
    )


# --- checking the files against the documents -------------------------------------------------

SCALARS = {
    "utf8": pl.String,
    "large_utf8": pl.String,
    "bool": pl.Boolean,
    "uint32": pl.UInt32,
    "uint64": pl.UInt64,
    "float64": pl.Float64,
}


def documented_tables(doc: str) -> dict:
    """`## name` sections of a schema document -> [(column, type, nullable)]."""
    tables, current = {}, None
    for line in doc.splitlines():
        heading = re.match(r"^## (\w+)", line)
        if heading:
            current = heading.group(1)
            continue
        row = re.match(r"^\| `([^`]+)` \| `([^`]+)` \| (yes|no) \|", line)
        if row and current:
            tables.setdefault(current, []).append((row.group(1), row.group(2), row.group(3) == "yes"))
    return tables  # sections without a column table (prose) are not tables


def top_level_fields(struct_type: str) -> list:
    """Field names of `struct<a: t, b: struct<...>>` at the outer level."""
    body = struct_type[len("struct<") : -1]
    names, depth, token = [], 0, ""
    for ch in body + ",":
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        if ch == "," and depth == 0:
            names.append(token.split(":")[0].strip())
            token = ""
        else:
            token += ch
    return names


def type_matches(dtype: pl.DataType, doc_type: str) -> bool:
    if doc_type in SCALARS:
        return dtype == SCALARS[doc_type]
    if doc_type.startswith("timestamp[ms"):
        return dtype == pl.Datetime("ms", "UTC")
    if doc_type.startswith("list<") and isinstance(dtype, pl.List):
        return type_matches(dtype.inner, doc_type[len("list<") : -1])
    if doc_type.startswith("struct<") and isinstance(dtype, pl.Struct):
        return [f.name for f in dtype.fields] == top_level_fields(doc_type)
    if doc_type.startswith("map<"):
        key, value = (t.strip() for t in doc_type[len("map<") : -1].split(",", 1))
        # Polars 2 has a map type; earlier versions read a Parquet map as a list of
        # key/value structs.
        if hasattr(pl, "Map") and isinstance(dtype, pl.Map):
            return type_matches(dtype.key, key) and type_matches(dtype.value, value)
        if isinstance(dtype, pl.List) and isinstance(dtype.inner, pl.Struct):
            fields = dtype.inner.fields
            return [f.name for f in fields] == ["key", "value"] and all(
                type_matches(f.dtype, t) for f, t in zip(fields, (key, value))
            )
    return False


def check_table(name: str, files: list, documented: list) -> int:
    df = scan(files).collect()
    arrow = pa.concat_tables([pq.ParquetFile(f).read() for f in files])
    assert arrow.num_rows == df.height, f"{name}: pyarrow and polars disagree"
    for column, doc_type, nullable in documented:
        assert column in df.columns, f"{name}: documented column {column} is missing"
        dtype = df.schema[column]
        assert type_matches(dtype, doc_type), f"{name}.{column}: {dtype} is not {doc_type}"
        if not nullable:
            assert df[column].null_count() == 0, f"{name}.{column} holds nulls"
    undocumented = set(df.columns) - {c for c, _, _ in documented}
    assert not undocumented, f"{name}: undocumented columns {sorted(undocumented)}"
    return df.height


def check_documents(corpus: pathlib.Path) -> None:
    corpus_doc = documented_tables((REPO / "schemas" / "corpus.md").read_text())
    store_doc = documented_tables((REPO / "schemas" / "store.md").read_text())
    for name, columns in corpus_doc.items():
        try:
            files = table_files(corpus, name)
        except FileNotFoundError:
            files = []
        if not files or not files[0].exists():
            # A table a check owns is written only when that check ran.
            print(f"{name}: not written by this audit")
            continue
        rows = check_table(name, files, columns)
        print(f"{name}: {rows} rows in {len(files)} file(s), {len(columns)} columns as documented")
    files = store_runs(store_dir(corpus))
    rows = check_table("store runs", files, store_doc["runs"])
    print(f"store runs: {rows} rows in {len(files)} file(s), {len(store_doc['runs'])} columns as documented")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus", type=pathlib.Path)
    parser.add_argument("--plot", type=pathlib.Path, help="write a bar chart of the rates here")
    args = parser.parse_args()
    corpus = args.corpus

    check_documents(corpus)

    findings = scan(table_files(corpus, "findings")).collect()
    # Nested columns: each witness is a struct whose subject is a struct.
    witnesses = (
        findings.select("finding_id", "check_name", "witnesses")
        .explode("witnesses")
        .unnest("witnesses")
        .unnest("subject")
    )
    print(witnesses.select("check_name", "kind", "id", "predicate", "value").head(5))
    loops = (
        findings.filter(pl.col("check_name") == "repeated-call")
        .group_by("tool_name")
        .agg(
            findings=pl.len(),
            wasted_landings=pl.col("wasted_landings").sum(),
            wasted_ms=pl.col("wasted_ms").sum(),
        )
        .sort(["wasted_landings", "tool_name"], descending=[True, False])
    )
    print(loops)

    rates = fail_rates(corpus)
    print(rates)
    # The notebook's numbers are the audit's: failed runs per check match the manifest.
    for counts in manifest(corpus)["counts"]:
        failed = rates.filter(pl.col("check_name") == counts["check"])["failed"].sum()
        assert failed == counts["checked_fail"], (counts["check"], failed, counts["checked_fail"])

    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        labels = [f"{c} · {m}" for c, m in zip(rates["check_name"], rates["model"])]
        fig, ax = plt.subplots(figsize=(8, 0.35 * len(labels) + 1.2))
        ax.barh(labels, (rates["fail_rate"] * 100).to_list(), color="#4a78c2")
        ax.set_xlabel("fail rate, % of checked runs")
        ax.invert_yaxis()
        fig.tight_layout()
        fig.savefig(args.plot)
        print(f"plot written to {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
