/* SPDX-License-Identifier: Apache-2.0
 * perf_line_verbs.c — `tally-perf line --transport verbs`: Tally's goodput over RDMA verbs
 * against ib_write_bw (perftest) on the same RDMA device, in one run. Runs ib_write_bw
 * (server and client, RDMA WRITE of --size bytes), then tally-udpd with rdma-listen and W
 * tally-worker ranks over verbs (--no-verify) allreducing --bytes for --rounds, and prints
 * both rates and their ratio: gradient bytes per second summed over the ranks over
 * ib_write_bw's one-direction bandwidth (the "wire" ratio counts the RESULT bytes too).
 * With --key-file K (and tallyctl beside tally-perf, or --tallyctl): the same job also
 * admitted with that key (tallyctl job-add --key-file), run with connections authenticated
 * at setup (no per-packet MAC) and with TALLY_VERBS_AUTH=packet (a MAC on every packet),
 * the three kinds interleaved --reps times on the one tally-udpd, each figure printed and
 * the medians' ratios to the unkeyed job.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_cmds.h"

#define LV_MAX_WORKERS 16

struct lv_opts {
	const char *addr, *dev, *udpd, *worker, *bytes, *key_file, *ctl;
	unsigned port, gid, workers, rounds, size, iters, reps;
};

enum lv_mode { LV_PLAIN, LV_SETUP, LV_PACKET, LV_NMODES };
static const char *const lv_mode_name[LV_NMODES] = {
	"unkeyed", "keyed, setup auth (no per-packet MAC)", "keyed, TALLY_VERBS_AUTH=packet" };

static pid_t lv_spawn(const char *cmd, const char *log)
{
	pid_t pid = fork();

	if (pid == 0) {
		if (!freopen(log, "w", stdout) || !freopen(log, "a", stderr))
			_exit(127);
		execl("/bin/sh", "sh", "-c", cmd, (char *)NULL);
		_exit(127);
	}
	return pid;
}

static int lv_wait(pid_t pid)
{
	int st = 0;

	if (pid <= 0 || waitpid(pid, &st, 0) < 0)
		return -1;
	return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

/* The first number after `key` in file, or -1. */
static double lv_num(const char *file, const char *key)
{
	char buf[8192];
	FILE *f = fopen(file, "r");
	size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;
	const char *p;

	if (f)
		fclose(f);
	buf[n] = 0;
	p = strstr(buf, key);
	return p ? strtod(p + strlen(key), NULL) : -1;
}

/* ib_write_bw's result row: "SIZE ITERS PEAK AVG MSGRATE": the average, MB/s. */
static double lv_ibw(const char *file, unsigned size)
{
	char line[512];
	double avg = -1;
	FILE *f = fopen(file, "r");

	while (f && fgets(line, sizeof(line), f)) {
		unsigned s, it;
		double peak, a;

		if (sscanf(line, " %u %u %lf %lf", &s, &it, &peak, &a) == 4 && s == size)
			avg = a;
	}
	if (f)
		fclose(f);
	return avg;
}

static void lv_defaults(struct lv_opts *o, char *dir, size_t len)
{
	static char udpd[PATH_MAX + 64], worker[PATH_MAX + 64], ctl[PATH_MAX + 64];
	ssize_t n = readlink("/proc/self/exe", dir, len - 1);

	dir[n > 0 ? n : 0] = 0;
	if (strrchr(dir, '/'))
		*strrchr(dir, '/') = 0;
	/* Next to tally-perf (an install or a copied bin/), else the build tree's layout. */
	snprintf(worker, sizeof(worker), "%s/tally-worker", dir);
	snprintf(udpd, sizeof(udpd), "%s/tally-udpd", dir);
	if (access(udpd, X_OK))
		snprintf(udpd, sizeof(udpd), "%s/../appliance/udpd/tally-udpd", dir);
	snprintf(ctl, sizeof(ctl), "%s/tallyctl", dir);
	if (access(ctl, X_OK))
		snprintf(ctl, sizeof(ctl), "%s/../control/tallyctl", dir);
	o->ctl = o->ctl ? o->ctl : ctl;
	o->udpd = o->udpd ? o->udpd : udpd;
	o->worker = o->worker ? o->worker : worker;
}

