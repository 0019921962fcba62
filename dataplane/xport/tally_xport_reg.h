/* SPDX-License-Identifier: Apache-2.0
 * tally_xport_reg.h — transports as registered implementations (libtally_xport): one ops
 * table per transport (open/close with an options struct, receive wiring in one form, the
 * datapath ops of tally_xport.h, flush, counters), registered by name from the transport's
 * own folder (TALLY_XPORT_REGISTER), chosen by name with tally_xport_open(), and one
 * multiplexer for an appliance that serves several transports at once.
 *
 * Settings are passed, never read: a program fills tally_xport_opts from its flags and
 * config, and hands its environment lookup to tally_xport_opts_env(), which applies the
 * transport's documented environment names (TALLY_UDP_BUSY_POLL_US, ...) so that they keep
 * working at the program's edge. The library itself reads no environment.
 */
#ifndef TALLY_XPORT_REG_H
#define TALLY_XPORT_REG_H

#include <stddef.h>
#include <stdint.h>

#include "tally_xport.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_XPORT_MAX 16      /* transports a program may register */
#define TALLY_XPORT_MUX_MAX 4   /* members of one multiplexer */
#define TALLY_XPORT_BUSY_POLL_MAX_US 10000 /* opts.busy_poll_us's bound, every transport */

struct tally_auth;
struct tally_client;

/* Test-only fault injection (tests/xport_fault): flags a transport honours when a test
 * build sets tally_xport_opts.fault. Production programs never set it. */
struct tally_xport_fault {
	uint8_t lose_disconnect;   /* verbs: rdma_cm DISCONNECTED ignored */
	uint8_t lose_established;  /* verbs listener: ESTABLISHED ignored */
	uint8_t replay_connect;    /* verbs client: the first signed connect request replayed */
	uint8_t skew_connect;      /* verbs client: requests dated 1000 s back */
	uint8_t migrate_fail;      /* verbs per-core listener: first request's move fails */
	uint8_t handoff_full;      /* verbs per-core listener: first hand-off finds a full ring */
	uint8_t bad_advert;        /* verbs client: advertisements wrap the address space */
	uint8_t short_advert;      /* verbs client: advertisements of half the buffer */
};

/* One options struct for every transport; each reads the fields of its section. Zero is
 * the transport's default everywhere. */
struct tally_xport_opts {
	int listen;               /* 0 client (a worker's session), 1 listen (an appliance) */
	const char *host;         /* client: appliance address; listen: local address */
	uint16_t port;            /* (base) port, 0: TALLY_DEFAULT_PORT */
	uint16_t ncores;          /* listen: cores served (required); client: upper bound */
	int busy_poll_us;         /* udp, verbs: spin before blocking; 0 default, < 0 off, at
				   * most TALLY_XPORT_BUSY_POLL_MAX_US */
	/* udp (tally_udp.h) */
	const char *bind_host;    /* client: local address */
	int gso, gro;             /* UDP_SEGMENT on send, UDP_GRO on receive: 1 on, 0 off */
	int sock_buf;
	uint32_t batch;
	/* dpdk client (tally_dpdk.h): EAL arguments (space separated), our ADDR/LEN, port name */
	const char *eal_args, *local_ip, *dpdk_port;
	const char *prog;         /* argv[0] for the EAL */
	/* dpdk client: queue pairs on the port (0: 1, at most 8), every RX queue polled; a
	 * packet for appliance core c goes out on queue c - dpdk_core_base when that is one of
	 * them (a memif peer polls its queue j with core dpdk_core_base + j), else on queue 0.
	 * Several may be open in one process, a port each (the first open's eal_args start
	 * the EAL; without dpdk_port each takes the first port no other one has) */
	uint16_t dpdk_queues, dpdk_core_base;
	/* verbs (tally_verbs.h) */
	int gid_index;            /* < 0 rdma_cm picks (callers set -1 for the default) */
	uint32_t slots, timeout_ms, max_conns;
	int per_core;             /* listen: 0, or TALLY_XPORT_LISTENER / TALLY_XPORT_CORE
				   * (per-core listening, below; tallyd) */
	const uint8_t *auth_key;  /* client: the job key (NULL: none), connections authenticated
				   * at setup as (auth_job, auth_rank) unless auth_packet */
	uint32_t auth_job, auth_rank;
	int auth_packet;          /* client: keep per-packet MACs (plain connect) */
	struct tally_auth *(*auth_lookup)(void *arg, uint32_t core, uint32_t job_id);
	void *auth_arg;           /* listen: auth_lookup's first argument */
	int32_t mr_cache;         /* client: result buffers kept registered; 0 default, < 0 none */
	const struct tally_xport_fault *fault; /* test builds only (tests/xport_fault) */
};

