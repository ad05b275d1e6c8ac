/* SPDX-License-Identifier: MIT */
/* The bootstrap mirror, read from fixture apt configurations. */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "helpers.h"
#include "images/store.h"

static char *fixture(const char *name)
{
	const char *src = getenv("SBX_SOURCE_ROOT");
	char *p = NULL;
	cr_assert(asprintf(&p, "%s/tests/unit/images/fixtures/%s", src ? src : ".", name) > 0);
	return p;
}

static void expect(const char *fix, const char *suite, const char *want)
{
	char *root = fixture(fix), *got = NULL;
	sbx_error *err = NULL;
	int r = sbx__image_mirror_from_apt(&got, root, suite, &err);
	cr_assert_eq(r, 0, "%s/%s: %s", fix, suite, err ? err->msg : "?");
	cr_assert_str_eq(got, want, "%s/%s", fix, suite);
	free(got);
	free(root);
}

Test(images_mirror, deb822_first_matching_stanza)
{
	/* skips -security, deb-src and Enabled: no; trailing slash dropped */
	expect("apt-deb822", "bookworm", "http://mirror.example.org/debian");
	expect("apt-deb822", "bookworm-updates", "http://mirror.example.org/debian");
}

Test(images_mirror, deb822_wins_over_oneline)
{
	/* no stanza lists trixie: the first non-security deb entry */
	expect("apt-deb822", "trixie", "http://mirror.example.org/debian");
}

Test(images_mirror, oneline_with_options)
{
	expect("apt-oneline", "bookworm", "https://oneline.example.org/debian");
}

Test(images_mirror, suite_match_beats_order)
{
	/* nodesource comes first but only the .list entry has the suite */
	expect("apt-mixed", "trixie", "http://listd.example.org/debian");
}

Test(images_mirror, fallback_skips_security)
{
	expect("apt-fallback", "bookworm", "http://fallback.example.org/debian");
}

Test(images_mirror, nothing_configured)
{
	char *root = fixture("apt-empty"), *got = NULL;
	sbx_error *err = NULL;
	cr_assert_eq(sbx__image_mirror_from_apt(&got, root, "bookworm", &err), -ENOENT);
	cr_assert_null(got);
	cr_assert_not_null(strstr(err->msg, "--mirror"), "%s", err->msg);
	sbx_error_free(err);
	free(root);
	err = NULL;
	cr_assert_eq(sbx__image_mirror_from_apt(&got, "/nonexistent-root", "bookworm", &err), -ENOENT);
	sbx_error_free(err);
}

Test(images_mirror, this_machine_has_one)
{
	char *got = NULL;
	if (sbx__image_mirror_from_apt(&got, "/", "bookworm", NULL) < 0)
		sbx_test_skip("no apt sources on this machine");
	cr_assert_null(strstr(got, "-security"));
	cr_assert(strncmp(got, "http", 4) == 0 || strncmp(got, "file:", 5) == 0, "%s", got);
	free(got);
}
