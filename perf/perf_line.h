/* SPDX-License-Identifier: Apache-2.0
 * perf_line.h — `tally-perf line`: its options and the command lines it runs (perf_line_cmd.c
 * parses, validates and builds them; perf_line.c runs them and folds the workers' figures).
 *
 * Three appliance setups: tallyd on net_memif vdevs, one per worker (default, one box);
 * tallyd on real ports (--appliance-port PCI, passed to its EAL as -a PCI); or a tallyd that
 * is already running (--appliance HOST:PORT). Workers are DPDK on memif (default), DPDK on a
 * real port (--worker-port PCI), or kernel UDP; on this host or, with --hosts, on remote hosts
 * through a command prefix (--remote-cmd, default ssh) that takes HOST and one shell command
 * line, as ssh does.
 */
#ifndef PERF_LINE_H
#define PERF_LINE_H

#include <stddef.h>
#include <stdio.h>

#define LN_MAX_WORKERS 16
#define LN_MAX_PORTS 8
#define LN_MAX_ARGS 96
#define LN_MAX_REMOTE 8 /* words of --remote-cmd */

enum ln_app { LN_APP_MEMIF, LN_APP_PCI, LN_APP_EXTERNAL };
enum ln_wkind { LN_WK_MEMIF, LN_WK_PCI, LN_WK_UDP };

#define LN_MAX_CPUS 256

struct ln_opts {
	unsigned workers;
	int workers_set;
	double seconds;
	unsigned chunk;
	const char *dtype, *bytes, *tallyd, *worker;
	int json, keep, dry_run;
	const char *rto_us, *window;
	/* appliance */
	enum ln_app app;
	const char *app_port[LN_MAX_PORTS];
	unsigned n_app_port;
	char app_ip_list[512];           /* --appliance-ip, comma list, split into app_ip */
	char *app_ip[LN_MAX_PORTS];
	unsigned n_app_ip;
	unsigned queues;                 /* per real port */
	const char *eal;                 /* extra tallyd EAL arguments */
	char ext_host[256];              /* --appliance HOST:PORT */
	unsigned ext_port, ext_cores;
	/* workers */
	enum ln_wkind wkind;
	const char *transport;           /* --worker-transport as given, or NULL */
	char worker_port_list[512];
	char *worker_port[LN_MAX_WORKERS];
	unsigned n_worker_port;
	char worker_ip_list[512];
	char *worker_ip[LN_MAX_WORKERS];
	unsigned n_worker_ip;
	const char *worker_eal;          /* extra worker EAL arguments */
	const char *worker_args;         /* extra tally-worker options, one string */
	char *wargs[32];
	unsigned n_wargs;
	char wargs_buf[512];
	char host_list[1024];            /* --hosts */
	char *host[LN_MAX_WORKERS];
	unsigned n_host;
	char remote_buf[256];            /* --remote-cmd, split */
	char *remote[LN_MAX_REMOTE];
	unsigned n_remote;
	const char *remote_worker;       /* tally-worker's path on the remote hosts */
	/* one box (memif): the CPUs this process may run on, which lcores are pinned to */
	unsigned cpu[LN_MAX_CPUS];
	unsigned ncpu;
};

/* One command line, its strings in its own buffer. */
struct ln_cmd {
	char *argv[LN_MAX_ARGS + 1];
	int argc;
	char buf[8192];
	size_t used;
};

/* Parse and validate argv (0; 1 after --help, printed; or 2 with the error printed). */
int ln_parse(int argc, char **argv, struct ln_opts *o);
void ln_usage(FILE *f);
/* Datapath cores of the appliance (the per-core figure and the workers' --blast-cores). */
unsigned ln_app_cores(const struct ln_opts *o);
/* Does this run have a forward (--io-forward) baseline? Not against a running tallyd. */
int ln_has_forward(const struct ln_opts *o);
/* Build tallyd's command line for a run (forward or aggregation); tmp: the run's folder. */
int ln_build_tallyd(const struct ln_opts *o, int forward, const char *tmp, const char *prefix,
		    struct ln_cmd *c);
/* Build worker i's command line, wrapped in --remote-cmd HOST '...' for a remote host. */
int ln_build_worker(const struct ln_opts *o, unsigned i, int forward, const char *tmp,
		    const char *prefix, struct ln_cmd *c);
/* Print a command line as a shell would take it (words quoted where needed). */
void ln_print_cmd(FILE *f, const struct ln_cmd *c);

#endif
