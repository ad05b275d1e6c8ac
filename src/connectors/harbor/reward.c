/* SPDX-License-Identifier: MIT */
/*
 * Reward files, read the way Harbor's verifier does: /logs/verifier/reward.json
 * (a flat JSON object of numeric metrics) wins whenever it exists, else
 * reward.txt (one float). Missing, empty and unparsable files are distinct
 * outcomes, never a reward of 0. The exit code of test.sh is not consulted.
 */
#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "connectors/harbor/harbor.h"
#include "util/alloc.h"
#include "util/cleanup.h"

static bool blank(const char *s, size_t len)
{
	for (size_t i = 0; i < len; i++)
		if (!isspace((unsigned char)s[i]))
			return false;
	return true;
}

static void fail(sbx_reward *out, sbx_reward_status st, const char *source, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static void fail(sbx_reward *out, sbx_reward_status st, const char *source, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	out->status = st;
	out->source = source;
	out->detail = xvasprintf(fmt, ap);
	va_end(ap);
}

static void parse_json(sbx_reward *out, const char *text, size_t len)
{
	json_error_t je;
	json_t *o = json_loadb(text, len, JSON_REJECT_DUPLICATES, &je);
	if (!o) {
		fail(out, SBX_REWARD_UNPARSABLE, "reward.json", "reward.json: line %d: %s", je.line,
		     je.text);
		return;
	}
	if (!json_is_object(o) || json_object_size(o) == 0) {
		fail(out, SBX_REWARD_UNPARSABLE, "reward.json", "reward.json: expected a non-empty "
		     "object of numeric metrics");
		json_decref(o);
		return;
	}
	const char *k;
	json_t *v;
	double sum = 0;
	size_t n = 0;
	json_object_foreach(o, k, v) {
		if (!json_is_number(v) || !isfinite(json_number_value(v))) {
			fail(out, SBX_REWARD_UNPARSABLE, "reward.json",
			     "reward.json: metric \"%.64s\" is not a number", k);
			json_decref(o);
			return;
		}
		sum += json_number_value(v);
		n++;
	}
	json_t *main_v = json_object_get(o, "reward");
	out->reward = main_v ? json_number_value(main_v) : sum / (double)n;
	out->rewards_json = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
	out->status = SBX_REWARD_OK;
	out->source = "reward.json";
	json_decref(o);
}

static void parse_txt(sbx_reward *out, const char *text, size_t len)
{
	_cleanup_free_ char *s = xstrndup(text, len);
	char *p = s;
	while (isspace((unsigned char)*p))
		p++;
	char *end = p + strlen(p);
	while (end > p && isspace((unsigned char)end[-1]))
		*--end = '\0';
	char *stop;
	errno = 0;
	double v = strtod(p, &stop);
	if (stop == p || *stop || errno == ERANGE || !isfinite(v)) {
		for (char *c = p; *c; c++)
			if (!isprint((unsigned char)*c))
				*c = '?';
		fail(out, SBX_REWARD_UNPARSABLE, "reward.txt", "reward.txt: not a number: \"%.40s\"", p);
		return;
	}
	out->status = SBX_REWARD_OK;
	out->source = "reward.txt";
	out->reward = v;
	json_t *o = json_pack("{s:f}", "reward", v);
	out->rewards_json = json_dumps(o, JSON_COMPACT);
	json_decref(o);
}

void sbx__reward_parse(sbx_reward *out, const char *json, size_t json_len, const char *txt,
		       size_t txt_len)
{
	memset(out, 0, sizeof(*out));
	if (json) {
		if (blank(json, json_len))
			fail(out, SBX_REWARD_EMPTY, "reward.json", "reward.json is empty");
		else
			parse_json(out, json, json_len);
		return;
	}
	if (txt) {
		if (blank(txt, txt_len))
			fail(out, SBX_REWARD_EMPTY, "reward.txt", "reward.txt is empty");
		else
			parse_txt(out, txt, txt_len);
		return;
	}
	fail(out, SBX_REWARD_MISSING, NULL, "no reward file: the verifier wrote neither "
	     "/logs/verifier/reward.json nor reward.txt");
}

void sbx__reward_free(sbx_reward *r)
{
	if (!r)
		return;
	free(r->rewards_json);
	free(r->detail);
	r->rewards_json = NULL;
	r->detail = NULL;
}
