/* SPDX-License-Identifier: MIT */
/*
 * network=internet for the local provider (docs/network.md): each sandbox's
 * own network namespace gets a veth pair to the host, an address pair out of
 * a dedicated pool, a default route, and rules in the host's nftables table
 * `inet sbx` (NAT out, nothing in, no host, no link-local, no other
 * sandbox, the spec's egress lists). Everything is keyed by the sandbox id,
 * so any process can remove it: the host end is `sbx<id>`, a sandbox with
 * egress lists has chain `sb_<id>`, and <state>/local/<id>.net marks that
 * there is something to remove (GC finds sandboxes by such files).
 */
#ifndef SBX_LOCAL_NET_H
#define SBX_LOCAL_NET_H

#include <sys/types.h>

#include <sbx/spec.h>
#include <sbx/sys/provider.h>

/* Wires the network namespace of init_pid (base = <state>/local/<id>).
 * Validates and resolves the spec's allow_out/deny_out. 0 or -errno
 * (-EINVAL for a bad list entry, naming it). */
int sbx__net_attach(const char *base, const char *id, pid_t init_pid, const sbx_sandbox_opts *o,
		    sbx_error **err);
/* Removes the sandbox's rules, then the marker (init must be dead: its
 * link goes with its namespace); 0 also when there was nothing to remove.
 * Safe from any process. */
int sbx__net_detach(const char *base, const char *id, sbx_error **err);
/* Replaces the egress lists of a wired sandbox (o's allow_out/deny_out,
 * resolved now): -ENOTSUP when it has no network=internet (no marker). */
int sbx__net_set_egress(const char *base, const char *id, const sbx_sandbox_opts *o, sbx_error **err);
/* Whether <base>.net exists (attach ran and detach has not finished). */
int sbx__net_marked(const char *base);
/* /etc/resolv.conf for an internet sandbox: the host's non-loopback
 * nameservers (or SBX_NET_DNS), owned. */
char *sbx__net_resolv_conf(void);

#endif
