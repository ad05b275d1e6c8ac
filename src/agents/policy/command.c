/* SPDX-License-Identifier: MIT */
/*
 * The command a model's text reply asks for, as the reference loop reads
 * it: a reply starting with TASK_COMPLETE (any case) stops; otherwise the
 * first fenced block tagged bash, sh, shell or nothing is the command, a
 * python or py block runs with python3; without such a block the whole
 * reply, trimmed, is the command. Fences with another tag (```text,
 * ```json) are skipped, so the first runnable block wins.
 */
#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "agents/policy/policy.h"
#include "util/alloc.h"
#include "util/str.h"

static char *trimmed(const char *s, size_t n)
{
	while (n > 0 && isspace((unsigned char)*s)) {
		s++;
		n--;
	}
	while (n > 0 && isspace((unsigned char)s[n - 1]))
		n--;
	return xstrndup(s, n);
}

char *sbx__policy_python(const char *code)
{
	/* A here-document whose end marker the code does not hold. */
	char tag[32] = "sbx_py_end";
	char hex[9];
	while (strstr(code, tag)) {
		sbx__random_hex(hex, 8);
		memcpy(tag + 10, hex, sizeof(hex));
	}
	return xasprintf("python3 - <<'%s'\n%s\n%s", tag, code, tag);
}

enum reply_kind sbx__policy_command(char **cmd, const char *reply)
{
	*cmd = NULL;
	const char *s = reply ? reply : "";
	s += strspn(s, " \t\r\n");
	if (strncasecmp(s, "TASK_COMPLETE", 13) == 0)
		return REPLY_COMPLETE;
	const char *p = s;
	while ((p = strstr(p, "```"))) {
		const char *tag = p + 3;
		size_t tl = strcspn(tag, " \t\r\n`");
		const char *body = tag + tl;
		body += strspn(body, " \t");
		if (*body == '\r')
			body++;
		if (*body == '\n')
			body++;
		const char *end = strstr(body, "```");
		if (!end)
			break;
		int sh = tl == 0 || (tl == 4 && !strncasecmp(tag, "bash", 4)) ||
			 (tl == 2 && !strncasecmp(tag, "sh", 2)) ||
			 (tl == 5 && !strncasecmp(tag, "shell", 5));
		int py = (tl == 6 && !strncasecmp(tag, "python", 6)) ||
			 (tl == 2 && !strncasecmp(tag, "py", 2)) ||
			 (tl == 7 && !strncasecmp(tag, "python3", 7));
		if (sh || py) {
			char *c = trimmed(body, (size_t)(end - body));
			if (!*c) {
				free(c);
				return REPLY_NONE;
			}
			if (py) {
				*cmd = sbx__policy_python(c);
				free(c);
			} else {
				*cmd = c;
			}
			return REPLY_COMMAND;
		}
		p = end + 3;
	}
	char *c = trimmed(s, strlen(s));
	if (!*c) {
		free(c);
		return REPLY_NONE;
	}
	*cmd = c;
	return REPLY_COMMAND;
}
