/* SPDX-License-Identifier: MIT */
/*
 * pass@k for `sbx eval --samples K`: the unbiased estimator of Chen et al.
 * 2021 ("Evaluating Large Language Models Trained on Code"), per task, then
 * averaged over the tasks.
 */
#include "eval.h"

double eval_pass_at_k(unsigned n, unsigned c, unsigned k)
{
	if (k == 0 || k > n || c > n)
		return -1;
	/* Every draw of k from n contains a pass when fewer than k fail. */
	if (n - c < k)
		return 1.0;
	/* C(n-c,k)/C(n,k) = prod_{i=n-c+1..n} (1 - k/i) */
	double fail = 1.0;
	for (unsigned i = n - c + 1; i <= n; i++)
		fail *= 1.0 - (double)k / (double)i;
	return 1.0 - fail;
}

double eval_pass_at_k_mean(const struct eval_task_count *v, size_t n, unsigned k,
			   size_t *used_out)
{
	double sum = 0;
	size_t used = 0;
	for (size_t i = 0; i < n; i++) {
		double p = eval_pass_at_k(v[i].scored, v[i].passed, k);
		if (p < 0)
			continue;
		sum += p;
		used++;
	}
	if (used_out)
		*used_out = used;
	return used ? sum / (double)used : -1;
}
