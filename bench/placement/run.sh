#!/usr/bin/env bash
# bench/placement/run.sh — the placement benchmark behind `make bench-placement`.
#
# Builds placement_bench and placement_report in build-bench/ (Release), runs
# the matrix of docs/benchmarks/placement.md (synthetic mixes × loads × N,
# both Alibaba traces, queue mode, lognormal lifetimes, H200 table,
# adversarial scripts, a single-threaded latency run), draws the plots with
# gnuplot and writes docs/benchmarks/placement.md from
# bench/placement/report_template.md. Sized to finish within 10 minutes on 2
# cores.
#
# Environment: JOBS (worker threads, default nproc), SEEDS (10), EVENTS
# (arrivals per run, 12000), TRACE_DIR (the Alibaba pod lists, default
# data/alibaba-gpu-v2023 in this repository), BUILD_DIR (build-bench).
set -euo pipefail
cd "$(dirname "$0")/../.."

BUILD=${BUILD_DIR:-build-bench}
OUT=$BUILD/bench-placement
DOC=docs/benchmarks/placement.md
PLOTS=docs/benchmarks/placement
TRACE_DIR=${TRACE_DIR:-data/alibaba-gpu-v2023}
JOBS=${JOBS:-$(nproc)}
SEEDS=${SEEDS:-10}
EVENTS=${EVENTS:-12000}
LOADS=0.5,0.7,0.9,1.1,1.3
GOAL_LOADS=0.7,0.9,1.1
start=$(date +%s%N)

# elapsed START_NS: seconds since START_NS, one decimal.
elapsed() {
  local ns=$(($(date +%s%N) - $1))
  printf '%d.%d' $((ns / 1000000000)) $(((ns / 100000000) % 10))
}

# Release with CMake's default flags (-O3 -DNDEBUG), set explicitly so that a
# build dir configured earlier with other flags is reset. (The GCC 12 -O3
# -Wrestrict false positives in std::string concatenation, GCC PR 105329,
# were worked around in src/planner and bench/placement/report_*.cc.)
RELEASE_FLAGS="-O3 -DNDEBUG"
cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS_RELEASE="$RELEASE_FLAGS" >/dev/null
cmake --build "$BUILD" -j "$JOBS" --target placement_bench placement_report
build_s=$(elapsed "$start")

