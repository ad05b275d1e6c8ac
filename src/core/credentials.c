/* SPDX-License-Identifier: MIT */
/*
 * Backend names and credentials: every provider's description in the
 * registry (sys/provider.h) says which variables hold its key (all
 * required; a pair is all-or-nothing), which variable names a key file, the
 * default key file, how to provision it, and which address variables a
 * launcher forwards. Every code path (library, CLI, `sbx env --for-workers`,
 * `sbx doctor`) uses these descriptions and one precedence: environment
 * variables, then the named key file, then the default key file. Secret
 * values are registered for redaction the moment they are read and never
 * leave this file except in sbx_credential.values.
 */
#include <ctype.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <sbx/backend.h>
#include <sbx/sys/provider.h>

#include "../tasks/toml.h" /* generic TOML 1.0 parser, for profile files (~/.modal.toml) */
#include "../util/alloc.h"
#include "../util/config.h"
#include "../util/cleanup.h"
#include "../util/fs.h"
#include "../util/log.h"
#include "../util/str.h"

/* Sorted, comma-separated names and aliases of every described provider. */
static int by_name(const void *a, const void *b)
{
	return strcmp(*(const char *const *)a, *(const char *const *)b);
}

const char *sbx_backend_names(void)
{
	static __thread char buf[512];
	const char *v[64];
	size_t n = 0;
	const sbx_provider_desc *d;
	for (size_t i = 0; (d = sbx_provider_desc_at(i)) != NULL; i++) {
		if (n < SBX_ARRAY_SIZE(v))
			v[n++] = d->name;
		for (size_t j = 0; d->aliases && d->aliases[j] && n < SBX_ARRAY_SIZE(v); j++)
			v[n++] = d->aliases[j];
	}
	qsort(v, n, sizeof(v[0]), by_name);
	size_t off = 0;
	buf[0] = '\0';
	for (size_t i = 0; i < n && off < sizeof(buf); i++) {
		int w = snprintf(buf + off, sizeof(buf) - off, "%s%s", i ? ", " : "", v[i]);
		if (w < 0)
			break;
		off += (size_t)w;
	}
	return buf;
}

int sbx_backend_resolve(char **out, const char *flag, sbx_error **err)
{
	const char *src = "--backend";
	const char *v = flag;
	if (!v || !*v) {
		v = sbx__env("SBX_BACKEND");
		src = "SBX_BACKEND";
	}
	if (!v || !*v) {
		v = sbx__env("OPENENV_SANDBOX_BACKEND");
		src = "OPENENV_SANDBOX_BACKEND";
	}
	_cleanup_free_ char *name = xstrdup(v ? v : "");
	sbx__str_lower(sbx__str_trim(name));
	const sbx_provider_desc *d = *name ? sbx_provider_describe(name) : sbx_provider_default();
	if (!d)
		return sbx_error_set(err, -EINVAL, "unknown sandbox backend '%s' (from %s); choose one of: %s", name,
				     src, sbx_backend_names());
	*out = xstrdup(d->name);
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
	const char *home = sbx__env("HOME");
	return xasprintf("%s/%s", home && *home ? home : "/root", rel);
}

static size_t n_keys(const sbx_provider_cred *s)
{
	size_t n = 0;
	while (s && n < SBX_ARRAY_SIZE(s->key_vars) && s->key_vars[n])
		n++;
	return n;
}

static void add_value(sbx_credential *c, const char *v)
{
	c->values = xrealloc(c->values, (c->n_values + 1) * sizeof(char *));
	c->values[c->n_values++] = xstrdup(v);
	sbx__redact_add(v);
}

/* A profile file (Modal's ~/.modal.toml): [profile] KEY = "..." for each of
 * profile_keys, active = true; the profile named by profile_var wins. */
static int read_profile(sbx_credential *c, const sbx_provider_cred *s, const char *path, sbx_error **err)
{
	sbx_toml *doc = NULL;
	int r = sbx__toml_parse_file(&doc, path, err);
	if (r < 0)
		return r;
	const char *want = s->profile_var ? sbx__env_dyn(s->profile_var) : NULL;
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
	const char *vals[SBX_ARRAY_SIZE(s->profile_keys)] = { NULL };
	size_t n = 0;
	int ok = prof != NULL;
	for (; n < SBX_ARRAY_SIZE(s->profile_keys) && s->profile_keys[n]; n++)
		ok = ok && sbx__toml_get_string(prof, s->profile_keys[n], &vals[n]) == SBX_TOML_FOUND && *vals[n];
	if (!ok) {
		char keys[128] = "";
		for (size_t i = 0; i < n; i++) {
			strncat(keys, i ? " and " : "", sizeof(keys) - strlen(keys) - 1);
			strncat(keys, s->profile_keys[i], sizeof(keys) - strlen(keys) - 1);
		}
		r = sbx_error_set(err, -ENOKEY, "%s: profile %s lacks %s", path,
				  prof ? name : (want && *want ? want : "(none)"), keys);
	} else {
		for (size_t i = 0; i < n; i++)
			add_value(c, vals[i]);
	}
	sbx__toml_free(doc);
	return r;
}

