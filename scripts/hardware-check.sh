#!/usr/bin/env bash
# hardware-check.sh: records what a real GPU's NVML answers where nvml.h
# leaves the behaviour open (docs/simulator.md §1.4, docs/probe.md), READ-ONLY:
# it runs `migctl probe --hardware-check -o json` through libnvidia-ml.so.1 and
# writes the JSON to one file under data/hardware/. For every GPU with MIG on
# it records the MIG-device walk (each index below nvmlDeviceGetMaxMigDeviceCount
# with its result, GI id, CI id and UUID, and whether a second walk saw the
# same), what nvmlComputeInstanceGetInfo_v2().device and
# nvmlGpuInstanceGetInfo().device hold (the header says "Parent device"),
# nvmlDeviceGetHandleByUUID of each MIG UUID in the R470+ and the older
# "MIG-GPU-<uuid>/<gi>/<ci>" form, and what GetGpuInstanceId answers on a GPU
# handle. The walk is only interesting where MIG instances already exist:
# create some first (nvidia-smi mig -cgi ... -C) if the GPU has none.
#
# It never enables or disables MIG, creates, destroys or resets anything (a
# test runs it against the simulator and checks the simulator's mutation
# counters: tests/nvml_driver_sim_test.cc, HardwareCheckScriptMutatesNothing).
# Whether a new CI is visible to the walk at once cannot be seen without
# creating one; this script does not try.
#
# Usage: scripts/hardware-check.sh [--migctl PATH] [--nvml-library PATH] [--out DIR]
#   --migctl        migctl binary (default: build/bin/migctl, then migctl on PATH)
#   --nvml-library  NVML library (default: libnvidia-ml.so.1)
#   --out           directory for the JSON file (default: data/hardware/ of this
#                   repository)
# Prints the path of the file it wrote. Exit status: migctl probe's (0 OK, 2
# NVML unavailable), 1 for a usage error.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
migctl=""
library="libnvidia-ml.so.1"
out="${repo}/data/hardware"

while [[ $# -gt 0 ]]; do
  case "$1" in
    --migctl) migctl="$2"; shift 2 ;;
    --nvml-library) library="$2"; shift 2 ;;
    --out) out="$2"; shift 2 ;;
    -h|--help) sed -n '2,30p' "$0"; exit 0 ;;
    *) echo "hardware-check.sh: unknown argument '$1' (see --help)" >&2; exit 1 ;;
  esac
done

if [[ -z "${migctl}" ]]; then
  if [[ -x "${repo}/build/bin/migctl" ]]; then
    migctl="${repo}/build/bin/migctl"
  elif command -v migctl >/dev/null; then
    migctl="$(command -v migctl)"
  else
    echo "hardware-check.sh: no migctl: build it (make build) or pass --migctl PATH" >&2
    exit 1
  fi
fi

mkdir -p "${out}"
host="$(hostname -s 2>/dev/null || echo host)"
stamp="$(date -u +%Y%m%dT%H%M%SZ)"
tmp="$(mktemp "${out}/.hardware-check.XXXXXX")"
trap 'rm -f "${tmp}"' EXIT

status=0
"${migctl}" probe --nvml-library "${library}" --hardware-check -o json >"${tmp}" || status=$?
if [[ ${status} -ne 0 ]]; then
  echo "hardware-check.sh: migctl probe failed (exit ${status}); nothing written" >&2
  exit "${status}"
fi

# <host>-<driver version>-<UTC time>.json; the driver version comes from the
# probe's own output.
driver="$(sed -n 's/^  "driver_version": "\(.*\)",$/\1/p' "${tmp}" | head -1)"
file="${out}/${host}-${driver:-unknown}-${stamp}.json"
mv "${tmp}" "${file}"
trap - EXIT
echo "${file}"
