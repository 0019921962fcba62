/* SPDX-License-Identifier: Apache-2.0
 * aopt_table.c — the option table of both appliances (tally_aopt.h): one row an option,
 * in --help order. A row both appliances take is written once; where the two mean
 * different things by one name (tallyd's per-port --ip against tally-udpd's listen
 * address, memory for the whole appliance against per core) each has its row. A setting
 * that is also a control method's parameter takes its range and help from the control
 * schema (control/ctl_schema.c), and the log levels are the control plane's
 * (TALLY_CTL_LOG_LEVELS) after the three only a command line may set.
 */
#include <stdint.h>
#include <string.h>

#include "aopt_int.h"
#include "tally_aopt.h"
#include "tally_ctl.h"
#include "tally_proto.h"

#define TD TALLY_AOPT_TALLYD
#define UD TALLY_AOPT_UDPD
#define BOTH TALLY_AOPT_BOTH
#define U32 4294967295ull
#define LEVELS "emerg|alert|crit|err/" TALLY_CTL_LOG_LEVELS

static const struct tally_aopt table[] = {
	/* tallyd's ports: each setting after --port sets that port (tallyd_config.c) */
	{ .name = "port", .apps = TD, .type = TALLY_AOPT_CUSTOM, .arg = "DEV",
	  .help = "PCI address or vdev spec (repeat for more ports)" },
	{ .name = "ip", .apps = TD, .type = TALLY_AOPT_CUSTOM, .arg = "A.B.C.D/LEN",
	  .help = "the port's address (required)" },
	{ .name = "mac", .apps = TD, .type = TALLY_AOPT_CUSTOM, .arg = "XX:..:XX",
	  .help = "the port's MAC (default: the device's)" },
	{ .name = "queues", .apps = TD, .type = TALLY_AOPT_CUSTOM, .min = 1,
	  .max = TALLY_AOPT_MAX_CORES, .what = "queues", .arg = "N",
	  .help = "RX queues of the port, one datapath lcore each (1)" },
	{ .name = "lcores", .apps = TD, .type = TALLY_AOPT_CUSTOM, .arg = "LIST",
	  .help = "the lcores polling those queues (default: EAL's workers)" },
	{ .name = "eal", .apps = TD, .type = TALLY_AOPT_CUSTOM, .arg = "\"ARGS\"",
	  .help = "EAL arguments (or after --)" },
	/* tally-udpd's address */
	{ .name = "ip", .also = "addr", .apps = UD, .also_apps = UD, .type = TALLY_AOPT_CUSTOM,
	  .arg = "A.B.C.D", .help = "address to listen on (any)" },
	/* both */
	{ .name = "base-port", .also = "port", .apps = BOTH, .also_apps = UD,
	  .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_BASE_PORT, .min = 1, .max = 65535,
	  .what = "the UDP base port", .arg = "N",
	  .help = "UDP port of core 0; core i listens on N+i (9170)" },
	{ .name = "cores", .apps = TD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_CORES,
	  .min = 1, .max = TALLY_AOPT_MAX_CORES,
	  .what = "the datapath cores", .arg = "N",
	  .help = "datapath lcores: of a tallyd without ports (verbs only) (1); with ports, "
		  "fewer lcores than ports, port p polled by lcore p % N (one queue each)" },
	{ .name = "cores", .apps = UD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_CORES,
	  .min = 1, .max = TALLY_AOPT_UDPD_MAX_CORES, .what = "the number of engines",
	  .arg = "N", .help = "engines, one UDP socket each (2)" },
	{ .name = "mem", .apps = TD, .type = TALLY_AOPT_SIZE, .id = TALLY_AOPT_ID_MEM,
	  .max = 1ull << 40, .arg = "SIZE", .help = "memory for keys, whole appliance (256M)" },
	{ .name = "mem", .apps = UD, .type = TALLY_AOPT_SIZE, .id = TALLY_AOPT_ID_MEM,
	  .min = 1, .max = 1ull << 40, .arg = "SIZE", .help = "memory for keys per core (1G)" },
	{ .name = "det-pool", .apps = BOTH, .type = TALLY_AOPT_SIZE, .id = TALLY_AOPT_ID_DET_POOL,
	  .max = 1ull << 40, .show_def = 1, .arg = "SIZE",
	  .help = "deterministic staging pool per core" },
	{ .name = "frame-size", .apps = TD, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_FRAME_SIZE, .min = 256, .max = 65000, .what = "the largest frame",
	  .arg = "N", .help = "largest frame an RX mbuf holds (9216)" },
	{ .name = "max-chunk", .apps = BOTH, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_MAX_CHUNK, .min = 64, .max = TALLY_MAX_PAYLOAD,
	  .what = "the largest chunk in bytes", .arg = "N",
	  .help = "largest payload accepted (8192)" },
	/* the control plane tracks at most 64 jobs (CTL_MAX_JOBS) */
	{ .name = "max-jobs", .apps = BOTH, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_MAX_JOBS,
	  .min = 1, .max = 64, .what = "the number of jobs", .arg = "N",
	  .help = "concurrent jobs, 1..64 (16; a sharded agent job takes one\n"
		  "per local rank)" },
	{ .name = "rx-desc", .apps = TD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_RX_DESC,
	  .min = 64, .max = 16384, .what = "RX descriptors", .arg = "N",
	  .help = "RX descriptors per queue, a power of two (1024)" },
	{ .name = "tx-desc", .apps = TD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_TX_DESC,
	  .min = 64, .max = 16384, .what = "TX descriptors", .arg = "N",
	  .help = "TX descriptors per queue, a power of two (1024)" },
	{ .name = "mtu", .apps = TD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_MTU,
	  .max = 65000, .what = "the MTU (0 leaves it alone)", .arg = "N",
	  .help = "set the port MTU if the device allows (9000; 0 leaves it)" },
	{ .name = "log-level", .apps = BOTH, .type = TALLY_AOPT_ENUM,
	  .id = TALLY_AOPT_ID_LOG_LEVEL, .choices = LEVELS, .what = "the log level",
	  .arg = "L", .help = "emerg..debug (info)" },
	{ .name = "open-admission", .also = "open", .apps = BOTH, .also_apps = UD,
	  .type = TALLY_AOPT_BOOL, .id = TALLY_AOPT_ID_OPEN_ADMISSION, .is_switch = 1,
	  .help = "the first JOIN creates its job (quick start only)" },
	/* tally-udpd: a job admitted at start */
	{ .name = "job", .apps = UD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_JOB,
	  .what = "the job id", .arg = "ID", .ctl_method = "job_add", .ctl_param = "job_id",
	  .help = "admit a job at start (tallyctl job-add's settings), authenticated:" },
	{ .name = "token", .apps = UD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_TOKEN,
	  .what = "the job token", .arg = "T", .ctl_method = "job_add", .ctl_param = "token" },
	{ .name = "world", .apps = UD, .type = TALLY_AOPT_UINT, .id = TALLY_AOPT_ID_WORLD,
	  .what = "the world size", .arg = "W", .ctl_method = "job_add",
	  .ctl_param = "world_size" },
	{ .name = "key-file", .apps = UD, .type = TALLY_AOPT_STRING,
	  .id = TALLY_AOPT_ID_KEY_FILE, .what = "a path", .arg = "FILE",
	  .ctl_method = "job_add", .ctl_param = "key_file" },
	{ .name = "no-auth", .apps = UD, .type = TALLY_AOPT_BOOL, .id = TALLY_AOPT_ID_NO_AUTH,
	  .is_switch = 1, .ctl_method = "job_add", .ctl_param = "no_auth" },
	{ .name = "gso", .apps = UD, .type = TALLY_AOPT_BOOL, .id = TALLY_AOPT_ID_GSO,
	  .arg = "on|off",
	  .help = "RESULTs to one worker leave as UDP GSO super-datagrams\n"
		  "(on; off for clients that cannot take kernel-segmented\n"
		  "frames: DPDK on AF_PACKET over a veth)" },
	{ .name = "gro", .apps = UD, .type = TALLY_AOPT_BOOL, .id = TALLY_AOPT_ID_GRO,
	  .arg = "on|off", .help = "take pushes as UDP GRO batches, one receive each (on)" },
	/* the RDMA verbs listener (appliance/ctl/actl_verbs.c parses these) */
	{ .name = "rdma-listen", .apps = BOTH, .type = TALLY_AOPT_RDMA, .id = TALLY_AOPT_ID_RDMA,
	  .arg = "A:P", .help = "also accept RDMA verbs workers (rdma_cm) on A:P" },
	{ .name = "rdma-slots", .apps = BOTH, .type = TALLY_AOPT_RDMA, .id = TALLY_AOPT_ID_RDMA,
	  .arg = "N", .help = "verbs landing slots per connection, 2^k in 4..4096 (128)" },
	{ .name = "rdma-gid-index", .apps = BOTH, .type = TALLY_AOPT_RDMA,
	  .id = TALLY_AOPT_ID_RDMA, .arg = "N",
	  .help = "check the GID index (-1: rdma_cm chooses, default)" },
	{ .name = "rdma-max-conns", .apps = BOTH, .type = TALLY_AOPT_RDMA,
	  .id = TALLY_AOPT_ID_RDMA, .arg = "N", .help = "verbs connections at once (256)" },
	{ .name = "rdma-auth", .apps = BOTH, .type = TALLY_AOPT_RDMA, .id = TALLY_AOPT_ID_RDMA,
	  .arg = "MODE", .help = "keyed jobs over verbs: setup (connections authenticated\n"
				 "at connect, no per-packet MAC; default) or packet" },
	/* how a tallyd lcore waits (tallyd_idle.c) */
	{ .name = "idle", .apps = TD, .type = TALLY_AOPT_ENUM, .id = TALLY_AOPT_ID_IDLE,
	  .choices = "interrupt|sleep|poll", .arg = "MODE",
	  .help = "how an lcore waits after idle-polls empty polls (interrupt):\n"
		  "interrupt: block on the port's RX interrupt (epoll, 1 ms\n"
		  "bound) where the device has them (net_tap, net_memif, most\n"
		  "NICs), else sleep; sleep: sleeps of 1..idle-max-us µs;\n"
		  "poll: spin with rte_pause (dedicated cores, line rate)" },
	{ .name = "idle-backoff", .apps = TD, .type = TALLY_AOPT_CUSTOM, .arg = "on|off",
	  .help = "old switch: off = --idle poll, on = interrupt" },
	{ .name = "no-idle-backoff", .apps = TD, .type = TALLY_AOPT_CUSTOM, .is_switch = 1,
	  .help = "old switch: --idle poll" },
	{ .name = "idle-polls", .apps = TD, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_IDLE_POLLS, .min = 1, .max = 100000000, .what = "", .arg = "N",
	  .help = "empty polls before waiting (1000)" },
	{ .name = "idle-max-us", .apps = TD, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_IDLE_MAX_US, .min = 1, .max = TALLY_AOPT_IDLE_MAX_US, .what = "",
	  .arg = "N", .help = "longest idle sleep, 1..1000 (20)" },
	{ .name = "dispatch-ring", .apps = TD, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_DISPATCH_RING, .min = 32, .max = 65536,
	  .what = "the dispatch ring size", .arg = "N",
	  .help = "software dispatch and TX relay ring per core, a power of\n"
		  "two (1024; frames for another core wait there)" },
	{ .name = "tx-flush-us", .apps = TD, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_TX_FLUSH_US, .min = 1, .max = 10000,
	  .what = "the TX flush deadline", .arg = "N",
	  .help = "a buffered packet waits at most this long (10)" },
	{ .name = "rss", .apps = TD, .type = TALLY_AOPT_BOOL, .id = TALLY_AOPT_ID_RSS,
	  .arg = "on|off", .help = "RSS over a port's queues where offered (on)" },
	{ .name = "drain-timeout-ms", .apps = BOTH, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_DRAIN_TIMEOUT, .max = 3600000, .what = "the drain timeout",
	  .arg = "N", .help = "SIGTERM or a shutdown with drain waits this long for\n"
			      "open rounds (10000); exit status 3 when it abandoned them" },
	{ .name = "dead-rank-timeout-ms", .apps = BOTH, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_DEAD_RANK_TIMEOUT, .max = 86400000,
	  .what = "the dead rank timeout", .arg = "N",
	  .help = "a chunk waiting this long on a rank silent as long\n"
		  "fails the waiting workers' operation, naming the rank (10000)" },
	{ .name = "job-idle-timeout-ms", .apps = BOTH, .type = TALLY_AOPT_UINT,
	  .id = TALLY_AOPT_ID_JOB_IDLE_TIMEOUT, .max = U32, .what = "the job idle timeout",
	  .arg = "N", .help = "a job with no packet this long ends, memory freed (60000)" },
	{ .name = "ctl-socket", .also = "control", .apps = BOTH, .also_apps = BOTH,
	  .type = TALLY_AOPT_STRING, .id = TALLY_AOPT_ID_CTL_SOCKET, .what = "a path",
	  .arg = "PATH", .help = "control socket (/run/tally/tallyd.sock); also --control" },
	{ .name = "control-config", .also = "control_config", .apps = BOTH, .also_apps = TD,
	  .type = TALLY_AOPT_STRING, .id = TALLY_AOPT_ID_CTL_CONFIG, .what = "a path",
	  .arg = "FILE", .help = "replay a 'tallyctl config-save' file (jobs, policies, log\n"
				 "level) once the control plane is up; an error stops it" },
	{ .name = "stats", .apps = UD, .type = TALLY_AOPT_STRING, .id = TALLY_AOPT_ID_STATS,
	  .what = "a path", .arg = "FILE",
	  .help = "every counter as one JSON line at exit (stdout)" },
	{ .name = "io-forward", .apps = TD, .type = TALLY_AOPT_BOOL,
	  .id = TALLY_AOPT_ID_IO_FORWARD, .is_switch = 1,
	  .help = "bounce Tally packets back, no engine (I/O baseline)" },
	{ .name = "check-config", .apps = BOTH, .type = TALLY_AOPT_BOOL,
	  .id = TALLY_AOPT_ID_CHECK_CONFIG, .is_switch = 1, .no_save = 1,
	  .help = "validate, print the sizing, exit" },
	{ .name = "config-save", .apps = BOTH, .type = TALLY_AOPT_BOOL,
	  .id = TALLY_AOPT_ID_CONFIG_SAVE, .is_switch = 1, .no_save = 1,
	  .help = "print the settings as a config file (what --config reads), exit" },
	{ .name = "help", .apps = BOTH, .type = TALLY_AOPT_BOOL, .id = TALLY_AOPT_ID_HELP,
	  .is_switch = 1, .no_save = 1, .help = "this text (also -h)" },
	/* trust (appliance/ctl/actl_guard.c parses these) */
	{ .name = "allow", .apps = BOTH, .type = TALLY_AOPT_GUARD, .id = TALLY_AOPT_ID_GUARD,
	  .arg = "CIDR", .section = "Trust (THREAT_MODEL.md):",
	  .help = "accept packets only from these networks (repeat, up to 16;\n"
		  "default: any source); checked before anything else" },
	{ .name = "admit-subnet", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "CIDR",
	  .help = "open admission only for JOINs from this network (any)" },
	{ .name = "admit-claims", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "N",
	  .help = "open-admission jobs without a key at once, 0..64 (half max-jobs)" },
	{ .name = "admit-timeout-ms", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "N",
	  .help = "an open-admission job with no key this long is ended (60000)" },
	{ .name = "quota-keys", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "N",
	  .help = "keys one job may register (half the key table)" },
	{ .name = "quota-bytes", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "SIZE",
	  .help = "key memory one job may hold, counted like --mem (half of it)" },
	{ .name = "quota-ranks", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "N",
	  .help = "largest world size an open-admission JOIN may ask (1024)" },
	{ .name = "rejoin-timeout-ms", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "N",
	  .help = "a bound rank must be silent this long before a JOIN from\n"
		  "another address or MAC takes it over (5000)" },
	{ .name = "ctl-idle-timeout-ms", .apps = BOTH, .type = TALLY_AOPT_GUARD,
	  .id = TALLY_AOPT_ID_GUARD, .arg = "N",
	  .help = "idle control connections closed after (10000); when the\n"
		  "socket is full the idlest client makes room" },
};

