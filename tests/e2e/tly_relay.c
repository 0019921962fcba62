/* SPDX-License-Identifier: Apache-2.0
 * tly_relay — a seeded UDP impairment relay for the e2e tests (the kernel here has no netem).
 *
 * Listens on LISTEN:BASE+c (c < ncores) and forwards each client's datagrams to TO:TO_BASE+c
 * from a socket of its own per (client, core), like a NAT, so replies find their way back.
 * Both directions are impaired with the same seeded generator: drop, duplicate, reorder
 * (hold a packet back so later ones overtake it), fixed delay plus jitter. Runs until
 * SIGTERM/SIGINT, then prints its counters as one JSON line (stdout, or --stats FILE).
 *
 *   tly_relay --listen 10.0.0.1 --to 10.0.1.2 [--base 9170] [--to-base 9170] [--ncores 4]
 *             [--seed 1] [--drop PCT] [--dup PCT] [--reorder PCT] [--reorder-us 300]
 *             [--delay-us 0] [--jitter-us 0] [--stats FILE]
 */
#include <arpa/inet.h>
#include <errno.h>
#include <getopt.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define RL_MAX_CORES 64
#define RL_MAX_FLOWS 1024
#define RL_MAX_PENDING 65536
#define RL_BUF 9216

struct rl_flow {           /* one client on one core */
	struct sockaddr_in client;
	unsigned core;
	int fd;                /* upstream socket, connected to TO:TO_BASE+core */
};

struct rl_pkt {
	uint64_t at;           /* release time */
	uint64_t seq;
	int fd;
	struct sockaddr_in to; /* sin_family 0: connected socket */
	uint32_t len;
	uint8_t *data;
};

enum { DIR_UP, DIR_DOWN, DIR_N };

struct rl_dir_stats {
	uint64_t in, out, dropped, duplicated, reordered, overflow, send_errors;
};

static struct {
	struct sockaddr_in listen, to;
	unsigned base, to_base, ncores;
	double drop, dup, reorder;
	uint64_t reorder_ns, delay_ns, jitter_ns;
	uint64_t rng;
	int front[RL_MAX_CORES];
	struct rl_flow flows[RL_MAX_FLOWS];
	unsigned nflows;
	struct rl_pkt *heap[RL_MAX_PENDING];
	unsigned nheap;
	uint64_t seq;
	struct rl_dir_stats st[DIR_N];
	const char *stats_file;
} R;

static volatile sig_atomic_t rl_stop;

static void rl_sig(int s)
{
	(void)s;
	rl_stop = 1;
}

static uint64_t rl_now(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static double rl_rand(void) /* [0, 100) */
{
	uint64_t z = (R.rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	z ^= z >> 31;
	return (double)(z >> 11) / (double)(1ull << 53) * 100.0;
}

static int rl_before(const struct rl_pkt *a, const struct rl_pkt *b)
{
	return a->at < b->at || (a->at == b->at && a->seq < b->seq);
}

static void rl_push(struct rl_pkt *p)
{
	unsigned i = R.nheap++;

	while (i && rl_before(p, R.heap[(i - 1) / 2])) {
		R.heap[i] = R.heap[(i - 1) / 2];
		i = (i - 1) / 2;
	}
	R.heap[i] = p;
}

static struct rl_pkt *rl_pop(void)
{
	struct rl_pkt *top = R.heap[0], *last = R.heap[--R.nheap];
	unsigned i = 0;

	for (;;) {
		unsigned c = 2 * i + 1;

		if (c >= R.nheap)
			break;
		if (c + 1 < R.nheap && rl_before(R.heap[c + 1], R.heap[c]))
			c++;
		if (!rl_before(R.heap[c], last))
			break;
		R.heap[i] = R.heap[c];
		i = c;
	}
	if (R.nheap)
		R.heap[i] = last;
	return top;
}

/* Impair and queue one received datagram. */
static void rl_enqueue(int dir, int fd, const struct sockaddr_in *to, const uint8_t *buf,
		       uint32_t len)
{
	struct rl_dir_stats *s = &R.st[dir];
	int copies = 1;
	uint64_t now = rl_now();

	s->in++;
	if (R.drop > 0 && rl_rand() < R.drop) {
		s->dropped++;
		return;
	}
	if (R.dup > 0 && rl_rand() < R.dup) {
		s->duplicated++;
		copies = 2;
	}
	for (int c = 0; c < copies; c++) {
		struct rl_pkt *p;

		if (R.nheap == RL_MAX_PENDING || !(p = malloc(sizeof(*p) + len))) {
			s->overflow++;
			return;
		}
		p->data = (uint8_t *)(p + 1);
		memcpy(p->data, buf, len);
		p->len = len;
		p->fd = fd;
		if (to)
			p->to = *to;
		else
			memset(&p->to, 0, sizeof(p->to));
		p->seq = R.seq++;
		p->at = now + R.delay_ns;
		if (R.jitter_ns)
			p->at += (uint64_t)(rl_rand() / 100.0 * (double)R.jitter_ns);
		if (R.reorder > 0 && rl_rand() < R.reorder) {
			p->at += R.reorder_ns;
			s->reordered++;
		}
		rl_push(p);
	}
}

static void rl_release(void)
{
	uint64_t now = rl_now();

	while (R.nheap && R.heap[0]->at <= now) {
		struct rl_pkt *p = rl_pop();
		int dir = p->to.sin_family ? DIR_DOWN : DIR_UP;
		ssize_t r = p->to.sin_family ?
			sendto(p->fd, p->data, p->len, MSG_DONTWAIT, (struct sockaddr *)&p->to,
			       sizeof(p->to)) :
			send(p->fd, p->data, p->len, MSG_DONTWAIT);

		if (r < 0)
			R.st[dir].send_errors++;
		else
			R.st[dir].out++;
		free(p);
	}
}

static struct rl_flow *rl_flow(const struct sockaddr_in *client, unsigned core)
{
	struct sockaddr_in sa = R.to;
	struct rl_flow *f;
	int fd, buf = 16 << 20;

	for (unsigned i = 0; i < R.nflows; i++) {
		f = &R.flows[i];
		if (f->core == core && f->client.sin_addr.s_addr == client->sin_addr.s_addr &&
		    f->client.sin_port == client->sin_port)
			return f;
	}
	if (R.nflows == RL_MAX_FLOWS)
		return NULL;
	fd = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return NULL;
	setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
	setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
	sa.sin_port = htons((uint16_t)(R.to_base + core));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa))) {
		fprintf(stderr, "tly_relay: connect upstream core %u: %s\n", core, strerror(errno));
		close(fd);
		return NULL;
	}
	f = &R.flows[R.nflows++];
	f->client = *client;
	f->core = core;
	f->fd = fd;
	return f;
}

