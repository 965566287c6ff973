#!/usr/bin/env bash
# Checks the deployment files without Docker, Helm or a cluster:
#   1. every non-template YAML file parses (python3-yaml), Chart.yaml has the
#      fields Helm requires, and every key of docs/config.md's table is in
#      deploy/migd.yaml and in the chart's values (config.*), and nothing else;
#   2. the Helm chart renders (deploy/tools/helmlite: Go text/template with the
#      Helm functions the chart uses) with its default values and with each
#      ci/*-values.yaml, and every rendered manifest is well-formed YAML;
#   2b. every rendered manifest is valid against the Kubernetes API schema
#      (deploy/tools/manifest-check: kubernetes-models' validators compiled from
#      the official OpenAPI definitions, plus unknown fields), and the checker
#      refuses each of its bad fixtures (unknown field, wrong type, missing
#      required field, unknown kind);
#   3. the systemd unit passes `systemd-analyze verify`, its exposure score
#      (`systemd-analyze security --offline=yes`) is the one docs/operations.md
#      records, and the runtime packages the Dockerfile installs exist in
#      Debian 12 (`apt-cache show`);
#   4. with a migd binary (argument 1, default build/bin/migd): deploy/migd.yaml
#      and every migd.yaml the chart renders start a real migd (on simulated
#      GPUs, paths redirected to a temporary directory) that becomes ready and
#      stops cleanly — i.e. the configs pass migd's own strict validation.
# Steps 2b and 3 fail when their tools are missing (scripts/install-deps.sh
# manifest-check deploy-check installs them; `make check` does); other steps
# whose tool is missing are reported as SKIPPED. Any failure exits 1.
#
#   deploy/check.sh [path/to/migd]
set -uo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MIGD="${1:-$ROOT/build/bin/migd}"
CHART="$ROOT/deploy/helm/migd"
TMP="$(mktemp -d)"
trap 'rm -rf "$TMP"' EXIT
failures=0

ok() { echo "ok      $*"; }
fail() { echo "FAILED  $*"; failures=$((failures + 1)); }
skip() { echo "SKIPPED $*"; }

# ---- 1. YAML files ----
if python3 -c 'import yaml' 2>/dev/null; then
  while IFS= read -r f; do
    if out="$(python3 - "$f" 2>&1 <<'EOF'
import sys, yaml
path = sys.argv[1]
with open(path) as fh:
    docs = [d for d in yaml.safe_load_all(fh) if d is not None]
if not docs:
    sys.exit(path + ": no YAML document")
if path.endswith("Chart.yaml"):
    chart = docs[0]
    for key in ("apiVersion", "name", "version"):
        if key not in chart:
            sys.exit(path + ": missing " + key)
    if chart["apiVersion"] != "v2":
        sys.exit(path + ": apiVersion must be v2")
EOF
)"; then ok "yaml ${f#"$ROOT"/}"; else fail "yaml ${f#"$ROOT"/}: $out"; fi
  done < <(find "$ROOT/deploy" -name '*.yaml' -not -path '*/templates/*' | sort)
else
  skip "yaml: python3 with the yaml module (Debian python3-yaml) not found"
fi

# ---- 1b. every documented config key is in deploy/migd.yaml and the chart's values ----
if python3 -c 'import yaml' 2>/dev/null && [ -f "$ROOT/docs/config.md" ]; then
  if out="$(python3 - "$ROOT" 2>&1 <<'EOF'
import re, sys, yaml
root = sys.argv[1]
doc = open(root + "/docs/config.md").read()
keys = re.findall(r"^\| `([A-Za-z.]+)` \|", doc[doc.index("## Keys"):], re.M)
if len(keys) < 10:
    sys.exit("docs/config.md: found only %d keys in its Keys table" % len(keys))
def has(tree, path):
    for part in path.split("."):
        if not isinstance(tree, dict) or part not in tree:
            return False
        tree = tree[part]
    return True
def leaves(tree, prefix=""):
    for k, v in tree.items():
        path = prefix + k
        if isinstance(v, dict) and v and path not in keys:
            yield from leaves(v, path + ".")
        else:
            yield path
example = yaml.safe_load(open(root + "/deploy/migd.yaml"))
values = yaml.safe_load(open(root + "/deploy/helm/migd/values.yaml"))["config"]
problems = []
for name, tree in (("deploy/migd.yaml", example), ("values.yaml config", values)):
    problems += ["%s lacks %s" % (name, k) for k in keys if not has(tree, k)]
    problems += ["%s has %s, not in docs/config.md" % (name, k) for k in leaves(tree) if k not in keys]
if problems:
    sys.exit("; ".join(problems))
print("%d keys" % len(keys))
EOF
)"; then ok "config keys (docs/config.md) in deploy/migd.yaml and values.yaml: $out"; else fail "config keys: $out"; fi
else
  skip "config keys: python3-yaml or docs/config.md missing"
fi

