/* SPDX-License-Identifier: MIT */
/* envhelper (tests/integration/envhelper.c): what its two files share. */
#ifndef SBX_TEST_ENVHELPER_H
#define SBX_TEST_ENVHELPER_H

#include <stddef.h>
#include <sys/types.h>

#define MSG_MAX (4u << 20) /* the largest message, and input buffered */
#define OUT_MAX (1u << 20) /* the most output a command's answer carries */

/* Set from the command line (envhelper.c). */
extern const char *workdir;
extern size_t max_output;

/* ---- envhelper_io.c: the connection ---- */
extern int fd;                        /* the client's socket */
extern pid_t running;                 /* the running command's process group, or 0 */
extern unsigned char in[MSG_MAX + 16]; /* bytes read, not yet consumed */
extern size_t in_n;
extern char out[OUT_MAX + 1];         /* the last command's output */
extern size_t out_n;

void wr(const void *p, size_t n);                  /* exits when the client is gone */
void ws_send(unsigned op, const void *p, size_t n); /* one unmasked, final frame */
void ws_close(unsigned code);                      /* sends close CODE and exits */
double now(void);

struct frame {
	int fin, op;
	size_t hdr, len; /* header bytes (mask included), payload bytes */
};
/* The frame at in[OFF]: 1 when whole, 0 when more is due; a broken one closes. */
int frame_at(size_t off, struct frame *f);
void frame_unmask(size_t off, const struct frame *f);
void drop(size_t off, size_t n); /* removes in[OFF, OFF + N) */
int fill(void);                  /* reads more into in[]: 0, or -1 at EOF */
/* Answers pings and a close in in[], leaving data frames in order: -1 when closed. */
int service_control(void);

struct run {
	int exit_code, timed_out, truncated;
	double seconds;
};
/*
 * Runs `sh -c CMD` in workdir with ENV (NENV "K=V" strings) added, stdout and
 * stderr into out[] (the first max_output bytes), its process group killed
 * after TIMEOUT seconds (0: none) or when the client goes away.
 */
void run(const char *cmd, char **env, int nenv, double timeout, struct run *r);

#endif
