/* SPDX-License-Identifier: MIT */
/*
 * TOML 1.0 parser: a small DOM for Harbor task files (task.toml). Semi-private
 * to the library (sbx__toml_*). Values are trees of sbx_toml nodes owned by the
 * root returned from sbx__toml_parse(); every pointer handed out by a getter is
 * borrowed and lives as long as the root.
 */
#ifndef SBX_TASKS_TOML_H
#define SBX_TASKS_TOML_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <sbx/error.h>

/** Largest file sbx__toml_parse_file() reads. */
#define SBX_TOML_MAX_FILE (4u * 1024u * 1024u)
/** Deepest nesting of tables and arrays accepted. */
#define SBX_TOML_MAX_DEPTH 256

typedef enum sbx_toml_type {
	SBX_TOML_TABLE,
	SBX_TOML_ARRAY,
	SBX_TOML_STRING,
	SBX_TOML_INTEGER,
	SBX_TOML_FLOAT,
	SBX_TOML_BOOL,
	SBX_TOML_DATETIME,       /**< offset date-time, 1979-05-27T07:32:00Z */
	SBX_TOML_DATETIME_LOCAL, /**< 1979-05-27T07:32:00 */
	SBX_TOML_DATE_LOCAL,     /**< 1979-05-27 */
	SBX_TOML_TIME_LOCAL,     /**< 07:32:00 */
} sbx_toml_type;

/** Parsed fields of the four datetime kinds; absent parts are zero. */
typedef struct sbx_toml_datetime {
	int year, month, day;
	int hour, minute, second;
	int nanosecond;   /**< fractional seconds, truncated to nanoseconds */
	int offset_min;   /**< minutes east of UTC (offset date-time only) */
	bool has_date, has_time, has_offset;
} sbx_toml_datetime;

typedef struct sbx_toml sbx_toml;

/** One node. Read it through the accessors below; fields are for the parser. */
struct sbx_toml {
	sbx_toml_type type;
	unsigned flags;   /* parser bookkeeping (definition kind of tables) */
	unsigned depth;   /* nesting level, root = 0 */
	union {
		struct {
			char **keys;        /* NUL-terminated; may hold NUL (key_lens) */
			size_t *key_lens;
			sbx_toml **vals;
			size_t n, cap;
			uint32_t *index;    /* hash of slots (idx + 1), built past 16 keys */
			size_t index_cap;
		} tab;
		struct {
			sbx_toml **items;
			size_t n, cap;
		} arr;
		struct {
			char *s;            /* NUL-terminated; may also contain NUL */
			size_t len;
		} str;
		int64_t i;
		double f;
		bool b;
		struct {
			char *s;            /* normalized RFC 3339 text */
			sbx_toml_datetime v;
		} dt;
	} u;
};

/** Result of a typed lookup. */
typedef enum sbx_toml_status {
	SBX_TOML_FOUND = 0,
	SBX_TOML_MISSING,      /**< no such key (or a path component is not a table) */
	SBX_TOML_WRONG_TYPE,   /**< the key exists with another type */
} sbx_toml_status;

/**
 * Parses a TOML 1.0 document.
 * @param out       owned root table, freed with sbx__toml_free()
 * @param text      document bytes (need not be NUL-terminated)
 * @param filename  used in messages; NULL means "<input>"
 * @return 0, or -EINVAL with "FILE:LINE:COL: what was expected".
 */
int sbx__toml_parse(sbx_toml **out, const char *text, size_t len, const char *filename,
		    sbx_error **err);

/**
 * Reads and parses a file of at most SBX_TOML_MAX_FILE bytes.
 * @return 0, -ENOENT (message names the path), -EFBIG, or -EINVAL as above.
 */
int sbx__toml_parse_file(sbx_toml **out, const char *path, sbx_error **err);

/** Frees a tree; NULL is fine. */
void sbx__toml_free(sbx_toml *v);
/** For _cleanup_(sbx__toml_freep). */
static inline void sbx__toml_freep(sbx_toml **v)
{
	sbx__toml_free(*v);
}

/** "table", "array", "string", "integer", "float", "boolean", "datetime", ... */
const char *sbx__toml_type_name(sbx_toml_type t);

/**
 * Looks up a dotted path ("agent.timeout_sec") of bare key names below a table.
 * @return a borrowed node, or NULL when missing or a component is not a table.
 */
const sbx_toml *sbx__toml_get(const sbx_toml *table, const char *path);
/** Looks up one key (exact bytes, no dot splitting); borrowed or NULL. */
const sbx_toml *sbx__toml_table_get(const sbx_toml *table, const char *key, size_t klen);

/* Typed lookups; *out is only written on SBX_TOML_FOUND. Borrowed strings. */
sbx_toml_status sbx__toml_get_string(const sbx_toml *t, const char *path, const char **out);
sbx_toml_status sbx__toml_get_int(const sbx_toml *t, const char *path, int64_t *out);
/** Accepts an integer or a float. */
sbx_toml_status sbx__toml_get_number(const sbx_toml *t, const char *path, double *out);
sbx_toml_status sbx__toml_get_bool(const sbx_toml *t, const char *path, bool *out);
sbx_toml_status sbx__toml_get_table(const sbx_toml *t, const char *path, const sbx_toml **out);
sbx_toml_status sbx__toml_get_array(const sbx_toml *t, const char *path, const sbx_toml **out);

/**
 * Sets "FILE: [agent].timeout_sec: expected WHAT, got TYPE" (or "missing") for
 * a failed lookup of path below the root.
 * @return -EINVAL.
 */
int sbx__toml_type_error(sbx_error **err, const char *file, const char *path, const char *what,
			 const sbx_toml *got);

/* Node accessors (NULL-safe: wrong types give 0 / NULL / false). */
/** Type of a node; check for NULL first (NULL gives SBX_TOML_TABLE). */
sbx_toml_type sbx__toml_type(const sbx_toml *v);
/** Entries of a table or items of an array. */
size_t sbx__toml_len(const sbx_toml *v);
/** i-th key of a table in insertion order (borrowed), with its value in *val. */
const char *sbx__toml_key_at(const sbx_toml *table, size_t i, const sbx_toml **val);
/** i-th item of an array (borrowed). */
const sbx_toml *sbx__toml_at(const sbx_toml *array, size_t i);
const char *sbx__toml_string(const sbx_toml *v, size_t *len);
int64_t sbx__toml_int(const sbx_toml *v);
/** Value of an integer or float node. */
double sbx__toml_number(const sbx_toml *v);
bool sbx__toml_bool(const sbx_toml *v);
/** Fields and normalized text of any datetime kind. */
const sbx_toml_datetime *sbx__toml_datetime(const sbx_toml *v, const char **text);

/**
 * Encodes a tree as toml-test tagged JSON ({"type": ..., "value": ...} leaves).
 * @param out owned NUL-terminated JSON text
 * @return 0 or -ENOMEM.
 */
int sbx__toml_to_tagged_json(char **out, const sbx_toml *root);

#endif
