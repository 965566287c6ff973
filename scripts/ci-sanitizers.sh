#!/usr/bin/env bash
# The sanitizer and fuzzing share of `make test` (what CI runs besides the
# main suite; docs/reliability.md, "Sanitizers and fuzzing in CI"):
#
#   1. libFuzzer (clang 14, ASan+UBSan; build-fuzz/): replay every checked-in
#      input and fuzz each of the six targets for 10 s (fuzz/run.sh ci).
#   2. ASan+UBSan: the engine against the simulator and the unit tests of the
#      modules that index tables and write files, built in that same clang
#      tree (so the libraries are compiled once for both).
#   3. Thread-safety annotations (clang's -Wthread-safety, an error in every
#      migd target of a clang build, cmake/migd.cmake): steps 1 and 2 compile
#      part of the tree with it; scripts/thread_safety_check.py compiles every
#      other translation unit that can see an annotation with -fsyntax-only
#      (no code generation), after a self-test that an unguarded write fails.
#   4. TSan (GCC; build-tsan/, -O1): the tests that run migd's threads against
#      each other: engine (allocations racing reconcile, release and reclaim,
#      through the fake driver and through the simulator) and store. api_test is clean too with the compiled-in suppressions but
#      needs gRPC and protobuf code under TSan, which CI has no time for.
#
# The whole suite under each sanitizer is `make test-asan` / `make test-tsan`
# (not in CI: each is a second full build).
#
#   scripts/ci-sanitizers.sh [fuzz|asan|thread-safety|tsan]...   (default: all four)
set -euo pipefail
cd "$(dirname "$0")/.."
readonly JOBS="${JOBS:-2}"
# The subsets (docs/reliability.md, "Why a subset in CI"): what each sanitizer
# finds that the rest of CI cannot, per minute of a 2-core machine. The whole
# suite under either is `make test-asan` / `make test-tsan`.
readonly ASAN_TESTS=(engine_sim_test planner_test mig_test store_test)
readonly TSAN_TESTS=(engine_sim_test engine_test store_test)

steps=("$@")
[[ ${#steps[@]} -eq 0 ]] && steps=(fuzz asan thread-safety tsan)

# The random-SIGKILL campaign (EngineCrashTest.RandomSigkillsRecoverExactly)
# runs its full 200 children in the main suite; under a sanitizer each child
# costs seconds, so here it runs 40 (still every code path, kills in real work).
export MIGD_ENGINE_CRASH_ITERATIONS="${MIGD_ENGINE_CRASH_ITERATIONS:-40}"

# Runs every test binary as SHARDS gtest shards (GTEST_SHARD_INDEX), at most
# JOBS processes at a time, so the slow engine_sim_test spreads over both
# cores. The tests are safe to run concurrently: ctest already runs each TEST()
# of a binary as its own process, two at a time. Each shard's output is
# printed whole, in order, once all have ended; any failed shard fails the step.
export SHARDS="${SHARDS:-4}"
run_tests() {  # build_dir test...
  local dir="$1"; shift
  local logs; logs="$(mktemp -d)"
  local queue=() failed=() t i job rc
  for t in "$@"; do
    for ((i = 0; i < SHARDS; i++)); do queue+=("${t}:${i}"); done
  done
  printf '%s\n' "${queue[@]}" |
    DIR="${dir}" LOGS="${logs}" xargs -P "${JOBS}" -I{} bash -c '
      job="$1"
      GTEST_TOTAL_SHARDS="${SHARDS}" GTEST_SHARD_INDEX="${job##*:}" \
        "${DIR}/tests/${job%%:*}" --gtest_brief=1 >"${LOGS}/${job}.log" 2>&1
      echo "$?" >"${LOGS}/${job}.rc"' _ {} || true
  for job in "${queue[@]}"; do
    rc="$(cat "${logs}/${job}.rc" 2>/dev/null || echo "not run")"
    echo "== ${dir}/tests/${job%%:*} (shard ${job##*:} of ${SHARDS}, exit ${rc})"
    cat "${logs}/${job}.log" 2>/dev/null || true
    [[ "${rc}" == "0" ]] || failed+=("${job}")
  done
  rm -rf "${logs}"
  if [[ ${#failed[@]} -gt 0 ]]; then
    echo "ci-sanitizers: FAILED in ${dir}: ${failed[*]} (test:shard)" >&2
    return 1
  fi
}

for step in "${steps[@]}"; do
  case "${step}" in
    fuzz)
      fuzz/run.sh ci ;;
    asan)
      [[ -f build-fuzz/CMakeCache.txt ]] || cmake --preset fuzz >/dev/null
      cmake --build build-fuzz -j "${JOBS}" --target "${ASAN_TESTS[@]}"
      # Leak checking stays on; UBSan aborts on the first report (preset flags).
      ASAN_OPTIONS="${ASAN_OPTIONS:-detect_leaks=1}" run_tests build-fuzz "${ASAN_TESTS[@]}" ;;
    thread-safety)
      [[ -f build-fuzz/CMakeCache.txt ]] || cmake --preset fuzz >/dev/null
      # The generated protobuf headers the remaining translation units include.
      mapfile -t generated < <(ninja -C build-fuzz -t targets all |
                               sed -n 's#^\(gen/proto/[^:]*\.pb\.h\): .*#\1#p')
      ninja -C build-fuzz "${generated[@]}" >/dev/null
      scripts/thread_safety_check.py build-fuzz --jobs "${JOBS}" ;;
    tsan)
      [[ -f build-tsan/CMakeCache.txt ]] || cmake --preset tsan >/dev/null
      cmake --build build-tsan -j "${JOBS}" --target "${TSAN_TESTS[@]}"
      # Suppressions for the uninstrumented Debian libraries are compiled in
      # (cmake/tsan_suppressions.cc); any report fails the test (exit 66).
      run_tests build-tsan "${TSAN_TESTS[@]}" ;;
    *) echo "ci-sanitizers: unknown step '${step}' (fuzz, asan, thread-safety, tsan)" >&2; exit 2 ;;
  esac
done
