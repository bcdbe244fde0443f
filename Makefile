# hangwatch - top-level entry points.  CMake does the building; this file
# only names the things people run:
#
#   make          build everything into build/ (CLI: build/bin/hangwatch)
#   make demo     build, then run the demo under hangwatch and show its report
#   make test     build and run every test: ThreadSanitizer (concurrency),
#                 AddressSanitizer + UndefinedBehaviorSanitizer (clang, whole
#                 suite, plus the fuzz targets briefly), then the plain gcc
#                 build (whole suite, with the kernel observer's fentry
#                 tests on Debian's stock kernel booted under QEMU: tests/vm)
#   make test-under-load
#                 the same suite with two CPU hogs running beside it
#                 (scripts/with-cpu-hogs.sh): a busy machine is where hangs
#                 happen, and every test must hold there
#   make bench    benchmarks (bench/), results in docs/benchmarks.md
#   make compare  every detector on every scenario (compare/), and the
#                 verdict corpus (hangs made of one known thing each, beside
#                 two CPU hogs: the verdict's accuracy), tables in
#                 docs/comparison.md (about 13 minutes)
#   make coverage every loop library x every way a callback blocks, under
#                 run and watch (tests/integration/test_coverage.py, which
#                 make test runs too), table in docs/coverage.md
#   make soak     hangwatch watching a tree of 20 processes that hang, fork,
#                 exec, die and restart at random for SOAK_MINUTES (default
#                 60), with early sampling, metrics and Sentry on: the agent's
#                 RSS, fds, threads and report directory every 5 s in
#                 $(BUILD)/soak/soak.csv and soak.svg, every hang accounted
#                 for; fails on an unaccounted hang or growth after warm-up
#                 (bench/soak.py says the rule)
#   make fuzz     build the libFuzzer targets (fuzz/, clang, in build-fuzz)
#                 and run each for FUZZ_SECONDS (default 60); FUZZ_TARGETS
#                 picks some ("page registration"); new inputs stay in
#                 build-fuzz/fuzz/new-corpus unless FUZZ_MERGE=1 merges them
#                 into fuzz/corpus (docs/fuzzing.md).  `make test` runs each
#                 target over its corpus and for 10 s in the ASan build.
#   make install  install the CLI, the observer, the library, its header and
#                 pkg-config file under PREFIX (default /usr/local; DESTDIR
#                 is honoured)
#   make clean    remove build output
#
# Missing Debian packages are installed when run as root, otherwise the
# exact apt-get line is printed (scripts/ensure-deps.sh).

BUILD      ?= build
JOBS       ?= 2
# Tests at once: one more than the two cores, as most integration tests
# spend their time waiting for a hang to pass its threshold; the tests hold
# beside two CPU hogs (make test-under-load), and those that time
# themselves against the threshold run alone (RUN_SERIAL).
TEST_JOBS  ?= 3
CMAKE_ARGS ?=
PREFIX     ?= /usr/local
FUZZ_SECONDS ?= 60
FUZZ_MERGE   ?= 0
FUZZ_TARGETS ?=
SOAK_MINUTES ?= 60

.PHONY: all build demo test test-under-load test-plain test-asan test-tsan clean deps-build deps-test bench compare coverage install fuzz soak

all: build

deps-build:
	@scripts/ensure-deps.sh build

deps-test:
	@scripts/ensure-deps.sh test

build: deps-build
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	@rm -rf $(BUILD)/demo-reports
	@echo "== running the demo under hangwatch (it blocks its main thread in sleep(4)) =="
	$(BUILD)/bin/hangwatch run --report-dir $(BUILD)/demo-reports -- $(BUILD)/bin/hangwatch-demo
	@echo
	@echo "== the report hangwatch wrote =="
	@$(BUILD)/bin/hangwatch show $(BUILD)/demo-reports/*.json

test-tsan: deps-test
	@cmake -S . -B $(BUILD)-tsan -DCMAKE_C_COMPILER=clang -DHANGWATCH_SANITIZE=thread >/dev/null
	@cmake --build $(BUILD)-tsan -j $(JOBS)
	cd $(BUILD)-tsan && ctest -L concurrency --output-on-failure -j $(JOBS)

# The ASan tree also builds the fuzz targets: their tests (label "fuzz") run
# each over its committed corpus and fuzz it briefly.
test-asan: deps-test
	@cmake -S . -B $(BUILD)-asan -DCMAKE_C_COMPILER=clang -DHANGWATCH_SANITIZE=address -DHANGWATCH_FUZZ=ON >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(TEST_JOBS)

test-plain: deps-test
	@cmake -S . -B $(BUILD) -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(TEST_JOBS)

# The plain run goes last so that the final line is the whole suite's summary.
test: test-tsan test-asan test-plain

test-under-load:
	@scripts/with-cpu-hogs.sh 2 $(MAKE) --no-print-directory test

bench: build
	@scripts/ensure-deps.sh bench
	@/usr/bin/python3 bench/run.py --build $(BUILD)

compare: build
	@scripts/ensure-deps.sh compare
	@/usr/bin/python3 compare/run.py --build $(BUILD)

coverage: deps-test build
	@status=0; (cd $(BUILD) && ctest -R '^it_test_coverage_matrix$$' --output-on-failure) || status=$$?; \
	  cp $(BUILD)/coverage/coverage.md docs/coverage.md && echo "docs/coverage.md written"; exit $$status

soak: build
	@scripts/ensure-deps.sh soak
	@/usr/bin/python3 bench/soak.py $(BUILD) --minutes $(SOAK_MINUTES) --out $(BUILD)/soak

fuzz:
	@scripts/ensure-deps.sh fuzz
	@cmake -S . -B $(BUILD)-fuzz -DCMAKE_C_COMPILER=clang -DHANGWATCH_FUZZ=ON >/dev/null
	@cmake --build $(BUILD)-fuzz -j $(JOBS) --target fuzz_targets
	@FUZZ_MERGE=$(FUZZ_MERGE) fuzz/run.sh $(BUILD)-fuzz $(FUZZ_SECONDS) $(FUZZ_TARGETS)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan $(BUILD)-fuzz
