/* SPDX-License-Identifier: MIT */
/* libarchive, loaded at first use: the functions sbx calls (see lazy.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

#include <archive.h>
#include <archive_entry.h>

#include "lazy.h"

/* The Debian 12 soname (stable for a decade) and its package. */
sbx__lazy_lib sbx__lazy_archive = SBX_LAZY_LIB_INIT("libarchive.so.13", "libarchive", "libarchive13");

#define FAIL ARCHIVE_FATAL

SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_copy_sourcepath, (struct archive_entry *a0, const char *a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, mode_t, FAIL, archive_entry_filetype, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_free, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, const char *, NULL, archive_entry_hardlink, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_linkify, (struct archive_entry_linkresolver *a0, struct archive_entry **a1, struct archive_entry **a2), (a0, a1, a2))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_linkresolver_free, (struct archive_entry_linkresolver *a0), (a0))
SBX_LAZY(sbx__lazy_archive, struct archive_entry_linkresolver *, NULL, archive_entry_linkresolver_new, (void), ())
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_linkresolver_set_strategy, (struct archive_entry_linkresolver *a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, time_t, FAIL, archive_entry_mtime, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, struct archive_entry *, NULL, archive_entry_new, (void), ())
SBX_LAZY(sbx__lazy_archive, const char *, NULL, archive_entry_pathname, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, mode_t, FAIL, archive_entry_perm, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, dev_t, FAIL, archive_entry_rdev, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_filetype, (struct archive_entry *a0, unsigned int a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_gid, (struct archive_entry *a0, la_int64_t a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_gname, (struct archive_entry *a0, const char *a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_hardlink, (struct archive_entry *a0, const char *a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_mtime, (struct archive_entry *a0, time_t a1, long int a2), (a0, a1, a2))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_pathname, (struct archive_entry *a0, const char *a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_perm, (struct archive_entry *a0, mode_t a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_rdev, (struct archive_entry *a0, dev_t a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_uid, (struct archive_entry *a0, la_int64_t a1), (a0, a1))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_set_uname, (struct archive_entry *a0, const char *a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, la_int64_t, FAIL, archive_entry_size, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, const struct stat *, NULL, archive_entry_stat, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_unset_atime, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_unset_birthtime, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_unset_ctime, (struct archive_entry *a0), (a0))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_xattr_add_entry, (struct archive_entry *a0, const char *a1, const void *a2, size_t a3), (a0, a1, a2, a3))
SBX_LAZY_VOID(sbx__lazy_archive, archive_entry_xattr_clear, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_entry_xattr_next, (struct archive_entry *a0, const char **a1, const void **a2, size_t *a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_entry_xattr_reset, (struct archive_entry *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_errno, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, const char *, NULL, archive_error_string, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, la_ssize_t, FAIL, archive_read_data, (struct archive *a0, void *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_data_block, (struct archive *a0, const void **a1, size_t *a2, la_int64_t *a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_disk_descend, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_disk_entry_from_file, (struct archive *a0, struct archive_entry *a1, int a2, const struct stat *a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_archive, struct archive *, NULL, archive_read_disk_new, (void), ())
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_disk_open, (struct archive *a0, const char *a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_disk_set_behavior, (struct archive *a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_disk_set_standard_lookup, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_disk_set_symlink_physical, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_free, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, struct archive *, NULL, archive_read_new, (void), ())
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_next_header, (struct archive *a0, struct archive_entry **a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_open, (struct archive *a0, void *a1, archive_open_callback (*a2), archive_read_callback (*a3), archive_close_callback (*a4)), (a0, a1, a2, a3, a4))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_open_fd, (struct archive *a0, int a1, size_t a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_open_filename, (struct archive *a0, const char *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_filter_all, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_filter_bzip2, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_filter_gzip, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_filter_xz, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_filter_zstd, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_format_all, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_format_empty, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_format_raw, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_read_support_format_tar, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_add_filter_gzip, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_add_filter_none, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_close, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, la_ssize_t, FAIL, archive_write_data, (struct archive *a0, const void *a1, size_t a2), (a0, a1, a2))
SBX_LAZY(sbx__lazy_archive, la_ssize_t, FAIL, archive_write_data_block, (struct archive *a0, const void *a1, size_t a2, la_int64_t a3), (a0, a1, a2, a3))
SBX_LAZY(sbx__lazy_archive, struct archive *, NULL, archive_write_disk_new, (void), ())
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_disk_set_options, (struct archive *a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_finish_entry, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_free, (struct archive *a0), (a0))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_header, (struct archive *a0, struct archive_entry *a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, struct archive *, NULL, archive_write_new, (void), ())
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_open, (struct archive *a0, void *a1, archive_open_callback (*a2), archive_write_callback (*a3), archive_close_callback (*a4)), (a0, a1, a2, a3, a4))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_open_fd, (struct archive *a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_set_bytes_in_last_block, (struct archive *a0, int a1), (a0, a1))
SBX_LAZY(sbx__lazy_archive, int, FAIL, archive_write_set_format_pax_restricted, (struct archive *a0), (a0))

/* The message is formatted here: libarchive has no va_list variant. */
__attribute__((weak, visibility("hidden"))) void(archive_set_error)(struct archive *a, int code, const char *fmt, ...)
{
	static __typeof__(archive_set_error) *fp;
	__typeof__(archive_set_error) *f = __atomic_load_n(&fp, __ATOMIC_ACQUIRE);
	if (!f) {
		f = (__typeof__(archive_set_error) *)sbx__lazy_sym(&sbx__lazy_archive, "archive_set_error");
		if (!f)
			return;
		__atomic_store_n(&fp, f, __ATOMIC_RELEASE);
	}
	char msg[512];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	f(a, code, "%s", msg);
}
