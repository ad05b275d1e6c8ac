/* SPDX-License-Identifier: MIT */
/*
 * Backend names and the credential registry: one table says, per backend,
 * which variables hold the key (all required; a pair is all-or-nothing),
 * which variable names a key file, the default key file, how to provision
 * it, and which address variables a launcher forwards. Every code path
 * (library, CLI, `sbx env --for-workers`, `sbx doctor`) uses this table and
 * one precedence: environment variables, then the named key file, then the
 * default key file. Secret values are registered for redaction the moment
 * they are read and never leave this file except in sbx_credential.values.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/backend.h>

#include "../tasks/toml.h" /* generic TOML 1.0 parser, for ~/.modal.toml */
#include "../util/alloc.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"

struct cred_spec {
	const char *backend;
	const char *title;
	const char *key_vars[3];
	const char *file_var;
	const char *default_path;  /* below $HOME */
	const char *hint;
	const char *forward[6];    /* address variables forwarded by value */
	const char *endpoint_var;
	const char *endpoint_label;
};

static const struct cred_spec specs[] = {
	{ "local", "local", { NULL }, NULL, NULL, NULL, { NULL }, NULL, NULL },
	{ "e2b", "E2B", { "E2B_API_KEY", NULL }, "E2B_API_KEY_FILE", ".config/e2b/api_key",
	  "mkdir -p ~/.config/e2b && (umask 077; echo YOUR_KEY > ~/.config/e2b/api_key)  "
	  "# E2B Cloud: e2b.dev dashboard; AgentENV and `sbx serve`: the server's key",
	  { "E2B_API_URL", "E2B_SANDBOX_URL", "E2B_DOMAIN", "SBX_E2B_URL_SCHEME", "OPENENV_E2B_URL_SCHEME", NULL },
	  "E2B_API_URL", "endpoint" },
	{ "daytona", "Daytona", { "DAYTONA_API_KEY", NULL }, "DAYTONA_API_KEY_FILE", ".config/daytona/api_key",
	  "mkdir -p ~/.config/daytona && (umask 077; echo dtn_... > ~/.config/daytona/api_key)",
	  { "DAYTONA_API_URL", "DAYTONA_TARGET", NULL }, "DAYTONA_API_URL", "endpoint" },
	{ "modal", "Modal", { "MODAL_TOKEN_ID", "MODAL_TOKEN_SECRET", NULL }, "MODAL_CONFIG_PATH", ".modal.toml",
	  "pip install 'modal>=1.5.5' && modal token new  # writes ~/.modal.toml",
	  { "MODAL_PROFILE", "MODAL_ENVIRONMENT", "OPENENV_MODAL_APP", NULL }, "MODAL_ENVIRONMENT",
	  "workspace environment" },
};

static const struct cred_spec *find_spec(const char *backend)
{
	for (size_t i = 0; i < SBX_ARRAY_SIZE(specs); i++)
		if (backend && strcmp(specs[i].backend, backend) == 0)
			return &specs[i];
	return NULL;
}

const char *sbx_backend_names(void)
{
	return "agentenv, daytona, e2b, local, modal";
}

int sbx_backend_resolve(char **out, const char *flag, sbx_error **err)
{
	const char *src = "--backend";
	const char *v = flag;
	if (!v || !*v) {
		v = getenv("SBX_BACKEND");
		src = "SBX_BACKEND";
	}
	if (!v || !*v) {
		v = getenv("OPENENV_SANDBOX_BACKEND");
		src = "OPENENV_SANDBOX_BACKEND";
	}
	_cleanup_free_ char *name = xstrdup(v ? v : "");
	sbx__str_lower(sbx__str_trim(name));
	if (!*name) {
		*out = xstrdup("local");
		return 0;
	}
	if (strcmp(name, "agentenv") == 0) {
		*out = xstrdup("e2b");
		return 0;
	}
	if (!find_spec(name))
		return sbx_error_set(err, -EINVAL, "unknown sandbox backend '%s' (from %s); choose one of: %s", name,
				     src, sbx_backend_names());
	*out = steal_ptr(&name);
	return 0;
}

