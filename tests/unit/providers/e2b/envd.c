/* SPDX-License-Identifier: MIT */
/* Connect streaming: envelopes fed in any split, events, end-stream, entries, sandbox JSON. */
#include <criterion/criterion.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "providers/e2b/e2b_int.h"

struct frames {
	unsigned flags[16];
	char *msg[16];
	size_t n;
};

static int collect(unsigned flags, const char *msg, size_t len, void *ud)
{
	struct frames *f = ud;
	cr_assert_lt(f->n, 16);
	f->flags[f->n] = flags;
	f->msg[f->n] = strndup(msg, len);
	f->n++;
	return 0;
}

static size_t stream_of(char *buf, const char *const *msgs, int end)
{
	size_t off = 0;
	for (size_t i = 0; msgs[i]; i++) {
		size_t n;
		char *e = sbx__e2b_envelope(msgs[i], strlen(msgs[i]), &n);
		memcpy(buf + off, e, n);
		off += n;
		free(e);
	}
	if (end) {
		memcpy(buf + off, "\x02\x00\x00\x00\x02{}", 7);
		off += 7;
	}
	return off;
}

static const char *const echo_hi[] = {
	"{\"event\":{\"start\":{\"pid\":42}}}",
	"{\"event\":{\"data\":{\"stdout\":\"aGkK\"}}}",
	"{\"event\":{\"keepalive\":{}}}",
	"{\"event\":{\"data\":{\"stderr\":\"b29wcwo=\"}}}",
	"{\"event\":{\"end\":{\"exitCode\":3,\"exited\":true,\"status\":\"exit status 3\"}}}",
	NULL,
};

Test(e2b_envd, envelope_header_is_big_endian)
{
	size_t n;
	char *e = sbx__e2b_envelope("{}", 2, &n);
	cr_assert_eq(n, 7);
	cr_assert_eq(memcmp(e, "\x00\x00\x00\x00\x02{}", 7), 0);
	free(e);
	char big[300];
	memset(big, 'x', sizeof(big));
	e = sbx__e2b_envelope(big, sizeof(big), &n);
	cr_assert_eq((unsigned char)e[3], 1);
	cr_assert_eq((unsigned char)e[4], 300 - 256);
	free(e);
}

Test(e2b_envd, envelopes_in_every_split)
{
	char buf[1024];
	size_t len = stream_of(buf, echo_hi, 1);
	for (size_t step = 1; step <= len; step++) {
		struct e2b_envelopes p;
		struct frames f = { 0 };
		sbx__e2b_envelopes_init(&p);
		for (size_t off = 0; off < len; off += step)
			cr_assert_eq(sbx__e2b_envelopes_feed(&p, buf + off, off + step <= len ? step : len - off, collect,
							     &f), 0, "step %zu", step);
		cr_assert_eq(f.n, 6, "step %zu", step);
		cr_assert(p.ended);
		cr_assert_eq(f.flags[5], 2);
		cr_assert_str_eq(f.msg[0], echo_hi[0]);
		cr_assert_str_eq(f.msg[4], echo_hi[4]);
		for (size_t i = 0; i < f.n; i++)
			free(f.msg[i]);
		sbx__e2b_envelopes_free(&p);
	}
}

Test(e2b_envd, envelope_errors)
{
	struct e2b_envelopes p;
	struct frames f = { 0 };
	sbx__e2b_envelopes_init(&p);
	cr_assert_eq(sbx__e2b_envelopes_feed(&p, "\x01\x00\x00\x00\x02{}", 7, collect, &f), -EPROTO,
		     "compressed frames are refused");
	sbx__e2b_envelopes_free(&p);
	sbx__e2b_envelopes_init(&p);
	cr_assert_eq(sbx__e2b_envelopes_feed(&p, "\x00\x7f\x00\x00\x00", 5, collect, &f), -EPROTO, "oversized");
	sbx__e2b_envelopes_free(&p);
	sbx__e2b_envelopes_init(&p);
	cr_assert_eq(sbx__e2b_envelopes_feed(&p, "\x02\x00\x00\x00\x02{}\x00", 8, collect, &f), -EPROTO,
		     "nothing may follow the end-stream frame");
	for (size_t i = 0; i < f.n; i++)
		free(f.msg[i]);
	sbx__e2b_envelopes_free(&p);
}

