/* SPDX-License-Identifier: MIT */
/* sbx_error: set once at the failure point, prefixed on the way up. */
#include <errno.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include <sbx/error.h>

#include "alloc.h"
#include "log.h"

void sbx_error_free(sbx_error *e)
{
	if (!e)
		return;
	free(e->provider);
	free(e->msg);
	free(e);
}

static int vset(sbx_error **err, int code, int sys_errno, const char *fmt, va_list ap)
{
	if (!err || *err)
		return code;
	sbx_error *e = xcalloc(1, sizeof(*e));
	char *msg = xvasprintf(fmt, ap);
	e->code = code;
	e->sys_errno = sys_errno;
	if (sys_errno) {
		e->msg = xasprintf("%s: %s", msg, strerror(sys_errno));
		free(msg);
	} else {
		e->msg = msg;
	}
	sbx__redact_inplace(e->msg);
	*err = e;
	return code;
}

int sbx_error_set(sbx_error **err, int code, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(err, code, 0, fmt, ap);
	va_end(ap);
	return code;
}

int sbx_error_setsys(sbx_error **err, int code, int sys_errno, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vset(err, code, sys_errno, fmt, ap);
	va_end(ap);
	return code;
}

int sbx_error_prefix(sbx_error **err, int code, const char *fmt, ...)
{
	if (!err || !*err)
		return code;
	va_list ap;
	va_start(ap, fmt);
	char *pre = xvasprintf(fmt, ap);
	va_end(ap);
	char *msg = xasprintf("%s: %s", pre, (*err)->msg);
	free(pre);
	free((*err)->msg);
	(*err)->msg = msg;
	return (*err)->code;
}

const char *sbx_error_code_name(int code)
{
	switch (-code) {
	case 0: return "OK";
	case EPERM: return "EPERM";
	case ENOENT: return "ENOENT";
	case ESRCH: return "ESRCH";
	case EIO: return "EIO";
	case E2BIG: return "E2BIG";
	case EAGAIN: return "EAGAIN";
	case ENOMEM: return "ENOMEM";
	case EACCES: return "EACCES";
	case EBUSY: return "EBUSY";
	case EEXIST: return "EEXIST";
	case ENOTDIR: return "ENOTDIR";
	case EISDIR: return "EISDIR";
	case EINVAL: return "EINVAL";
	case EFBIG: return "EFBIG";
	case ENOSPC: return "ENOSPC";
	case ENOSYS: return "ENOSYS";
	case EPROTO: return "EPROTO";
	case ETIMEDOUT: return "ETIMEDOUT";
	case ECANCELED: return "ECANCELED";
	case ECONNREFUSED: return "ECONNREFUSED";
	default: return "EUNKNOWN";
	}
}
