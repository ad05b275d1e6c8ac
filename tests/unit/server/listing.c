/* SPDX-License-Identifier: MIT */
/*
 * startedAfter / startedBefore of GET /v2/sandboxes: RFC 3339 as the SDKs
 * and Date.toISOString() write it, offsets included; anything looser is
 * refused (the server answers 400 rather than guessing).
 */
#include <criterion/criterion.h>
#include <errno.h>

#include "server/server_int.h"

static void expect_time(const char *s, double want)
{
	double t = -1;
	cr_expect_eq(sbx__srv_parse_rfc3339(&t, s), 0, "%s refused", s);
	cr_expect(t > want - 1e-6 && t < want + 1e-6, "%s: got %.6f, want %.6f", s, t, want);
}

Test(server_listing, rfc3339_times)
{
	expect_time("1970-01-01T00:00:00Z", 0);
	expect_time("2026-01-02T15:04:05Z", 1767366245);
	expect_time("2026-01-02T15:04:05.250Z", 1767366245.25);
	expect_time("2026-01-02t15:04:05z", 1767366245);
	expect_time("2026-01-02T17:04:05+02:00", 1767366245);
	expect_time("2026-01-02T10:34:05.5-04:30", 1767366245.5);
}

Test(server_listing, rfc3339_refuses_the_rest)
{
	const char *bad[] = { "", "yesterday", "2026-01-02", "2026-01-02T15:04Z", "2026-01-02T15:04:05",
			      "2026-01-02T15:04:05+0200", "2026-13-02T15:04:05Z", "2026-01-02T25:04:05Z",
			      "2026-01-02T15:04:05.Z", "2026-01-02T15:04:05Z trailing", "1767366245" };
	for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
		double t = 0;
		cr_expect_eq(sbx__srv_parse_rfc3339(&t, bad[i]), -EINVAL, "accepted %s", bad[i]);
	}
}