Test(e2b_envd, events)
{
	struct e2b_event e;
	cr_assert_eq(sbx__e2b_event_parse(&e, echo_hi[0], strlen(echo_hi[0])), 0);
	cr_assert_eq(e.type, E2B_EV_START);
	cr_assert_eq(e.pid, 42);
	sbx__e2b_event_clear(&e);
	cr_assert_eq(sbx__e2b_event_parse(&e, echo_hi[1], strlen(echo_hi[1])), 0);
	cr_assert_eq(e.type, E2B_EV_DATA);
	cr_assert_eq(e.fd, 1);
	cr_assert_eq(e.len, 3);
	cr_assert_eq(memcmp(e.data, "hi\n", 3), 0);
	sbx__e2b_event_clear(&e);
	cr_assert_eq(sbx__e2b_event_parse(&e, echo_hi[3], strlen(echo_hi[3])), 0);
	cr_assert_eq(e.fd, 2);
	cr_assert_str_eq(e.data, "oops\n");
	sbx__e2b_event_clear(&e);
	cr_assert_eq(sbx__e2b_event_parse(&e, echo_hi[2], strlen(echo_hi[2])), 0);
	cr_assert_eq(e.type, E2B_EV_KEEPALIVE);
	cr_assert_eq(sbx__e2b_event_parse(&e, echo_hi[4], strlen(echo_hi[4])), 0);
	cr_assert_eq(e.type, E2B_EV_END);
	cr_assert_eq(e.exit_code, 3);
	cr_assert_str_eq(e.status, "exit status 3");
	sbx__e2b_event_clear(&e);
	const char *empty_end = "{\"event\":{\"end\":{}}}";
	cr_assert_eq(sbx__e2b_event_parse(&e, empty_end, strlen(empty_end)), 0);
	cr_assert_eq(e.type, E2B_EV_END);
	cr_assert_eq(e.exit_code, 0, "absent exitCode is 0");
	sbx__e2b_event_clear(&e);
	const char *proto = "{\"event\":{\"end\":{\"exit_code\":-1,\"status\":\"signal: killed\"}}}";
	cr_assert_eq(sbx__e2b_event_parse(&e, proto, strlen(proto)), 0);
	cr_assert_eq(e.exit_code, -1);
	cr_assert_eq(sbx__e2b_status_signal(e.status), SIGKILL);
	sbx__e2b_event_clear(&e);
	cr_assert_eq(sbx__e2b_event_parse(&e, "nope", 4), -EPROTO);
	const char *bad64 = "{\"event\":{\"data\":{\"stdout\":\"***\"}}}";
	cr_assert_eq(sbx__e2b_event_parse(&e, bad64, strlen(bad64)), -EPROTO);
	/* protobuf JSON bytes: URL-safe and unpadded are accepted, bad padding is not */
	const char *url64 = "{\"event\":{\"data\":{\"stdout\":\"-_8\"}}}";
	cr_assert_eq(sbx__e2b_event_parse(&e, url64, strlen(url64)), 0);
	cr_assert_eq(e.len, 2);
	cr_assert_eq((unsigned char)e.data[0], 0xfb);
	cr_assert_eq((unsigned char)e.data[1], 0xff);
	sbx__e2b_event_clear(&e);
	const char *pad64 = "{\"event\":{\"data\":{\"stdout\":\"aGk==\"}}}";
	cr_assert_eq(sbx__e2b_event_parse(&e, pad64, strlen(pad64)), -EPROTO);
	sbx__e2b_event_clear(&e);
	const char *none = "{\"event\":{\"data\":{\"stdout\":\"\"}}}";
	cr_assert_eq(sbx__e2b_event_parse(&e, none, strlen(none)), 0);
	cr_assert_eq(e.len, 0);
	sbx__e2b_event_clear(&e);
	cr_assert_eq(sbx__e2b_status_signal("exit status 0"), 0);
	cr_assert_eq(sbx__e2b_status_signal("signal: terminated"), SIGTERM);
}

