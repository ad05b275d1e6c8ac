#!/bin/bash
# Oracle solution: tabs, an order-only build/ directory, header dependencies,
# .PHONY, DESTDIR-aware install and a complete clean.
set -euo pipefail
cd /app/calc
printf '%s\n' \
  '# Build the calculator into build/.' \
  'CC      ?= gcc' \
  'CFLAGS  ?= -O2 -Wall -Wextra' \
  'PREFIX  ?= /usr/local' \
  'DESTDIR ?=' \
  'OBJS    = build/main.o build/ops.o' \
  '' \
  '.PHONY: all test install clean' \
  '' \
  'all: build/calc' \
  '' \
  'build/calc: $(OBJS)' \
  '	$(CC) $(CFLAGS) -o $@ $(OBJS)' \
  '' \
  'build/%.o: src/%.c src/ops.h | build' \
  '	$(CC) $(CFLAGS) -c -o $@ $<' \
  '' \
  'build:' \
  '	mkdir -p build' \
  '' \
  'test: build/calc' \
  '	./build/calc 2 + 3 | grep -qx 5' \
  '	./build/calc 6 x 7 | grep -qx 42' \
  '	@echo "tests passed"' \
  '' \
  'install: build/calc' \
  '	install -d $(DESTDIR)$(PREFIX)/bin' \
  '	install -m 755 build/calc $(DESTDIR)$(PREFIX)/bin/calc' \
  '' \
  'clean:' \
  '	rm -rf build' > Makefile
make clean
make -j4
make test
