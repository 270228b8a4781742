# tpl -- developer / CI entry points (GNU make).
#
#   make deps                 install missing Debian packages (apt-get)
#   make test                 release, debug-asan, tsan, fuzz: configure + build + ctest
#                             (tsan is clang 16 over libc++, so the suite runs against both
#                             standard libraries; make test-libcxx runs it over libc++ unsanitized)
#                             (ctest runs JOBS tests at a time; the bench harness self-test,
#                             which times things, runs alone: RUN_SERIAL)
#                             (release and debug-asan include a short tpl_soak run; fuzz builds
#                             only the library and the libFuzzer targets and runs each over its
#                             corpus plus a bounded number of fuzzing runs)
#   make test-<preset>        one configuration only (release | debug-asan | tsan | fuzz | libcxx)
#   make soak [SOAK_ITERATIONS=N] [SOAK_ASAN_ITERATIONS=N] [SOAK_SEED=S]
#                             the long soak: tpl_soak in release (SOAK_ITERATIONS, default 10000:
#                             a few minutes), then in debug-asan with LeakSanitizer
#                             (SOAK_ASAN_ITERATIONS, default 300). See docs/testing.md, "Soak".
#   make bench [QUICK=1] [FILTER=group|regex]
#                             build the release preset, build the peers (Go, tokio, rayon, Asio,
#                             oneTBB, Java 21+, Mono, .NET Core; each skipped if its toolchain
#                             is missing) and run bench/run.py: tpl and the peers interleaved.
#                             A full run (no QUICK, no FILTER) regenerates docs/benchmarks.md
#                             and docs/img/*.png.
#                             It also rewrites README.md's figures (saved in docs/bench-results.json;
#                             `python3 bench/run.py --regen-docs` redoes README from them).
#   make clean                remove build/
#
# Variables: JOBS (build parallelism, default 2), BENCH_PRESET (default release).

SHELL := /bin/bash
.SHELLFLAGS := -eu -o pipefail -c
.DEFAULT_GOAL := test
MAKEFLAGS += --no-print-directory

JOBS         ?= 2
TEST_PRESETS := release debug-asan tsan fuzz
EXTRA_PRESETS := libcxx
BENCH_PRESET ?= release
QUICK        ?=
FILTER       ?=

# Debian packages. libbenchmark-dev is needed by `test` too because the
# release preset also builds the benchmarks.
# llvm-16 brings llvm-symbolizer, which TSan needs to name functions in a report and to apply its
# suppressions (tests/main/tsan_suppressions.cpp).
TEST_PKGS  := cmake ninja-build g++ clang-16 libclang-rt-16-dev llvm-16 libgtest-dev googletest libc++-16-dev libc++abi-16-dev \
              python3 libbenchmark-dev pkgconf liburing-dev
# The bench peers' toolchains from Debian (Go, cargo and the JDKs come with the machine or not;
# .NET Core comes from PyPI into build/peers/venv). A missing one only skips that peer.
BENCH_PKGS := $(TEST_PKGS) libasio-dev libtbb-dev mono-mcs python3-venv python3-matplotlib wrk

SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# Runtime options for the sanitizer configurations.
# Under CI=true the release configuration's bench_harness self-test runs tpl's programs only:
# building and running the peers there takes about two minutes of the suite's 25.
ENV_release    := $(if $(filter true 1,$(CI)),TPL_BENCH_SELFTEST_PEERS=0)
ENV_debug-asan := ASAN_OPTIONS=detect_leaks=1:halt_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ENV_tsan       := TSAN_OPTIONS='halt_on_error=1 second_deadlock_stack=1'
ENV_fuzz       := $(ENV_debug-asan)
ENV_libcxx     :=

SOAK_ITERATIONS      ?= 10000
SOAK_ASAN_ITERATIONS ?= 300
SOAK_SEED            ?= 1
# Sanitized binaries need ASLR off on kernels with vm.mmap_rnd_bits > 28 (as tests/CMakeLists.txt).
NO_ASLR := $(shell [ "$$(cat /proc/sys/vm/mmap_rnd_bits 2>/dev/null || echo 0)" -gt 28 ] && \
             setarch "$$(uname -m)" -R true 2>/dev/null && echo setarch "$$(uname -m)" -R)

