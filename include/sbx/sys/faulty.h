/* SPDX-License-Identifier: MIT */
/**
 * @file sys/faulty.h
 * The `faulty` provider, for tests: it wraps `local` and injects throttles,
 * errors, slow creates and hangs, and counts what it saw (peak concurrent
 * creates, calls, live sandboxes). Not for production use.
 */
#ifndef SBX_SYS_FAULTY_H
#define SBX_SYS_FAULTY_H

#include <sbx/error.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sbx_faulty_config {
	double throttle_rate;  /**< probability that a create fails with a throttle (-EAGAIN, HTTP 429) */
	double error_rate;     /**< probability that a create fails with -EIO */
	double slow_ms;        /**< every create sleeps this long first */
	double hang_rate;      /**< probability that a create sleeps hang_ms first */
	double hang_ms;
	double exec_fail_rate; /**< probability that an exec fails with -EIO */
	unsigned seed;         /**< 0 = from the clock */
	unsigned set_timeout_fail; /**< 1: every set_timeout fails (keepalive tests) */
	unsigned throttle_first;   /**< the first N creates are throttled, whatever the rates */
} sbx_faulty_config;

typedef struct sbx_faulty_stats {
	unsigned creates;        /**< create calls */
	unsigned throttled;      /**< of which throttled */
	unsigned failed;         /**< of which failed otherwise */
	unsigned peak_inflight;  /**< most create calls in flight at once */
	unsigned live;           /**< sandboxes created and not yet destroyed */
	unsigned set_timeouts;   /**< set_timeout calls */
	unsigned returned;       /**< create calls that have returned, however they ended
	                              (a create abandoned by a cancel returns later) */
	unsigned destroyed;      /**< successful destroys */
} sbx_faulty_stats;

/** Registers the provider as "faulty" (idempotent). */
int sbx_faulty_register(sbx_error **err);
/** Replaces the fault configuration and resets the counters. */
void sbx_faulty_configure(const sbx_faulty_config *c);
/** Reads the counters. */
void sbx_faulty_stats_get(sbx_faulty_stats *out);

#ifdef __cplusplus
}
#endif
#endif
