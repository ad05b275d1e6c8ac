/* SPDX-License-Identifier: MIT */
/*
 * toml-test decoder: reads TOML on stdin, prints the tagged JSON on stdout.
 * Exit 0 on success, 1 when the document is rejected (message on stderr),
 * 2 on usage or I/O errors.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "tasks/toml.h"
#include "util/buf.h"

int main(int argc, char **argv)
{
	(void)argv;
	if (argc != 1) {
		fprintf(stderr, "usage: toml-decoder < file.toml\n");
		return 2;
	}
	sbx_buf in;
	sbx__buf_init(&in, SBX_TOML_MAX_FILE);
	char chunk[65536];
	for (;;) {
		ssize_t n = read(STDIN_FILENO, chunk, sizeof(chunk));
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			perror("toml-decoder: read");
			return 2;
		}
		if (n == 0)
			break;
		if (sbx__buf_append(&in, chunk, (size_t)n) < 0) {
			fprintf(stderr, "toml-decoder: input larger than %u bytes\n",
				SBX_TOML_MAX_FILE);
			sbx__buf_free(&in);
			return 1;
		}
	}
	sbx_toml *root = NULL;
	sbx_error *err = NULL;
	int r = sbx__toml_parse(&root, in.data, in.len, "<stdin>", &err);
	sbx__buf_free(&in);
	if (r < 0) {
		fprintf(stderr, "%s\n", err ? err->msg : "parse error");
		sbx_error_free(err);
		return 1;
	}
	char *json = NULL;
	r = sbx__toml_to_tagged_json(&json, root);
	sbx__toml_free(root);
	if (r < 0) {
		fprintf(stderr, "toml-decoder: out of memory\n");
		return 2;
	}
	puts(json);
	free(json);
	return 0;
}
