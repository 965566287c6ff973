#!/usr/bin/env bash
# Crash campaign (docs/reliability.md): runs the crash campaign test
# (tests/crash/crash_campaign_e2e_test.cc) for N kill/restart iterations in
# chunks of CHUNK (default 50), chunk k seeded SEED+k, and prints
#   survived <S>/<N>
# A failing chunk does not stop the campaign: its seed and log are printed so
# it can be replayed alone:
#   MIGD_CRASH_ITERATIONS=<chunk> MIGD_CRASH_SEED=<seed> <build>/tests/crash_campaign_e2e_test
#
# Usage: scripts/crash-campaign.sh [N=1000] [SEED=1]
# Env:   BUILD_DIR (default build), CHUNK (default 50), LOG_DIR (default
#        $BUILD_DIR/crash-campaign). Builds the test, migd and the simulator
#        first unless NO_BUILD=1.
set -euo pipefail
N=${1:-1000}
SEED=${2:-1}
BUILD_DIR=${BUILD_DIR:-build}
CHUNK=${CHUNK:-50}
LOG_DIR=${LOG_DIR:-$BUILD_DIR/crash-campaign}
cd "$(dirname "$0")/.."

if [[ "${NO_BUILD:-0}" != 1 ]]; then
  cmake --build "$BUILD_DIR" -j "${JOBS:-2}" --target crash_campaign_e2e_test migd nvidia_ml_sim
fi
BIN=$(find "$BUILD_DIR" -name crash_campaign_e2e_test -type f -perm -u+x | head -n1)
[[ -n "$BIN" ]] || { echo "crash_campaign_e2e_test not built in $BUILD_DIR" >&2; exit 2; }
mkdir -p "$LOG_DIR"

survived=0
failed_chunks=()
done_iterations=0
chunk=0
while (( done_iterations < N )); do
  n=$(( N - done_iterations < CHUNK ? N - done_iterations : CHUNK ))
  seed=$(( SEED + chunk ))
  log="$LOG_DIR/chunk-$seed.log"
  if MIGD_CRASH_ITERATIONS=$n MIGD_CRASH_SEED=$seed "$BIN" >"$log" 2>&1; then
    ok=1
  else
    ok=0
  fi
  # The test prints "survived S/K" (K = kills, = iterations when it ran to the end).
  s=$(sed -n 's/^survived \([0-9]*\)\/.*/\1/p' "$log" 2>/dev/null | tail -n1 || true)
  s=${s:-0}
  (( s > n )) && s=$n
  survived=$(( survived + s ))
  if (( ok == 0 )); then
    failed_chunks+=("seed=$seed iterations=$n log=$log")
    echo "chunk seed=$seed: FAILED after $s/$n (log: $log)" >&2
  else
    echo "chunk seed=$seed: survived $s/$n"
  fi
  done_iterations=$(( done_iterations + n ))
  chunk=$(( chunk + 1 ))
done

# Kinds of kill, summed over the chunks.
grep -h '^  [a-zA-Z_ .()-]*: [0-9]*$' "$LOG_DIR"/chunk-*.log 2>/dev/null | sort | \
  awk -F': ' '{n[$1]+=$2} END {for (k in n) print k ": " n[k]}' | sort || true
echo "survived $survived/$N"
if (( ${#failed_chunks[@]} > 0 )); then
  printf 'failed chunk: %s\n' "${failed_chunks[@]}" >&2
  exit 1
fi
