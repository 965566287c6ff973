#!/usr/bin/env bash
# Installs every Debian 12 package that migd's build, tests and benchmarks need.
# Idempotent: does nothing when all packages are present, and runs
# `apt-get update` only when something is missing.
#
#   scripts/install-deps.sh          the default packages below
#   scripts/install-deps.sh bench    also the optional `bench` group (gnuplot-nox,
#                                    for the plots of `make bench-placement`)
#   scripts/install-deps.sh cdi-check  also the optional `cdi-check` group (Go and the
#                                    CDI Go library 0.5.2, for tests/cdi cdi_library_test)
#   scripts/install-deps.sh metrics-check  also Debian's prometheus (promtool and the
#                                    server, for the /metrics conformance tests)
#   scripts/install-deps.sh deploy-check  also python3-yaml and the Go YAML library
#                                    (deploy/check.sh: chart rendering, YAML checks)
#   scripts/install-deps.sh fuzz     also clang 14 with libFuzzer and the LLVM tools
#                                    (the `fuzz` preset: make fuzz, scripts/ci-sanitizers.sh)
#   scripts/install-deps.sh manifest-check  also Node.js and npm, then the npm packages of
#                                    deploy/tools/manifest-check (kubernetes-models, pinned by
#                                    its package-lock.json; `npm ci`, only when missing)
#   scripts/install-deps.sh runtime-e2e  also podman with runc and crun and busybox-static
#                                    (tests/runtime: CDI injection by a real container runtime)
#   scripts/install-deps.sh image    also podman and debootstrap (make image, make image-test)
set -euo pipefail

PACKAGES=(
  # toolchain
  cmake ninja-build g++ make pkg-config
  # libraries
  libspdlog-dev libfmt-dev nlohmann-json3-dev libcli11-dev libyaml-cpp-dev
  libgrpc++-dev libprotobuf-dev protobuf-compiler protobuf-compiler-grpc
  libcpp-httplib-dev libsystemd-dev libcurl4-openssl-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
)

# Optional groups, selected by name on the command line.
BENCH_PACKAGES=(
  gnuplot-nox
)
DEPLOY_CHECK_PACKAGES=(
  python3-yaml golang-go golang-k8s-sigs-yaml-dev systemd
)
MANIFEST_CHECK_PACKAGES=(
  nodejs npm
)
RUNTIME_E2E_PACKAGES=(
  podman runc crun busybox-static
)
IMAGE_PACKAGES=(
  podman runc debootstrap
)
METRICS_CHECK_PACKAGES=(
  prometheus
)
FUZZ_PACKAGES=(
  clang-14 libclang-rt-14-dev llvm-14
)
CDI_CHECK_PACKAGES=(
  golang-go golang-github-container-orchestrated-devices-container-device-interface-dev
)

NPM_DIRS=()
for group in "$@"; do
  case "$group" in
    bench) PACKAGES+=("${BENCH_PACKAGES[@]}") ;;
    cdi-check) PACKAGES+=("${CDI_CHECK_PACKAGES[@]}") ;;
    metrics-check) PACKAGES+=("${METRICS_CHECK_PACKAGES[@]}") ;;
    deploy-check) PACKAGES+=("${DEPLOY_CHECK_PACKAGES[@]}") ;;
    fuzz) PACKAGES+=("${FUZZ_PACKAGES[@]}") ;;
    manifest-check) PACKAGES+=("${MANIFEST_CHECK_PACKAGES[@]}"); NPM_DIRS+=(deploy/tools/manifest-check) ;;
    runtime-e2e) PACKAGES+=("${RUNTIME_E2E_PACKAGES[@]}") ;;
    image) PACKAGES+=("${IMAGE_PACKAGES[@]}") ;;
    *) echo "install-deps: unknown group '$group' (known: bench, cdi-check, metrics-check, deploy-check, fuzz, manifest-check, runtime-e2e, image)" >&2; exit 2 ;;
  esac
done

missing=()
for pkg in "${PACKAGES[@]}"; do
  # A Node.js package from another source (it bundles npm and conflicts with
  # Debian's npm package) satisfies nodejs/npm.
  if [ "$pkg" = npm ] && command -v npm >/dev/null 2>&1; then continue; fi
  if ! dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$pkg")
  fi
done

# npm packages of the selected groups: `npm ci` from the committed lock file
# (exact versions and integrity hashes), only when node_modules is missing or
# older than the lock file.
install_npm() {
  local root dir
  root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
  for dir in "${NPM_DIRS[@]}"; do
    if [ ! -f "$root/$dir/node_modules/.package-lock.json" ] ||
       [ "$root/$dir/package-lock.json" -nt "$root/$dir/node_modules/.package-lock.json" ]; then
      echo "install-deps: npm ci in $dir"
      (cd "$root/$dir" && npm ci --no-audit --no-fund --loglevel=error)
    fi
  done
}

if [ ${#missing[@]} -eq 0 ]; then
  install_npm
  exit 0
fi

echo "install-deps: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO="sudo"
  else
    echo "install-deps: missing packages (${missing[*]}) and not root; run as root or install them" >&2
    exit 1
  fi
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
install_npm
