/* SPDX-License-Identifier: MIT */
/**
 * @file spec.h
 * The sandbox spec: what a sandbox is made of. One struct, filled from CLI
 * flags, environment, task files and API bodies alike.
 */
#ifndef SBX_SPEC_H
#define SBX_SPEC_H

#ifdef __cplusplus
extern "C" {
#endif

/** Network modes. */
typedef enum sbx_network {
	SBX_NETWORK_NONE = 0,     /**< loopback only (the default) */
	SBX_NETWORK_HOST = 1,     /**< UNSAFE: share the host's network, loopback included;
	                               explicit opt-in only, never a default */
	SBX_NETWORK_INTERNET = 2, /**< own namespace, a veth pair and NAT through the host;
	                               host loopback/addresses, link-local and other
	                               sandboxes unreachable; egress rules apply */
} sbx_network;

/** User namespace modes. */
typedef enum sbx_userns {
	SBX_USERNS_PRIVATE = 0, /**< root inside maps to an unprivileged host id range of
	                             its own (the default) */
	SBX_USERNS_HOST = 1,    /**< UNSAFE: root inside is host uid 0 (the pre-2026-12 mode) */
} sbx_userns;

/** Where the writable layer lives (local provider). */
typedef enum sbx_scratch_kind {
	SBX_SCRATCH_DEFAULT = 0, /**< SBX_SCRATCH, else on disk where the host can */
	SBX_SCRATCH_DISK = 1,    /**< on disk, capped by a quota; an error if unavailable */
	SBX_SCRATCH_TMPFS = 2,   /**< in memory (a tmpfs charged to the memory limit) */
} sbx_scratch_kind;

#define SBX_SANDBOX_OPTS_VERSION 1

/**
 * Sandbox spec. All pointers are borrowed for the duration of the create call
 * only: the create copies every string and string array it hands a provider
 * (provider, image, env, workdir, user, labels, hostname, upper_dir,
 * allow_out, deny_out), so the caller may free or reuse them as soon as
 * sbx_sandbox_create() / sbx_sandbox_create_ex() returns, also when it
 * returned -ECANCELED or -ETIMEDOUT while the provider call goes on.
 * String arrays are NULL-terminated lists of "KEY=VALUE".
 */
typedef struct sbx_sandbox_opts {
	unsigned version;          /**< SBX_SANDBOX_OPTS_VERSION */
	const char *provider;      /**< provider name; NULL = the runtime's default */
	const char *image;         /**< image name in the store (local) or template (remote) */
	double cpus;               /**< CPU quota in cores; 0 = unlimited */
	unsigned memory_mb;        /**< memory limit; 0 = unlimited */
	unsigned storage_mb;       /**< cap on the writable layer; 0 = provider default */
	unsigned pids_max;         /**< process limit; 0 = provider default */
	sbx_network network;       /**< SBX_NETWORK_NONE by default */
	const char *const *env;    /**< extra environment for every exec */
	const char *workdir;       /**< default cwd; NULL = image's WorkingDir or "/" */
	const char *user;          /**< default user ("root", "1000", "name:group") */
	unsigned ttl_s;            /**< destroy after this long idle-or-not; 0 = never */
	const char *const *labels; /**< "key=value" labels for listing and GC */
	const char *hostname;      /**< NULL = "sbx-<id prefix>" */
	const char *upper_dir;     /**< local only: keep the writable layer in this host
	                                directory (template builds); NULL = the scratch
	                                store (see `scratch`) */
	int detach;                /**< 1: sandbox outlives the creating process
	                                without being treated as leaked by `sbx gc` */
	/* Fields below were added after version 1's first release; zero keeps
	 * the safe default. */
	sbx_userns userns;         /**< SBX_USERNS_PRIVATE by default */
	const char *const *allow_out; /**< network=internet: egress allowed only to these
	                                CIDRs / hostnames (NULL = anywhere public) */
	const char *const *deny_out;  /**< network=internet: egress refused to these CIDRs /
	                                hostnames (checked after allow_out) */
	unsigned nofile_max;       /**< RLIMIT_NOFILE of commands; 0 = provider default */
	int net_raw;               /**< 1: grant CAP_NET_RAW inside (raw/packet sockets);
	                                default 0 in every network mode */
	sbx_scratch_kind scratch;  /**< where the writable layer lives (local) */
} sbx_sandbox_opts;

#define SBX_SANDBOX_OPTS_INIT { .version = SBX_SANDBOX_OPTS_VERSION }

/** "none" / "internet" / "host" -> mode; returns -EINVAL on anything else. */
int sbx_network_parse(sbx_network *out, const char *s);
/** Static name of a network mode. */
const char *sbx_network_name(sbx_network n);
/** "private" / "host" -> mode; returns -EINVAL on anything else. */
int sbx_userns_parse(sbx_userns *out, const char *s);
/** Static name of a user namespace mode. */
const char *sbx_userns_name(sbx_userns u);
/** "disk" / "tmpfs" -> kind; returns -EINVAL on anything else. */
int sbx_scratch_parse(sbx_scratch_kind *out, const char *s);

#ifdef __cplusplus
}
#endif
#endif
