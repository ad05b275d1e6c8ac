/* SPDX-License-Identifier: MIT */
/* The pass@k estimator of `sbx eval --samples K` against exact binomials. */
#include <criterion/criterion.h>

#include "cli/eval.h"

/* C(n, k) exactly, for the small n here. */
static double binom(unsigned n, unsigned k)
{
	if (k > n)
		return 0;
	double r = 1;
	for (unsigned i = 1; i <= k; i++)
		r = r * (n - k + i) / i;
	return r;
}

Test(cli_passk, matches_the_binomial_formula)
{
	for (unsigned n = 1; n <= 12; n++)
		for (unsigned c = 0; c <= n; c++)
			for (unsigned k = 1; k <= n; k++) {
				double want = 1.0 - binom(n - c, k) / binom(n, k);
				cr_assert_float_eq(eval_pass_at_k(n, c, k), want, 1e-12,
						   "n=%u c=%u k=%u", n, c, k);
			}
}

Test(cli_passk, edges)
{
	cr_assert_float_eq(eval_pass_at_k(4, 0, 4), 0.0, 1e-12);
	cr_assert_float_eq(eval_pass_at_k(4, 1, 4), 1.0, 1e-12);
	cr_assert_float_eq(eval_pass_at_k(4, 1, 1), 0.25, 1e-12);
	cr_assert_float_eq(eval_pass_at_k(5, 2, 2), 0.7, 1e-12); /* 1 - 3/10 */
	cr_assert_float_eq(eval_pass_at_k(1, 1, 1), 1.0, 1e-12);
	cr_assert_eq(eval_pass_at_k(3, 1, 4), -1, "k > n is not estimable");
	cr_assert_eq(eval_pass_at_k(3, 1, 0), -1);
	cr_assert_eq(eval_pass_at_k(3, 4, 1), -1, "more passes than samples");
	/* large n: the product form neither overflows nor loses the answer */
	cr_assert_float_eq(eval_pass_at_k(1000, 1, 1), 0.001, 1e-12);
	cr_assert_float_eq(eval_pass_at_k(1000, 500, 10), 1.0 - binom(500, 10) / binom(1000, 10), 1e-9);
}

Test(cli_passk, mean_skips_tasks_with_too_few_scored_samples)
{
	const struct eval_task_count v[] = { { 4, 4 }, { 4, 0 }, { 4, 1 }, { 2, 2 } };
	size_t used = 0;
	cr_assert_float_eq(eval_pass_at_k_mean(v, 4, 1, &used), (1.0 + 0 + 0.25 + 1) / 4, 1e-12);
	cr_assert_eq(used, 4);
	cr_assert_float_eq(eval_pass_at_k_mean(v, 4, 4, &used), (1.0 + 0 + 1) / 3, 1e-12);
	cr_assert_eq(used, 3, "the task with 2 scored samples cannot say pass@4");
	cr_assert_eq(eval_pass_at_k_mean(v, 4, 5, &used), -1);
	cr_assert_eq(used, 0);
	cr_assert_eq(eval_pass_at_k_mean(NULL, 0, 1, &used), -1);
}