const struct tally_aopt *tally_aopt_table(size_t *n)
{
	*n = sizeof(table) / sizeof(table[0]);
	return table;
}

const struct tally_aopt *tally_aopt_find(unsigned app, const char *name)
{
	for (size_t i = 0; name && i < sizeof(table) / sizeof(table[0]); i++) {
		const struct tally_aopt *o = &table[i];

		if ((o->apps & app) && !strcmp(o->name, name))
			return o;
		if (o->also && (o->also_apps & app) && !strcmp(o->also, name))
			return o;
	}
	return NULL;
}

const struct tally_aopt *tally_aopt_row(const struct tally_aopt *o, struct tally_aopt *tmp)
{
	const struct tally_ctl_method *m = o->ctl_method ? tally_ctl_method_by_name(o->ctl_method)
							 : NULL;
	const struct tally_ctl_param *p = m ? tally_ctl_param_find(m, o->ctl_param) : NULL;

	if (!p)
		return o;
	*tmp = *o;
	tmp->min = p->min;
	tmp->max = p->type == TALLY_CTL_T_U64 ? UINT64_MAX : p->max;
	if (!tmp->help)
		tmp->help = p->help;
	return tmp;
}

const struct tally_aopt_field *aopt_field(const struct tally_aopt_app *a, enum tally_aopt_id id)
{
	for (size_t i = 0; id && i < a->nfields; i++)
		if (a->fields[i].id == id)
			return &a->fields[i];
	return NULL;
}