void sbx_credential_clear(sbx_credential *c)
{
	if (!c)
		return;
	free(c->backend);
	free(c->path);
	free(c->file_var);
	for (size_t i = 0; i < c->n_values; i++) {
		if (c->values[i])
			explicit_bzero(c->values[i], strlen(c->values[i]));
		free(c->values[i]);
	}
	free(c->values);
	free(c->endpoint);
	free(c->endpoint_label);
	memset(c, 0, sizeof(*c));
}

static char *home_path(const char *rel)
{
	const char *home = getenv("HOME");
	return xasprintf("%s/%s", home && *home ? home : "/root", rel);
}

static size_t n_keys(const struct cred_spec *s)
{
	size_t n = 0;
	while (n < SBX_ARRAY_SIZE(s->key_vars) && s->key_vars[n])
		n++;
	return n;
}

static void add_value(sbx_credential *c, const char *v)
{
	c->values = xrealloc(c->values, (c->n_values + 1) * sizeof(char *));
	c->values[c->n_values++] = xstrdup(v);
	sbx__redact_add(v);
}

/* Modal's ~/.modal.toml: [profile] token_id, token_secret, active = true. */
static int read_modal(sbx_credential *c, const char *path, sbx_error **err)
{
	sbx_toml *doc = NULL;
	int r = sbx__toml_parse_file(&doc, path, err);
	if (r < 0)
		return r;
	const char *want = getenv("MODAL_PROFILE");
	const sbx_toml *prof = NULL;
	const char *name = NULL;
	for (size_t i = 0; i < sbx__toml_len(doc); i++) {
		const sbx_toml *t;
		const char *k = sbx__toml_key_at(doc, i, &t);
		bool active = false;
		if (sbx__toml_type(t) != SBX_TOML_TABLE)
			continue;
		sbx__toml_get_bool(t, "active", &active);
		if ((want && *want && strcmp(k, want) == 0) || (!(want && *want) && (active || !prof))) {
			prof = t;
			name = k;
			if (want && *want)
				break;
		}
	}
	const char *id = NULL, *secret = NULL;
	if (!prof || sbx__toml_get_string(prof, "token_id", &id) != SBX_TOML_FOUND ||
	    sbx__toml_get_string(prof, "token_secret", &secret) != SBX_TOML_FOUND || !*id || !*secret) {
		r = sbx_error_set(err, -ENOKEY, "%s: profile %s lacks token_id and token_secret", path,
				  prof ? name : (want && *want ? want : "(none)"));
	} else {
		add_value(c, id);
		add_value(c, secret);
	}
	sbx__toml_free(doc);
	return r;
}

static int read_key_file(sbx_credential *c, const struct cred_spec *s, const char *path, sbx_error **err)
{
	if (strcmp(s->backend, "modal") == 0)
		return read_modal(c, path, err);
	char *data = NULL;
	size_t n;
	int r = sbx__read_file(&data, &n, path, 64 * 1024, err);
	if (r < 0)
		return r;
	sbx__str_trim(data);
	if (!*data) {
		free(data);
		return sbx_error_set(err, -ENOKEY, "%s key file %s is empty", s->title, path);
	}
	if (strchr(data, '\n') || strchr(data, ' ')) {
		explicit_bzero(data, strlen(data));
		free(data);
		return sbx_error_set(err, -EINVAL, "%s key file %s: expected one key on one line", s->title, path);
	}
	add_value(c, data);
	explicit_bzero(data, strlen(data));
	free(data);
	return 0;
}

static int missing(const struct cred_spec *s, const char *path, sbx_error **err)
{
	char vars[128] = "";
	for (size_t i = 0; i < n_keys(s); i++) {
		strncat(vars, i ? " + " : "", sizeof(vars) - strlen(vars) - 1);
		strncat(vars, s->key_vars[i], sizeof(vars) - strlen(vars) - 1);
	}
	return sbx_error_set(err, -ENOKEY,
			     "the %s backend needs credentials: put them in a file (%s; %s overrides) or in "
			     "the environment as %s%s. Provision the file with: %s",
			     s->title, path, s->file_var, vars, n_keys(s) > 1 ? " (both halves)" : "", s->hint);
}

