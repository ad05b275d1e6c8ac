/* SPDX-License-Identifier: MIT */
/*
 * passwd(5) and group(5) text as found in a sandbox or image, parsed on the
 * host: lookups by name and by id. The text is the sandbox's, so it is
 * untrusted: callers open it their own way (a sandbox file only without
 * blocking and only when regular, see docs/security.md) and read at most
 * SBX_PASSWD_MAX bytes; lines that do not parse are skipped, as glibc does.
 */
#ifndef SBX_UTIL_PASSWD_H
#define SBX_UTIL_PASSWD_H

#include <stddef.h>

/* Largest /etc/passwd or /etc/group read. */
#define SBX_PASSWD_MAX (1u << 20)

/* One line: name, id (uid or gid), and for passwd the primary gid and home. */
struct sbx_pwent {
	char *name;
	unsigned id;
	unsigned gid; /* passwd: field 4; group: the id again */
	char *home;   /* passwd: field 6 ("" when empty); group: NULL */
};

/* The entry named NAME in DB (LEN bytes of passwd or group text, GROUP set
 * for the latter). @return 0 (OUT filled, owned), or -ENOENT. */
int sbx__pw_by_name(struct sbx_pwent *out, const char *db, size_t len, int group, const char *name);
/* The first entry with id ID. @return 0 or -ENOENT. */
int sbx__pw_by_id(struct sbx_pwent *out, const char *db, size_t len, int group, unsigned id);
void sbx__pw_clear(struct sbx_pwent *e);

#endif