/* Receive wiring, one form for every transport: each packet to rx (buf valid only during the
 * call); placed, where the transport can place RESULTs straight into the caller's buffer
 * (tally_xport_ops.advertise), each such RESULT (NULL: nothing is advertised). */
typedef void (*tally_xport_rx_fn)(void *arg, const void *buf, size_t len,
				  const struct tally_addr *from);
typedef void (*tally_xport_rx_placed_fn)(void *arg, const void *hdr, size_t hlen,
					 const void *payload, size_t plen);
struct tally_xport_rx {
	tally_xport_rx_fn rx;
	tally_xport_rx_placed_fn placed;
	void *arg;
};

/* A counter a transport reports: name and value; ms = 1: the value is in nanoseconds and
 * is shown in milliseconds under `name`. */
struct tally_xport_counter {
	const char *name;
	uint64_t value;
	int ms;
};

/* For a transport's counters(): copy at most max of its n counters into out; returns how
 * many were copied. */
size_t tally_xport_counters_copy(struct tally_xport_counter *out, size_t max,
				 const struct tally_xport_counter *all, size_t n);

/* ---- Per-core listening (an appliance whose cores each own their connections) --------
 * Modelled on SPDK nvmf's listen / accept / poll_group_add. One listener (opts.per_core =
 * TALLY_XPORT_LISTENER, on the main thread) binds the address and owns no connection; one
 * instance per core (TALLY_XPORT_CORE, binds nothing; opts.max_conns is that core's share)
 * is attached to it (tally_xport_attach). The listener's round (tally_xport_listen_poll)
 * hands each connection request to `fn` with the core it names; the program queues it for
 * that core (e.g. an SP/SC ring: no lock), and the core accepts it on its own thread
 * (tally_xport_accept), reads its connections' events (tally_xport_events, slow path) and
 * polls them (tally_xport_poll_burst, datapath: no syscall). Close the listener first,
 * then refuse what is still queued (tally_xport_refuse), then the core instances. */
#define TALLY_XPORT_LISTENER 1
#define TALLY_XPORT_CORE 2
#define TALLY_XPORT_REQ_BYTES 80
/* A connection request on its way to its core: copy it whole (the bytes are the
 * transport's own). */
struct tally_xport_req {
	uint32_t core;                             /* the core the request names */
	uint32_t len;                              /* bytes of data in use */
	uint64_t data[TALLY_XPORT_REQ_BYTES / 8];
};
/* Queues req for core req->core: 0, or a negative errno (the transport refuses it). On
 * the listener's thread. */
typedef int (*tally_xport_handoff_fn)(void *arg, const struct tally_xport_req *req);

/* A counter an appliance's control plane shows for a listening transport: name and help.
 * Shown as <transport>_<name> (e.g. verbs_conns_up), per core and in total, zeros included,
 * for every transport the program has. */
struct tally_xport_counter_def {
	const char *name, *help;
};

