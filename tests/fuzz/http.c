/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: HTTP request handling of `sbx serve` (src/server/): the
 * input is one request, "METHOD URL\n", header lines "Name: value\n", an
 * empty line, then the body, run through http.c's request callbacks,
 * routing, auth, the control plane (JSON bodies, query strings, paths) and
 * envd's data plane against one fake sandbox (srv_fixture.c). Template
 * builds are left out: a POST there would start a real build.
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/util/alloc.h"
#include "fuzz.h"
#include "srv_fixture.h"

#define MAX_HEADERS 32

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_srv();
	return 0;
}

/* Next line of [*p, end) without its "\n" (or "\r\n"), NUL-terminated copy. */
static char *next_line(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	const char *stop = nl ? nl : end;
	size_t n = (size_t)(stop - *p);
	if (n && (*p)[n - 1] == '\r')
		n--;
	char *line = xstrndup(*p, n);
	*p = nl ? nl + 1 : end;
	return line;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	char *first = next_line(&p, end);
	char *sp = strchr(first, ' ');
	if (!sp) {
		free(first);
		return 0;
	}
	*sp = '\0';
	const char *method = first, *url = sp + 1;
	if (*url != '/' || (strstr(url, "templates") && strcmp(method, "GET") != 0 &&
			    strcmp(method, "DELETE") != 0)) {
		free(first);
		return 0;
	}
	struct fz_header h[MAX_HEADERS];
	char *lines[MAX_HEADERS];
	size_t nh = 0;
	while (p < end && nh < MAX_HEADERS) {
		char *line = next_line(&p, end);
		char *colon = strchr(line, ':');
		if (!*line || !colon) {
			free(line);
			break;
		}
		*colon = '\0';
		const char *v = colon + 1;
		while (*v == ' ')
			v++;
		lines[nh] = line;
		h[nh++] = (struct fz_header){ line, v };
	}
	size_t len = (size_t)(end - p);
	fz_request(method, url, h, nh, p, len, len / 2);
	for (size_t i = 0; i < nh; i++)
		free(lines[i]);
	free(first);
	return 0;
}
