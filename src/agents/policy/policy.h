/* SPDX-License-Identifier: MIT */
/*
 * The policy agent's parts (docs/agents.md): its settings (config.c), one
 * chat completion with retries and SSE (chat.c), the command a reply asks
 * for (command.c) and the loop (policy.c).
 */
#ifndef SBX_AGENTS_POLICY_H
#define SBX_AGENTS_POLICY_H

#include <jansson.h>
#include <stddef.h>

#include <sbx/error.h>

struct policy_cfg {
	char *api_base;         /* without a trailing slash */
	char *model;
	char *key;              /* a secret: never logged, zeroed when freed; NULL = none */
	double temperature;
	long max_tokens;        /* 0 = not sent */
	unsigned max_turns;
	double command_timeout; /* seconds per command; 0 = none */
	double request_timeout; /* seconds per chat request */
	unsigned max_retries;   /* of a 429, 5xx or transport failure */
	int tool_mode;
	int stream;
	char *system_prompt;
	char *system_prompt_from; /* "default" or the file */
	json_t *extra_body;     /* an object, or NULL */
};

/* Reads agent_args over the environment (POLICY_*, OPENENV_MAX_TURNS); an
 * unknown key or a bad value is -EINVAL naming it. */
int sbx__policy_cfg_load(struct policy_cfg *c, const char *const *args, sbx_error **err);
void sbx__policy_cfg_free(struct policy_cfg *c);

/* One chat completion's answer. */
struct chat_reply {
	json_t *message;        /* the assistant message as the server sent it (owned) */
	char *finish_reason;    /* or NULL */
	unsigned retries;       /* failed attempts before this one */
	long prompt_tokens, completion_tokens; /* from usage, -1 when absent */
};

/*
 * POSTs {api_base}/chat/completions with `body` (the request object) within
 * `deadline` (monotonic): 429, 5xx and transport failures are retried with
 * jittered backoff up to c->max_retries, other statuses are not.
 * @return 0; -ETIMEDOUT (the deadline passed); -EIO, -EPROTO (a bad
 *         answer) or the transport's code with a message (no key in it).
 */
int sbx__policy_chat(struct chat_reply *out, const struct policy_cfg *c, json_t *body,
		     double deadline, sbx_error **err);
void sbx__policy_reply_free(struct chat_reply *r);

/* The command a text reply asks for. */
enum reply_kind {
	REPLY_COMMAND,       /* *cmd is a command for /bin/sh -c */
	REPLY_COMPLETE,      /* TASK_COMPLETE */
	REPLY_NONE,          /* nothing to run */
};

/* The first ```bash / ```sh (or untagged) block, a ```python / ```py block
 * run with python3, else the whole reply; a reply starting with
 * TASK_COMPLETE is REPLY_COMPLETE. *cmd owned. */
enum reply_kind sbx__policy_command(char **cmd, const char *reply);

/* A shell command running `code` with python3 (a here-document). Owned. */
char *sbx__policy_python(const char *code);

#endif
