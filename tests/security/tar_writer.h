/* SPDX-License-Identifier: MIT */
/*
 * A tiny ustar/pax writer for the escape battery: hostile archives need
 * entries that no well-behaved tool writes on purpose (hardlinks through
 * symlinks, device nodes, setuid modes, capability xattrs).
 */
#ifndef SBX_TEST_TAR_WRITER_H
#define SBX_TEST_TAR_WRITER_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

struct tar_ent {
	const char *name;
	char type;             /* '0' file, '1' hardlink, '2' symlink, '3' char, '4' block, '5' dir, '6' fifo */
	unsigned mode;
	const char *link;      /* hardlink/symlink target */
	const char *data;      /* file contents (NUL-terminated), or NULL */
	unsigned major, minor; /* devices */
};

static inline void tar_octal(char *field, size_t width, unsigned long long v)
{
	/* width - 1 octal digits and a NUL, most significant first */
	field[width - 1] = '\0';
	for (size_t i = width - 1; i-- > 0; v >>= 3)
		field[i] = (char)('0' + (v & 7));
}

static inline void tar_header(FILE *f, const char *name, char type, unsigned mode, const char *link,
			      size_t size, unsigned major, unsigned minor)
{
	unsigned char h[512] = { 0 };
	cr_assert_lt(strlen(name), 100, "tar name too long: %s", name);
	memcpy(h, name, strlen(name));
	tar_octal((char *)h + 100, 8, mode);
	tar_octal((char *)h + 108, 8, 0);
	tar_octal((char *)h + 116, 8, 0);
	tar_octal((char *)h + 124, 12, size);
	tar_octal((char *)h + 136, 12, 1700000000ull);
	h[156] = (unsigned char)type;
	if (link)
		memcpy(h + 157, link, strlen(link) < 100 ? strlen(link) : 99);
	memcpy(h + 257, "ustar", 6);
	memcpy(h + 263, "00", 2);
	memcpy(h + 265, "root", 4);
	memcpy(h + 297, "root", 4);
	tar_octal((char *)h + 329, 8, major);
	tar_octal((char *)h + 337, 8, minor);
	memset(h + 148, ' ', 8);
	unsigned sum = 0;
	for (size_t i = 0; i < 512; i++)
		sum += h[i];
	snprintf((char *)h + 148, 8, "%06o", sum);
	h[155] = ' ';
	fwrite(h, 1, 512, f);
}

static inline void tar_data(FILE *f, const void *data, size_t len)
{
	static const char zero[512];
	fwrite(data, 1, len, f);
	if (len % 512)
		fwrite(zero, 1, 512 - len % 512, f);
}

static inline void tar_add(FILE *f, const struct tar_ent *e)
{
	size_t len = e->data ? strlen(e->data) : 0;
	tar_header(f, e->name, e->type, e->mode, e->link, len, e->major, e->minor);
	if (len)
		tar_data(f, e->data, len);
}

/* A pax header giving the next entry the xattr KEY=VALUE (binary value). */
static inline void tar_pax_xattr(FILE *f, const char *key, const void *val, size_t vlen)
{
	char rec[512];
	size_t body = 1 + strlen("SCHILY.xattr.") + strlen(key) + 1 + vlen + 1; /* " k=v\n" */
	size_t n = body + 1;
	while (snprintf(NULL, 0, "%zu", n) + body != n)
		n = snprintf(NULL, 0, "%zu", n) + body;
	int h = snprintf(rec, sizeof(rec), "%zu SCHILY.xattr.%s=", n, key);
	cr_assert_lt((size_t)h + vlen + 1, sizeof(rec));
	memcpy(rec + h, val, vlen);
	rec[h + vlen] = '\n';
	tar_header(f, "PaxHeaders/x", 'x', 0644, NULL, n, 0, 0);
	tar_data(f, rec, n);
}

static inline void tar_end(FILE *f)
{
	static const char zero[1024];
	fwrite(zero, 1, sizeof(zero), f);
}

/* Writes ENTS (terminated by a NULL name) as a tar file at PATH. */
static inline void tar_write(const char *path, const struct tar_ent *ents)
{
	FILE *f = fopen(path, "w");
	cr_assert_not_null(f, "create %s", path);
	for (size_t i = 0; ents[i].name; i++)
		tar_add(f, &ents[i]);
	tar_end(f);
	cr_assert_eq(fclose(f), 0);
}

#endif
