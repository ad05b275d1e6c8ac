/* SPDX-License-Identifier: MIT */
/* Prints sizeof of every public struct the Python package mirrors with
 * ctypes (python/sbx/_lib.py), for test_abi.py: a field added on one side
 * only makes the library read past what Python passed. */
#include <stdio.h>

#include <sbx/pool.h>
#include <sbx/sbx.h>

#define P(T) printf("%s %zu\n", #T, sizeof(T))

int main(void)
{
	P(sbx_error);
	P(sbx_runtime_opts);
	P(sbx_sandbox_opts);
	P(sbx_pool_opts);
	P(sbx_create_ctl);
	P(sbx_exec_opts);
	P(sbx_exec_result);
	P(sbx_sandbox_info);
	P(sbx_stats);
	P(sbx_task);
	P(sbx_episode_opts);
	P(sbx_episode_result);
	P(sbx_observation);
	return 0;
}
