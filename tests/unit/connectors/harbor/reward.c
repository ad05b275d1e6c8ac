/* SPDX-License-Identifier: MIT */
/*
 * Unit tests for reward files (src/connectors/harbor/reward.c): reward.json over
 * reward.txt, flat numeric objects, the "reward" metric, and distinct
 * missing / empty / unparsable outcomes.
 */
#include <criterion/criterion.h>
#include <string.h>

#include "connectors/harbor/harbor.h"

static sbx_reward parse(const char *json, const char *txt)
{
	sbx_reward r;
	sbx__reward_parse(&r, json, json ? strlen(json) : 0, txt, txt ? strlen(txt) : 0);
	return r;
}

static void expect_status(const char *json, const char *txt, sbx_reward_status st,
			  const char *detail_has)
{
	sbx_reward r = parse(json, txt);
	cr_assert_eq(r.status, st, "json=%s txt=%s: status %d (%s)", json ? json : "-",
		     txt ? txt : "-", r.status, r.detail ? r.detail : "-");
	if (detail_has) {
		cr_assert_not_null(r.detail);
		cr_assert_not_null(strstr(r.detail, detail_has), "%s", r.detail);
	}
	if (st != SBX_REWARD_OK)
		cr_assert_null(r.rewards_json);
	sbx__reward_free(&r);
}

Test(reward, txt_one_float)
{
	const char *ok[] = { "1", "1.0\n", "  0.25  \n", "0", "1e0", "-1" };
	const double want[] = { 1, 1, 0.25, 0, 1, -1 };
	for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
		sbx_reward r = parse(NULL, ok[i]);
		cr_assert_eq(r.status, SBX_REWARD_OK, "%s: %s", ok[i], r.detail ? r.detail : "");
		cr_assert_float_eq(r.reward, want[i], 1e-12);
		cr_assert_str_eq(r.source, "reward.txt");
		cr_assert_not_null(r.rewards_json);
		cr_assert_not_null(strstr(r.rewards_json, "\"reward\""));
		sbx__reward_free(&r);
	}
}

Test(reward, json_wins_over_txt)
{
	sbx_reward r = parse("{\"reward\": 1, \"accuracy\": 0.5}", "0");
	cr_assert_eq(r.status, SBX_REWARD_OK);
	cr_assert_float_eq(r.reward, 1, 1e-12);
	cr_assert_str_eq(r.source, "reward.json");
	cr_assert_str_eq(r.rewards_json, "{\"accuracy\":0.5,\"reward\":1}");
	sbx__reward_free(&r);
}

Test(reward, json_without_reward_key_is_the_mean)
{
	sbx_reward r = parse("{\"a\": 1, \"b\": 0}", NULL);
	cr_assert_eq(r.status, SBX_REWARD_OK);
	cr_assert_float_eq(r.reward, 0.5, 1e-12);
	sbx__reward_free(&r);
	r = parse("{\"score\": 0.75}", NULL);
	cr_assert_float_eq(r.reward, 0.75, 1e-12);
	sbx__reward_free(&r);
}

Test(reward, missing)
{
	expect_status(NULL, NULL, SBX_REWARD_MISSING, "no reward file");
}

Test(reward, empty_files)
{
	expect_status(NULL, "", SBX_REWARD_EMPTY, "reward.txt is empty");
	expect_status(NULL, " \n\t", SBX_REWARD_EMPTY, "reward.txt is empty");
	expect_status("", "1", SBX_REWARD_EMPTY, "reward.json is empty");
	expect_status("\n", NULL, SBX_REWARD_EMPTY, "reward.json is empty");
}

Test(reward, unparsable_files)
{
	expect_status(NULL, "passed!", SBX_REWARD_UNPARSABLE, "reward.txt: not a number");
	expect_status(NULL, "1 2", SBX_REWARD_UNPARSABLE, "not a number");
	expect_status(NULL, "nan", SBX_REWARD_UNPARSABLE, "not a number");
	expect_status(NULL, "inf", SBX_REWARD_UNPARSABLE, "not a number");
	expect_status(NULL, "1\x01\xff", SBX_REWARD_UNPARSABLE, "1??");
	expect_status("{\"reward\": ", "1", SBX_REWARD_UNPARSABLE, "reward.json: line 1");
	expect_status("[1]", NULL, SBX_REWARD_UNPARSABLE, "object");
	expect_status("1", NULL, SBX_REWARD_UNPARSABLE, NULL);
	expect_status("{}", NULL, SBX_REWARD_UNPARSABLE, "non-empty");
	expect_status("{\"reward\": \"1\"}", NULL, SBX_REWARD_UNPARSABLE, "\"reward\" is not a number");
	expect_status("{\"reward\": true}", NULL, SBX_REWARD_UNPARSABLE, "not a number");
	expect_status("{\"reward\": {\"x\": 1}}", NULL, SBX_REWARD_UNPARSABLE, "not a number");
	expect_status("{\"reward\": 1, \"reward\": 0}", NULL, SBX_REWARD_UNPARSABLE, NULL);
}

Test(reward, free_is_idempotent)
{
	sbx_reward r = parse(NULL, "junk");
	sbx__reward_free(&r);
	sbx__reward_free(&r);
	sbx__reward_free(NULL);
}