static int read_key_file(sbx_credential *c, const sbx_provider_desc *d, const char *path, sbx_error **err)
{
	if (d->cred->profile_keys[0])
		return read_profile(c, d->cred, path, err);
	char *data = NULL;
	size_t n;
	int r = sbx__read_file(&data, &n, path, 64 * 1024, err);
	if (r < 0)
		return r;
	sbx__str_trim(data);
	if (!*data) {
		free(data);
		return sbx_error_set(err, -ENOKEY, "%s key file %s is empty", d->title, path);
	}
	if (strchr(data, '\n') || strchr(data, ' ')) {
		explicit_bzero(data, strlen(data));
		free(data);
		return sbx_error_set(err, -EINVAL, "%s key file %s: expected one key on one line", d->title, path);
	}
	add_value(c, data);
	explicit_bzero(data, strlen(data));
	free(data);
	return 0;
}

static int missing(const sbx_provider_desc *d, const char *path, sbx_error **err)
{
	const sbx_provider_cred *s = d->cred;
	char vars[128] = "";
	for (size_t i = 0; i < n_keys(s); i++) {
		strncat(vars, i ? " + " : "", sizeof(vars) - strlen(vars) - 1);
		strncat(vars, s->key_vars[i], sizeof(vars) - strlen(vars) - 1);
	}
	return sbx_error_set(err, -ENOKEY,
			     "the %s backend needs credentials: put them in a file (%s; %s overrides) or in "
			     "the environment as %s%s. Provision the file with: %s",
			     d->title, path, s->file_var, vars, n_keys(s) > 1 ? " (both halves)" : "", s->hint);
}

int sbx_credential_resolve(sbx_credential *out, const char *backend, sbx_error **err)
{
	memset(out, 0, sizeof(*out));
	const sbx_provider_desc *d = sbx_provider_describe(backend);
	if (!d)
		return sbx_error_set(err, -EINVAL, "unknown sandbox backend '%s'; choose one of: %s",
				     backend ? backend : "", sbx_backend_names());
	const sbx_provider_cred *s = d->cred;
	out->backend = xstrdup(d->name);
	if (d->endpoint_var) {
		const char *e = sbx__env_dyn(d->endpoint_var);
		out->endpoint = e && *e ? xstrdup(e) : NULL;
		out->endpoint_label = xstrdup(d->endpoint_label ? d->endpoint_label : "endpoint");
	}
	if (!n_keys(s))
		return 0;
	out->file_var = xstrdup(s->file_var);
	size_t have = 0;
	for (size_t i = 0; i < n_keys(s); i++) {
		const char *v = sbx__env_dyn(s->key_vars[i]);
		have += v && *v;
	}
	if (have == n_keys(s)) {
		out->source = SBX_CRED_ENV;
		for (size_t i = 0; i < n_keys(s); i++)
			add_value(out, sbx__env_dyn(s->key_vars[i]));
		return 0;
	}
	const char *named = sbx__env_dyn(s->file_var);
	char *path = named && *named ? xstrdup(named) : home_path(s->default_path);
	int r;
	if (access(path, R_OK) != 0) {
		r = named && *named ? sbx_error_set(err, -ENOKEY, "%s=%s is missing or unreadable", s->file_var, path)
				    : missing(d, path, err);
		if (have && have < n_keys(s))
			sbx_error_prefix(err, r, "only part of the %s credential pair is set", d->title);
		free(path);
		sbx_credential_clear(out);
		return r;
	}
	r = read_key_file(out, d, path, err);
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
	const sbx_provider_desc *d = sbx_provider_describe(backend);
	if (!d)
		return sbx_error_set(err, -EINVAL, "unknown sandbox backend '%s'; choose one of: %s",
				     backend ? backend : "", sbx_backend_names());
	const sbx_provider_cred *s = d->cred;
	char **lines = NULL;
	for (size_t i = 0; s && i < SBX_ARRAY_SIZE(s->forward) && s->forward[i]; i++) {
		const char *v = sbx__env_dyn(s->forward[i]);
		if (!v || !*v)
			continue;
		if (strchr(v, '@')) {
			sbx__strv_free(lines);
			return sbx_error_set(err, -EINVAL,
					     "%s looks like it embeds credentials ('@'), and anything forwarded to "
					     "workers may be logged in plaintext. Put the credential in the %s key "
					     "file and leave a bare address here",
					     s->forward[i], d->title);
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
					 "read it themselves)", d->title, c.path);
		} else {
			note = xasprintf("%s credential: environment variables set here; they are not forwarded "
					 "(secrets never travel by value): workers need them in their own environment "
					 "or a key file at the same path",
					 d->title);
		}
		sbx_credential_clear(&c);
	} else {
		note = xasprintf("%s needs no credential", d->title);
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
