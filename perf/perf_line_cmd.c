/* SPDX-License-Identifier: Apache-2.0
 * perf_line_cmd.c — `tally-perf line`'s options, parsed and validated with a clear error before
 * anything starts (perf_line_build.c turns them into command lines; see perf_line.h).
 */
#include <errno.h>
#include <getopt.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "perf_line.h"
#include "tally_pkt.h"

/* Print "tally-perf line: MESSAGE"; the usage exit status (2). */
static int ln_err(const char *fmt, ...)
{
	va_list ap;

	fputs("tally-perf line: ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	return 2;
}

void ln_usage(FILE *f)
{
	fprintf(f,
		"usage: tally-perf line [--workers N] [--seconds T] [--chunk BYTES] [--dtype T]\n"
		"                       [--bytes SIZE] [--rto-us N] [--window N] [--tallyd PATH]\n"
		"                       [--worker PATH] [--worker-args \"ARGS\"] [--json] [--keep]\n"
		"                       [--dry-run] [real ports and hosts, below]\n"
		"  tallyd + N workers for T seconds, once forwarding (--io-forward) and once\n"
		"  aggregating; prints both rates, their ratio, cores per 100G port.\n"
		"  defaults: 1 worker, 5 s, chunk 8192, f32, 16M per worker per round; tallyd and\n"
		"  tally-worker next to this binary (../appliance/tallyd, ./tally-worker); tallyd\n"
		"  with one net_memif port per worker, DPDK workers on the other ends (one box).\n"
		"real NICs (see perf/README.md):\n"
		"  --appliance-port PCI   tallyd on this port (repeat for more; EAL -a PCI, hugepages)\n"
		"  --appliance-ip LIST    the ports' addresses A.B.C.D/LEN (comma list, one per port)\n"
		"  --queues N             RX queues (datapath cores) per appliance port (1)\n"
		"  --eal \"ARGS\"           more EAL arguments for tallyd (e.g. \"-l 0,2-5 -n 4\")\n"
		"  --appliance HOST:PORT  use a tallyd that is already running (no forward run);\n"
		"                         --appliance-cores N: its datapath cores (1)\n"
		"  --worker-transport T   dpdk or udp (default dpdk on memif or --worker-port, else udp)\n"
		"  --worker-port LIST     DPDK workers on these ports (EAL -a PCI): one per worker,\n"
		"                         or one for all with --hosts; --worker-ip LIST (A/LEN each)\n"
		"  --worker-eal \"ARGS\"    more EAL arguments for DPDK workers\n"
		"  --hosts H1,H2,...      one worker per remote host (user@host allowed), started as\n"
		"                         REMOTE-CMD HOST 'tally-worker ...'\n"
		"  --remote-cmd \"CMD\"     command prefix that runs a shell line on HOST (default\n"
		"                         \"ssh -o BatchMode=yes\")\n"
		"  --remote-worker PATH   tally-worker on the remote hosts (default: tally-worker)\n"
		"  --dry-run              print the commands of both runs, start nothing\n");
}

/* A.B.C.D, or A.B.C.D/LEN with cidr */
static int ln_is_ipv4(const char *s, int cidr)
{
	unsigned a[4], len;
	int n = 0;
	char tail;

	if (cidr) {
		if (sscanf(s, "%3u.%3u.%3u.%3u/%2u%n", &a[0], &a[1], &a[2], &a[3], &len, &n) != 5 ||
		    s[n] || len < 1 || len > 32)
			return 0;
	} else if (sscanf(s, "%3u.%3u.%3u.%3u%c", &a[0], &a[1], &a[2], &a[3], &tail) != 4) {
		return 0;
	}
	for (int i = 0; i < 4; i++)
		if (a[i] > 255)
			return 0;
	return strspn(s, "0123456789./") == strlen(s);
}

/* A host name for ssh: letters, digits, . _ - : @ (user@host, IPv6), no leading '-'. */
static int ln_is_host(const char *s)
{
	return *s && *s != '-' && strlen(s) < 256 &&
	       strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-:@") ==
		       strlen(s);
}

/* Append `v` to a comma list (repeated options add to it). */
static int ln_append(char *list, size_t len, const char *v)
{
	size_t n = strlen(list);

	if (n + (n ? 1 : 0) + strlen(v) + 1 > len)
		return -ENOSPC;
	snprintf(list + n, len - n, "%s%s", n ? "," : "", v);
	return 0;
}

/* Split `s` in place at any of `sep`; empty items are an error (-EINVAL). */
static int ln_split(char *s, const char *sep, int allow_empty_list, char **out, unsigned max,
		    unsigned *n)
{
	*n = 0;
	if (!*s)
		return allow_empty_list ? 0 : -EINVAL;
	for (char *p = s;;) {
		size_t l = strcspn(p, sep);

		if (!l && !allow_empty_list)
			return -EINVAL;
		if (l) {
			if (*n >= max)
				return -E2BIG;
			out[(*n)++] = p;
		}
		if (!p[l])
			break;
		p[l] = '\0';
		p += l + 1;
	}
	return 0;
}

static int ln_u32(const char *s, unsigned lo, unsigned hi, unsigned *v)
{
	char *e;
	unsigned long x;

	if (!*s || *s == '-')
		return -EINVAL;
	x = strtoul(s, &e, 10);
	if (*e || x < lo || x > hi)
		return -EINVAL;
	*v = (unsigned)x;
	return 0;
}

/* Options the harness sets itself: --worker-args may not give them. */
static const char *const ln_owned[] = { "--host", "--port", "--rank", "--world", "--transport",
					 "--dpdk", "--local-ip", "--dpdk-port", "--seconds",
					 "--rounds", "--blast", "--blast-cores", "--linger", "--json",
					 "--chunk", "--dtype", "--bytes", NULL };

static int ln_check(struct ln_opts *o)
{
	unsigned w;

	if (o->app == LN_APP_EXTERNAL && o->n_app_port)
		return ln_err("--appliance (a running tallyd) and --appliance-port (start one) "
			      "exclude each other");
	if (o->n_app_port) {
		o->app = LN_APP_PCI;
		if (ln_split(o->app_ip_list, ",", 0, o->app_ip, LN_MAX_PORTS, &o->n_app_ip) ||
		    o->n_app_ip != o->n_app_port)
			return ln_err("--appliance-port needs --appliance-ip with one A.B.C.D/LEN "
				      "per port (%u port(s))", o->n_app_port);
		for (unsigned i = 0; i < o->n_app_ip; i++)
			if (!ln_is_ipv4(o->app_ip[i], 1))
				return ln_err("--appliance-ip '%s' is not A.B.C.D/LEN", o->app_ip[i]);
	} else if (o->app_ip_list[0]) {
		return ln_err("--appliance-ip is for --appliance-port");
	}
	if (o->queues != 1 && o->app != LN_APP_PCI)
		return ln_err("--queues is for --appliance-port (a memif port has one queue)");
	if (o->eal && o->app != LN_APP_PCI && o->app != LN_APP_MEMIF)
		return ln_err("--eal is for a tallyd this command starts, not --appliance");
	if (o->ext_cores != 1 && o->app != LN_APP_EXTERNAL)
		return ln_err("--appliance-cores is for --appliance");
	/* remote hosts */
	if (o->host_list[0] &&
	    ln_split(o->host_list, ",", 0, o->host, LN_MAX_WORKERS, &o->n_host))
		return ln_err("--hosts: a comma list of 1..%d host names, no empty item",
			      LN_MAX_WORKERS);
	for (unsigned i = 0; i < o->n_host; i++)
		if (!ln_is_host(o->host[i]))
			return ln_err("--hosts: '%s' is not a host name ([user@]host)", o->host[i]);
	if (o->n_host) {
		if (o->workers_set && o->workers != o->n_host)
			return ln_err("--workers %u but %u --hosts: one worker per host", o->workers,
				      o->n_host);
		o->workers = o->n_host;
	}
	if (!o->n_host && (o->remote_buf[0] || o->remote_worker))
		return ln_err("--remote-cmd and --remote-worker are for --hosts");
	if (!o->remote_buf[0])
		snprintf(o->remote_buf, sizeof(o->remote_buf), "ssh -o BatchMode=yes");
	if (ln_split(o->remote_buf, " \t", 1, o->remote, LN_MAX_REMOTE, &o->n_remote) ||
	    !o->n_remote)
		return ln_err("--remote-cmd: 1..%d words (a command that takes HOST and a command "
			      "line, like ssh)", LN_MAX_REMOTE);
	if (!o->remote_worker)
		o->remote_worker = "tally-worker";
	if (!*o->remote_worker)
		return ln_err("--remote-worker: empty path");
	if (!o->workers || o->workers > LN_MAX_WORKERS)
		return ln_err("need 1 <= workers <= %d", LN_MAX_WORKERS);
	w = o->workers;
	/* workers' transport */
	if (o->worker_port_list[0] &&
	    ln_split(o->worker_port_list, ",", 0, o->worker_port, LN_MAX_WORKERS,
		     &o->n_worker_port))
		return ln_err("--worker-port: a comma list of PCI addresses, no empty item");
	for (unsigned i = 0; i < o->n_worker_port; i++)
		if (!tally_pkt_is_pci(o->worker_port[i]))
			return ln_err("--worker-port '%s' is not a PCI address (0000:3b:00.0)",
				      o->worker_port[i]);
	if (o->worker_ip_list[0] &&
	    ln_split(o->worker_ip_list, ",", 0, o->worker_ip, LN_MAX_WORKERS, &o->n_worker_ip))
		return ln_err("--worker-ip: a comma list of A.B.C.D/LEN, no empty item");
	for (unsigned i = 0; i < o->n_worker_ip; i++)
		if (!ln_is_ipv4(o->worker_ip[i], 1))
			return ln_err("--worker-ip '%s' is not A.B.C.D/LEN", o->worker_ip[i]);
	if (o->transport && strcmp(o->transport, "dpdk") && strcmp(o->transport, "udp"))
		return ln_err("--worker-transport '%s': dpdk or udp", o->transport);
	if (o->n_worker_port)
		o->wkind = LN_WK_PCI;
	else if (o->app == LN_APP_MEMIF && !o->n_host)
		o->wkind = LN_WK_MEMIF;
	else
		o->wkind = LN_WK_UDP;
	if (o->transport && !strcmp(o->transport, "udp") && o->wkind != LN_WK_UDP)
		return ln_err("--worker-transport udp: %s", o->n_worker_port ?
			      "--worker-port is for DPDK workers" :
			      "a memif appliance takes DPDK workers only (give --appliance-port "
			      "or --appliance for kernel UDP workers)");
	if (o->transport && !strcmp(o->transport, "dpdk") && o->wkind == LN_WK_UDP)
		return ln_err("--worker-transport dpdk needs --worker-port PCI (and --worker-ip) "
			      "here: memif workers run on this host against a memif tallyd");
	if (o->app == LN_APP_MEMIF && o->wkind != LN_WK_MEMIF)
		return ln_err("the default appliance (tallyd on net_memif) takes local memif "
			      "workers only: give --appliance-port or --appliance for %s",
			      o->n_host ? "--hosts" : "--worker-port");
	if (o->wkind == LN_WK_PCI) {
		if (o->n_worker_port != w && !(o->n_worker_port == 1 && o->n_host))
			return ln_err("--worker-port: one PCI address per worker (%u), or one for "
				      "all with --hosts", w);
		if (o->n_worker_ip != w)
			return ln_err("DPDK workers need --worker-ip with one A.B.C.D/LEN per "
				      "worker (%u)", w);
		if (o->app == LN_APP_EXTERNAL && !ln_is_ipv4(o->ext_host, 0))
			return ln_err("DPDK workers need --appliance with an IPv4 address, not "
				      "'%s'", o->ext_host);
	} else if (o->n_worker_ip) {
		return ln_err("--worker-ip is for DPDK workers (--worker-port)");
	}
	if (o->worker_eal && o->wkind != LN_WK_PCI)
		return ln_err("--worker-eal is for DPDK workers on real ports (--worker-port)");
	/* --worker-args: no option the harness sets itself; GSO only over kernel UDP */
	if (o->worker_args) {
		snprintf(o->wargs_buf, sizeof(o->wargs_buf), "%s", o->worker_args);
		if (strlen(o->worker_args) >= sizeof(o->wargs_buf) ||
		    ln_split(o->wargs_buf, " \t", 1, o->wargs, 32, &o->n_wargs))
			return ln_err("--worker-args: at most 32 words, %zu characters",
				      sizeof(o->wargs_buf) - 1);
		for (unsigned i = 0; i < o->n_wargs; i++) {
			for (const char *const *p = ln_owned; *p; p++)
				if (!strcmp(o->wargs[i], *p) ||
				    (!strncmp(o->wargs[i], *p, strlen(*p)) &&
				     o->wargs[i][strlen(*p)] == '='))
					return ln_err("--worker-args: %s is set by tally-perf line "
						      "(use its own option)", *p);
			if (!strcmp(o->wargs[i], "--gso") && o->wkind != LN_WK_UDP)
				return ln_err("--worker-args --gso: UDP segmentation offload is for "
					      "kernel UDP workers; these are DPDK workers");
		}
	}
	return 0;
}

/* The CPUs of this process's affinity mask, in order (0 and 1 where it cannot be read): the
 * one-box layout pins tallyd's lcores and the workers across them. */
static void ln_cpus(struct ln_opts *o)
{
	cpu_set_t set;

	o->ncpu = 0;
	if (sched_getaffinity(0, sizeof(set), &set) == 0)
		for (unsigned c = 0; c < CPU_SETSIZE && o->ncpu < LN_MAX_CPUS; c++)
			if (CPU_ISSET(c, &set))
				o->cpu[o->ncpu++] = c;
	if (o->ncpu == 0) {
		o->cpu[0] = 0;
		o->cpu[1] = 1;
		o->ncpu = 2;
	}
}

int ln_parse(int argc, char **argv, struct ln_opts *o)
{
	enum { O_WORKERS = 256, O_SECONDS, O_CHUNK, O_DTYPE, O_BYTES, O_TALLYD, O_WORKER,
	       O_JSON, O_KEEP, O_RTO, O_WINDOW, O_HELP, O_DRY, O_APORT, O_AIP, O_QUEUES, O_EAL,
	       O_APP, O_ACORES, O_WTRANS, O_WPORT, O_WIP, O_WEAL, O_WARGS, O_HOSTS, O_REMOTE,
	       O_RWORKER };
	static const struct option lo[] = {
		{ "workers", 1, 0, O_WORKERS }, { "seconds", 1, 0, O_SECONDS },
		{ "chunk", 1, 0, O_CHUNK }, { "dtype", 1, 0, O_DTYPE }, { "bytes", 1, 0, O_BYTES },
		{ "tallyd", 1, 0, O_TALLYD }, { "worker", 1, 0, O_WORKER }, { "json", 0, 0, O_JSON },
		{ "keep", 0, 0, O_KEEP }, { "rto-us", 1, 0, O_RTO }, { "window", 1, 0, O_WINDOW },
		{ "help", 0, 0, O_HELP }, { "dry-run", 0, 0, O_DRY },
		{ "appliance-port", 1, 0, O_APORT }, { "port", 1, 0, O_APORT },
		{ "appliance-ip", 1, 0, O_AIP }, { "queues", 1, 0, O_QUEUES },
		{ "eal", 1, 0, O_EAL }, { "appliance", 1, 0, O_APP },
		{ "appliance-cores", 1, 0, O_ACORES }, { "worker-transport", 1, 0, O_WTRANS },
		{ "worker-port", 1, 0, O_WPORT }, { "worker-ip", 1, 0, O_WIP },
		{ "worker-eal", 1, 0, O_WEAL }, { "worker-args", 1, 0, O_WARGS },
		{ "hosts", 1, 0, O_HOSTS }, { "remote-cmd", 1, 0, O_REMOTE },
		{ "remote-worker", 1, 0, O_RWORKER }, { 0, 0, 0, 0 } };
	int c;

	o->workers = 1;
	ln_cpus(o);
	o->seconds = 5;
	o->chunk = 8192;
	o->dtype = "f32";
	o->bytes = "16M";
	o->rto_us = "500";
	o->window = "64";
	o->queues = 1;
	o->ext_cores = 1;
	o->app = LN_APP_MEMIF;
	optind = 1;
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":h", lo, NULL)) != -1) {
		const char *name = c >= O_WORKERS ? lo[c - O_WORKERS].name : "?";
		unsigned v;
		char *e;
		int bad = 0;

		if (c == O_APORT) /* "port" is an alias listed after it */
			name = "appliance-port";
		switch (c) {
		case O_WORKERS:
			bad = ln_u32(optarg, 1, LN_MAX_WORKERS, &o->workers);
			o->workers_set = 1;
			break;
		case O_SECONDS:
			o->seconds = strtod(optarg, &e);
			bad = e == optarg || *e || !(o->seconds > 0) || o->seconds > 600;
			break;
		case O_CHUNK: bad = ln_u32(optarg, 64, 9000, &o->chunk); break;
		case O_DTYPE:
			bad = strcmp(optarg, "f32") && strcmp(optarg, "f16") &&
			      strcmp(optarg, "bf16") && strcmp(optarg, "i32");
			o->dtype = optarg;
			break;
		case O_BYTES: {
			char *u;
			unsigned long long x = strtoull(optarg, &u, 10);

			bad = u == optarg || *optarg == '-' || !x ||
			      (*u && (strchr("kKmMgG", *u) == NULL || u[1]));
			o->bytes = optarg;
			break;
		}
		case O_TALLYD: o->tallyd = optarg; break;
		case O_WORKER: o->worker = optarg; break;
		case O_JSON: o->json = 1; break;
		case O_KEEP: o->keep = 1; break;
		case O_DRY: o->dry_run = 1; break;
		case O_RTO: bad = ln_u32(optarg, 1, 10000000, &v); o->rto_us = optarg; break;
		case O_WINDOW: bad = ln_u32(optarg, 1, 65536, &v); o->window = optarg; break;
		case O_APORT:
			bad = !tally_pkt_is_pci(optarg) || o->n_app_port >= LN_MAX_PORTS;
			if (!bad)
				o->app_port[o->n_app_port++] = optarg;
			break;
		case O_AIP: bad = ln_append(o->app_ip_list, sizeof(o->app_ip_list), optarg); break;
		case O_QUEUES: bad = ln_u32(optarg, 1, 16, &o->queues); break;
		case O_EAL: o->eal = optarg; break;
		case O_APP: {
			const char *colon = strrchr(optarg, ':');
			size_t hl = colon ? (size_t)(colon - optarg) : 0;

			bad = !colon || !hl || hl >= sizeof(o->ext_host) ||
			      ln_u32(colon + 1, 1, 65535, &o->ext_port);
			if (!bad) {
				memcpy(o->ext_host, optarg, hl);
				o->ext_host[hl] = '\0';
				bad = !ln_is_host(o->ext_host) || strchr(o->ext_host, '@');
			}
			o->app = LN_APP_EXTERNAL;
			break;
		}
		case O_ACORES: bad = ln_u32(optarg, 1, 256, &o->ext_cores); break;
		case O_WTRANS: o->transport = optarg; break;
		case O_WPORT:
			bad = ln_append(o->worker_port_list, sizeof(o->worker_port_list), optarg);
			break;
		case O_WIP:
			bad = ln_append(o->worker_ip_list, sizeof(o->worker_ip_list), optarg);
			break;
		case O_WEAL: o->worker_eal = optarg; break;
		case O_WARGS: o->worker_args = optarg; break;
		case O_HOSTS: bad = ln_append(o->host_list, sizeof(o->host_list), optarg); break;
		case O_REMOTE:
			bad = !*optarg || strlen(optarg) >= sizeof(o->remote_buf);
			if (!bad)
				snprintf(o->remote_buf, sizeof(o->remote_buf), "%s", optarg);
			break;
		case O_RWORKER: o->remote_worker = optarg; break;
		case O_HELP: case 'h': ln_usage(stdout); return 1;
		case ':':
			return ln_err("option %s needs a value", argv[optind - 1]);
		default:
			ln_err("unknown option '%s'", argv[optind - 1]);
			ln_usage(stderr);
			return 2;
		}
		if (bad)
			return ln_err("bad value '%s' for --%s%s", optarg, name,
				      c == O_APORT ? " (a PCI address, 0000:3b:00.0; at most 8)" :
				      c == O_APP ? " (HOST:PORT, PORT 1..65535)" :
				      c == O_WORKERS ? " (1..16)" : c == O_QUEUES ? " (1..16)" :
				      c == O_CHUNK ? " (64..9000)" : "");
	}
	if (optind < argc)
		return ln_err("unexpected argument '%s'", argv[optind]);
	return ln_check(o);
}
