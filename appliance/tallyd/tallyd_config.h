/* SPDX-License-Identifier: Apache-2.0
 * tallyd_config.h — tallyd's configuration: flags and/or a config file, validated before
 * anything starts. The settings are rows of the appliances' option table (tally_aopt.h),
 * which also writes --help and --config-save. A config file holds one setting a line, `name = value` (or `name` alone
 * for a switch), with the names of the long flags; `#` starts a comment. Settings apply in
 * order, so `ip`, `mac`, `queues`, `lcores` refer to the latest `port` before them, and
 * flags after --config override the file. Arguments after `--` go to EAL unchanged.
 */
#ifndef TALLYD_CONFIG_H
#define TALLYD_CONFIG_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tally_actl.h"
#include "tally_aopt.h"

#define TALLYD_MAX_PORTS 8
#define TALLYD_MAX_CORES TALLY_AOPT_MAX_CORES
#define TALLYD_MAX_EAL_ARGS 64
#define TALLYD_DEV_LEN 256

/* How an lcore waits once idle-polls polls found nothing (tallyd_idle.c). */
enum tallyd_idle_mode {
	TALLYD_IDLE_INTERRUPT = 0, /* RX interrupt wait where the port has them, else sleep */
	TALLYD_IDLE_SLEEP,         /* short sleeps, capped at idle-max-us */
	TALLYD_IDLE_POLL,          /* spin with rte_pause (a core to itself, line rate) */
};
#define TALLYD_IDLE_MAX_US_CAP TALLY_AOPT_IDLE_MAX_US /* a sleep never adds ms to a round */

struct tallyd_port_conf {
	char dev[TALLYD_DEV_LEN];  /* PCI address or vdev spec (net_...) */
	int is_vdev;
	uint32_t ip, mask;         /* network order; ip 0 = not set */
	uint8_t mac[6];
	int mac_set;
	uint16_t queues;           /* RX queues = datapath lcores on this port (0: 1) */
	uint16_t nlcores;          /* explicit lcore ids (0: assigned after EAL init) */
	uint16_t lcores[TALLYD_MAX_CORES];
};

struct tallyd_conf {
	/* EAL arguments (argv[0] excluded), pointing into eal_buf */
	int eal_argc;
	char *eal_argv[TALLYD_MAX_EAL_ARGS];
	char eal_buf[4096];
	size_t eal_used;

	struct tallyd_port_conf port[TALLYD_MAX_PORTS];
	uint16_t nports;

	uint16_t base_port;        /* UDP port of core 0 (default 9170) */
	uint64_t mem_budget;       /* bytes for keys, whole appliance, split over the cores */
	uint64_t det_pool;         /* deterministic staging pool per core */
	uint32_t frame_room;       /* largest frame an RX mbuf holds (data room - headroom) */
	uint16_t rx_desc, tx_desc;
	uint32_t dispatch_ring;    /* software dispatch / TX relay ring slots per core */
	uint32_t mtu;              /* 0: leave alone */
	uint32_t max_chunk;        /* largest payload accepted */
	uint32_t max_jobs;         /* engine job table (a sharded agent takes one per local rank) */
	uint32_t log_level;        /* RTE_LOG_* (1..8) */
	int open_admission;
	int idle_mode;             /* enum tallyd_idle_mode: how an idle lcore waits */
	uint32_t idle_polls;       /* empty polls before waiting */
	uint32_t idle_max_us;      /* longest idle sleep (idle = sleep, and interrupt fallback) */
	int io_forward;
	int check_config;
	int config_save;           /* print the settings as a config file and exit */
	int help;
	int rss;
	uint32_t tx_flush_us;      /* TX deadline */
	uint32_t drain_timeout_ms;
	uint32_t dead_rank_timeout_ms; /* engine: report a silent rank after (0: its 10 s) */
	uint32_t job_idle_timeout_ms;  /* engine: end a silent job after (0: its 60 s) */
	char ctl_path[108];
	char ctl_config[512];      /* a tallyctl config-save file replayed at start */
	struct tally_actl_guard guard; /* allow-list, admission, quotas, control idle timeout */
	struct tally_actl_verbs rdma;  /* rdma-listen, -slots, -gid-index, -max-conns */
	uint16_t cores;            /* datapath lcores without a port (verbs only; 0: 1) */
	uint16_t ncore_lcores;     /* their lcore ids (assigned by tallyd_eal_prepare) */
	uint16_t core_lcores[TALLYD_MAX_CORES];
};

/* The defaults (no ports). */
void tallyd_conf_init(struct tallyd_conf *c);

/* Apply one setting by its long-flag name. 0, or -EINVAL with a sentence in err. */
int tallyd_conf_set(struct tallyd_conf *c, const char *name, const char *value, char *err,
		    size_t errlen);

/* Read a config file (see above). 0 or a negative errno, err says file:line and why. */
int tallyd_conf_file(struct tallyd_conf *c, const char *path, char *err, size_t errlen);

/* Parse argv (argv[0] is the program), --config FILE included. 0 or -EINVAL. */
int tallyd_conf_args(struct tallyd_conf *c, int argc, char **argv, char *err, size_t errlen);

/* Cross-field checks (ports, addresses, lcores, sizes). 0 or -EINVAL with err. */
int tallyd_conf_validate(const struct tallyd_conf *c, char *err, size_t errlen);

/* Is port pi polled by the lcore of port pi % cores (`cores` below the number of ports)? */
int tallyd_conf_port_shared(const struct tallyd_conf *c, uint16_t pi);
/* Datapath cores the configuration asks for (sum of queues; `cores` when set, with ports
 * or without). */
unsigned tallyd_conf_ncores(const struct tallyd_conf *c);

/* Is `arg` (or one starting with it and '=') among the EAL arguments? Returns its index
 * or -1. */
int tallyd_conf_eal_has(const struct tallyd_conf *c, const char *arg);
/* Append an EAL argument. 0 or -ENOSPC. */
int tallyd_conf_eal_add(struct tallyd_conf *c, const char *arg);

/* Helpers, exposed for tests: "64M", "2G", "4096" → bytes; "1-3,5" → lcore ids. */
int tallyd_parse_size(const char *s, uint64_t *out);
int tallyd_parse_lcores(const char *s, uint16_t *ids, uint16_t max, uint16_t *n);

void tallyd_usage(FILE *f);

/* The name of an idle mode (interrupt, sleep, poll). */
const char *tallyd_idle_name(int mode);
/* --config-save: the settings as a config file that --config reads back. */
void tallyd_conf_save(const struct tallyd_conf *c, FILE *f);

#endif
