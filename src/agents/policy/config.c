/* SPDX-License-Identifier: MIT */
/*
 * The policy agent's settings: agent_args ("key=value", docs/agents.md)
 * over the reference framework's variables (POLICY_BASE_URL, POLICY_MODEL,
 * POLICY_API_KEY_FILE / POLICY_API_KEY / DEEPSEEK_API_KEY,
 * OPENENV_MAX_TURNS) over the defaults. The key is read from a file when
 * one is named (the safer way) and registered for redaction at once; it is
 * never put in a message.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "agents/policy/policy.h"
#include "util/alloc.h"
#include "util/cleanup.h"
#include "util/config.h"
#include "util/fs.h"
#include "util/log.h"
#include "util/str.h"

#define KEY_FILE_MAX 4096
#define PROMPT_FILE_MAX (1u << 20)

/* Our wording of the reference's Terminal-Bench agent contract: one shell
 * command per turn in a bash block, TASK_COMPLETE alone to stop. */
static const char default_prompt[] =
	"You are an agent working in a Linux terminal to complete a Terminal-Bench task. "
	"The task instruction comes next; after it, every message you receive is the output "
	"of your previous command. In each reply give exactly one shell command, in a single "
	"```bash code block, and nothing else. Explore the system, make the changes the task "
	"asks for and check that they work. Once you are sure the task is done, reply with "
	"TASK_COMPLETE alone, without a code block.";

static const char *const keys[] = { "api_base", "model", "temperature", "max_tokens",
				    "max_turns", "obs_cap", "tool_mode", "system_prompt_file",
				    "extra_body", "command_timeout", "api_key_file", "stream",
				    "request_timeout", "max_retries", NULL };

static const char *arg(const char *const *args, const char *key)
{
	size_t kl = strlen(key);
	const char *v = NULL;
	for (size_t i = 0; args && args[i]; i++)
		if (strncmp(args[i], key, kl) == 0 && args[i][kl] == '=')
			v = args[i] + kl + 1; /* the last one wins, as on a command line */
	return v;
}

static int bad(sbx_error **err, const char *key, const char *v, const char *want)
{
	return sbx_error_set(err, -EINVAL, "%s \"%.60s\": expected %s", key, v, want);
}

static int num(double *out, const char *const *args, const char *key, double lo, double hi,
	       sbx_error **err)
{
	const char *v = arg(args, key);
	if (!v)
		return 0;
	char *end;
	errno = 0;
	double d = strtod(v, &end);
	if (errno || end == v || *end || d < lo || d > hi) {
		_cleanup_free_ char *want = xasprintf("a number from %g to %g", lo, hi);
		return bad(err, key, v, want);
	}
	*out = d;
	return 0;
}

static int flag(int *out, const char *const *args, const char *key, sbx_error **err)
{
	const char *v = arg(args, key);
	if (!v)
		return 0;
	if (!strcmp(v, "1") || !strcmp(v, "true") || !strcmp(v, "yes"))
		*out = 1;
	else if (!strcmp(v, "0") || !strcmp(v, "false") || !strcmp(v, "no"))
		*out = 0;
	else
		return bad(err, key, v, "1 or 0");
	return 0;
}

static int read_key(struct policy_cfg *c, const char *path, const char *from, sbx_error **err)
{
	_cleanup_free_ char *s = NULL;
	size_t len = 0;
	int r = sbx__read_file(&s, &len, path, KEY_FILE_MAX, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "%s", from);
	char *t = sbx__str_trim(s);
	if (!*t)
		r = sbx_error_set(err, -EINVAL, "%s %s is empty", from, path);
	else if (strpbrk(t, "\r\n"))
		r = sbx_error_set(err, -EINVAL, "%s %s: expected the key on one line",
				  from, path);
	if (r == 0) {
		c->key = xstrdup(t);
		sbx__redact_add(c->key);
	}
	explicit_bzero(s, len);
	return r;
}

static int load_key(struct policy_cfg *c, const char *const *args, sbx_error **err)
{
	const char *f = arg(args, "api_key_file");
	if (f)
		return read_key(c, f, "api_key_file", err);
	f = sbx__env("POLICY_API_KEY_FILE");
	if (f && *f)
		return read_key(c, f, "POLICY_API_KEY_FILE", err);
	const char *v = sbx__env("POLICY_API_KEY");
	if (!v || !*v)
		v = sbx__env("DEEPSEEK_API_KEY");
	if (v && *v) {
		c->key = xstrdup(v);
		sbx__redact_add(c->key);
	}
	return 0;
}