int sbx_credential_resolve(sbx_credential *out, const char *backend, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const struct cred_spec *s = find_spec(backend);
	if (!s)
		return sbx_error_set(err, -EINVAL, "unknown sandbox backend '%s'; choose one of: %s",
				     backend ? backend : "", sbx_backend_names());
	out->backend = xstrdup(s->backend);
	if (s->endpoint_var) {
		const char *e = getenv(s->endpoint_var);
		out->endpoint = e && *e ? xstrdup(e) : NULL;
		out->endpoint_label = xstrdup(s->endpoint_label);
	}
	if (!n_keys(s))
		return 0;
	out->file_var = xstrdup(s->file_var);
	size_t have = 0;
	for (size_t i = 0; i < n_keys(s); i++) {
		const char *v = getenv(s->key_vars[i]);
		have += v && *v;
	}
	if (have == n_keys(s)) {
		out->source = SBX_CRED_ENV;
		for (size_t i = 0; i < n_keys(s); i++)
			add_value(out, getenv(s->key_vars[i]));
		return 0;
	}
	const char *named = getenv(s->file_var);
	char *path = named && *named ? xstrdup(named) : home_path(s->default_path);
	int r;
	if (access(path, R_OK) != 0) {
		r = named && *named ? sbx_error_set(err, -ENOKEY, "%s=%s is missing or unreadable", s->file_var, path)
				    : missing(s, path, err);
		if (have && have < n_keys(s))
			sbx_error_prefix(err, r, "only part of the %s credential pair is set", s->title);
		free(path);
		sbx_credential_clear(out);
		return r;
	}
	r = read_key_file(out, s, path, err);
	if (r < 0) {
		free(path);
		sbx_credential_clear(out);
		return r;
	}
	out->source = SBX_CRED_FILE;
	out->path = path;
	return 0;
}

int sbx_backend_forward_env(char ***out, char **note_out, const char *backend, sbx_error **err)
{
	const struct cred_spec *s = find_spec(backend);
	if (!s)
		return sbx_error_set(err, -EINVAL, "unknown sandbox backend '%s'; choose one of: %s",
				     backend ? backend : "", sbx_backend_names());
	char **lines = NULL;
	for (size_t i = 0; i < SBX_ARRAY_SIZE(s->forward) && s->forward[i]; i++) {
		const char *v = getenv(s->forward[i]);
		if (!v || !*v)
			continue;
		if (strchr(v, '@')) {
			sbx__strv_free(lines);
			return sbx_error_set(err, -EINVAL,
					     "%s looks like it embeds credentials ('@'), and anything forwarded to "
					     "workers may be logged in plaintext. Put the credential in the %s key "
					     "file and leave a bare address here",
					     s->forward[i], s->title);
		}
		_cleanup_free_ char *kv = xasprintf("%s=%s", s->forward[i], v);
		sbx__strv_push(&lines, kv);
	}
	char *note = NULL;
	if (n_keys(s)) {
		sbx_credential c;
		int r = sbx_credential_resolve(&c, backend, err);
		if (r < 0) {
			sbx__strv_free(lines);
			return r;
		}
		if (c.source == SBX_CRED_FILE) {
			_cleanup_free_ char *kv = xasprintf("%s=%s", s->file_var, c.path);
			sbx__strv_push(&lines, kv);
			note = xasprintf("%s credential: key file %s (readable here; forwarding its path, workers "
					 "read it themselves)", s->title, c.path);
		} else {
			note = xasprintf("%s credential: environment variables set here; they are not forwarded "
					 "(secrets never travel by value): workers need them in their own environment "
					 "or a key file at the same path",
					 s->title);
		}
		sbx_credential_clear(&c);
	} else {
		note = xasprintf("%s needs no credential", s->title);
	}
	if (!lines)
		lines = xcalloc(1, sizeof(char *));
	*out = lines;
	if (note_out)
		*note_out = note;
	else
		free(note);
	return 0;
}
