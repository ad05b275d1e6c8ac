/* SPDX-License-Identifier: MIT */
/* Optional libraries loaded at first use (src/util/lazy.h): a missing one is
 * an error naming the package, never a crash; a present one loads once. */
#include <criterion/criterion.h>
#include <errno.h>
#include <string.h>

#include "util/lazy.h"

static sbx__lazy_lib missing = SBX_LAZY_LIB_INIT("libsbx-test-missing.so.0", "libmissing", "sbx-test-pkg");

/* A shim over the missing library, as lazy_<lib>.c files declare them. */
int sbx_test_missing_fn(int a);
SBX_LAZY(missing, int, -77, sbx_test_missing_fn, (int a), (a))
void sbx_test_missing_void(int a);
SBX_LAZY_VOID(missing, sbx_test_missing_void, (int a), (a))

Test(lazy, missing_library_names_the_package)
{
	sbx_error *err = NULL;
	cr_assert_eq(sbx__lazy_load(&missing, &err), -ENOSYS);
	cr_assert_not_null(err);
	cr_expect_not_null(strstr(err->msg, "libmissing (libsbx-test-missing.so.0) cannot be loaded"), "%s", err->msg);
	cr_expect_not_null(strstr(err->msg, "install the Debian package sbx-test-pkg"), "%s", err->msg);
	sbx_error_free(err);
	/* the failure is remembered, and asking again gives the same error */
	err = NULL;
	cr_assert_eq(sbx__lazy_load(&missing, &err), -ENOSYS);
	sbx_error_free(err);
	cr_expect_eq(sbx__lazy_mapped(&missing), 0);
}

Test(lazy, shim_of_a_missing_library_returns_its_failure_value)
{
	cr_expect_eq(sbx_test_missing_fn(1), -77);
	sbx_test_missing_void(1); /* does nothing */
	cr_expect_null(sbx__lazy_sym(&missing, "sbx_test_missing_fn"));
}

Test(lazy, present_library_loads_and_resolves)
{
	sbx_error *err = NULL;
	cr_assert_eq(sbx__lazy_load(&sbx__lazy_crypto, &err), 0, "%s", err ? err->msg : "");
	cr_expect_eq(sbx__lazy_mapped(&sbx__lazy_crypto), 1);
	cr_expect_not_null(sbx__lazy_sym(&sbx__lazy_crypto, "EVP_sha256"));
	cr_expect_null(sbx__lazy_sym(&sbx__lazy_crypto, "sbx_no_such_symbol"));
	cr_assert_eq(sbx__lazy_load(&sbx__lazy_crypto, &err), 0);
}
