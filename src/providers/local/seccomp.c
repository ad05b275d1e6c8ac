/* SPDX-License-Identifier: MIT */
/* The default seccomp filter: raw BPF compiled at build time by
 * sbx-seccomp-gen (seccomp_gen.c holds the rules) into seccomp_bpf.c. */
#include "local_int.h"

extern const unsigned char sbx__seccomp_bpf[];
extern const size_t sbx__seccomp_bpf_len;

int sbx__seccomp_program(const void **prog, size_t *len, sbx_error **err)
{
	(void)err;
	*prog = sbx__seccomp_bpf;
	*len = sbx__seccomp_bpf_len;
	return 0;
}
