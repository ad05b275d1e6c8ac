/* SPDX-License-Identifier: MIT */
/* Which requests the Daytona API takes (daytona/router.c): /api and
 * /toolbox paths, and which of them stream their bodies (bulk uploads). */
#include <criterion/criterion.h>

#include "server/daytona/daytona.h"

Test(server_daytona_router, paths)
{
	cr_expect(sbx__dt_match("/api/sandbox"));
	cr_expect(sbx__dt_match("/api"));
	cr_expect(sbx__dt_match("/toolbox/abc/process/execute"));
	cr_expect(!sbx__dt_match("/apis"));
	cr_expect(!sbx__dt_match("/sandboxes"));
	cr_expect(!sbx__dt_match("/files"));
	cr_expect(!sbx__dt_match("/toolbox"));
}

Test(server_daytona_router, uploads_stream)
{
	cr_expect(sbx__dt_is_upload("POST", "/toolbox/abc/files/bulk-upload"));
	cr_expect(sbx__dt_is_upload("POST", "/toolbox/abc/files/upload"));
	cr_expect(sbx__dt_is_upload("POST", "/api/toolbox/abc/toolbox/files/bulk-upload"));
	cr_expect(!sbx__dt_is_upload("GET", "/toolbox/abc/files/bulk-upload"));
	cr_expect(!sbx__dt_is_upload("POST", "/toolbox/abc/files/bulk-download"));
	cr_expect(!sbx__dt_is_upload("POST", "/toolbox//files/bulk-upload"));
	cr_expect(!sbx__dt_is_upload("POST", "/api/sandbox"));
}
