# migd — developer entry points. Every target that needs packages installs them
# first (scripts/install-deps.sh is idempotent and quiet when nothing is missing).
#
#   make test        deps + build + every ctest tier, summary printed
#   make run         deps + build + migd's main job on simulated GPUs when no
#                    NVIDIA driver is present (today: `migctl probe`)
#   make build       deps + RelWithDebInfo build in build/
#   make test-asan   the whole suite under ASan+UBSan (build-asan/)
#   make test-tsan   the whole suite under TSan (build-tsan/)
#   make bench-placement
#                    deps (+ gnuplot) + the placement benchmark in build-bench/
#                    (Release); writes docs/benchmarks/placement.md and plots

SHELL := /bin/bash
JOBS ?= 2
SIM_GPUS ?= a100-40gb:2,h100-80gb:1
RUN_DIR ?= $(CURDIR)/build/run

.PHONY: all deps deps-test configure build test run test-asan test-tsan test-debug clean probe bench-placement

all: build

deps:
	@scripts/install-deps.sh

# The tests also need Go and the CDI Go library (tests/cdi checks every spec
# migd writes against the real CDI library).
deps-test:
	@scripts/install-deps.sh cdi-check metrics-check

configure: deps
	@cmake --preset default >/dev/null

build: configure
	@cmake --build --preset default -j $(JOBS)

test: deps-test build
	@cd build && ctest --output-on-failure -j $(JOBS) --timeout 600

test-%: deps
	@cmake --preset $* >/dev/null
	@cmake --build --preset $* -j $(JOBS)
	@cd build-$* && ctest --output-on-failure -j $(JOBS) --timeout 1200

# The real driver is used only when libnvidia-ml.so.1 is loadable; otherwise
# migd runs on the simulated library with a fresh simulated machine.
run: build
	@if ldconfig -p 2>/dev/null | grep -q 'libnvidia-ml.so.1'; then \
	  echo "make run: NVIDIA driver found; probing the real GPUs (read-only)"; \
	  build/bin/migctl probe; \
	else \
	  echo "make run: no NVIDIA driver (libnvidia-ml.so.1) on this machine; using simulated GPUs $(SIM_GPUS)"; \
	  rm -rf $(RUN_DIR) && mkdir -p $(RUN_DIR)/proc; \
	  MIGD_SIM_STATE=$(RUN_DIR)/sim-state.json MIGD_SIM_GPUS=$(SIM_GPUS) \
	  MIGD_SIM_PROC_ROOT=$(RUN_DIR)/proc \
	    build/bin/migctl probe --nvml-library build/lib/libnvidia-ml-sim.so.1; \
	fi

clean:
	rm -rf build build-debug build-asan build-tsan

# The placement benchmark (bench/placement, placement.md §6): < 10 min on 2 cores.
bench-placement:
	@scripts/install-deps.sh bench
	@bench/placement/run.sh
