#!/usr/bin/env bash
# Builds the libFuzzer targets (the `fuzz` CMake preset: clang 14, ASan+UBSan)
# and runs them. See docs/fuzzing.md.
#
#   fuzz/run.sh [TARGET...]     fuzz each target for $FUZZ_SECONDS (default 60)
#                               s, growing a work corpus in build-fuzz/fuzz/work/
#                               (the checked-in seeds in fuzz/corpus/ are read,
#                               never written); `make fuzz` calls this.
#   fuzz/run.sh ci              replay every checked-in input, then fuzz each
#                               target for 10 s (ctest -L fuzz); for CI.
#   fuzz/run.sh list            print the target names.
#
# A crash, leak, sanitizer report, timeout or FUZZ_CHECK failure stops that
# target, leaves the input in build-fuzz/fuzz/artifacts/ and makes the script
# exit non-zero after the remaining targets have run.
#
# Environment: FUZZ_SECONDS (per target), FUZZ_JOBS (parallel fuzzing
# processes per target, default 1), BUILD_DIR (default build-fuzz).
set -euo pipefail

cd "$(dirname "$0")/.."
readonly TARGETS=(record config cdi_common_edits hami_codec api_request plan_input)
readonly BUILD_DIR="${BUILD_DIR:-build-fuzz}"
readonly FUZZ_SECONDS="${FUZZ_SECONDS:-60}"
readonly FUZZ_JOBS="${FUZZ_JOBS:-1}"

if [[ "${1:-}" == "list" ]]; then
  printf '%s\n' "${TARGETS[@]}"
  exit 0
fi

configure_and_build() {
  if [[ ! -f "${BUILD_DIR}/CMakeCache.txt" ]]; then
    if [[ "${BUILD_DIR}" == "build-fuzz" ]]; then
      cmake --preset fuzz
    else
      echo "run.sh: ${BUILD_DIR} is not configured; use BUILD_DIR=build-fuzz or configure it" \
           "like the fuzz preset" >&2
      exit 2
    fi
  fi
  local targets=()
  for t in "$@"; do targets+=("fuzz_${t}"); done
  cmake --build "${BUILD_DIR}" -j "$(nproc)" --target "${targets[@]}"
}

if [[ "${1:-}" == "ci" ]]; then
  configure_and_build "${TARGETS[@]}"
  # Each target fuzzes for a fixed time on one core: run one per core.
  exec ctest --test-dir "${BUILD_DIR}" -L fuzz --output-on-failure -j "$(nproc)"
fi

selected=("$@")
if [[ ${#selected[@]} -eq 0 ]]; then selected=("${TARGETS[@]}"); fi
for t in "${selected[@]}"; do
  if [[ ! " ${TARGETS[*]} " == *" ${t} "* ]]; then
    echo "run.sh: unknown target '${t}' (known: ${TARGETS[*]})" >&2
    exit 2
  fi
done
configure_and_build "${selected[@]}"

work="${BUILD_DIR}/fuzz/work"
artifacts="${BUILD_DIR}/fuzz/artifacts"
mkdir -p "${artifacts}"
failed=()
for t in "${selected[@]}"; do
  mkdir -p "${work}/${t}"
  echo "=== fuzz_${t}: ${FUZZ_SECONDS} s, ${FUZZ_JOBS} job(s)"
  args=(-max_total_time="${FUZZ_SECONDS}" -timeout=20 -rss_limit_mb=2560 -print_final_stats=1
        -artifact_prefix="${artifacts}/${t}-")
  if [[ "${FUZZ_JOBS}" -gt 1 ]]; then
    args+=(-fork="${FUZZ_JOBS}")
  fi
  if ! "${BUILD_DIR}/fuzz/fuzz_${t}" "${args[@]}" "${work}/${t}" "fuzz/corpus/${t}"; then
    failed+=("${t}")
  fi
done
if [[ ${#failed[@]} -gt 0 ]]; then
  echo "run.sh: findings in: ${failed[*]} (inputs in ${artifacts}/)" >&2
  exit 1
fi
echo "run.sh: no findings in ${selected[*]}"
