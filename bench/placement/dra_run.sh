#!/usr/bin/env bash
# bench/placement/dra_run.sh — the runs behind docs/benchmarks/dra.md.
#
# Builds dra_bench in BUILD_DIR (default build) and runs NVIDIA's DRA device
# order vs migd's on the placement benchmark's workloads: synthetic mixes at
# three loads on 8 GPUs, two mixes on 1 GPU, both Alibaba traces (when
# TRACE_DIR holds them), and the 1.35 allocator (slices unsorted). Each run
# prints its markdown table and writes OUT/<name>.json.
#
# Environment: JOBS (2), SEEDS (5), EVENTS (3000), LATENCY (the model's
# defaults: create=100,destroy=120,reuse=1), TRACE_DIR
# (data/alibaba-gpu-v2023 of the repository), OUT
# (BUILD_DIR/bench-dra).
set -euo pipefail
cd "$(dirname "$0")/../.."
BUILD=${BUILD_DIR:-build}
OUT=${OUT:-$BUILD/bench-dra}
JOBS=${JOBS:-2}
SEEDS=${SEEDS:-5}
EVENTS=${EVENTS:-3000}
LATENCY=${LATENCY:-create=100,destroy=120,reuse=1}
TRACE_DIR=${TRACE_DIR:-data/alibaba-gpu-v2023}
cmake --build "$BUILD" -j "$JOBS" --target dra_bench >/dev/null
mkdir -p "$OUT"
BIN=$BUILD/bin/dra_bench
COMMON=(--model a100-40gb --seeds "$SEEDS" --events "$EVENTS" --latency "$LATENCY" --jobs "$JOBS")

run() {
  local name=$1
  shift
  echo "## $name"
  echo
  echo '```'
  echo "dra_bench ${COMMON[*]} $*"
  echo '```'
  echo
  "$BIN" "${COMMON[@]}" "$@" --out-json "$OUT/$name.json"
  echo
}

run synthetic-8gpu --mix uniform,small-heavy,large-heavy --load 0.7,0.9,1.1 --gpus 8
run synthetic-1gpu --mix uniform,small-heavy --load 0.9 --gpus 1
run k8s-1.35-unsorted --mix uniform --load 0.9 --gpus 8 --kubernetes-minor 35
for f in default gpushare100; do
  csv="$TRACE_DIR/openb_pod_list_$f.csv"
  if [ -f "$csv" ]; then
    run "trace-$f" --trace "$csv" --trace-mapping compute-ceil --load 0.9 --gpus 8
  else
    echo "dra_run: $csv not found; trace run skipped" >&2
  fi
done