static int load_prompt(struct policy_cfg *c, const char *const *args, sbx_error **err)
{
	const char *f = arg(args, "system_prompt_file");
	if (!f) {
		c->system_prompt = xstrdup(default_prompt);
		c->system_prompt_from = xstrdup("default");
		return 0;
	}
	size_t len;
	int r = sbx__read_file(&c->system_prompt, &len, f, PROMPT_FILE_MAX, err);
	if (r < 0)
		return sbx_error_prefix(err, r, "system_prompt_file");
	json_t *ok = strlen(c->system_prompt) == len ? json_stringn(c->system_prompt, len) : NULL;
	json_decref(ok);
	if (!ok)
		return sbx_error_set(err, -EINVAL, "system_prompt_file %s: expected "
				     "UTF-8 text", f);
	c->system_prompt_from = xstrdup(f);
	return 0;
}

static int load_base(struct policy_cfg *c, const char *const *args, sbx_error **err)
{
	const char *b = arg(args, "api_base");
	if (!b || !*b)
		b = sbx__env("POLICY_BASE_URL");
	if (!b || !*b)
		b = "https://api.deepseek.com";
	if (strncmp(b, "http://", 7) && strncmp(b, "https://", 8))
		return sbx_error_set(err, -EINVAL, "api_base: expected an http:// or https:// URL");
	const char *host = strstr(b, "://") + 3;
	size_t hl = strcspn(host, "/?#");
	/* A key in the URL would surface in every record and message. */
	if (memchr(host, '@', hl))
		return sbx_error_set(err, -EINVAL, "api_base embeds credentials; give "
				     "the key in POLICY_API_KEY_FILE instead");
	c->api_base = xstrdup(b);
	size_t n = strlen(c->api_base);
	while (n > 0 && c->api_base[n - 1] == '/')
		c->api_base[--n] = 0;
	return 0;
}

int sbx__policy_cfg_load(struct policy_cfg *c, const char *const *args, sbx_error **err)
{
	memset(c, 0, sizeof(*c));
	c->temperature = 0.8;
	c->max_turns = 30;
	c->command_timeout = 900;
	c->request_timeout = 600;
	c->max_retries = 4;
	for (size_t i = 0; args && args[i]; i++) {
		size_t kl = strcspn(args[i], "=");
		int known = 0;
		for (size_t k = 0; keys[k] && !known; k++)
			known = strlen(keys[k]) == kl && !strncmp(keys[k], args[i], kl);
		if (!known)
			return sbx_error_set(err, -EINVAL, "unknown agent arg \"%.*s\" "
					     "(known: api_base, model, temperature, max_tokens, "
					     "max_turns, obs_cap, tool_mode, stream, system_prompt_file, "
					     "extra_body, command_timeout, request_timeout, max_retries, "
					     "api_key_file)", (int)(kl > 40 ? 40 : kl), args[i]);
	}
	const char *env_turns = sbx__env("OPENENV_MAX_TURNS");
	double d = c->max_turns;
	if (env_turns && *env_turns) {
		const char *a[] = { NULL, NULL };
		_cleanup_free_ char *kv = xasprintf("OPENENV_MAX_TURNS=%s", env_turns);
		a[0] = kv;
		int r = num(&d, a, "OPENENV_MAX_TURNS", 1, 100000, err);
		if (r < 0)
			return r;
	}
	double mt = c->max_tokens, mr = c->max_retries;
	int r = num(&d, args, "max_turns", 1, 100000, err);
	if (r == 0)
		r = num(&c->temperature, args, "temperature", 0, 2, err);
	if (r == 0)
		r = num(&mt, args, "max_tokens", 0, 10000000, err);
	if (r == 0)
		r = num(&c->command_timeout, args, "command_timeout", 0, 864000, err);
	if (r == 0)
		r = num(&c->request_timeout, args, "request_timeout", 0.001, 864000, err);
	if (r == 0)
		r = num(&mr, args, "max_retries", 0, 100, err);
	if (r == 0)
		r = flag(&c->tool_mode, args, "tool_mode", err);
	if (r == 0)
		r = flag(&c->stream, args, "stream", err);
	if (r < 0)
		return r;
	c->max_turns = (unsigned)d;
	c->max_tokens = (long)mt;
	c->max_retries = (unsigned)mr;
	const char *eb = arg(args, "extra_body");
	if (eb) {
		json_error_t je;
		c->extra_body = json_loads(eb, 0, &je);
		if (!json_is_object(c->extra_body))
			return bad(err, "extra_body", eb, "a JSON object");
	}
	const char *m = arg(args, "model");
	if (!m || !*m)
		m = sbx__env("POLICY_MODEL");
	c->model = xstrdup(m && *m ? m : "deepseek-v4-flash");
	r = load_base(c, args, err);
	if (r == 0)
		r = load_prompt(c, args, err);
	if (r == 0)
		r = load_key(c, args, err);
	return r;
}

void sbx__policy_cfg_free(struct policy_cfg *c)
{
	if (c->key) {
		explicit_bzero(c->key, strlen(c->key));
		free(c->key);
	}
	free(c->api_base);
	free(c->model);
	free(c->system_prompt);
	free(c->system_prompt_from);
	json_decref(c->extra_body);
	memset(c, 0, sizeof(*c));
}