static void rl_drain(int fd, int is_front, unsigned idx)
{
	static uint8_t buf[RL_BUF];

	for (int n = 0; n < 256; n++) {
		struct sockaddr_in from;
		socklen_t fl = sizeof(from);
		ssize_t r = recvfrom(fd, buf, sizeof(buf), MSG_DONTWAIT, (struct sockaddr *)&from, &fl);

		if (r < 0)
			return;
		if (is_front) {
			struct rl_flow *f = rl_flow(&from, idx);

			if (f)
				rl_enqueue(DIR_UP, f->fd, NULL, buf, (uint32_t)r);
			else
				R.st[DIR_UP].overflow++;
		} else {
			struct rl_flow *f = &R.flows[idx];

			rl_enqueue(DIR_DOWN, R.front[f->core], &f->client, buf, (uint32_t)r);
		}
	}
}

static void rl_print(void)
{
	FILE *f = R.stats_file ? fopen(R.stats_file, "w") : stdout;

	if (!f)
		f = stdout;
	fprintf(f, "{\"flows\":%u", R.nflows);
	for (int d = 0; d < DIR_N; d++) {
		struct rl_dir_stats *s = &R.st[d];

		fprintf(f, ",\"%s\":{\"in\":%llu,\"out\":%llu,\"dropped\":%llu,\"duplicated\":%llu,"
			"\"reordered\":%llu,\"overflow\":%llu,\"send_errors\":%llu}",
			d == DIR_UP ? "up" : "down", (unsigned long long)s->in,
			(unsigned long long)s->out, (unsigned long long)s->dropped,
			(unsigned long long)s->duplicated, (unsigned long long)s->reordered,
			(unsigned long long)s->overflow, (unsigned long long)s->send_errors);
	}
	fprintf(f, "}\n");
	if (f != stdout)
		fclose(f);
}

static int rl_addr(const char *s, struct sockaddr_in *sa)
{
	memset(sa, 0, sizeof(*sa));
	sa->sin_family = AF_INET;
	return inet_pton(AF_INET, s, &sa->sin_addr) == 1 ? 0 : -1;
}

static int rl_num(const char *s, double max, double *v)
{
	char *e;

	*v = strtod(s, &e);
	return (e == s || *e || *v < 0 || *v > max) ? -1 : 0;
}