# ---- 2. Helm chart ----
configs=()
manifests=()
manifest_labels=()
if command -v go >/dev/null 2>&1 && [ -d /usr/share/gocode/src/sigs.k8s.io/yaml ]; then
  export GO111MODULE=off GOPATH=/usr/share/gocode GOCACHE="$TMP/gocache" GOFLAGS=
  if go build -o "$TMP/helmlite" "$ROOT/deploy/tools/helmlite/main.go" 2>"$TMP/go.err"; then
    n=0
    for values in "" "$CHART"/ci/*-values.yaml; do
      n=$((n + 1))
      args=()
      label="default values"
      if [ -n "$values" ]; then args=(-values "$values"); label="${values#"$ROOT"/}"; fi
      if out="$("$TMP/helmlite" "${args[@]}" -config-out "$TMP/chart-$n.yaml" \
                 -manifests-out "$TMP/manifests-$n.yaml" "$CHART" 2>&1)"; then
        ok "helm template ($label): $out"
        configs+=("$TMP/chart-$n.yaml")
        manifests+=("$TMP/manifests-$n.yaml")
        manifest_labels+=("$label")
      else
        fail "helm template ($label): $out"
      fi
    done
  else
    fail "helmlite does not build: $(cat "$TMP/go.err")"
  fi
else
  skip "helm template: Go and golang-k8s-sigs-yaml-dev (Debian) not found"
fi

# ---- 2b. rendered manifests against the Kubernetes API schema ----
MC="$ROOT/deploy/tools/manifest-check"
if command -v node >/dev/null 2>&1 && [ -d "$MC/node_modules/kubernetes-models" ]; then
  if out="$(node "$MC/check.js" --self-test "$MC/testdata" 2>&1)"; then
    ok "$out"
  else
    fail "manifest-check self-test: $out"
  fi
  for i in "${!manifests[@]}"; do
    if out="$(node "$MC/check.js" "${manifests[$i]}" 2>&1)"; then
      ok "Kubernetes API schema (${manifest_labels[$i]}): $out"
    else
      fail "Kubernetes API schema (${manifest_labels[$i]}): $out"
    fi
  done
else
  fail "Kubernetes API schema: node or deploy/tools/manifest-check/node_modules missing (scripts/install-deps.sh manifest-check)"
fi

# ---- 3. systemd unit ----
if command -v systemd-analyze >/dev/null 2>&1; then
  # verify insists that ExecStart's binary exists; point it at a stub.
  mkdir -p "$TMP/unit"
  printf '#!/bin/sh\n' >"$TMP/unit/migd" && chmod +x "$TMP/unit/migd"
  sed "s#/usr/bin/migd#$TMP/unit/migd#" "$ROOT/deploy/systemd/migd.service" >"$TMP/unit/migd.service"
  out="$(systemd-analyze verify "$TMP/unit/migd.service" 2>&1)"
  if [ -z "$out" ]; then ok "systemd-analyze verify migd.service"; else fail "systemd-analyze verify: $out"; fi
  # The score docs/operations.md records ("Exposure: **N.N**") must be the
  # tool's: a change of the unit updates the documentation with it.
  score="$(systemd-analyze security --offline=yes "$TMP/unit/migd.service" 2>&1 |
    sed -n 's/.*Overall exposure level for migd.service: \([0-9.]*\).*/\1/p')"
  recorded="$(sed -n 's/.*systemd-analyze security.*Exposure: \*\*\([0-9.]*\)\*\*.*/\1/p' "$ROOT/docs/operations.md" | head -1)"
  if [ -z "$score" ]; then
    fail "systemd-analyze security --offline=yes printed no exposure score"
  elif [ "$score" = "$recorded" ]; then
    ok "systemd-analyze security --offline=yes migd.service: exposure $score (as docs/operations.md records)"
  else
    fail "systemd-analyze security: exposure $score, docs/operations.md records '${recorded:-nothing}'; update the Hardening section"
  fi
else
  fail "systemd unit: systemd-analyze not found (Debian package systemd; scripts/install-deps.sh deploy-check)"
fi

