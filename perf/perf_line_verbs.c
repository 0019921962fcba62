/* SPDX-License-Identifier: Apache-2.0
 * perf_line_verbs.c — `tally-perf line --transport verbs`: Tally's goodput over RDMA verbs
 * against ib_write_bw (perftest) on the same RDMA device, in one run. Starts tally-udpd with
 * rdma-listen, then per repetition runs ib_write_bw (server and client, RDMA WRITE of --size
 * bytes) one way and with -b (both ways at once), then W tally-worker ranks over verbs
 * (--no-verify) allreducing --bytes for --rounds after --warmup untimed rounds, and prints
 * every rate and the per-repetition ratios: gradient bytes per second summed over the ranks
 * over ib_write_bw's one-direction bandwidth (goodput; the "wire" ratio counts the RESULT
 * bytes too) and over -b's bandwidth per direction (duplex).
 * With --key-file K (and tallyctl beside tally-perf, or --tallyctl): the same job also
 * admitted with that key (tallyctl job-add --key-file), run with connections authenticated
 * at setup (no per-packet MAC) and with TALLY_VERBS_AUTH=packet (a MAC on every packet),
 * the three kinds interleaved in each repetition on the one tally-udpd, each figure printed
 * and the medians' ratios to the unkeyed job.
 */
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "perf_cmds.h"

#define LV_MAX_WORKERS 16
#define LV_MAX_REPS 50

struct lv_opts {
	const char *addr, *dev, *udpd, *worker, *bytes, *key_file, *ctl;
	unsigned port, gid, workers, rounds, warmup, size, iters, reps;
};

enum lv_mode { LV_PLAIN, LV_SETUP, LV_PACKET, LV_NMODES };

/* Per repetition: the baselines (MB/s) and each mode's gradient Gbit/s. */
struct lv_res {
	double ibw[LV_MAX_REPS], ibw_bi[LV_MAX_REPS], g[LV_NMODES][LV_MAX_REPS];
};
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

/* ib_write_bw server and client on o->dev (bidir: -b, the sum of both directions); MB/s. */
static double lv_ibw_run(const struct lv_opts *o, const char *tmp, bool bidir)
{
	char cmd[512], log[PATH_MAX + 64];
	pid_t srv;

	snprintf(cmd, sizeof(cmd), "ib_write_bw -d %s -x %u -s %u -n %u -F%s", o->dev, o->gid,
		 o->size, o->iters, bidir ? " -b" : "");
	snprintf(log, sizeof(log), "%s/ibw%s_srv.log", tmp, bidir ? "_bi" : "");
	srv = lv_spawn(cmd, log);
	sleep(1);
	snprintf(cmd + strlen(cmd), sizeof(cmd) - strlen(cmd), " %s", o->addr);
	snprintf(log, sizeof(log), "%s/ibw%s.log", tmp, bidir ? "_bi" : "");
	lv_wait(lv_spawn(cmd, log));
	lv_wait(srv);
	return lv_ibw(log, o->size);
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
		{ "warmup", 1, 0, 'u' }, { "help", 0, 0, 'h' }, { 0, 0, 0, 0 } };
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
		case 'u': o->warmup = (unsigned)atoi(optarg); break;
		default:
			fprintf(c == 'h' ? stdout : stderr,
				"usage: tally-perf line --transport verbs --addr A.B.C.D [--rdma-dev rxe0]\n"
				"  [--gid-index 1] [--port 9170] [--workers 1] [--bytes 16M] [--rounds 3]\n"
				"  [--warmup 2: untimed first rounds (connect, registration, both round parities'\n"
				"  accumulators first touched)] [--reps N: repetitions, default 1 (3 with a key)]\n"
				"  [--size 8192 --iters 4000: ib_write_bw] [--udpd PATH] [--worker PATH]\n"
				"  [--key-file K [--tallyctl PATH]: also keyed, setup and "
				"per-packet auth]\n"
				"ib_write_bw (perftest) and Tally over verbs on the same device, one run.\n");
			return c == 'h' ? 1 : -EINVAL;
		}
	}
	if (!o->reps) /* interleaved repetitions: one without a key, three with */
		o->reps = o->key_file ? 3 : 1;
	if (!o->addr || !o->workers || o->workers > LV_MAX_WORKERS || !o->rounds || !o->size ||
	    !o->port || o->port > 65535 || !o->reps || o->reps > LV_MAX_REPS || o->warmup > 100) {
		fprintf(stderr, "tally-perf line --transport verbs: need --addr (the RDMA interface's "
			"IPv4 address), 1 <= --workers <= %d, --rounds >= 1, --warmup <= 100, "
			"--size >= 1, 1 <= --reps <= 50\n", LV_MAX_WORKERS);
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
			 "--token %u --rank %u --world %u --bytes %s --keys 8 --rounds %u --warmup %u "
			 "--no-verify --json %s", m == LV_PACKET ? "TALLY_VERBS_AUTH=packet " : "",
			 o->worker, o->addr, o->port, job, job, i, o->workers, o->bytes, o->rounds,
			 o->warmup, key);
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