int main(int argc, char **argv)
{
	static const struct option lo[] = {
		{ "listen", 1, 0, 'l' }, { "to", 1, 0, 't' }, { "base", 1, 0, 'b' },
		{ "to-base", 1, 0, 'B' }, { "ncores", 1, 0, 'n' }, { "seed", 1, 0, 's' },
		{ "drop", 1, 0, 'd' }, { "dup", 1, 0, 'u' }, { "reorder", 1, 0, 'r' },
		{ "reorder-us", 1, 0, 'R' }, { "delay-us", 1, 0, 'D' }, { "jitter-us", 1, 0, 'j' },
		{ "stats", 1, 0, 'S' }, { 0, 0, 0, 0 } };
	int have_l = 0, have_t = 0, c;
	double v, reorder_us = 300, delay_us = 0, jitter_us = 0, base = 9170, to_base = 0,
		  ncores = 1, seed = 1;

	while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
		int bad = 0;

		switch (c) {
		case 'l': bad = rl_addr(optarg, &R.listen); have_l = 1; break;
		case 't': bad = rl_addr(optarg, &R.to); have_t = 1; break;
		case 'b': bad = rl_num(optarg, 65535, &base); break;
		case 'B': bad = rl_num(optarg, 65535, &to_base); break;
		case 'n': bad = rl_num(optarg, RL_MAX_CORES, &ncores) || ncores < 1; break;
		case 's': bad = rl_num(optarg, 1e18, &seed); break;
		case 'd': bad = rl_num(optarg, 100, &R.drop); break;
		case 'u': bad = rl_num(optarg, 100, &R.dup); break;
		case 'r': bad = rl_num(optarg, 100, &R.reorder); break;
		case 'R': bad = rl_num(optarg, 1e7, &reorder_us); break;
		case 'D': bad = rl_num(optarg, 1e7, &delay_us); break;
		case 'j': bad = rl_num(optarg, 1e7, &jitter_us); break;
		case 'S': R.stats_file = optarg; break;
		default: return 2;
		}
		if (bad) {
			fprintf(stderr, "tly_relay: bad value '%s'\n", optarg);
			return 2;
		}
		(void)v;
	}
	if (!have_l || !have_t) {
		fprintf(stderr, "tly_relay: --listen ADDR and --to ADDR are required\n");
		return 2;
	}
	R.base = (unsigned)base;
	R.to_base = to_base ? (unsigned)to_base : R.base;
	R.ncores = (unsigned)ncores;
	R.rng = (uint64_t)seed;
	R.reorder_ns = (uint64_t)(reorder_us * 1000);
	R.delay_ns = (uint64_t)(delay_us * 1000);
	R.jitter_ns = (uint64_t)(jitter_us * 1000);
	if (R.base + R.ncores > 65536 || R.to_base + R.ncores > 65536) {
		fprintf(stderr, "tly_relay: port range past 65535\n");
		return 2;
	}
	for (unsigned i = 0; i < R.ncores; i++) {
		struct sockaddr_in sa = R.listen;
		int buf = 16 << 20;

		R.front[i] = socket(AF_INET, SOCK_DGRAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		setsockopt(R.front[i], SOL_SOCKET, SO_RCVBUFFORCE, &buf, sizeof(buf));
		setsockopt(R.front[i], SOL_SOCKET, SO_SNDBUFFORCE, &buf, sizeof(buf));
		sa.sin_port = htons((uint16_t)(R.base + i));
		if (R.front[i] < 0 || bind(R.front[i], (struct sockaddr *)&sa, sizeof(sa))) {
			fprintf(stderr, "tly_relay: bind %s:%u: %s\n", inet_ntoa(sa.sin_addr),
				R.base + i, strerror(errno));
			return 1;
		}
	}
	signal(SIGTERM, rl_sig);
	signal(SIGINT, rl_sig);
	fprintf(stderr, "tly_relay: %u cores, drop %.2f%% dup %.2f%% reorder %.2f%% (+%.0f us), "
		"delay %.0f us jitter %.0f us, seed %.0f\n", R.ncores, R.drop, R.dup, R.reorder,
		reorder_us, delay_us, jitter_us, seed);
	while (!rl_stop) {
		struct pollfd pfd[RL_MAX_CORES + RL_MAX_FLOWS];
		unsigned np = 0, nf = R.nflows;
		struct timespec ts = { 0, 10000000 };

		for (unsigned i = 0; i < R.ncores; i++)
			pfd[np++] = (struct pollfd){ .fd = R.front[i], .events = POLLIN };
		for (unsigned i = 0; i < nf; i++)
			pfd[np++] = (struct pollfd){ .fd = R.flows[i].fd, .events = POLLIN };
		if (R.nheap) {
			uint64_t now = rl_now(), at = R.heap[0]->at;
			uint64_t wait = at > now ? at - now : 0;

			if (wait < 10000000ull)
				ts.tv_nsec = (long)wait;
		}
		if (ppoll(pfd, np, &ts, NULL) < 0 && errno != EINTR)
			break;
		for (unsigned i = 0; i < np; i++)
			if (pfd[i].revents & POLLIN) {
				if (i < R.ncores)
					rl_drain(pfd[i].fd, 1, i);
				else
					rl_drain(pfd[i].fd, 0, i - R.ncores);
			}
		rl_release();
	}
	rl_print();
	return 0;
}
