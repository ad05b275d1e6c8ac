# Thin wrapper: the real build is Meson + Ninja.
#   make demo   install missing packages, build, run the main job on `local`
#   make base   build the image `sbx serve` serves as E2B's template "base" (make demo does too)
#   make check  install missing packages, build (plain + ASan/UBSan), run every offline test
#   make install  install the library, headers, CLI and the Python package (meson install;
#               PREFIX via `meson configure build -Dprefix=...`, DESTDIR honoured)
#   make bench-report  rewrite the summary table in docs/performance.md from build/bench-results/
#               (BENCH_RUN=1: run every bench first, small sizes, 10-15 min, as root)
#   make fuzz   build the libFuzzer harnesses with clang and run each FUZZ_MINUTES minutes
BUILD ?= build
ASAN  ?= build-asan
MESON ?= meson
FUZZ_MINUTES ?= 5
BENCH_RUN ?=

.PHONY: all deps build install demo base check test test-asan checksrc bench bench-report clean fuzz

all: build

deps:
	bash scripts/deps.sh

$(BUILD)/build.ninja:
	$(MESON) setup $(BUILD) --buildtype=debugoptimized

$(ASAN)/build.ninja:
	$(MESON) setup $(ASAN) --buildtype=debug -Db_sanitize=address,undefined -Db_lundef=false

build: deps $(BUILD)/build.ninja
	ninja -C $(BUILD)

install: build
	$(MESON) install -C $(BUILD)

demo: build
	bash scripts/demo.sh $(BUILD)

base: build
	bash scripts/base-template.sh $(BUILD)

test: build
	bash scripts/run-tests.sh $(BUILD)

test-asan: deps $(ASAN)/build.ninja
	ninja -C $(ASAN)
	bash scripts/run-tests.sh $(ASAN)

checksrc:
	bash scripts/checksrc.sh

check: build checksrc
	bash scripts/check.sh $(BUILD) $(ASAN)

bench: build
	bash scripts/deps.sh --bench
	bash bench/lifecycle.sh $(BUILD)

# One table of every bench's headline figures against its peers (bench/README.md).
bench-report:
	/usr/bin/python3 bench/report.py $(BUILD) $(if $(BENCH_RUN),--run)

# Runs each libFuzzer harness (tests/fuzz) for FUZZ_MINUTES minutes; docs/fuzzing.md.
fuzz: deps
	FUZZ_MINUTES=$(FUZZ_MINUTES) bash scripts/fuzz.sh

clean:
	rm -rf $(BUILD) $(ASAN)
