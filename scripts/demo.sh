#!/usr/bin/env bash
# `make demo`: a scripted tour of migd on simulated GPUs (a100-40gb:2,h100-80gb:1).
#
# Starts build/bin/migd --simulate with all of its state under build/demo/ (wiped
# first), then: allocate two instances, release one, allocate the same profile again
# (reused: same MIG UUID), fill a GPU with Idle instances so that a 7g.40gb needs a
# pressure reclaim, an operator `migctl reclaim`, a restart of migd (SIGTERM, start
# again) with its state recovered, and finally stops migd. `migctl status` is shown
# between the steps. Nothing outside build/demo/ is touched; no root needed.
#
#   scripts/demo.sh                  uses build/bin/{migd,migctl}
#   BUILD_DIR=build-debug scripts/demo.sh
#   DEMO_PAUSE=1 scripts/demo.sh     wait for Enter before each step
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BUILD_DIR:-$ROOT/build}"
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
MIGD_BIN="$BUILD/bin/migd"
MIGCTL_BIN="$BUILD/bin/migctl"
GPUS="a100-40gb:2,h100-80gb:1"
DEMO="$BUILD/demo"
SOCK="$DEMO/api.socket"
LOG="$DEMO/migd.log"

for bin in "$MIGD_BIN" "$MIGCTL_BIN"; do
  if [ ! -x "$bin" ]; then
    echo "demo: $bin not found; run \`make build\` first (or set BUILD_DIR)" >&2
    exit 1
  fi
done

if [ -t 1 ]; then BOLD=$'\e[1m'; DIM=$'\e[2m'; RESET=$'\e[0m'; else BOLD=""; DIM=""; RESET=""; fi

MIGD_PID=""
stop_migd() {
  if [ -n "$MIGD_PID" ] && kill -0 "$MIGD_PID" 2>/dev/null; then
    kill -TERM "$MIGD_PID"
    wait "$MIGD_PID" || true
  fi
  MIGD_PID=""
}
trap stop_migd EXIT
trap 'exit 130' INT TERM

# The simulated machine and migd's state both live in build/demo/, so that they
# survive the restart in step 7 (MIGD_SIM_STATE: docs/config.md, --simulate).
export MIGD_SIM_STATE="$DEMO/sim/state.json"
export MIGD_SIM_PROC_ROOT="$DEMO/sim/proc"
export MIGD_SOCKET="$SOCK"

start_migd() {
  "$MIGD_BIN" --simulate "$GPUS" --socket "$SOCK" --state-dir "$DEMO/state" \
    --cdi-spec-dir "$DEMO/cdi" --metrics-listen 127.0.0.1:0 >>"$LOG" 2>&1 &
  MIGD_PID=$!
  local lines_before="$1"
  for _ in $(seq 600); do
    if tail -n "+$((lines_before + 1))" "$LOG" | grep -q "migd ready"; then
      echo "${DIM}$(tail -n "+$((lines_before + 1))" "$LOG" | grep "migd ready")${RESET}"
      return 0
    fi
    if ! kill -0 "$MIGD_PID" 2>/dev/null; then
      echo "demo: migd exited during startup; its log ($LOG):" >&2
      tail -n 20 "$LOG" >&2
      exit 1
    fi
    sleep 0.1
  done
  echo "demo: migd not ready after 60 s; see $LOG" >&2
  exit 1
}

step_no=0
step() {
  step_no=$((step_no + 1))
  echo
  echo "${BOLD}== $step_no. $*${RESET}"
  if [ -n "${DEMO_PAUSE:-}" ]; then read -r -p "   (Enter) " _ </dev/tty; fi
}

# Runs and shows one migctl command.
ctl() {
  echo "${DIM}\$ migctl $*${RESET}"
  "$MIGCTL_BIN" "$@"
}

status() { ctl status; }

# The first MIG UUID in a migctl -o json answer.
mig_of() { grep -o 'MIG-[0-9a-f-]*' | head -n 1; }

rm -rf "$DEMO"
mkdir -p "$DEMO/sim/proc"
: >"$LOG"

step "Start migd on simulated GPUs ($GPUS); state in ${DEMO#"$ROOT"/}/"
echo "${DIM}\$ migd --simulate $GPUS --socket ${SOCK#"$ROOT"/} --state-dir ${DEMO#"$ROOT"/}/state --cdi-spec-dir ${DEMO#"$ROOT"/}/cdi  (log: ${LOG#"$ROOT"/})${RESET}"
start_migd 0
status

step "Allocate two instances on GPU 0 for two owners: a 3g.20gb and a 1g.5gb"
ctl allocate --id train-1 --owner team-a gpu0/3g.20gb
out="$(ctl allocate --id notebook-1 --owner alice gpu0/1g.5gb)"
echo "$out"
first_mig="$(echo "$out" | mig_of)"
status

step "Release notebook-1: its instance becomes Idle; the GI/CI and CDI spec stay for reuse"
ctl release --id notebook-1
status

step "Allocate a 1g.5gb again: migd hands out the Idle instance (path reuse, no NVML call)"
out="$(ctl allocate --id notebook-2 --owner bob 1g.5gb)"
echo "$out"
second_mig="$(echo "$out" | mig_of)"
if [ "$second_mig" = "$first_mig" ]; then
  echo "${BOLD}same MIG UUID as notebook-1 had: $second_mig (reused)${RESET}"
else
  echo "demo: expected notebook-2 to reuse $first_mig, got ${second_mig:-nothing}" >&2
  exit 1
fi
status

step "Fill GPU 1 with four small instances for a batch job, then release them (all Idle)"
ctl allocate --id batch-1 --owner batch gpu1/2g.10gb gpu1/2g.10gb gpu1/2g.10gb gpu1/1g.5gb
ctl release --id batch-1
status

step "Ask for a 7g.40gb: GPU 0 has Active instances, GPU 1 only Idle ones, so the plan reclaims them"
ctl plan 7g.40gb
ctl allocate --id big-1 --owner team-b 7g.40gb
status

step "Idle instances on GPU 0 and GPU 2; an operator reclaim of GPU 0 destroys only GPU 0's Idle ones"
ctl release --id train-1
ctl allocate --id infer-1 --owner carol gpu2/1g.10gb
ctl release --id infer-1
ctl reclaim --gpu 0
status

step "Restart migd (SIGTERM, start again): records + the live GPU layout give back the same state"
"$MIGCTL_BIN" list >"$DEMO/list-before.txt"
echo "${DIM}\$ kill -TERM $MIGD_PID${RESET}"
stop_migd
lines="$(wc -l <"$LOG")"
start_migd "$lines"
"$MIGCTL_BIN" list >"$DEMO/list-after.txt"
if diff -u "$DEMO/list-before.txt" "$DEMO/list-after.txt"; then
  echo "migctl list before and after the restart: identical"
else
  echo "demo: the restarted migd lists different instances (diff above)" >&2
  exit 1
fi
status

step "Stop migd"
echo "${DIM}\$ kill -TERM $MIGD_PID${RESET}"
stop_migd
tail -n 3 "$LOG"
echo
echo "Done. migd's log: ${LOG#"$ROOT"/}; CDI specs: ${DEMO#"$ROOT"/}/cdi/; records: ${DEMO#"$ROOT"/}/state/"
