/* SPDX-License-Identifier: MIT */
/*
 * The single map from sbx error codes (negative errno) to HTTP statuses for
 * the REST control plane and to Connect code strings for envd RPCs, plus
 * the Connect code -> HTTP status table for unary errors: one table, so
 * every endpoint maps a code the same way. Anything not listed is 500 /
 * "internal".
 */
#include <errno.h>
#include <string.h>

#include "../util/alloc.h"
#include "server_int.h"

static const struct {
	int code;
	int http;
	const char *connect;
} map[] = {
	{ -ENOENT, 404, "not_found" },
	{ -ESRCH, 404, "not_found" },
	{ -EEXIST, 409, "already_exists" },
	{ -EALREADY, 409, "failed_precondition" },
	{ -EINVAL, 400, "invalid_argument" },
	{ -ENOTDIR, 400, "invalid_argument" },
	{ -EISDIR, 400, "invalid_argument" },
	{ -ENAMETOOLONG, 400, "invalid_argument" },
	{ -ENXIO, 400, "failed_precondition" },  /* a FIFO without reader, a device without driver */
	{ -ELOOP, 400, "invalid_argument" },
	{ -EPERM, 403, "permission_denied" },
	{ -EACCES, 403, "permission_denied" },
	{ -ETIMEDOUT, 504, "deadline_exceeded" },
	{ -ECANCELED, 499, "canceled" },
	{ -EPROTO, 502, "unavailable" },
	{ -EIO, 500, "internal" },
	{ -EAGAIN, 429, "resource_exhausted" },
	{ -EBUSY, 503, "unavailable" },
	{ -E2BIG, 413, "resource_exhausted" },
	{ -EFBIG, 413, "resource_exhausted" },
	{ -ENOSPC, 507, "resource_exhausted" },
	{ -ENOSYS, 501, "unimplemented" },
	{ -ENOTEMPTY, 409, "failed_precondition" },
	{ -EPIPE, 409, "failed_precondition" },
};

int sbx__srv_http_status(int code)
{
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].code == code)
			return map[i].http;
	return 500;
}

const char *sbx__srv_connect_code(int code)
{
	for (size_t i = 0; i < sizeof(map) / sizeof(map[0]); i++)
		if (map[i].code == code)
			return map[i].connect;
	return "internal";
}

/* Connect's recommended HTTP status per code (connectrpc http-status table). */
static const struct {
	const char *code;
	int http;
} connect_http[] = {
	{ "canceled", 499 },	      { "unknown", 500 },	    { "invalid_argument", 400 },
	{ "deadline_exceeded", 504 }, { "not_found", 404 },	    { "already_exists", 409 },
	{ "permission_denied", 403 }, { "resource_exhausted", 429 }, { "failed_precondition", 400 },
	{ "aborted", 409 },	      { "out_of_range", 400 },	    { "unimplemented", 501 },
	{ "internal", 500 },	      { "unavailable", 503 },	    { "data_loss", 500 },
	{ "unauthenticated", 401 },
};

int sbx__srv_connect_http_status(const char *connect_code)
{
	for (size_t i = 0; i < sizeof(connect_http) / sizeof(connect_http[0]); i++)
		if (strcmp(connect_http[i].code, connect_code) == 0)
			return connect_http[i].http;
	return 500;
}

void sbx__srv_reply_sbx_error(struct srv_req *r, int connect, const char *what, int code, sbx_error *e)
{
	const char *msg = e && e->msg ? e->msg : sbx_error_code_name(code);
	if (connect)
		sbx__srv_reply_connect_error(r, sbx__srv_connect_code(code), "%s: %s", what, msg);
	else
		sbx__srv_reply_error(r, sbx__srv_http_status(code), "%s: %s", what, msg);
	sbx_error_free(e);
}
