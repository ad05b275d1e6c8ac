/* SPDX-License-Identifier: MIT */
/* zlib (gzip uploads to envd), loaded at first use (see util/lazy.h). */
#include <stddef.h>

#include <zlib.h>

#include "util/lazy.h"
#include "server_int.h"

sbx__lazy_lib sbx__lazy_zlib = SBX_LAZY_LIB_INIT("libz.so.1", "zlib", "zlib1g");

#define FAIL Z_STREAM_ERROR

SBX_LAZY(sbx__lazy_zlib, int, FAIL, inflateInit2_, (z_streamp a0, int a1, const char *a2, int a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_zlib, int, FAIL, inflate, (z_streamp a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_zlib, int, FAIL, inflateEnd, (z_streamp a0), (a0))
