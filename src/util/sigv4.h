/* SPDX-License-Identifier: MIT */
/*
 * AWS Signature Version 4 (header form), as S3-compatible object stores
 * check it: the daytona provider signs its context uploads with it and
 * `sbx serve` verifies what the Daytona SDK's S3 client sends. The HMACs
 * run on libcrypto (loaded lazily: callers load sbx__lazy_crypto first).
 */
#ifndef SBX_UTIL_SIGV4_H
#define SBX_UTIL_SIGV4_H

#include <sbx/error.h>

#define SBX_SIGV4_ALGO "AWS4-HMAC-SHA256"
#define SBX_SIGV4_EMPTY_SHA256 "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"

struct sbx_sigv4 {
	const char *method;
	const char *path;            /* canonical URI: the path as sent (already encoded) */
	const char *query;           /* the query as sent, without '?'; NULL or "" = none */
	const char *const *headers;  /* "Name: value" lines to sign, NULL-terminated */
	const char *payload_hash;    /* hex SHA-256 of the body, or UNSIGNED-PAYLOAD */
	const char *amz_date;        /* YYYYMMDDTHHMMSSZ */
	const char *region;
	const char *service;
	const char *secret;          /* the secret access key */
};

/*
 * The signature (64 hex digits) of S, and optionally the canonical request
 * and the ;-joined signed header names (both owned).
 * @return 0, or -EINVAL when a header line or the date is malformed.
 */
int sbx__sigv4_sign(char sig[65], char **canonical_out, char **signed_headers_out, const struct sbx_sigv4 *s,
		    sbx_error **err);

/* Percent-encodes S the way SigV4 wants (unreserved kept; '/' kept when
 * keep_slash, for paths). Owned. */
char *sbx__sigv4_uri_encode(const char *s, int keep_slash);

/* The current time as x-amz-date (YYYYMMDDTHHMMSSZ). */
void sbx__sigv4_now(char out[17]);

#endif
