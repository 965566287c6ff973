#!/usr/bin/env bash
# The container image of deploy/docker/Dockerfile, built and run with podman.
#
#   scripts/image.sh build   (make image)       builds IMAGE (default localhost/migd:<version>)
#   scripts/image.sh test    (make image-test)  runs migd from IMAGE as the Helm chart runs it
#
# build: the Dockerfile stays standard (FROM debian:bookworm / bookworm-slim).
# When no registry is reachable, the base is a local Debian 12 tree made by
# `debootstrap --variant=minbase bookworm` from the host's apt mirror and
# imported with `podman import`; both FROM lines then use it. RUN steps reach
# the same mirror with --network host. Prints the image size and its runtime
# packages.
#
# test: the chart's command line (`/usr/bin/migd --config /etc/migd/migd.yaml`)
# with the chart's rendered migd.yaml (deploy/tools/helmlite), the host paths
# mounted where the chart mounts them (state dir, CDI dir, kubelet's
# device-plugins and pod-resources dirs, socket dir, the /proc entries, /dev) and
# --simulate (the only change to the command line: no GPU here). Checks: migd
# starts and is ready, the socket answers `migctl status` from the host, an
# allocation's CDI spec appears in the host's CDI dir, SIGTERM stops it with
# exit 0. Every path on the host is under a temporary directory.
#
# Needs root, podman and runc (scripts/install-deps.sh image); `test` also Go
# for helmlite (scripts/install-deps.sh deploy-check) and build/bin/migctl.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VERSION="$(sed -n 's/^project(migd VERSION \([0-9.]*\).*/\1/p' "$ROOT/CMakeLists.txt")"
IMAGE="${IMAGE:-localhost/migd:$VERSION}"
BASE="${BASE_IMAGE:-localhost/migd-base:bookworm}"
WORK="${IMAGE_WORK_DIR:-/var/tmp/migd-image}"
ULIMITS=(--ulimit nofile=4096:4096 --ulimit nproc=4096:4096)
PODMAN=(podman --cgroup-manager cgroupfs)
RUN=(run --runtime runc "${ULIMITS[@]}")