Test(e2b_envd, end_stream)
{
	sbx_error *e = NULL;
	cr_assert_eq(sbx__e2b_end_stream("{}", 2, "exec", &e), 0);
	cr_assert_null(e);
	const char *err = "{\"error\":{\"code\":\"deadline_exceeded\",\"message\":\"too slow\"}}";
	cr_assert_eq(sbx__e2b_end_stream(err, strlen(err), "exec", &e), -ETIMEDOUT);
	cr_assert_str_eq(e->msg, "e2b: exec: deadline_exceeded: too slow");
	sbx_error_free(e);
	e = NULL;
	cr_assert_eq(sbx__e2b_end_stream("[", 1, "exec", &e), -EPROTO);
	sbx_error_free(e);
}

Test(e2b_envd, entry_info)
{
	json_t *o = json_loads("{\"name\":\"a\",\"type\":\"FILE_TYPE_DIRECTORY\",\"path\":\"/home/user/a\","
			       "\"size\":\"4096\",\"mode\":2147484141,\"owner\":\"root\",\"group\":\"root\","
			       "\"modifiedTime\":\"1970-01-01T00:01:40Z\"}", 0, NULL);
	sbx_file_info fi;
	cr_assert_eq(sbx__e2b_entry_parse(&fi, o), 0);
	cr_assert_eq(fi.type, SBX_FILE_DIR);
	cr_assert_eq(fi.size, 4096);
	cr_assert_eq(fi.mode, 0755);
	cr_assert_str_eq(fi.path, "/home/user/a");
	cr_assert_float_eq(fi.mtime, 100.0, 1e-9);
	sbx_file_info_clear(&fi);
	json_decref(o);
	o = json_loads("{\"type\":1,\"path\":\"/x/y\",\"symlinkTarget\":\"/z\"}", 0, NULL);
	cr_assert_eq(sbx__e2b_entry_parse(&fi, o), 0);
	cr_assert_eq(fi.type, SBX_FILE_REGULAR);
	cr_assert_str_eq(fi.name, "y");
	cr_assert_str_eq(fi.symlink_target, "/z");
	sbx_file_info_clear(&fi);
	json_decref(o);
}

Test(e2b_envd, sandbox_json)
{
	json_t *o = json_loads("{\"templateID\":\"base\",\"sandboxID\":\"sbx123\",\"clientID\":\"x\","
			       "\"envdVersion\":\"0.5.0\",\"envdAccessToken\":\"tok\",\"domain\":null,"
			       "\"metadata\":{\"sbx.task\":\"t\",\"n\":1},\"state\":\"running\","
			       "\"startedAt\":\"1970-01-01T00:00:05Z\",\"endAt\":\"1970-01-01T00:05:05Z\"}", 0, NULL);
	struct e2b_info in;
	cr_assert_eq(sbx__e2b_info_parse(&in, o, NULL), 0);
	cr_assert_str_eq(in.id, "sbx123");
	cr_assert_str_eq(in.token, "tok");
	cr_assert_null(in.domain);
	cr_assert_str_eq(in.metadata[0], "sbx.task=t");
	cr_assert_null(in.metadata[1], "non-string metadata is skipped");
	cr_assert_float_eq(in.end_at - in.started_at, 300.0, 1e-9);
	sbx__e2b_info_clear(&in);
	json_decref(o);
	o = json_loads("{\"templateID\":\"base\"}", 0, NULL);
	sbx_error *e = NULL;
	cr_assert_eq(sbx__e2b_info_parse(&in, o, &e), -EPROTO);
	sbx_error_free(e);
	json_decref(o);
}