/* A transport's implementation, registered by name. */
struct tally_xport_impl {
	const char *name;
	const char *alias;        /* another name it answers to, or NULL */
	/* Environment names the transport takes at a program's edge (NULL-terminated), and
	 * their parser: 0 applied to o, or -EINVAL with a message naming the setting. */
	const char *const *settings;
	int (*setting)(struct tally_xport_opts *o, const char *name, const char *value,
		       char *err, size_t errlen);
	/* NULL with *err a negative errno and a message naming the setting to change. */
	void *(*open)(const struct tally_xport_opts *o, int *err, char *errbuf, size_t errlen);
	void (*close)(void *ctx);
	const struct tally_xport_ops *(*ops)(void *ctx);
	void (*set_rx)(void *ctx, const struct tally_xport_rx *rx);
	int (*flush)(void *ctx);                   /* optional: send what is queued */
	/* optional (udp): UDP segmentation on send from now on; the state now (1/0) or a
	 * negative errno; gso: the state now */
	int (*set_gso)(void *ctx, int on);
	int (*gso)(const void *ctx);
	int (*setup_authed)(const void *ctx);      /* optional: connections keyed at setup */
	unsigned (*conns)(const void *ctx);        /* optional: live connections */
	int (*owns)(const struct tally_addr *a);   /* optional: a peer of this transport */
	/* optional: fills the fields of o left 0 with this transport's defaults */
	void (*defaults)(struct tally_xport_opts *o);
	/* optional: one non-blocking round of connection events (connects, disconnects) */
	int (*events)(void *ctx);
	size_t (*counters)(const void *ctx, struct tally_xport_counter *out, size_t max);
	const char *(*strerror)(const void *ctx);
	/* optional: per-core listening (above); all or none */
	void (*set_handoff)(void *listener, tally_xport_handoff_fn fn, void *arg);
	int (*attach)(void *listener, unsigned core, void *core_ctx);
	int (*listen_poll)(void *listener);
	void (*accept)(void *core_ctx, const struct tally_xport_req *req);
	void (*refuse)(const struct tally_xport_req *req);
	int (*poll_burst)(void *core_ctx);
	/* optional: the counters the control plane shows (ctl_defs[nctl]), their values in
	 * that order into v[nctl] */
	const struct tally_xport_counter_def *ctl_defs;
	size_t nctl;
	void (*ctl_counters)(const void *ctx, uint64_t *v);
};

/* Registration (TALLY_XPORT_REGISTER in the transport's folder). 0, or -ENOSPC/-EEXIST. */
int tally_xport_register(const struct tally_xport_impl *impl);
#define TALLY_XPORT_REGISTER(impl)                                                          \
	__attribute__((constructor)) static void tally_xport_register_##impl(void)          \
	{                                                                                    \
		tally_xport_register(&impl);                                                 \
	}

/* The transport called `name` (or its alias). NULL with a message in err that names
 * `setting` (e.g. "TALLY_TRANSPORT", "--transport") and the known names, or says that this
 * program was built without it. */
const struct tally_xport_impl *tally_xport_lookup(const char *name, const char *setting,
						  char *err, size_t errlen);
/* The i-th registered transport (registration order), NULL past the last. */
const struct tally_xport_impl *tally_xport_impl_at(unsigned i);
/* "udp, dpdk, verbs": the transports this program has. */
const char *tally_xport_names(char *buf, size_t len);

/* Apply the environment names of transport `name` (impl->settings) to o, each value
 * fetched with get (a program passes its environment lookup; tests a table). 0 or -EINVAL with a message. */
int tally_xport_opts_env(const char *name, struct tally_xport_opts *o,
			 char *(*get)(const char *), char *err, size_t errlen);

/* An open transport. */
struct tally_xport {
	const struct tally_xport_impl *impl;
	const struct tally_xport_ops *ops;
	void *ctx;
};

/* Look up `name` (error naming `setting`) and open it with o. 0 or a negative errno with
 * a message in err. */
int tally_xport_open(const char *name, const char *setting, const struct tally_xport_opts *o,
		     struct tally_xport *x, char *err, size_t errlen);
void tally_xport_close(struct tally_xport *x);
void tally_xport_set_rx(struct tally_xport *x, const struct tally_xport_rx *rx);
/* Deliver to a client session (tally_client_rx, tally_client_rx_placed). */
void tally_xport_attach_client(struct tally_xport *x, struct tally_client *c);
int tally_xport_flush(struct tally_xport *x);
int tally_xport_setup_authed(const struct tally_xport *x);
/* UDP segmentation on send on/off from now on (no syscall): the state now, 1 or 0, or
 * -EOPNOTSUPP for a transport without it (only "udp" has it) or a path that refused it. */
