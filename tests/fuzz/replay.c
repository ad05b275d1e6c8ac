/* SPDX-License-Identifier: MIT */
/*
 * Standalone driver for the fuzz harnesses (libFuzzer's standalone mode):
 * runs LLVMFuzzerTestOneInput once per file named on the command line, or
 * per file of each directory named. A crash or sanitizer report fails the
 * run; so does an empty corpus, which would otherwise pass silently.
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "../../src/util/alloc.h"
#include "../../src/util/fs.h"
#include "fuzz.h"

__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

static int run_file(const char *path)
{
	char *data = NULL;
	size_t len = 0;
	sbx_error *e = NULL;
	if (sbx__read_file(&data, &len, path, 64u << 20, &e) < 0) {
		fprintf(stderr, "replay: %s\n", e && e->msg ? e->msg : path);
		sbx_error_free(e);
		return -1;
	}
	LLVMFuzzerTestOneInput((const uint8_t *)data, len);
	free(data);
	return 0;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

int main(int argc, char **argv)
{
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	size_t ran = 0;
	for (int i = 1; i < argc; i++) {
		struct stat st;
		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		if (!S_ISDIR(st.st_mode)) {
			if (run_file(argv[i]) < 0)
				return 1;
			ran++;
			continue;
		}
		struct dirent **ents = NULL;
		int n = scandir(argv[i], &ents, NULL, by_name);
		if (n < 0) {
			fprintf(stderr, "replay: %s: %s\n", argv[i], strerror(errno));
			return 1;
		}
		for (int k = 0; k < n; k++) {
			char *p = xasprintf("%s/%s", argv[i], ents[k]->d_name);
			if (ents[k]->d_name[0] != '.' && stat(p, &st) == 0 && S_ISREG(st.st_mode)) {
				if (run_file(p) < 0)
					return 1;
				ran++;
			}
			free(p);
			free(ents[k]);
		}
		free(ents);
	}
	if (ran == 0) {
		fprintf(stderr, "replay: no inputs\n");
		return 1;
	}
	printf("replay: %zu inputs ok\n", ran);
	return 0;
}
