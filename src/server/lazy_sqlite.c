/* SPDX-License-Identifier: MIT */
/* SQLite, loaded when `sbx serve` starts (see util/lazy.h). */
#include <stddef.h>

#include <sqlite3.h>

#include "util/lazy.h"
#include "server_int.h"

sbx__lazy_lib sbx__lazy_sqlite = SBX_LAZY_LIB_INIT("libsqlite3.so.0", "SQLite", "libsqlite3-0");

#define FAIL SQLITE_ERROR

SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_bind_text, (sqlite3_stmt *a0, int a1, const char *a2, int a3, void (*a4) (void *)), (a0, a1, a2, a3, a4))
SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_close, (sqlite3 *a0), (a0))
SBX_LAZY(sbx__lazy_sqlite, const unsigned char *, NULL, sqlite3_column_text, (sqlite3_stmt *a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_sqlite, const char *, NULL, sqlite3_errmsg, (sqlite3 *a0), (a0))
SBX_LAZY(sbx__lazy_sqlite, const char *, NULL, sqlite3_errstr, (int a0), (a0))
SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_exec, (sqlite3 *a0, const char *a1, int (*a2) (void *, int, char **, char **), void *a3, char **a4), (a0, a1, a2, a3, a4))
SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_finalize, (sqlite3_stmt *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_sqlite, sqlite3_free, (void *a0), (a0))
SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_open_v2, (const char *a0, sqlite3 **a1, int a2, const char *a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_prepare_v2, (sqlite3 *a0, const char *a1, int a2, sqlite3_stmt **a3, const char **a4), (a0, a1, a2, a3, a4))
SBX_LAZY(sbx__lazy_sqlite, int, FAIL, sqlite3_step, (sqlite3_stmt *a0), (a0))
