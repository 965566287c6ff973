#!/usr/bin/env bash
# bench/load/run.sh — the load benchmark behind `make bench-load`. Builds
# load_bench and migd in $BUILD_DIR (build-bench, Release), then runs against
# the real migd --simulate over its unix socket, in one go:
#   1. mixed:  32 clients x 10,000 operations of the mixed workload (tmpfs);
#   2. cycles: allocate+release reuse cycles, 32 clients and 1 client, with
#              migd's stateDir on tmpfs and on a disk directory;
#   3. mixed:  1 client x 10,000 operations, for reference.
# Writes every table to $BUILD_DIR/bench-load/results.md (docs/benchmarks/
# load.md quotes a run) with the machine's load average before and after.
#
# Usage: bench/load/run.sh [--quick]
#   --quick  300 operations (cycles) per client (seconds, not minutes)
# Environment: BUILD_DIR (build-bench), BUILD_TYPE (Release), JOBS (nproc),
# LOAD_DIR (/dev/shm: sockets, CDI specs, the simulator's state), DISK_DIR
# (a directory on disk for the disk stateDir; default $BUILD_DIR/bench-load/
# disk), SEED (1), CYCLES (2000 per client).
# Exit status: 1 if any run had an unexpected error or a broken invariant.
set -euo pipefail
cd "$(dirname "$0")/../.."

QUICK=()
if [ "${1:-}" = "--quick" ]; then QUICK=(--quick); fi
BUILD=${BUILD_DIR:-build-bench}
JOBS=${JOBS:-$(nproc)}
OUT=$BUILD/bench-load
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE="${BUILD_TYPE:-Release}" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target load_bench migd nvidia_ml_sim
mkdir -p "$OUT"
DISK=${DISK_DIR:-$PWD/$OUT/disk}
mkdir -p "$DISK"
BIN=$BUILD/bin/load_bench
COMMON=(--dir "${LOAD_DIR:-/dev/shm}" --seed "${SEED:-1}")
CYCLES=${CYCLES:-2000}
if [ ${#QUICK[@]} -gt 0 ]; then CYCLES=300; fi
status=0
{
  echo "## $(date -u +%Y-%m-%dT%H:%MZ), $(nproc) CPUs ($(lscpu | sed -n 's/^Model name: *//p' | head -1)), git $(git rev-parse --short HEAD 2>/dev/null || echo '?')$([ -n "$(git status --porcelain 2>/dev/null)" ] && echo ' (dirty)')"
  echo
  echo "Load average before: $(cut -d' ' -f1-3 /proc/loadavg). Disk stateDir: $DISK ($(df -T "$DISK" | awk 'NR==2 {print $2}'))."
  echo
} >"$OUT/results.md"

# run NAME ARGS...: one load_bench run; its table is appended to results.md.
run() {
  local name=$1
  shift
  echo "bench-load: $name"
  "$BIN" "${COMMON[@]}" "$@" --out-md "$OUT/$name.md" >/dev/null || status=1
  { cat "$OUT/$name.md"; echo; } >>"$OUT/results.md"
}

run mixed-32 "${QUICK[@]}"
run cycles-32-tmpfs --mode cycles --ops "$CYCLES"
run cycles-32-disk --mode cycles --ops "$CYCLES" --state-parent "$DISK"
run cycles-1-tmpfs --mode cycles --clients 1 --ops "$((CYCLES * 4))"
run cycles-1-disk --mode cycles --clients 1 --ops "$CYCLES" --state-parent "$DISK"
ONE_OPS=10000
if [ ${#QUICK[@]} -gt 0 ]; then ONE_OPS=300; fi
run mixed-1 --clients 1 --ops "$ONE_OPS"
echo "Load average after: $(cut -d' ' -f1-3 /proc/loadavg)." >>"$OUT/results.md"
echo "load benchmark: tables in $OUT/results.md"
exit $status
