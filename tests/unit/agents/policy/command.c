/* SPDX-License-Identifier: MIT */
/* The command a model's reply asks for (src/agents/policy/command.c). */
#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "agents/policy/policy.h"

static void expect(const char *reply, enum reply_kind kind, const char *cmd)
{
	char *c = NULL;
	enum reply_kind k = sbx__policy_command(&c, reply);
	cr_assert_eq(k, kind, "reply %s: kind %d, want %d", reply ? reply : "(null)", k, kind);
	if (cmd)
		cr_assert_str_eq(c, cmd, "reply %s", reply);
	else
		cr_assert_null(c);
	free(c);
}

Test(policy_command, task_complete_at_the_start_only)
{
	expect("TASK_COMPLETE", REPLY_COMPLETE, NULL);
	expect("  \n task_complete, all done", REPLY_COMPLETE, NULL);
	expect("TASK_COMPLETE\n```bash\nrm -rf /\n```", REPLY_COMPLETE, NULL);
	expect("echo TASK_COMPLETE", REPLY_COMMAND, "echo TASK_COMPLETE");
}

Test(policy_command, nothing_to_run)
{
	expect("", REPLY_NONE, NULL);
	expect(NULL, REPLY_NONE, NULL);
	expect(" \n\t ", REPLY_NONE, NULL);
	expect("```bash\n\n```", REPLY_NONE, NULL);
}

Test(policy_command, the_bare_reply)
{
	expect("  ls -la /app \n", REPLY_COMMAND, "ls -la /app");
	/* an unterminated fence is not a block */
	expect("```bash\nls", REPLY_COMMAND, "```bash\nls");
}

Test(policy_command, the_first_runnable_fence)
{
	expect("Let me look.\n```bash\nls /app\n```\n", REPLY_COMMAND, "ls /app");
	expect("```sh\ncat a\n```", REPLY_COMMAND, "cat a");
	expect("```\nuname -a\n```", REPLY_COMMAND, "uname -a");
	expect("```BASH\nid\n```", REPLY_COMMAND, "id");
	expect("```text\nnot this\n```\n```bash\nfirst\n```\n```bash\nsecond\n```", REPLY_COMMAND,
	       "first");
	expect("```json\n{}\n```\nno block to run", REPLY_COMMAND,
	       "```json\n{}\n```\nno block to run");
	expect("```bash\r\nprintf 'a\\n'\r\n```", REPLY_COMMAND, "printf 'a\\n'");
}

Test(policy_command, python_fences_run_with_python3)
{
	char *c = NULL;
	cr_assert_eq(sbx__policy_command(&c, "```python\nprint(1)\n```"), REPLY_COMMAND);
	cr_assert_str_eq(c, "python3 - <<'sbx_py_end'\nprint(1)\nsbx_py_end");
	free(c);
	cr_assert_eq(sbx__policy_command(&c, "```py\nx = 2\n```"), REPLY_COMMAND);
	cr_assert_str_eq(c, "python3 - <<'sbx_py_end'\nx = 2\nsbx_py_end");
	free(c);
	/* code holding the marker gets another */
	c = sbx__policy_python("print('sbx_py_end')");
	cr_assert(strncmp(c, "python3 - <<'sbx_py_end", 23) == 0, "%s", c);
	const char *tag = c + strlen("python3 - <<'");
	size_t tl = strcspn(tag, "'");
	cr_assert_gt(tl, strlen("sbx_py_end"), "%s", c);
	char *end = strrchr(c, '\n');
	cr_assert_eq(strlen(end + 1), tl);
	cr_assert(strncmp(end + 1, tag, tl) == 0);
	free(c);
}
