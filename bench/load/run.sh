#!/usr/bin/env bash
# bench/load/run.sh — the load benchmark behind `make bench-load` (issue 8
# §6). Builds load_bench and migd in $BUILD_DIR (build-bench, Release), runs
# 32 clients x 10,000 operations against the real migd --simulate over its
# unix socket, then a single client for reference, and writes the tables to
# $BUILD_DIR/bench-load/results.md (docs/benchmarks/load.md quotes a run).
#
# Usage: bench/load/run.sh [--quick] [extra load_bench flags...]
#   --quick  32 clients x 300 operations (seconds, not minutes)
# Environment: BUILD_DIR (build-bench), BUILD_TYPE (Release), JOBS (nproc),
# LOAD_DIR (/dev/shm: migd's state dir, CDI dir and the simulator's state on
# tmpfs, so the shared disk's fsync does not dominate), SEED (1).
# Exit status: load_bench's (1 on an unexpected error or a broken invariant).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD_DIR:-build-bench}
JOBS=${JOBS:-$(nproc)}
OUT=$BUILD/bench-load
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target load_bench migd nvidia_ml_sim
mkdir -p "$OUT"
BIN=$BUILD/bin/load_bench
COMMON=(--dir "${LOAD_DIR:-/dev/shm}" --seed "${SEED:-1}")
{
  echo "## $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo
} >"$OUT/results.md"
"$BIN" "${COMMON[@]}" "$@" --out-md "$OUT/concurrent.md"
cat "$OUT/concurrent.md" >>"$OUT/results.md"
# One client, same mix: the latency without contention, for reference.
ONE_OPS=10000
for a in "$@"; do [ "$a" = "--quick" ] && ONE_OPS=300; done
"$BIN" "${COMMON[@]}" --clients 1 --ops "$ONE_OPS" --out-md "$OUT/single.md"
{ echo; cat "$OUT/single.md"; } >>"$OUT/results.md"
echo "load benchmark: tables in $OUT/results.md"
