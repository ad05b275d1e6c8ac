/* SPDX-License-Identifier: MIT */
/* libmicrohttpd, loaded when `sbx serve` starts (see util/lazy.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include <microhttpd.h>

#include "util/lazy.h"
#include "server_int.h"

sbx__lazy_lib sbx__lazy_mhd = SBX_LAZY_LIB_INIT("libmicrohttpd.so.12", "libmicrohttpd", "libmicrohttpd12");

#define FAIL MHD_NO

SBX_LAZY(sbx__lazy_mhd, enum MHD_Result, FAIL, MHD_add_response_header, (struct MHD_Response *a0, const char *a1, const char *a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_mhd, struct MHD_Response *, NULL, MHD_create_response_from_buffer, (size_t a0, void *a1, enum MHD_ResponseMemoryMode a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_mhd, struct MHD_Response *, NULL, MHD_create_response_from_buffer_with_free_callback, (size_t a0, void *a1, MHD_ContentReaderFreeCallback a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_mhd, struct MHD_Response *, NULL, MHD_create_response_from_callback, (uint64_t a0, size_t a1, MHD_ContentReaderCallback a2, void *a3, MHD_ContentReaderFreeCallback a4), (a0, a1, a2, a3, a4))
SBX_LAZY(sbx__lazy_mhd, struct MHD_Response *, NULL, MHD_create_response_for_upgrade, (MHD_UpgradeHandler a0, void *a1), (a0, a1))
SBX_LAZY(sbx__lazy_mhd, int, 0, MHD_get_connection_values, (struct MHD_Connection *a0, enum MHD_ValueKind a1, MHD_KeyValueIterator a2, void *a3), (a0, a1, a2, a3))
SBX_LAZY_VOID(sbx__lazy_mhd, MHD_destroy_response, (struct MHD_Response *a0), (a0))
SBX_LAZY(sbx__lazy_mhd, size_t, 0, MHD_http_unescape, (char *a0), (a0))
SBX_LAZY(sbx__lazy_mhd, const char *, NULL, MHD_lookup_connection_value, (struct MHD_Connection *a0, enum MHD_ValueKind a1, const char *a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_mhd, enum MHD_Result, FAIL, MHD_queue_response, (struct MHD_Connection *a0, unsigned int a1, struct MHD_Response *a2), (a0, a1, a2))
SBX_LAZY_VOID(sbx__lazy_mhd, MHD_stop_daemon, (struct MHD_Daemon *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_mhd, MHD_suspend_connection, (struct MHD_Connection *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_mhd, MHD_resume_connection, (struct MHD_Connection *a0), (a0))

#define RESOLVE(name, fail)                                                             \
	static __typeof__(name) *fp;                                                    \
	__typeof__(name) *f = __atomic_load_n(&fp, __ATOMIC_ACQUIRE);                   \
	if (!f) {                                                                       \
		f = (__typeof__(name) *)sbx__lazy_sym(&sbx__lazy_mhd, #name);           \
		if (!f)                                                                 \
			return fail;                                                    \
		__atomic_store_n(&fp, f, __ATOMIC_RELEASE);                             \
	}

/* The variadic ones go to their va_list variants, or take the one argument
 * the options sbx uses take. */
__attribute__((weak, visibility("hidden"))) struct MHD_Daemon *(MHD_start_daemon)(
	unsigned int flags, uint16_t port, MHD_AcceptPolicyCallback apc, void *apc_cls, MHD_AccessHandlerCallback dh,
	void *dh_cls, ...)
{
	RESOLVE(MHD_start_daemon_va, NULL);
	va_list ap;
	va_start(ap, dh_cls);
	struct MHD_Daemon *d = f(flags, port, apc, apc_cls, dh, dh_cls, ap);
	va_end(ap);
	return d;
}

/* MHD_CONNECTION_OPTION_TIMEOUT, the only option there is, takes an unsigned int. */
__attribute__((weak, visibility("hidden"))) enum MHD_Result(MHD_set_connection_option)(
	struct MHD_Connection *c, enum MHD_CONNECTION_OPTION opt, ...)
{
	RESOLVE(MHD_set_connection_option, MHD_NO);
	va_list ap;
	va_start(ap, opt);
	enum MHD_Result r = f(c, opt, va_arg(ap, unsigned int));
	va_end(ap);
	return r;
}

/* No info type sbx asks for takes an argument. */
__attribute__((weak, visibility("hidden"))) const union MHD_DaemonInfo *(MHD_get_daemon_info)(
	struct MHD_Daemon *d, enum MHD_DaemonInfoType type, ...)
{
	RESOLVE(MHD_get_daemon_info, NULL);
	return f(d, type);
}

/* No info type sbx asks for takes an argument. */
__attribute__((weak, visibility("hidden"))) const union MHD_ConnectionInfo *(MHD_get_connection_info)(
	struct MHD_Connection *c, enum MHD_ConnectionInfoType type, ...)
{
	RESOLVE(MHD_get_connection_info, NULL);
	return f(c, type);
}

/* Neither CLOSE nor CORK_ON/OFF takes an argument. */
__attribute__((weak, visibility("hidden"))) enum MHD_Result(MHD_upgrade_action)(
	struct MHD_UpgradeResponseHandle *urh, enum MHD_UpgradeAction action, ...)
{
	RESOLVE(MHD_upgrade_action, MHD_NO);
	return f(urh, action);
}
