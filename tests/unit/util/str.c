/* SPDX-License-Identifier: MIT */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "util/str.h"

Test(util_str, parse_size)
{
	uint64_t v;
	cr_assert_eq(sbx__parse_size(&v, "512"), 0);
	cr_assert_eq(v, 512);
	cr_assert_eq(sbx__parse_size(&v, "2G"), 0);
	cr_assert_eq(v, 2ULL << 30);
	cr_assert_eq(sbx__parse_size(&v, "1.5M"), 0);
	cr_assert_eq(v, 1572864);
	cr_assert_eq(sbx__parse_size(&v, "10GiB"), 0);
	cr_assert_eq(v, 10ULL << 30);
	cr_assert_eq(sbx__parse_size(&v, "4k"), 0);
	cr_assert_eq(v, 4096);
	cr_assert_eq(sbx__parse_size(&v, "abc"), -EINVAL);
	cr_assert_eq(sbx__parse_size(&v, "5Q"), -EINVAL);
	cr_assert_eq(sbx__parse_size(&v, "-1"), -EINVAL);
}

Test(util_str, parse_duration)
{
	double d;
	cr_assert_eq(sbx__parse_duration(&d, "30"), 0);
	cr_assert_float_eq(d, 30, 1e-9);
	cr_assert_eq(sbx__parse_duration(&d, "5m"), 0);
	cr_assert_float_eq(d, 300, 1e-9);
	cr_assert_eq(sbx__parse_duration(&d, "1.5h"), 0);
	cr_assert_float_eq(d, 5400, 1e-9);
	cr_assert_eq(sbx__parse_duration(&d, "250ms"), 0);
	cr_assert_float_eq(d, 0.25, 1e-9);
	cr_assert_eq(sbx__parse_duration(&d, "2 weeks"), -EINVAL);
}

Test(util_str, strv_setenv_replaces)
{
	char **v = NULL;
	sbx__strv_setenv(&v, "A=1");
	sbx__strv_setenv(&v, "B=2");
	sbx__strv_setenv(&v, "A=3");
	cr_assert_eq(sbx__strv_len((const char *const *)v), 2);
	cr_assert_str_eq(v[0], "A=3");
	cr_assert_eq(sbx__strv_find_key(v, "B"), 1);
	cr_assert_eq(sbx__strv_find_key(v, "C=x"), -1);
	sbx__strv_free(v);
}

Test(util_str, strv_contains)
{
	char **v = NULL;
	cr_assert(!sbx__strv_contains(v, "a"));
	sbx__strv_push(&v, "a");
	sbx__strv_push(&v, "bc");
	cr_assert(sbx__strv_contains(v, "a"));
	cr_assert(sbx__strv_contains(v, "bc"));
	cr_assert(!sbx__strv_contains(v, "b"));
	sbx__strv_free(v);
}

Test(util_str, trim_and_lower)
{
	char s[] = "  LoCaL \n";
	cr_assert_str_eq(sbx__str_lower(sbx__str_trim(s)), "local");
}

Test(util_str, random_hex_is_hex_and_differs)
{
	char a[13], b[13];
	sbx__random_hex(a, 12);
	sbx__random_hex(b, 12);
	cr_assert_eq(strlen(a), 12);
	cr_assert_eq(strspn(a, "0123456789abcdef"), 12);
	cr_assert_str_neq(a, b);
}
