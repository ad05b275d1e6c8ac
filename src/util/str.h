/* SPDX-License-Identifier: MIT */
/* String and string-vector helpers, plus parsers for sizes and durations. */
#ifndef SBX_UTIL_STR_H
#define SBX_UTIL_STR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

size_t sbx__strv_len(const char *const *v);
/* Deep copy; NULL in, NULL out. */
char **sbx__strv_dup(const char *const *v);
/* Appends a copy of s; *v may be NULL. */
void sbx__strv_push(char ***v, const char *s);
void sbx__strv_free(char **v);
/* Whether v (may be NULL) holds a string equal to s. */
bool sbx__strv_contains(char *const *v, const char *s);
/* Finds "key=" in a KEY=VALUE vector; returns the index or -1. */
int sbx__strv_find_key(char *const *v, const char *kv);
/* Sets KEY=VALUE (replacing an existing KEY). */
void sbx__strv_setenv(char ***v, const char *kv);

bool sbx__str_startswith(const char *s, const char *prefix);
/* Trims ASCII space in place and returns s. */
char *sbx__str_trim(char *s);
/* Lower-cases ASCII in place and returns s. */
char *sbx__str_lower(char *s);

/* Parses an unsigned decimal integer (whole string). 0 or -EINVAL/-ERANGE. */
int sbx__parse_u64(uint64_t *out, const char *s);
/* "512", "512M", "2G", "1.5G", "100k" -> bytes (suffixes are binary: K=1024). */
int sbx__parse_size(uint64_t *out, const char *s);
/* "30", "30s", "5m", "2h", "1d", "1.5h" -> seconds. */
int sbx__parse_duration(double *out, const char *s);

/* Random lower-case hex string of n characters (n <= 64) into out[n+1]. */
void sbx__random_hex(char *out, size_t n);

#endif
