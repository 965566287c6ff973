# migd — developer entry points. Every target that needs packages installs them
# first (scripts/install-deps.sh is idempotent and quiet when nothing is missing).
#
#   make test        what CI runs: `make check`, then scripts/ci-sanitizers.sh
#                    (fuzz targets 10 s each, a core subset under ASan+UBSan
#                    and under TSan)
#   make check       deps + build + every ctest tier, summary printed
#   make run         deps + build + migd in the foreground: on simulated GPUs
#                    when no NVIDIA driver is present (state in build/run/)
#   make demo        a scripted scenario on simulated GPUs (scripts/demo.sh)
#   make build       deps + RelWithDebInfo build in build/
#   make test-asan   the whole suite under ASan+UBSan (build-asan/)
#   make test-tsan   the whole suite under TSan (build-tsan/)
#   make bench-placement
#                    deps (+ gnuplot) + the placement benchmark in build-bench/
#                    (Release); writes docs/benchmarks/placement.md and plots
#   make bench-latency
#                    deps (+ gnuplot) + the latency benchmark (bench/latency):
#                    policies side by side, recovery, footprint; writes
#                    docs/benchmarks/latency/results.md and the plot
#   make crash-test N=... [SEED=...]
#                    crash campaign against the real migd, prints survived S/N
#   make fuzz        libFuzzer targets (clang), FUZZ_SECONDS each (docs/fuzzing.md)
#   make bench-load  32 clients x 10,000 operations against the real migd
#                    (bench/load, docs/benchmarks/load.md); QUICK=1 for a short run
#   make image       the container image of deploy/docker/Dockerfile, built with
#                    podman (scripts/image.sh; debootstrap base without a registry)
#   make image-test  migd from that image, run as the Helm chart runs it
#                    (simulated GPUs): ready, migctl status from the host, an
#                    allocation's CDI spec on the host, clean SIGTERM.
#                    Not part of `make test`: building the image compiles migd
#                    from scratch in the build stage (40 min measured on 2
#                    cores, docs/operations.md "Container image"), which does
#                    not fit CI's 40-minute budget beside the suite. Run both
#                    before each landing that touches deploy/.
#   make config-doc  rewrites docs/config.md's key table from the config schema

SHELL := /bin/bash
JOBS ?= 2
SIM_GPUS ?= a100-40gb:2,h100-80gb:1
RUN_DIR ?= $(CURDIR)/build/run

.PHONY: all deps deps-test configure build test check run demo test-asan test-tsan test-debug clean config-doc probe bench-placement bench-latency bench-load crash-test fuzz fuzz-ci image image-test

all: build

deps:
	@scripts/install-deps.sh

# The tests also need: Go and the CDI Go library (tests/cdi checks every spec
# migd writes against the real CDI library), Prometheus (promtool and the
# server), the deploy checks' YAML tools, Node.js with the pinned npm
# kubernetes-models (every rendered manifest against the Kubernetes API
# schema), podman with runc and crun (tests/runtime) and clang 14 (fuzzing,
# sanitizers, -Wthread-safety).
deps-test:
	@scripts/install-deps.sh cdi-check metrics-check deploy-check manifest-check runtime-e2e fuzz

configure: deps
	@cmake --preset default >/dev/null

build: configure
	@cmake --build --preset default -j $(JOBS)

# What CI runs: the whole suite, then the sanitizer and fuzzing share
# (scripts/ci-sanitizers.sh: fuzz targets 10 s each, a core subset under
# ASan+UBSan and under TSan). `make check` is the suite alone.
test: check
	@umask 022 && scripts/ci-sanitizers.sh

check: deps-test build
	@umask 022 && cd build && ctest --output-on-failure -j $(JOBS) --timeout 600

test-%: deps
	@cmake --preset $* >/dev/null
	@cmake --build --preset $* -j $(JOBS)
	@cd build-$* && ctest --output-on-failure -j $(JOBS) --timeout 1200

