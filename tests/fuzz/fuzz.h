/* SPDX-License-Identifier: MIT */
/*
 * The libFuzzer entry points every harness in tests/fuzz/ defines. The same
 * harness links either with libFuzzer (-fsanitize=fuzzer, `make fuzz`) or
 * with replay.c, which feeds it the files of its corpus (`make check`).
 */
#ifndef SBX_FUZZ_H
#define SBX_FUZZ_H

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The process's scratch directory /dev/shm/sbx-fuzz-NAME-XXXXXX (scratch.c),
 * made on the first call and removed at exit. */
const char *fz_scratch_dir(const char *name);

#endif
