/* SPDX-License-Identifier: Apache-2.0
 * udpd.h — tally-udpd, the software appliance over kernel UDP (internal to appliance/udpd):
 * the same engine and control plane as tallyd, for hosts without DPDK (colocated summation
 * service on GPU hosts, the non-root quick start, benchmarks).
 *
 * Threads: one engine thread polls the UDP sockets (one per core: base port + core) and
 * runs every core's engine; the main thread runs the control plane and posts engine work
 * to the engine thread through a one-slot mailbox (an atomic pointer the engine thread
 * checks every loop: no lock on the datapath). Counters are plain and read from any thread.
 */
#ifndef UDPD_H
#define UDPD_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tally_actl.h"
#include "tally_engine.h"
#include "tally_aopt.h"
#include "tally_xport_reg.h"

#define UDPD_MAX_CORES TALLY_AOPT_UDPD_MAX_CORES

struct udpd_conf {
	char host[64];             /* address to bind ("" = any) */
	uint16_t base_port;        /* UDP port of core 0 (9170) */
	uint16_t ncores;           /* engines, one socket each (2) */
	uint64_t mem_budget;       /* bytes for keys, per core (1G) */
	uint64_t det_pool;         /* deterministic staging pool per core (64M) */
	uint32_t max_chunk;        /* largest payload accepted (8192) */
	uint32_t max_jobs;         /* engine job table (16) */
	int open_admission;
	uint32_t job_id, world;    /* a job admitted at start (world 0: none) */
	uint64_t token;
	int no_auth;               /* --job unauthenticated on purpose (else key_file needed) */
	char key_file[256];        /* --job's key (tally_auth_key_load), "" none */
	int log_level;             /* syslog LOG_ERR..LOG_DEBUG (LOG_INFO) */
	uint32_t drain_timeout_ms; /* a shutdown with drain waits this long (10000) */
	uint32_t dead_rank_timeout_ms; /* engine: report a silent rank after (0: 10000) */
	uint32_t job_idle_timeout_ms;  /* engine: end a silent job after (0: 60000) */
	char ctl_path[108];        /* control socket ("" = the default one) */
	char ctl_config[512];      /* a tallyctl config-save file replayed at start */
	char stats_path[512];      /* counters as one JSON line at exit ("" = stdout) */
	int check_config, help;
	int config_save;           /* print the settings as a config file and exit */
	struct tally_actl_guard guard; /* allow-list, admission, quotas, control idle timeout */
	struct tally_actl_verbs rdma; /* rdma-listen, -slots, -gid-index, -max-conns */
	int gso;                   /* RESULT fan-out as UDP GSO super-datagrams per worker (on) */
	int gro;                   /* take pushes as UDP GRO batches (on) */
};

/* udpd_conf.c: the settings, from the appliances' option table (tally_aopt.h) */
void udpd_conf_init(struct udpd_conf *c);
int udpd_conf_set(struct udpd_conf *c, const char *name, const char *value, char *err,
		  size_t errlen);
int udpd_conf_file(struct udpd_conf *c, const char *path, char *err, size_t errlen);
int udpd_conf_args(struct udpd_conf *c, int argc, char **argv, char *err, size_t errlen);
void udpd_usage(FILE *f);
/* --config-save: the settings as a config file that --config reads back. */
void udpd_conf_save(const struct udpd_conf *c, FILE *f);
/* --job is authenticated unless --no-auth: 0, or -EINVAL naming both ways out. */
int udpd_conf_check_job(const struct udpd_conf *c, char *err, size_t errlen);

/* Engine work posted by the main thread (udpd_engine.c runs it). */
struct udpd_cmd {
	tally_actl_engine_fn fn;
	void *arg;
	int all;                   /* every core, else `core` */
	unsigned core;
	int result;
	atomic_int done;
};

struct udpd {
	struct udpd_conf conf;
	struct tally_xport udpx;   /* the UDP sockets, from the transport registry */
	struct tally_xport verbsx; /* rdma-listen's transport (ctx NULL: none) */
	struct tally_xport_mux mux; /* the engines' transport: UDP and verbs at once */
	struct tally_engine *eng[UDPD_MAX_CORES];
	struct tally_engine_live *live; /* "last heard" per rank, shared by the engines */
	unsigned ncores;
	_Atomic(struct udpd_cmd *) mbox;
	atomic_int running;        /* the engine thread is in its loop */
	atomic_int stop;           /* the engine thread leaves its loop */
	atomic_int quit;           /* a signal or a control-plane shutdown */
	int drain_on_quit;
	int draining;
	uint64_t start_ns;
	struct tally_actl *ctl;
};

/* udpd_engine.c: engines, the engine thread and its mailbox */
int udpd_engines_create(struct udpd *d, char *err, size_t errlen);
void udpd_engines_destroy(struct udpd *d);
void *udpd_engine_main(void *arg);
/* fn on core's engine (all: every core) on the engine thread; waits for it. */
int udpd_exec(struct udpd *d, int all, unsigned core, tally_actl_engine_fn fn, void *arg);
uint64_t udpd_now_ns(void);

/* udpd_verbs.c: the transports under the engines, opened by name from the registry: the
 * UDP sockets and, with rdma-listen, the verbs listener beside them, in one multiplexer
 * (d->mux: its ops go to the engines, its poll is the engine thread's). Settings come from
 * the configuration and, at this edge, the environment (TALLY_UDP_BUSY_POLL_US, ...). */
int udpd_xport_open(struct udpd *d, char *err, size_t el);
void udpd_xport_close(struct udpd *d);
/* The transports' counters (all sockets and the one listener: core 0's) and the verbs
 * listener's status fields. */
void udpd_xport_collect(struct udpd *d, struct tally_actl_counters *out);
void udpd_verbs_status(struct udpd *d, json_t *out);

/* udpd_ctl.c: the control plane's backend */
int udpd_ctl_start(struct udpd *d);
void udpd_ctl_collect(struct udpd *d, struct tally_actl_counters *total);
void udpd_log(struct udpd *d, int prio, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

#endif