static double lv_median(const double *v, unsigned n)
{
	double s[LV_MAX_REPS];

	memcpy(s, v, n * sizeof(double));
	qsort(s, n, sizeof(double), lv_cmp);
	return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

static void lv_print_list(const char *what, const double *v, unsigned n, const char *unit)
{
	printf("line verbs: %s:", what);
	for (unsigned r = 0; r < n; r++)
		printf(" %.3f", v[r]);
	printf("%s; median %.3f\n", unit, lv_median(v, n));
}

/* Every figure, per repetition, and the medians. A job pushes its gradients and takes the
 * sums back, so both directions carry them: on a full-duplex NIC each direction has the
 * one-way rate (the goodput ratio), on one loopback device (rxe) the two directions share
 * it and ib_write_bw -b's rate per direction is the bound (the duplex ratio). */
static void lv_report(const struct lv_opts *o, const struct lv_res *res, unsigned nmodes, int bad)
{
	double gp[LV_MAX_REPS], dx[LV_MAX_REPS], med0 = 0;

	printf("line verbs: ib_write_bw -d %s -x %u -s %u, then with -b (both directions at once), "
	       "before each repetition\n", o->dev, o->gid, o->size);
	lv_print_list("ib_write_bw MB/s", res->ibw, o->reps, "");
	lv_print_list("ib_write_bw -b MB/s in all (both directions)", res->ibw_bi, o->reps, "");
	for (unsigned m = 0; m < nmodes; m++) {
		char what[256];
		double med = lv_median(res->g[m], o->reps);

		snprintf(what, sizeof(what), "tally over verbs (%s), %u rank(s), %u rounds of %s after "
			 "%u untimed, Gbit/s of gradients", lv_mode_name[m], o->workers, o->rounds,
			 o->bytes, o->warmup);
		lv_print_list(what, res->g[m], o->reps, bad ? " [a worker failed: see its log]" : "");
		if (!m)
			med0 = med;
		else if (med0 > 0)
			printf("line verbs: %s / unkeyed: %.3f (medians)\n", lv_mode_name[m], med / med0);
	}
	for (unsigned r = 0; r < o->reps; r++) {
		double mbs = res->g[0][r] * 1000 / 8;

		gp[r] = res->ibw[r] > 0 ? mbs / res->ibw[r] : 0;
		dx[r] = res->ibw_bi[r] > 0 ? mbs / (res->ibw_bi[r] / 2) : 0;
	}
	lv_print_list("goodput ratio (gradient bytes / ib_write_bw bytes, same repetition)", gp,
		      o->reps, "");
	printf("line verbs: wire ratio (push + RESULT bytes / ib_write_bw bytes): median %.3f\n",
	       2 * lv_median(gp, o->reps));
	lv_print_list("duplex goodput ratio (gradient bytes / ib_write_bw -b's bytes per "
		      "direction, same repetition)", dx, o->reps, "");
}

int perf_line_verbs_main(int argc, char **argv)
{
	struct lv_opts o = { .dev = "rxe0", .gid = 1, .port = 9170, .workers = 1, .rounds = 3,
			     .warmup = 2, .size = 8192, .iters = 4000, .bytes = "16M", .reps = 0 };
	char dir[PATH_MAX], tmp[] = "/tmp/tally-line-verbs.XXXXXX", cmd[3 * PATH_MAX], log[PATH_MAX + 64];
	pid_t app;
	static struct lv_res res;
	int rc = lv_parse(argc, argv, &o), bad = 0, nobase = 0;
	unsigned nmodes = o.key_file ? LV_NMODES : 1, job = 7;

	if (rc)
		return rc > 0 ? 0 : 2;
	lv_defaults(&o, dir, sizeof(dir));
	if (!mkdtemp(tmp))
		return 1;
	snprintf(cmd, sizeof(cmd), "exec %s --ip %s --rdma-listen %s:%u --cores 2 --open-admission "
		 "--ctl-socket %s/ctl.sock --stats %s/udpd.json", o.udpd, o.addr, o.addr, o.port,
		 tmp, tmp);
	snprintf(log, sizeof(log), "%s/udpd.log", tmp);
	app = lv_spawn(cmd, log);
	for (int i = 0; i < 50 && lv_num(log, "rdma_cm listening on") < 0; i++)
		usleep(100000);
	/* Per repetition, the baselines (one way, both ways; tally-udpd idles in its CQ waits)
	 * right before Tally's jobs (the modes interleaved): load drift on a shared host hits
	 * both sides of each ratio alike. */
	for (unsigned r = 0; r < o.reps; r++) {
		res.ibw[r] = lv_ibw_run(&o, tmp, false);
		res.ibw_bi[r] = lv_ibw_run(&o, tmp, true);
		nobase |= res.ibw[r] <= 0 || res.ibw_bi[r] <= 0;
		for (unsigned m = 0; m < nmodes; m++)
			res.g[m][r] = lv_job(&o, tmp, job++, (enum lv_mode)m, &bad);
	}
	kill(app, SIGTERM);
	lv_wait(app);
	lv_report(&o, &res, nmodes, bad);
	if (nobase)
		printf("line verbs: an ib_write_bw run gave no figure: see %s/ibw*.log\n", tmp);
	printf("line verbs: logs in %s\n", tmp);
	return bad || nobase ? 1 : 0;
}
