/* SPDX-License-Identifier: MIT */
/*
 * Fuzz harness: multipart uploads to envd's POST /files (src/server/
 * envd_files.c). Line 1 of the input is the rest of the Content-Type after
 * "multipart/form-data; " (the boundary parameter), line 2 the query string
 * (path=, username=), the rest the body, sent with the fake sandbox's
 * access token through the whole request path (srv_fixture.c).
 */
#include <stdlib.h>
#include <string.h>

#include "../../src/util/alloc.h"
#include "fuzz.h"
#include "srv_fixture.h"

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc, (void)argv;
	fz_srv();
	return 0;
}

static char *line(const char **p, const char *end)
{
	const char *nl = memchr(*p, '\n', (size_t)(end - *p));
	const char *stop = nl ? nl : end;
	char *s = xstrndup(*p, (size_t)(stop - *p));
	*p = nl ? nl + 1 : end;
	return s;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const char *p = (const char *)data, *end = p + size;
	char *params = line(&p, end), *query = line(&p, end);
	char *ctype = xasprintf("multipart/form-data; %s", params);
	char *url = xasprintf("/files%s%s", *query ? "?" : "", query);
	struct fz_header h[] = { { "X-Access-Token", FZ_TOKEN }, { "Content-Type", ctype } };
	size_t len = (size_t)(end - p);
	fz_request("POST", url, h, 2, p, len, len / 3);
	free(url);
	free(ctype);
	free(query);
	free(params);
	return 0;
}
