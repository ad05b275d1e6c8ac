/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/error.h>
#include "util/log.h"

static char last[512];

static void sink(sbx_log_level level, const char *msg, void *payload)
{
	(void)level;
	(void)payload;
	snprintf(last, sizeof(last), "%s", msg);
}

Test(util_log, secrets_never_reach_the_sink_or_errors)
{
	sbx__log_set_sink(sink, NULL, SBX_LOG_DEBUG);
	sbx__redact_add("e2b_0123456789abcdef");
	SBX_LOGI("key is e2b_0123456789abcdef, twice e2b_0123456789abcdef");
	cr_assert_null(strstr(last, "0123456789abcdef"));
	cr_assert_not_null(strstr(last, "***"));
	sbx_error *e = NULL;
	cr_assert_eq(sbx_error_set(&e, -EPERM, "bad key e2b_0123456789abcdef"), -EPERM);
	cr_assert_str_eq(e->msg, "bad key ***");
	sbx_error_free(e);
	sbx__redact_clear();
	sbx__log_set_sink(NULL, NULL, SBX_LOG_INFO);
}

Test(util_log, level_filter)
{
	last[0] = '\0';
	sbx__log_set_sink(sink, NULL, SBX_LOG_WARN);
	SBX_LOGI("hidden");
	cr_assert_str_eq(last, "");
	SBX_LOGW("shown");
	cr_assert_str_eq(last, "shown");
	sbx__log_set_sink(NULL, NULL, SBX_LOG_INFO);
}

Test(util_error, first_error_wins_and_prefix)
{
	sbx_error *e = NULL;
	sbx_error_setsys(&e, -ENOENT, ENOENT, "open %s", "/x");
	sbx_error_set(&e, -EINVAL, "second");
	cr_assert_eq(e->code, -ENOENT);
	cr_assert_eq(e->sys_errno, ENOENT);
	cr_assert_eq(sbx_error_prefix(&e, -EIO, "create"), -ENOENT);
	cr_assert_str_eq(e->msg, "create: open /x: No such file or directory");
	cr_assert_str_eq(sbx_error_code_name(e->code), "ENOENT");
	sbx_error_free(e);
	cr_assert_eq(sbx_error_set(NULL, -EIO, "no sink"), -EIO);
}