static int lv_parse(int argc, char **argv, struct lv_opts *o)
{
	static const struct option lo[] = {
		{ "transport", 1, 0, 't' }, { "addr", 1, 0, 'a' }, { "port", 1, 0, 'p' },
		{ "rdma-dev", 1, 0, 'd' }, { "gid-index", 1, 0, 'g' }, { "workers", 1, 0, 'w' },
		{ "bytes", 1, 0, 'b' }, { "rounds", 1, 0, 'r' }, { "size", 1, 0, 's' },
		{ "iters", 1, 0, 'n' }, { "udpd", 1, 0, 'U' }, { "worker", 1, 0, 'W' },
		{ "key-file", 1, 0, 'k' }, { "tallyctl", 1, 0, 'C' }, { "reps", 1, 0, 'R' },
		{ "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
	int c;

	optind = 1;
	while ((c = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (c) {
		case 't': break;
		case 'a': o->addr = optarg; break;
		case 'p': o->port = (unsigned)atoi(optarg); break;
		case 'd': o->dev = optarg; break;
		case 'g': o->gid = (unsigned)atoi(optarg); break;
		case 'w': o->workers = (unsigned)atoi(optarg); break;
		case 'b': o->bytes = optarg; break;
		case 'r': o->rounds = (unsigned)atoi(optarg); break;
		case 's': o->size = (unsigned)atoi(optarg); break;
		case 'n': o->iters = (unsigned)atoi(optarg); break;
		case 'U': o->udpd = optarg; break;
		case 'W': o->worker = optarg; break;
		case 'k': o->key_file = optarg; break;
		case 'C': o->ctl = optarg; break;
		case 'R': o->reps = (unsigned)atoi(optarg); break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: tally-perf line --transport verbs --addr A.B.C.D [--rdma-dev rxe0]\n"
				"  [--gid-index 1] [--port 9170] [--workers 1] [--bytes 16M] [--rounds 3]\n"
				"  [--size 8192 --iters 4000: ib_write_bw] [--udpd PATH] [--worker PATH]\n"
				"  [--key-file K [--reps 2] [--tallyctl PATH]: also keyed, setup and "
				"per-packet auth]\n"
				"ib_write_bw (perftest) and Tally over verbs on the same device, one run.\n");
			return c == 'h' ? 1 : -EINVAL;
		}
	}
	if (!o->reps) /* interleaved repetitions: one without a key, two with */
		o->reps = o->key_file ? 2 : 1;
	if (!o->addr || !o->workers || o->workers > LV_MAX_WORKERS || !o->rounds || !o->size ||
	    !o->port || o->port > 65535 || !o->reps || o->reps > 50) {
		fprintf(stderr, "tally-perf line --transport verbs: need --addr (the RDMA interface's "
			"IPv4 address), 1 <= --workers <= %d, --rounds >= 1, --size >= 1, "
			"1 <= --reps <= 50\n", LV_MAX_WORKERS);
		return -EINVAL;
	}
	return 0;
}

/* One Tally job over verbs on the running tally-udpd: W ranks, mode's authentication.
 * Returns the ranks' summed gradient Gbit/s, *bad set if a rank failed. */
static double lv_job(const struct lv_opts *o, const char *tmp, unsigned job, enum lv_mode m,
		     int *bad)
{
	char cmd[3 * PATH_MAX], log[PATH_MAX + 64], key[PATH_MAX + 32] = "";
	pid_t w[LV_MAX_WORKERS];
	double gbps = 0;

	if (m != LV_PLAIN) {
		snprintf(cmd, sizeof(cmd), "exec %s --socket %s/ctl.sock job-add %u --token %u "
			 "--world-size %u --key-file %s", o->ctl, tmp, job, job, o->workers,
			 o->key_file);
		snprintf(log, sizeof(log), "%s/ctl%u.log", tmp, job);
		if (lv_wait(lv_spawn(cmd, log)) != 0) {
			*bad = 1;
			return 0;
		}
		snprintf(key, sizeof(key), "--key-file %s", o->key_file);
	}
	for (unsigned i = 0; i < o->workers; i++) {
		snprintf(cmd, sizeof(cmd), "%sexec %s --transport verbs --host %s --port %u --job %u "
			 "--token %u --rank %u --world %u --bytes %s --keys 8 --rounds %u --no-verify "
			 "--json %s", m == LV_PACKET ? "TALLY_VERBS_AUTH=packet " : "", o->worker,
			 o->addr, o->port, job, job, i, o->workers, o->bytes, o->rounds, key);
		snprintf(log, sizeof(log), "%s/w%u.%u.json", tmp, job, i);
		w[i] = lv_spawn(cmd, log);
	}
	for (unsigned i = 0; i < o->workers; i++) {
		double g;

		*bad |= lv_wait(w[i]) != 0;
		snprintf(log, sizeof(log), "%s/w%u.%u.json", tmp, job, i);
		g = lv_num(log, "\"gbps\":");
		gbps += g > 0 ? g : 0;
	}
	return gbps;
}

static int lv_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int perf_line_verbs_main(int argc, char **argv)
{
	struct lv_opts o = { .dev = "rxe0", .gid = 1, .port = 9170, .workers = 1, .rounds = 3,
			     .size = 8192, .iters = 4000, .bytes = "16M", .reps = 0 };
	char dir[PATH_MAX], tmp[] = "/tmp/tally-line-verbs.XXXXXX", cmd[3 * PATH_MAX], log[PATH_MAX + 64];
	pid_t srv, app;
	double ibw, g[LV_NMODES][50], med[LV_NMODES] = { 0 };
	int rc = lv_parse(argc, argv, &o), bad = 0;
	unsigned nmodes = o.key_file ? LV_NMODES : 1, job = 7;

	if (rc)
		return rc > 0 ? 0 : 2;
	lv_defaults(&o, dir, sizeof(dir));
	if (!mkdtemp(tmp))
		return 1;
	/* 1. the baseline: ib_write_bw server and client on the same device */
	snprintf(cmd, sizeof(cmd), "ib_write_bw -d %s -x %u -s %u -n %u -F", o.dev, o.gid, o.size,
		 o.iters);
	snprintf(log, sizeof(log), "%s/ibw_srv.log", tmp);
	srv = lv_spawn(cmd, log);
	sleep(1);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " %s", o.addr);
	snprintf(log, sizeof(log), "%s/ibw.log", tmp);
	lv_wait(lv_spawn(cmd, log));
	lv_wait(srv);
	ibw = lv_ibw(log, o.size);
	/* 2. tally-udpd over verbs and W ranks, per mode, the modes interleaved */
	snprintf(cmd, sizeof(cmd), "exec %s --ip %s --rdma-listen %s:%u --cores 2 --open-admission "
		 "--ctl-socket %s/ctl.sock --stats %s/udpd.json", o.udpd, o.addr, o.addr, o.port,
		 tmp, tmp);
	snprintf(log, sizeof(log), "%s/udpd.log", tmp);
	app = lv_spawn(cmd, log);
	for (int i = 0; i < 50 && lv_num(log, "rdma_cm listening on") < 0; i++)
		usleep(100000);
	for (unsigned r = 0; r < o.reps; r++)
		for (unsigned m = 0; m < nmodes; m++)
			g[m][r] = lv_job(&o, tmp, job++, (enum lv_mode)m, &bad);
	kill(app, SIGTERM);
	lv_wait(app);
	printf("line verbs: ib_write_bw -d %s -x %u -s %u: %.2f MB/s\n", o.dev, o.gid, o.size, ibw);
	for (unsigned m = 0; m < nmodes; m++) {
		printf("line verbs: tally over verbs (%s), %u rank(s), %u rounds of %s:", lv_mode_name[m],
		       o.workers, o.rounds, o.bytes);
		for (unsigned r = 0; r < o.reps; r++)
			printf(" %.3f", g[m][r]);
		qsort(g[m], o.reps, sizeof(double), lv_cmp);
		med[m] = o.reps % 2 ? g[m][o.reps / 2] : (g[m][o.reps / 2 - 1] + g[m][o.reps / 2]) / 2;
		printf(" Gbit/s of gradients; median %.3f Gbit/s (%.2f MB/s)%s\n", med[m],
		       med[m] * 1000 / 8, bad ? " [a worker failed: see its log]" : "");
		if (m && med[0] > 0)
			printf("line verbs: %s / unkeyed: %.3f (medians)\n", lv_mode_name[m],
			       med[m] / med[0]);
	}
	if (ibw > 0)
		printf("line verbs: goodput ratio %.3f (gradient bytes / ib_write_bw bytes), wire "
		       "ratio %.3f (push + RESULT), unkeyed medians\n", med[0] * 1000 / 8 / ibw,
		       2 * med[0] * 1000 / 8 / ibw);
	printf("line verbs: logs in %s\n", tmp);
	return bad || ibw <= 0 ? 1 : 0;
}
