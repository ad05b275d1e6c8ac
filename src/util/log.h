/* SPDX-License-Identifier: MIT */
/*
 * Logging through one settable sink, with secret redaction: every registered
 * secret value is replaced by "***" in every line and error message.
 */
#ifndef SBX_UTIL_LOG_H
#define SBX_UTIL_LOG_H

#include <sbx/runtime.h>

void sbx__log_set_sink(sbx_log_fn fn, void *payload, sbx_log_level max);
void sbx__log(sbx_log_level level, const char *func, int line, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

/* Registers a secret value (copied) so it never reaches a log or error. */
void sbx__redact_add(const char *secret);
/* Replaces every registered secret in s (in place; "***" is never longer). */
void sbx__redact_inplace(char *s);
/* Drops all registered secrets (tests). */
void sbx__redact_clear(void);

#define SBX_LOGE(...) sbx__log(SBX_LOG_ERROR, __func__, __LINE__, __VA_ARGS__)
#define SBX_LOGW(...) sbx__log(SBX_LOG_WARN, __func__, __LINE__, __VA_ARGS__)
#define SBX_LOGI(...) sbx__log(SBX_LOG_INFO, __func__, __LINE__, __VA_ARGS__)
#define SBX_LOGD(...) sbx__log(SBX_LOG_DEBUG, __func__, __LINE__, __VA_ARGS__)

#endif
