/* SPDX-License-Identifier: MIT */
/* The Daytona API's object storage (daytona/objects.c): which paths are S3
 * requests, that object PUTs stream, which keys are accepted, and where a
 * build context's tar lives (only for a hex hash, under the state dir). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "server/daytona/daytona.h"

Test(server_daytona_objects, s3_paths_and_streaming)
{
	cr_expect(sbx__dt_s3_match("/api/object-storage/s3/daytona-volume-builds/"));
	cr_expect(sbx__dt_match("/api/object-storage/s3/daytona-volume-builds/"), "served by the Daytona API");
	cr_expect(!sbx__dt_s3_match("/api/object-storage/push-access"));
	cr_expect(!sbx__dt_s3_match("/api/object-storage/s3"));
	cr_expect(sbx__dt_is_upload("PUT", "/api/object-storage/s3/b/org/h/context.tar"), "object bodies stream");
	cr_expect(!sbx__dt_is_upload("POST", "/api/object-storage/s3/b/org/h/context.tar"),
		  "CompleteMultipartUpload XML is buffered (1 MiB at most)");
	cr_expect(!sbx__dt_is_upload("GET", "/api/object-storage/s3/b/"));
}

Test(server_daytona_objects, keys)
{
	cr_expect(sbx__dt_s3_key_ok("sbx-local/0123abcd/context.tar"));
	cr_expect(sbx__dt_s3_key_ok("a"));
	const char *bad[] = { "", "/a", "a/", "a//b", "../a", "a/../b", "a/./b", ".", "..", "a b", "a\nb",
			      "a/%2e%2e/b", "ä", NULL };
	for (size_t i = 0; bad[i]; i++)
		cr_expect(!sbx__dt_s3_key_ok(bad[i]), "'%s' accepted", bad[i]);
	char big[1100];
	memset(big, 'a', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	cr_expect(!sbx__dt_s3_key_ok(big), "a key over 1024 bytes");
}

Test(server_daytona_objects, context_paths)
{
	struct server srv;
	memset(&srv, 0, sizeof(srv));
	srv.cfg.state_dir = "/st";
	char *p = sbx__dt_context_path(&srv, "0123456789abcdef0123456789abcdef");
	cr_assert_str_eq(p, "/st/server/daytona-objects/" DT_BUCKET "/" DT_ORG_ID "/0123456789abcdef0123456789abcdef/context.tar");
	free(p);
	const char *bad[] = { "", "0123", "../../../../etc/passwd", "0123456789ABCDEF0123456789abcdef",
			      "0123456789abcdef/0123456789abcdef", NULL };
	for (size_t i = 0; bad[i]; i++)
		cr_expect_null(sbx__dt_context_path(&srv, bad[i]), "'%s' accepted", bad[i]);
}
