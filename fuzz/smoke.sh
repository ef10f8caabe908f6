#!/usr/bin/env bash
# Build every fuzz target and run each for a few seconds from the corpus seeded from testdata.
# Exits non-zero when a target crashes, times out or runs out of memory (the input is left in
# artifacts/<target>/). Needs a nightly toolchain and cargo-fuzz.
#   FUZZ_SMOKE_SECONDS  seconds per target (default 5)
#   FUZZ_TARGET_DIR     the fuzz build's target directory (default fuzz/target); a persistent
#                       one keeps the instrumented dependencies between runs
set -euo pipefail
cd "$(dirname "$0")"
seconds="${FUZZ_SMOKE_SECONDS:-5}"
# The main crate's target directory does not hold instrumented builds; its traceaudit binary,
# when built, makes the store seeds (seed.sh).
export MAIN_TARGET_DIR="${CARGO_TARGET_DIR:-../target}"
unset CARGO_TARGET_DIR
target_dir=(--target-dir "${FUZZ_TARGET_DIR:-target}")
./seed.sh
cargo +nightly fuzz build "${target_dir[@]}"
failed=()
for target in $(cargo +nightly fuzz list); do
  # A fixed seed: the same mutations every run, so a smoke failure reproduces.
  if ! cargo +nightly fuzz run "${target_dir[@]}" "$target" -- -seed=1 -max_total_time="$seconds" \
      -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 >"run-$target.log" 2>&1; then
    tail -n 30 "run-$target.log"
    failed+=("$target")
  fi
  grep -h '^stat::number_of_executed_units' "run-$target.log" | sed "s/^/$target: /" || true
done
if ((${#failed[@]})); then
  echo "fuzz smoke: FAILED: ${failed[*]} (inputs in fuzz/artifacts/)"
  exit 1
fi
echo "fuzz smoke: every target ran ${seconds}s without a crash"