# ---- 3b. Dockerfile: the runtime packages exist in Debian 12 ----
# apt-cache needs package lists; a machine whose lists were cleaned skips.
if command -v apt-cache >/dev/null 2>&1 && grep -q 'VERSION_CODENAME=bookworm' /etc/os-release 2>/dev/null &&
   apt-cache show libc6 >/dev/null 2>&1; then
  # The names between "apt-get install ... \" and the "&& rm" line of the runtime stage.
  pkgs="$(sed -n '/^FROM .* AS runtime/,$p' "$ROOT/deploy/docker/Dockerfile" |
    sed -n '/apt-get install/,/&& rm/p' | grep -E '^ +[a-z0-9][a-z0-9.+-]+ +\\$' | sed 's/[ \\]//g')"
  if [ -z "$pkgs" ]; then
    fail "Dockerfile: no runtime packages found"
  else
    for p in $pkgs; do
      if apt-cache show "$p" >/dev/null 2>&1; then ok "Dockerfile package $p"; else fail "Dockerfile package $p: unknown to apt-cache"; fi
    done
    # Every shared library the built binaries need comes from a listed package
    # (or from the base packages every Debian image has).
    if [ -x "$MIGD" ] && command -v readelf >/dev/null 2>&1 &&
       readelf -d "$MIGD" | grep -Eq 'NEEDED.*lib(a|t|ub)san'; then
      # The image is built with the default preset; a sanitizer build links
      # its runtime and more libraries directly.
      skip "Dockerfile packages vs NEEDED: $MIGD is a sanitizer build"
    elif [ -x "$MIGD" ] && command -v readelf >/dev/null 2>&1; then
      bindir="$(dirname "$MIGD")"
      missing=""
      for lib in $(for b in "$MIGD" "$bindir/migctl" "$bindir/../lib/libnvidia-ml-sim.so.1"; do
                     [ -e "$b" ] && readelf -d "$b" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p'
                   done | sort -u); do
        path="$(ldconfig -p | awk -v l="$lib" '$1 == l { print $NF; exit }')"
        [ -n "$path" ] || continue
        real="$(readlink -f "$path")"
        pkg="$(dpkg -S "$real" 2>/dev/null || dpkg -S "/usr$real" 2>/dev/null || dpkg -S "${real#/usr}" 2>/dev/null)"
        pkg="${pkg%%:*}"
        case "$pkg" in "" | libc6 | libgcc-s1 | libstdc++6) continue ;; esac
        grep -qx "$pkg" <<<"$pkgs" || missing="$missing $pkg($lib)"
      done
      if [ -z "$missing" ]; then ok "Dockerfile packages cover the libraries $MIGD needs"; else fail "Dockerfile lacks runtime packages:$missing"; fi
    fi
  fi
else
  skip "Dockerfile packages: not a Debian 12 host with apt-cache"
fi

# ---- 4. configs through the real migd ----
if [ -x "$MIGD" ]; then
  n=0
  for cfg in "$ROOT/deploy/migd.yaml" "${configs[@]}"; do
    n=$((n + 1))
    d="$TMP/run-$n"
    mkdir -p "$d/sim/proc"
    label="${cfg#"$ROOT"/}"
    case "$cfg" in
      "$TMP"/*)
        # A chart config turns the Kubernetes integration on, which needs a
        # cluster; everything else in it is checked as rendered.
        # cdi.commonEditsFrom names a host file migd must be able to read
        # at startup: a stand-in spec of the same layout is used instead.
        label="chart-rendered migd.yaml #$n, kubernetes.enabled and recovery.ownerSource set to false/records"
        python3 - "$cfg" "$d/migd.yaml" "$d/nvidia.yaml" <<'EOF'
import sys, yaml
c = yaml.safe_load(open(sys.argv[1]))
c.setdefault("kubernetes", {})["enabled"] = False
c.setdefault("recovery", {})["ownerSource"] = "records"
if c.get("cdi", {}).get("commonEditsFrom"):
    with open(sys.argv[3], "w") as f:
        f.write("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\ncontainerEdits:\n"
                "  mounts:\n  - {hostPath: /usr/lib/libcuda.so.1, containerPath: /usr/lib/libcuda.so.1}\n")
    c["cdi"]["commonEditsFrom"] = sys.argv[3]
yaml.safe_dump(c, open(sys.argv[2], "w"), default_flow_style=False)
EOF
        cfg="$d/migd.yaml"
        ;;
    esac
    # migd refuses a config writable by group/other (a checkout under umask
    # 002 makes 0664 files): check a private copy.
    install -m 0600 "$cfg" "$d/checked.yaml"
    cfg="$d/checked.yaml"
    # Root-only paths and the host's /proc and driver go to the temporary
    # directory and the simulator: what is checked is the file's syntax and values.
    MIGD_SIM_STATE="$d/sim/state.json" MIGD_SIM_PROC_ROOT="$d/sim/proc" \
      "$MIGD" --config "$cfg" --simulate a100-40gb:1,h100-80gb:1 \
      --state-dir "$d/state" --socket "$d/api.socket" --cdi-spec-dir "$d/cdi" \
      --metrics-listen "" >"$d/out" 2>"$d/err" &
    pid=$!
    ready=0
    for _ in $(seq 600); do
      if grep -q "migd ready" "$d/err"; then ready=1; break; fi
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    rc=$?
    if [ "$ready" = 1 ] && [ "$rc" = 0 ]; then
      ok "migd --config $label"
    else
      fail "migd --config $label (ready=$ready exit=$rc): $(grep -v ' info ' "$d/err" | head -5)"
    fi
  done
else
  skip "configs: no migd binary at $MIGD (build it, or pass its path)"
fi

if [ "$failures" -ne 0 ]; then
  echo "deploy/check.sh: $failures check(s) failed"
  exit 1
fi
echo "deploy/check.sh: all checks passed"