int tally_xport_set_gso(struct tally_xport *x, int on);
/* 1 while sends use UDP segmentation, else 0 (every transport but udp: 0). */
int tally_xport_gso(const struct tally_xport *x);
unsigned tally_xport_conns(const struct tally_xport *x);
size_t tally_xport_counters(const struct tally_xport *x, struct tally_xport_counter *out,
			    size_t max);
const char *tally_xport_strerror(const struct tally_xport *x);
/* One counter of x by name, from its counters() or else its control-plane counters
 * (ctl_defs): 0 and *v, or -ENOENT (it has none such). */
int tally_xport_counter_get(const struct tally_xport *x, const char *name, uint64_t *v);
/* Fill o's zero fields with transport `name`'s defaults (nothing if unknown). */
void tally_xport_opts_defaults(const char *name, struct tally_xport_opts *o);
/* A connection round (impl->events; 0 without). */
int tally_xport_events(struct tally_xport *x);

/* Per-core listening over open transports (-ENOTSUP where the transport has none). */
int tally_xport_set_handoff(struct tally_xport *listener, tally_xport_handoff_fn fn, void *arg);
int tally_xport_attach(struct tally_xport *listener, unsigned core, struct tally_xport *c);
int tally_xport_listen_poll(struct tally_xport *listener);
void tally_xport_accept(struct tally_xport *c, const struct tally_xport_req *req);
void tally_xport_refuse(const struct tally_xport *x, const struct tally_xport_req *req);
/* Datapath: poll a core instance's completions, no syscall; returns completions handled. */
static inline int tally_xport_poll_burst(struct tally_xport *c)
{
	return c->impl->poll_burst(c->ctx);
}

/* ---- The control plane's transport counters (every registered transport's ctl_defs, one
 * stable order): how many, the i-th (its transport's name and def), and x's values added
 * into v[tally_xport_ctl_count()] at x's place. */
#define TALLY_XPORT_CTL_MAX 96
size_t tally_xport_ctl_count(void);
const struct tally_xport_counter_def *tally_xport_ctl_def(size_t i, const char **xport);
void tally_xport_ctl_add(const struct tally_xport *x, uint64_t *v);

/* ---- The multiplexer: one engine over several transports at once (appliances) ----
 * Each packet goes out the way its rank joined: through the first member whose owns()
 * claims the address, else through the default member (the first without owns; none:
 * -ENOTCONN). Zero-copy RESULT buffers are the default member's. poll() polls members
 * flagged cheap (no syscall, e.g. a CQ) up to 4 times, the others every 4th turn, and when
 * all are quiet blocks on a cheap member with live connections for at most wait_ns, else
 * on the default member. The mux is set up at start; its datapath allocates nothing. */
struct tally_xport_mux_member {
	const struct tally_xport_ops *ops;
	void *ctx;
	int (*owns)(const struct tally_addr *a);  /* NULL: the default member */
	unsigned (*conns)(const void *ctx);       /* live connections (NULL: none) */
	int cheap;                                /* poll costs no syscall */
};
struct tally_xport_mux {
	struct tally_xport_ops ops;   /* hand these and the mux to the engine */
	struct tally_xport_mux_member m[TALLY_XPORT_MUX_MAX];
	unsigned n;
	int dflt;                     /* index of the default member, -1: none */
	uint64_t wait_ns;             /* longest block on a cheap member (default 200 us) */
	unsigned turn;
};
/* Add a member (setup). 0 or -ENOSPC. */
int tally_xport_mux_add(struct tally_xport_mux *mx, const struct tally_xport_mux_member *mb);
/* Add an open transport as a member. */
int tally_xport_mux_add_xport(struct tally_xport_mux *mx, struct tally_xport *x, int cheap);
/* The ops and context to hand to the engine: the single member's own when there is only
 * the default one, else the mux's. */
const struct tally_xport_ops *tally_xport_mux_ops(struct tally_xport_mux *mx, void **ctx);
void tally_xport_mux_init(struct tally_xport_mux *mx);

#ifdef __cplusplus
}
#endif
#endif