# migd in the foreground. With an NVIDIA driver (libnvidia-ml.so.1 in the
# linker cache) it manages the real GPUs with the default config (root needed);
# otherwise it runs on simulated GPUs $(SIM_GPUS) with every file under
# $(RUN_DIR). migd itself never falls back to simulation: this target chooses.
METRICS_LISTEN ?= 127.0.0.1:9400
run: build
	@if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then \
	  echo "make run: NVIDIA driver found; starting migd on the real GPUs (Ctrl-C stops it)"; \
	  exec build/bin/migd $(if $(CONFIG),--config $(CONFIG)); \
	else \
	  rm -rf $(RUN_DIR) && mkdir -p $(RUN_DIR); \
	  printf '%s\n' \
	    "make run: no NVIDIA driver (libnvidia-ml.so.1) here; migd runs on simulated GPUs $(SIM_GPUS)" \
	    "  state:   $(RUN_DIR)   (Ctrl-C stops migd; the next make run starts fresh)" \
	    "  socket:  $(RUN_DIR)/api.socket" \
	    "  metrics: http://$(METRICS_LISTEN)/metrics" \
	    "Try in another terminal:" \
	    "  export MIGD_SOCKET=$(RUN_DIR)/api.socket" \
	    "  build/bin/migctl allocate --id demo-1 --owner me 3g.20gb" \
	    "  build/bin/migctl status" \
	    "  build/bin/migctl release --id demo-1" \
	    ""; \
	  exec env MIGD_SIM_STATE=$(RUN_DIR)/sim-state.json MIGD_SIM_PROC_ROOT=$(RUN_DIR)/proc \
	    build/bin/migd --simulate $(SIM_GPUS) --socket $(RUN_DIR)/api.socket \
	    --state-dir $(RUN_DIR)/state --cdi-spec-dir $(RUN_DIR)/cdi \
	    --metrics-listen $(METRICS_LISTEN); \
	fi

# A scripted tour on simulated GPUs: allocate, release, reuse, pressure
# reclaim, operator reclaim, restart; `migctl status` between the steps.
demo: build
	@scripts/demo.sh

# docs/config.md's key table, regenerated from the config schema
# (src/daemon/config_schema.cc); the config_doc_table test fails while it is stale.
config-doc: configure
	@cmake --build --preset default -j $(JOBS) --target migd_config_doc
	@build/bin/migd_config_doc --write docs/config.md

clean:
	rm -rf build build-debug build-asan build-tsan

# The placement benchmark (bench/placement, placement.md §6): < 10 min on 2 cores.
bench-placement:
	@scripts/install-deps.sh bench
	@bench/placement/run.sh

# The latency benchmark (bench/latency, docs/benchmarks/latency.md): about 13 min on 2 cores.
bench-latency:
	@scripts/install-deps.sh bench
	@bench/latency/run.sh

# The load benchmark (bench/load, docs/benchmarks/load.md): 32 clients x 10,000
# operations against the real migd on simulated GPUs; QUICK=1 for a short run.
bench-load: build
	@bench/load/run.sh $(if $(QUICK),--quick)

# Crash campaign (tests/crash, docs/reliability.md): the real migd SIGKILLed
# at random moments and inside NVML creates/destroys, restarted and checked
# N times; prints "survived S/N".
crash-test: configure
	@BUILD_DIR=build scripts/crash-campaign.sh $(or $(N),1000) $(or $(SEED),1)

# libFuzzer (clang preset `fuzz`, build-fuzz/, docs/fuzzing.md): every target
# for FUZZ_SECONDS; fuzz-ci replays each corpus and fuzzes each target 10 s.
# (`make test` replays every corpus input under GCC: fuzz_*_corpus.)
FUZZ_SECONDS ?= 60
fuzz:
	@FUZZ_SECONDS=$(FUZZ_SECONDS) fuzz/run.sh
fuzz-ci:
	@fuzz/run.sh ci

# The container image (scripts/image.sh, docs/operations.md "Container image").
image:
	@scripts/install-deps.sh image
	@scripts/image.sh build

image-test: build
	@scripts/install-deps.sh image deploy-check
	@scripts/image.sh test
