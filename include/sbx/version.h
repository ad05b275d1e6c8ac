/* SPDX-License-Identifier: MIT */
/** @file version.h Library version. */
#ifndef SBX_VERSION_H
#define SBX_VERSION_H

#define SBX_VERSION_MAJOR 0
#define SBX_VERSION_MINOR 1
#define SBX_VERSION_PATCH 0
#define SBX_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif
/** Borrowed: the runtime library's version string. */
const char *sbx_version_string(void);
#ifdef __cplusplus
}
#endif
#endif
