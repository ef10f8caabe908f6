#!/usr/bin/env bash
# Fuzz one target for a while from its corpus (seed it first with ./seed.sh), going on past
# crashes, timeouts and out-of-memory inputs (each is saved in artifacts/<target>/). Runs the
# built binary directly: build first with `cargo +nightly fuzz build`.
#   ./run.sh TARGET [SECONDS [LIBFUZZER-FLAGS...]]   (default 600 s); the log is
#   logs/TARGET.log, or logs/TARGET-TAG.log with FUZZ_LOG_TAG=TAG
set -euo pipefail
cd "$(dirname "$0")"
target="$1"
seconds="${2:-600}"
shift $(($# < 2 ? $# : 2))
log="logs/$target${FUZZ_LOG_TAG:+-$FUZZ_LOG_TAG}.log"
bin="${FUZZ_TARGET_DIR:-target}/x86_64-unknown-linux-gnu/release/$target"
mkdir -p "corpus/$target" "artifacts/$target" logs
exec "$bin" "corpus/$target" -artifact_prefix="artifacts/$target/" \
  -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "$@" \
  >"$log" 2>&1
