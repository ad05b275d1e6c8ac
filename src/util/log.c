/* SPDX-License-Identifier: MIT */
/*
 * Process-wide log sink and secret redaction. Both are guarded by one mutex
 * because a server logs from several threads.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"
#include "log.h"

/* A long-running server registers many (per-sandbox tokens, rotated keys):
 * grow as needed, up to a cap that bounds the per-line redaction cost. */
#define MAX_SECRETS 8192

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static sbx_log_fn sink;
static void *sink_payload;
static sbx_log_level sink_max = SBX_LOG_INFO;
static char **secrets;
static size_t n_secrets, cap_secrets;

void sbx__log_set_sink(sbx_log_fn fn, void *payload, sbx_log_level max)
{
	pthread_mutex_lock(&lock);
	sink = fn;
	sink_payload = payload;
	sink_max = max;
	pthread_mutex_unlock(&lock);
}

void sbx__redact_add(const char *secret)
{
	/* Very short values would redact ordinary words; real keys are long. */
	if (!secret || strlen(secret) < 6)
		return;
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_secrets; i++)
		if (strcmp(secrets[i], secret) == 0)
			goto out;
	if (n_secrets == cap_secrets && cap_secrets < MAX_SECRETS) {
		cap_secrets = cap_secrets ? cap_secrets * 2 : 16;
		secrets = xrealloc(secrets, cap_secrets * sizeof(*secrets));
	}
	if (n_secrets < cap_secrets)
		secrets[n_secrets++] = xstrdup(secret);
out:
	pthread_mutex_unlock(&lock);
}

void sbx__redact_clear(void)
{
	pthread_mutex_lock(&lock);
	for (size_t i = 0; i < n_secrets; i++)
		free(secrets[i]);
	n_secrets = 0;
	pthread_mutex_unlock(&lock);
}

static void redact_locked(char *s)
{
	for (size_t i = 0; i < n_secrets; i++) {
		size_t n = strlen(secrets[i]);
		char *p;
		while ((p = strstr(s, secrets[i])) != NULL) {
			memcpy(p, "***", 3);
			memmove(p + 3, p + n, strlen(p + n) + 1);
		}
	}
}

void sbx__redact_inplace(char *s)
{
	if (!s)
		return;
	pthread_mutex_lock(&lock);
	redact_locked(s);
	pthread_mutex_unlock(&lock);
}

void sbx__log(sbx_log_level level, const char *func, int line, const char *fmt, ...)
{
	pthread_mutex_lock(&lock);
	if (!sink || level > sink_max) {
		pthread_mutex_unlock(&lock);
		return;
	}
	va_list ap;
	va_start(ap, fmt);
	char *body = xvasprintf(fmt, ap);
	va_end(ap);
	char *msg = level >= SBX_LOG_DEBUG ? xasprintf("%s:%d: %s", func, line, body) : xstrdup(body);
	free(body);
	redact_locked(msg);
	sbx_log_fn fn = sink;
	void *payload = sink_payload;
	pthread_mutex_unlock(&lock);
	fn(level, msg, payload);
	free(msg);
}
