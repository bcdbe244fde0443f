# hangwatch - top-level entry points.  CMake does the building; this file
# only names the things people run:
#
#   make          build everything into build/ (CLI: build/bin/hangwatch)
#   make demo     build, then run the demo under hangwatch and show its report
#   make test     build and run every test: ThreadSanitizer (concurrency),
#                 AddressSanitizer + UndefinedBehaviorSanitizer (clang, whole
#                 suite), then the plain gcc build (whole suite)
#   make bench    benchmarks (bench/), results in docs/benchmarks.md
#   make compare  every detector on every scenario (compare/), table in
#                 docs/comparison.md (about 12 minutes)
#   make install  install the CLI, the observer, the library, its header and
#                 pkg-config file under PREFIX (default /usr/local; DESTDIR
#                 is honoured)
#   make clean    remove build output
#
# Missing Debian packages are installed when run as root, otherwise the
# exact apt-get line is printed (scripts/ensure-deps.sh).

BUILD      ?= build
JOBS       ?= 2
CMAKE_ARGS ?=
PREFIX     ?= /usr/local

.PHONY: all build demo test test-plain test-asan test-tsan clean deps-build deps-test bench compare install

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

test-asan: deps-test
	@cmake -S . -B $(BUILD)-asan -DCMAKE_C_COMPILER=clang -DHANGWATCH_SANITIZE=address >/dev/null
	@cmake --build $(BUILD)-asan -j $(JOBS)
	cd $(BUILD)-asan && ctest --output-on-failure -j $(JOBS)

test-plain: deps-test
	@cmake -S . -B $(BUILD) -DCMAKE_C_COMPILER=gcc -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The plain run goes last so that the final line is the whole suite's summary.
test: test-tsan test-asan test-plain

bench: build
	@scripts/ensure-deps.sh bench
	@/usr/bin/python3 bench/run.py --build $(BUILD)

compare: build
	@scripts/ensure-deps.sh compare
	@/usr/bin/python3 compare/run.py --build $(BUILD)

install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

clean:
	rm -rf $(BUILD) $(BUILD)-asan $(BUILD)-tsan
