/* SPDX-License-Identifier: MIT */
/*
 * Harbor's legacy size strings (`memory = "2G"`, `storage = "10G"`) in MB,
 * the way Harbor reads them: a G, M or K suffix (optional i and B), 1G =
 * 1024 MB, rounded up to whole MB.
 */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>

#include "connectors/harbor/harbor.h"

int sbx__task_parse_mb(unsigned *out, const char *s)
{
	char *end;
	errno = 0;
	while (isspace((unsigned char)*s))
		s++;
	double v = strtod(s, &end);
	if (end == s || errno || !isfinite(v) || v <= 0)
		return -EINVAL;
	double mul;
	switch (toupper((unsigned char)*end)) {
	case 'G': mul = 1024; break;
	case 'M': mul = 1; break;
	case 'K': mul = 1.0 / 1024; break;
	default: return -EINVAL;
	}
	end++;
	if (*end == 'i')
		end++;
	if (*end == 'B' || *end == 'b')
		end++;
	while (isspace((unsigned char)*end))
		end++;
	if (*end)
		return -EINVAL;
	double mb = ceil(v * mul);
	if (mb < 1 || mb > UINT_MAX)
		return -EINVAL;
	*out = (unsigned)mb;
	return 0;
}