.PHONY: all deps deps-test deps-bench test bench soak clean $(addprefix test-,$(TEST_PRESETS) $(EXTRA_PRESETS))

all: test

# --- dependencies --------------------------------------------------------------
# $(call install_pkgs,<packages>): apt-get only what `dpkg -s` reports missing.
define install_pkgs
	@if ! command -v dpkg >/dev/null 2>&1; then \
	  echo "deps: dpkg not found (not Debian/Ubuntu?); skipping package installation"; exit 0; \
	fi; \
	missing=""; \
	for p in $(1); do \
	  dpkg -s "$$p" 2>/dev/null | grep -q '^Status: install ok installed' || missing="$$missing $$p"; \
	done; \
	if [ -z "$$missing" ]; then \
	  echo "deps: all required packages are installed"; \
	else \
	  echo "deps: installing:$$missing"; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get update; \
	  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $$missing; \
	fi
endef

deps: deps-bench

deps-test:
	$(call install_pkgs,$(TEST_PKGS))

deps-bench:
	$(call install_pkgs,$(BENCH_PKGS))

# --- tests -----------------------------------------------------------------------
# $(call run_preset,<preset>): configure, build and test one configuration.
define run_preset
	@echo; \
	echo "=================================================================="; \
	echo "==  tpl: configuration '$(1)'  (configure / build / ctest)"; \
	echo "=================================================================="; \
	start=$$(date +%s); \
	cmake --preset $(1); \
	cmake --build --preset $(1) -j$(JOBS); \
	env $(ENV_$(1)) ctest --preset $(1) -j$(JOBS); \
	echo "==  tpl: configuration '$(1)' PASSED in $$(( $$(date +%s) - start )) s"
endef

test: deps-test
	@start=$$(date +%s); \
	for p in $(TEST_PRESETS); do \
	  if ! $(MAKE) _test-one PRESET=$$p; then \
	    echo; echo "==  tpl: configuration '$$p' FAILED -- stopping"; exit 1; \
	  fi; \
	done; \
	echo; echo "==  tpl: all configurations passed ($(TEST_PRESETS)) in $$(( $$(date +%s) - start )) s"

$(addprefix test-,$(TEST_PRESETS) $(EXTRA_PRESETS)): test-%: deps-test
	$(call run_preset,$*)

.PHONY: _test-one
_test-one:
	$(call run_preset,$(PRESET))

# --- soak ------------------------------------------------------------------------------
soak: deps-test
	cmake --preset release
	cmake --build --preset release --target tpl_soak -j$(JOBS)
	build/release/tests/tpl_soak --iterations $(SOAK_ITERATIONS) --seed $(SOAK_SEED)
	cmake --preset debug-asan
	cmake --build --preset debug-asan --target tpl_soak -j$(JOBS)
	env $(ENV_debug-asan) $(NO_ASLR) build/debug-asan/tests/tpl_soak --iterations $(SOAK_ASAN_ITERATIONS) --seed $(SOAK_SEED)

# --- benchmarks --------------------------------------------------------------------
BENCH_QUICK := $(filter-out 0 no false off OFF,$(QUICK))
BENCH_ARGS  := $(if $(BENCH_QUICK),--quick) $(if $(FILTER),--filter '$(FILTER)') \
               $(if $(BENCH_QUICK)$(FILTER),,--docs) \
               --command "make bench$(if $(BENCH_QUICK), QUICK=1)$(if $(FILTER), FILTER=$(FILTER))"

# deps-bench may fail (no network, not root): the peers it would bring are then skipped.
bench:
	-@$(MAKE) deps-bench
	cmake --preset $(BENCH_PRESET)
	cmake --build --preset $(BENCH_PRESET) -j$(JOBS)
	python3 bench/run.py --build build/$(BENCH_PRESET) $(BENCH_ARGS)

# --- misc --------------------------------------------------------------------------
clean:
	rm -rf build