die() { echo "image.sh: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (rootful podman)"
command -v podman >/dev/null || die "podman not found (scripts/install-deps.sh image)"

# The first deb URI of the host's apt sources (deb822 or one-line format).
apt_mirror() {
  local m
  m="$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2>/dev/null | grep -v security | head -1)"
  [ -n "$m" ] || m="$(awk '$1 == "deb" && $0 !~ /security/ { print $2; exit }' /etc/apt/sources.list 2>/dev/null)"
  echo "${m:-http://deb.debian.org/debian}"
}

base_images() {
  if timeout 60 "${PODMAN[@]}" pull -q docker.io/library/debian:bookworm >/dev/null 2>&1 &&
     timeout 60 "${PODMAN[@]}" pull -q docker.io/library/debian:bookworm-slim >/dev/null 2>&1; then
    echo "image.sh: base images from the registry" >&2
    BUILD_ARGS=()
    return
  fi
  if ! "${PODMAN[@]}" image exists "$BASE"; then
    command -v debootstrap >/dev/null || die "no registry and no debootstrap (scripts/install-deps.sh image)"
    local tree="$WORK/rootfs" mirror
    mirror="$(apt_mirror)"
    echo "image.sh: no registry reachable; debootstrap --variant=minbase bookworm from $mirror" >&2
    rm -rf "$tree" && mkdir -p "$tree"
    debootstrap --variant=minbase bookworm "$tree" "$mirror" >"$WORK/debootstrap.log" 2>&1 ||
      die "debootstrap failed; see $WORK/debootstrap.log"
    # What the official images do too: no package lists, the same sources.
    rm -rf "$tree"/var/lib/apt/lists/* "$tree"/var/cache/apt/*.bin
    tar -C "$tree" -c . | "${PODMAN[@]}" import --change 'CMD ["bash"]' - "$BASE" >/dev/null
    rm -rf "$tree"
  fi
  BUILD_ARGS=(--build-arg "DEBIAN_IMAGE=$BASE" --build-arg "DEBIAN_SLIM_IMAGE=$BASE")
}

report() {
  local size
  size="$("${PODMAN[@]}" image inspect --format '{{.Size}}' "$IMAGE")"
  echo "image.sh: $IMAGE: $((size / 1000000)) MB"
  echo "image.sh: packages beyond the base image:"
  "${PODMAN[@]}" "${RUN[@]}" --rm --network none --entrypoint /bin/sh "$IMAGE" -c \
    'dpkg-query -W -f "\${Package} \${Installed-Size}\n" | sort' >"$WORK/packages.txt"
  "${PODMAN[@]}" "${RUN[@]}" --rm --network none --entrypoint /bin/sh "$BASE" -c \
    'dpkg-query -W -f "\${Package} \${Installed-Size}\n" | sort' >"$WORK/base-packages.txt"
  comm -23 "$WORK/packages.txt" "$WORK/base-packages.txt" | sed 's/^/  /'
  # No compiler, no headers, no test data in the runtime image.
  if "${PODMAN[@]}" "${RUN[@]}" --rm --network none --entrypoint /bin/sh "$IMAGE" -c \
       'command -v gcc g++ cc c++ cmake ninja >/dev/null || ls /usr/include/grpc* /src /opt/migd/tests 2>/dev/null | grep -q .'; then
    die "$IMAGE carries a compiler, headers or sources"
  fi
  echo "image.sh: no compiler, headers, sources or tests in $IMAGE"
}

build() {
  mkdir -p "$WORK"
  base_images
  local start=$SECONDS
  "${PODMAN[@]}" build --format docker --network host --runtime runc "${ULIMITS[@]}" "${BUILD_ARGS[@]}" \
    --ignorefile "$ROOT/deploy/docker/Dockerfile.dockerignore" \
    -f "$ROOT/deploy/docker/Dockerfile" -t "$IMAGE" "$ROOT"
  echo "image.sh: built $IMAGE in $((SECONDS - start)) s"
  report
}

image_test() {
  local migctl="$ROOT/build/bin/migctl" helmlite start=$SECONDS
  [ -x "$migctl" ] || die "no $migctl (make build)"
  "${PODMAN[@]}" image exists "$IMAGE" || die "no image $IMAGE (make image)"
  # Globals: the EXIT trap runs after this function has returned.
  tmp="$(mktemp -d /var/tmp/migd-image-test.XXXXXX)"
  name="migd-image-test-$$"
  trap '"${PODMAN[@]}" rm -f -t 0 "$name" >/dev/null 2>&1; rm -rf "$tmp"' EXIT
  # The chart's migd.yaml, with the Kubernetes integration off (no cluster).
  helmlite="$tmp/helmlite"
  (cd "$ROOT" && GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$tmp/gocache" GOFLAGS= \
     go build -o "$helmlite" deploy/tools/helmlite/main.go) || die "helmlite does not build"
  mkdir -p "$tmp"/{etc-migd,state,run-migd,cdi,etc-cdi,proc-nvidia,proc-nvidia-caps,driver-root}
  mkdir -p "$tmp"/kubelet/{device-plugins,pod-resources}
  "$helmlite" -config-out "$tmp/chart.yaml" "$ROOT/deploy/helm/migd" >/dev/null 2>&1 ||
    die "the chart does not render"
  python3 - "$tmp/chart.yaml" "$tmp/etc-migd/migd.yaml" <<'PY'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c["kubernetes"]["enabled"] = False
c["recovery"]["ownerSource"] = "records"
yaml.safe_dump(c, open(sys.argv[2], "w"), default_flow_style=False)
PY
  chmod 0600 "$tmp/etc-migd/migd.yaml"
  chmod 0700 "$tmp/state"
  # The DaemonSet's container: its command, mounts, root, read-only root fs,
  # privileged, a memory /tmp; --simulate because there is no GPU here.
  "${PODMAN[@]}" "${RUN[@]}" -d --name "$name" --network none --privileged --user 0:0 \
    --read-only --tmpfs /tmp:size=16m --env NODE_NAME=image-test \
    -v "$tmp/etc-migd:/etc/migd:ro" -v "$tmp/state:/var/lib/migd" -v "$tmp/run-migd:/run/migd" \
    -v "$tmp/cdi:/var/run/cdi" -v "$tmp/etc-cdi:/etc/cdi:ro" \
    -v "$tmp/proc-nvidia:/host/proc/driver/nvidia:ro" \
    -v "$tmp/proc-nvidia-caps:/host/proc/driver/nvidia-caps:ro" \
    -v /proc/devices:/host/proc/devices:ro -v /dev:/host/dev:ro \
    -v "$tmp/driver-root:/driver-root:ro" \
    -v "$tmp/kubelet/device-plugins:/var/lib/kubelet/device-plugins" \
    -v "$tmp/kubelet/pod-resources:/var/lib/kubelet/pod-resources:ro" \
    --entrypoint /usr/bin/migd "$IMAGE" --config /etc/migd/migd.yaml \
    --simulate a100-40gb:1,h100-80gb:1 >/dev/null
  local socket="$tmp/run-migd/api.socket" i
  for i in $(seq 120); do
    "$migctl" --socket "$socket" status >/dev/null 2>&1 && break
    [ "$("${PODMAN[@]}" inspect -f '{{.State.Running}}' "$name")" = true ] ||
      die "migd exited: $("${PODMAN[@]}" logs "$name" 2>&1 | tail -5)"
    sleep 0.5
  done
  "$migctl" --socket "$socket" status >"$tmp/status.txt" 2>&1 ||
    die "the socket does not answer migctl status: $(cat "$tmp/status.txt")"
  echo "ok      migd ready in the container; the host's migctl status answers over $socket"
  "$migctl" --socket "$socket" allocate --id image-test --owner image-test 1g.5gb -o json >"$tmp/alloc.json" ||
    die "allocate failed: $(cat "$tmp/alloc.json")"
  local spec
  spec="$(ls "$tmp/cdi"/hami.io-mig_MIG-*.json 2>/dev/null | head -1)"
  [ -n "$spec" ] || die "no CDI spec in the host's CDI dir after the allocation"
  grep -q "$(basename "$spec" .json | sed 's/^hami.io-mig_//')" "$tmp/alloc.json" ||
    die "$spec is not the allocated device's"
  echo "ok      allocation's CDI spec on the host: ${spec#"$tmp"/}"
  ls "$tmp/state"/*.json >/dev/null 2>&1 || die "no ownership record in the host's state dir"
  echo "ok      ownership record in the host's state dir"
  "${PODMAN[@]}" stop -t 60 "$name" >/dev/null
  local rc
  rc="$("${PODMAN[@]}" inspect -f '{{.State.ExitCode}}' "$name")"
  [ "$rc" = 0 ] || die "migd exited $rc after SIGTERM: $("${PODMAN[@]}" logs "$name" 2>&1 | tail -5)"
  "${PODMAN[@]}" logs "$name" 2>&1 | grep -q "migd stopped" ||
    die "no clean-shutdown line in the log: $("${PODMAN[@]}" logs "$name" 2>&1 | tail -3)"
  echo "ok      SIGTERM: migd stopped cleanly (exit 0)"
  echo "image.sh: image-test passed in $((SECONDS - start)) s"
}

case "${1:-build}" in
  build) build ;;
  test) image_test ;;
  *) die "usage: scripts/image.sh build|test" ;;
esac
