/* SPDX-License-Identifier: MIT */
/** @file sbx.h Umbrella include for libsbx. */
#ifndef SBX_SBX_H
#define SBX_SBX_H
#include <sbx/version.h>
#include <sbx/error.h>
#include <sbx/runtime.h>
#include <sbx/spec.h>
#include <sbx/sandbox.h>
#include <sbx/pool.h>
#include <sbx/process.h>
#include <sbx/backend.h>
#include <sbx/image.h>
#include <sbx/template.h>
#include <sbx/task.h>
#include <sbx/episode.h>
#endif
