/* SPDX-License-Identifier: MIT */
/*
 * Optional shared libraries loaded at first use (dlopen) instead of at start.
 *
 * Linking libcurl, libarchive, libcrypto, libmicrohttpd, SQLite and zlib made
 * every `sbx` process map ~48 libraries (curl's tree alone pulls gnutls,
 * krb5, LDAP and, through libarchive's libxml2, ICU) before main: 15 ms of a
 * 16 ms `sbx exec`. Commands that never touch them (run, exec, ls, rm, cp,
 * create) now never load them (docs/performance.md).
 *
 * Each lazy library has a file of shims (lazy_<lib>.c) that defines the
 * functions sbx calls under their real names, with the prototypes of the
 * library's own header (so the compiler checks them). A shim resolves its
 * symbol once, on first call, and calls through. The build still names the
 * libraries (meson deps): with --as-needed a library is only recorded as
 * needed when code calls a function that has no shim, which keeps the build
 * working but loads it at start again; tests/integration/cli_lazy.c fails
 * then. To call a new function of a lazy library, add its line to the
 * library's shim file.
 *
 * Entry points call sbx__lazy_load() first, so a missing library is a clear
 * error naming the Debian package; a shim called while its library cannot
 * load returns the library's failure value (NULL, an error code) and does
 * nothing for void functions.
 */
#ifndef SBX_UTIL_LAZY_H
#define SBX_UTIL_LAZY_H

#include <sbx/error.h>

typedef struct sbx__lazy_lib {
	const char *soname;  /* what dlopen loads, e.g. "libcurl.so.4" */
	const char *name;    /* for messages, e.g. "libcurl" */
	const char *package; /* the Debian package that ships soname */
	int state;           /* 0 not tried, 1 loaded, -1 failed (atomic) */
	void *handle;
	char error[256];     /* dlerror() of the failed load */
} sbx__lazy_lib;

#define SBX_LAZY_LIB_INIT(so, nm, pkg) { .soname = (so), .name = (nm), .package = (pkg) }

/* lazy_curl.c, lazy_archive.c, lazy_crypto.c; the server has its own. */
extern sbx__lazy_lib sbx__lazy_curl, sbx__lazy_archive, sbx__lazy_crypto;

/* Loads LIB if it is not loaded yet (thread-safe, once per process).
 * @return 0, or -ENOSYS: "<name> (<soname>) cannot be loaded: ...; install
 *         the Debian package <package>". */
int sbx__lazy_load(sbx__lazy_lib *lib, sbx_error **err);

/* The address of NAME in LIB (loading LIB first), NULL when either fails. */
void *sbx__lazy_sym(sbx__lazy_lib *lib, const char *name);

/* 1 when LIB is mapped in this process (loaded by us or by anyone). */
int sbx__lazy_mapped(const sbx__lazy_lib *lib);

/* A shim: `ret name params` calling the library's NAME with ARGS, FAIL
 * returned when it cannot be loaded. The name is in parentheses so that a
 * header's function-like macro of the same name (curl's type checks) does not
 * expand here. Hidden: an executable never exports it to the library. Weak:
 * a test that fakes a function (tests/fuzz/srv_fixture.c) keeps its own. */
#define SBX_LAZY(lib, ret, fail, name, params, args)                                     \
	__attribute__((weak, visibility("hidden"))) ret(name) params                           \
	{                                                                                \
		static __typeof__(name) *fp;                                             \
		__typeof__(name) *f = __atomic_load_n(&fp, __ATOMIC_ACQUIRE);            \
		if (!f) {                                                                \
			f = (__typeof__(name) *)sbx__lazy_sym(&(lib), #name);            \
			if (!f)                                                          \
				return fail;                                             \
			__atomic_store_n(&fp, f, __ATOMIC_RELEASE);                      \
		}                                                                        \
		return f args;                                                           \
	}

#define SBX_LAZY_VOID(lib, name, params, args)                                           \
	__attribute__((weak, visibility("hidden"))) void(name) params                          \
	{                                                                                \
		static __typeof__(name) *fp;                                             \
		__typeof__(name) *f = __atomic_load_n(&fp, __ATOMIC_ACQUIRE);            \
		if (!f) {                                                                \
			f = (__typeof__(name) *)sbx__lazy_sym(&(lib), #name);            \
			if (!f)                                                          \
				return;                                                  \
			__atomic_store_n(&fp, f, __ATOMIC_RELEASE);                      \
		}                                                                        \
		f args;                                                                  \
	}

#endif