rm -rf "$OUT"
mkdir -p "$OUT/plots" "$PLOTS"
rm -f "$PLOTS"/*.png
BIN=$BUILD/bin/placement_bench
COMMANDS=()

# run NAME ARGS...: one placement_bench invocation writing $OUT/NAME.json.
run() {
  local name=$1
  shift
  local cmd=("$BIN" "$@" --jobs "${RUN_JOBS:-$JOBS}" --quiet --out-json "$OUT/$name.json")
  COMMANDS+=("${cmd[*]}")
  local t0
  t0=$(date +%s%N)
  "${cmd[@]}"
  printf 'bench-placement: %-24s %6s s\n' "$name" "$(elapsed "$t0")"
}

MAIN=(--model h100-80gb --seeds "$SEEDS" --events "$EVENTS")

run synth "${MAIN[@]}" --mix uniform,small-heavy,no-7g,large-heavy,bimodal,uniform-dm,multi \
  --load "$LOADS" --gpus 1,2,4,8

for f in default gpushare100; do
  csv=$TRACE_DIR/openb_pod_list_$f.csv
  run "trace-$f-cc" "${MAIN[@]}" --trace "$csv" --trace-mapping compute-ceil \
    --load "$LOADS" --gpus 4,8
  run "trace-$f-me" "${MAIN[@]}" --trace "$csv" --trace-mapping memory-eighths \
    --load "$GOAL_LOADS" --gpus 8
done

# migd without Idle instances, to isolate their effect, and with the values
# leading on every node size (the separable approximation).
run diag "${MAIN[@]}" --mix uniform,small-heavy,no-7g --load 0.9 --gpus 1,2,8 \
  --policies migd,migd-noidle,migd-separable,B10

BASE=migd,migd-slice,migd-order,B1,B2,B3,B4a,B4b,B5,B6,B8,B9,B10,B12,B14
run h200 --model h200-141gb --seeds "$SEEDS" --events "$EVENTS" --mix uniform-dm \
  --load "$GOAL_LOADS" --gpus 8 --policies "$BASE"
run lognormal "${MAIN[@]}" --lifetime lognormal --mix uniform,small-heavy --load "$GOAL_LOADS" \
  --gpus 8 --policies "$BASE"
QUEUE=(--model h100-80gb --seeds "$SEEDS" --events 8000 --mode queue --mix uniform
  --load 0.9,1.1 --gpus 4 --policies migd,migd-order,B1,B2,B4b,B8,B9,B10,B12,B14)
run queue-fifo "${QUEUE[@]}"
run queue-backfill "${QUEUE[@]}" --backfill

SCRIPT_POLICIES=migd,migd-order,B1,B2,B3,B4a,B4b,B5,B6,B8,B9,B10,B12,B14
run script-dra933 --model h100-80gb --script dra933 --policies "$SCRIPT_POLICIES"
run script-reverse --model h100-80gb --script reverse --policies "$SCRIPT_POLICIES"
run script-churn4g-fifo --model h100-80gb --script churn4g --mode queue --patience 1000 \
  --policies "$SCRIPT_POLICIES"
run script-churn4g-backfill --model h100-80gb --script churn4g --mode queue --backfill \
  --patience 1000 --policies "$SCRIPT_POLICIES"

# Latency: one worker thread, migd only, each MakePlan timed 3 times (fastest kept).
RUN_JOBS=1 run latency --model h100-80gb --seeds 3 --events "$EVENTS" --policies migd \
  --latency-repeats 3 \
  --mix uniform --load 0.9 --gpus 1,2,4,8
RUN_JOBS=1 run latency-multi --model h100-80gb --seeds 3 --events "$EVENTS" --policies migd \
  --latency-repeats 3 \
  --mix multi --load 1.1 --gpus 1,2,4,8

# CPU seconds (user + sys) of everything this script ran so far; `times` must
# run in this shell (a subshell starts from zero).
cpu_seconds() {
  tail -1 "$OUT/times.txt" | awk '{
    t = 0
    for (i = 1; i <= 2; i++) { split($i, a, "m"); sub("s", "", a[2]); t += a[1] * 60 + a[2] }
    printf "%.1f", t
  }'
}

# Metadata for the report.
json_escape() { sed -e 's/\\/\\\\/g' -e 's/"/\\"/g' <<<"$1" | tr -d '\n'; }
write_meta() {
  local runtime=$1
  times >"$OUT/times.txt"
  {
    printf '{\n'
    printf '  "date": "%s",\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    printf '  "commit": "%s",\n' "$(git rev-parse --short=12 HEAD 2>/dev/null || echo unknown)"
    if [ -n "$(git status --porcelain 2>/dev/null)" ]; then
      printf '  "dirty": true,\n'
    else
      printf '  "dirty": false,\n'
    fi
    printf '  "nproc": %s,\n' "$(nproc)"
    printf '  "cpu": "%s",\n' "$(json_escape "$(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//')")"
    printf '  "compiler": "%s",\n' "$(json_escape "$(c++ --version | head -1)")"
    printf '  "build": "CMAKE_BUILD_TYPE=Release, CMAKE_CXX_FLAGS_RELEASE=%s",\n' "$RELEASE_FLAGS"
    printf '  "gnuplot": "%s",\n' "$(json_escape "$(gnuplot --version 2>/dev/null || echo missing)")"
    printf '  "jobs": %s,\n' "$JOBS"
    printf '  "build_s": %s,\n' "$build_s"
    printf '  "runtime_s": %s,\n' "$runtime"
    printf '  "cpu_s": %s,\n' "$(cpu_seconds)"
    printf '  "load_average": "%s",\n' "$(cut -d' ' -f1-3 /proc/loadavg)"
    printf '  "commands": [\n'
    local i
    for i in "${!COMMANDS[@]}"; do
      printf '    "%s"%s\n' "$(json_escape "${COMMANDS[$i]}")" "$([ "$i" -lt $((${#COMMANDS[@]} - 1)) ] && echo ,)"
    done
    printf '  ]\n}\n'
  } >"$OUT/meta.json"
}

report() {
  "$BUILD/bin/placement_report" --results "$OUT" --meta "$OUT/meta.json" \
    --template bench/placement/report_template.md --out "$DOC" \
    --plots-dir "$PLOTS" --data-dir "$OUT/plots"
}

write_meta "$(elapsed "$start")"
report
for gp in "$OUT"/plots/*.gp; do
  gnuplot "$gp"
done
# Final runtime (everything above), then the report again with it.
total=$(elapsed "$start")
write_meta "$total"
report
printf 'bench-placement: wrote %s and %s/ in %s s\n' "$DOC" "$PLOTS" "$total"
