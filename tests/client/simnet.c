/* SPDX-License-Identifier: Apache-2.0
 * simnet.c — the in-memory network with virtual time (simnet.h).
 */
#include "simnet.h"

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

struct sn_pkt {
	struct sn_pkt *next_free;
	unsigned dst;
	struct tally_addr from;
	size_t len;
	uint8_t data[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];
};

struct sn_ev {
	uint64_t t, seq;
	struct sn_pkt *pkt;
};

struct sn_ep {
	struct simnet *net;
	unsigned node;
};

struct sn_node {
	struct simnet_node_ops ops;
	void *arg;
	bool down;
	uint64_t extra_ns;
	uint64_t busy_ns[2];   /* a client's link up / down is busy until (ns_per_kib) */
	uint64_t last_t[2];    /* and delivers its last queued packet then */
};

struct simnet {
	struct simnet_cfg cfg;
	uint64_t now, seq, rng;
	unsigned nnodes;
	struct sn_node *nodes;
	struct sn_ep *eps;
	struct sn_ev *heap;
	size_t nheap, capheap;
	struct sn_pkt *free_pkts;
	struct sn_pkt **all_pkts;
	size_t nall, capall;
	uint64_t next_engine_poll;
	unsigned polling_node;  /* node inside simnet_poll, or UINT32_MAX */
	unsigned poll_hits;
	struct simnet_stats st;
	simnet_filter_fn filter;
	void *filter_arg;
};

uint64_t simnet_rand(struct simnet *net)
{
	/* splitmix64: tiny, good enough, and fully determined by the seed */
	uint64_t z = (net->rng += 0x9e3779b97f4a7c15ull);

	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

static double sn_unit(struct simnet *net)
{
	return (double)(simnet_rand(net) >> 11) * (1.0 / 9007199254740992.0);
}

struct simnet *simnet_create(const struct simnet_cfg *cfg)
{
	struct simnet *net = calloc(1, sizeof(*net));

	if (!net)
		return NULL;
	net->cfg = *cfg;
	net->rng = cfg->seed;
	net->nnodes = cfg->nengines + cfg->nclients;
	net->nodes = calloc(net->nnodes, sizeof(*net->nodes));
	net->eps = calloc(net->nnodes, sizeof(*net->eps));
	net->polling_node = UINT32_MAX;
	if (!net->nodes || !net->eps) {
		simnet_destroy(net);
		return NULL;
	}
	for (unsigned i = 0; i < net->nnodes; i++) {
		net->eps[i].net = net;
		net->eps[i].node = i;
	}
	return net;
}

void simnet_destroy(struct simnet *net)
{
	if (!net)
		return;
	for (size_t i = 0; i < net->nall; i++)
		free(net->all_pkts[i]);
	free(net->all_pkts);
	free(net->heap);
	free(net->nodes);
	free(net->eps);
	free(net);
}

unsigned simnet_engine_node(const struct simnet *net, unsigned core)
{
	(void)net;
	return core;
}

unsigned simnet_client_node(const struct simnet *net, unsigned client)
{
	return net->cfg.nengines + client;
}

void *simnet_ctx(struct simnet *net, unsigned node)
{
	return node < net->nnodes ? &net->eps[node] : NULL;
}

struct tally_addr simnet_addr(const struct simnet *net, unsigned node)
{
	struct tally_addr a;

	memset(&a, 0, sizeof(a));
	if (node < net->cfg.nengines) {
		a.core = node;
	} else {
		a.ip = 0x0a000000u | (node + 1);   /* 10.x.y.z, byte order irrelevant here */
		a.port = (uint16_t)(20000 + node);
	}
	a.mac[0] = 0x02;
	a.mac[5] = (uint8_t)node;
	a.cookie = node + 1;
	return a;
}

void simnet_attach(struct simnet *net, unsigned node, const struct simnet_node_ops *ops,
		   void *arg)
{
	if (node >= net->nnodes)
		return;
	net->nodes[node].ops = *ops;
	net->nodes[node].arg = arg;
}

static void sn_client_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

static uint64_t sn_client_tick(void *arg)
{
	return tally_client_tick(arg);
}

void simnet_attach_client(struct simnet *net, unsigned client, struct tally_client *c)
{
	struct simnet_node_ops o = { .rx = sn_client_rx, .tick = sn_client_tick };

	simnet_attach(net, simnet_client_node(net, client), &o, c);
}

void simnet_set_down(struct simnet *net, unsigned node, int down)
{
	if (node < net->nnodes)
		net->nodes[node].down = down != 0;
}

void simnet_set_extra_delay(struct simnet *net, unsigned node, uint64_t ns)
{
	if (node < net->nnodes)
		net->nodes[node].extra_ns = ns;
}

void simnet_set_link(struct simnet *net, const struct simnet_link *up,
		     const struct simnet_link *down)
{
	if (up)
		net->cfg.up = *up;
	if (down)
		net->cfg.down = *down;
}

void simnet_stall(struct simnet *net, unsigned client, int up, uint64_t ns)
{
	unsigned node = simnet_client_node(net, client);
	uint64_t *busy;

	if (node >= net->nnodes)
		return;
	busy = &net->nodes[node].busy_ns[up ? 0 : 1];
	*busy = (*busy > net->now ? *busy : net->now) + ns;
}

void simnet_set_filter(struct simnet *net, simnet_filter_fn fn, void *arg)
{
	net->filter = fn;
	net->filter_arg = arg;
}

uint64_t simnet_now(const struct simnet *net)
{
	return net->now;
}

size_t simnet_inflight(const struct simnet *net)
{
	return net->nheap;
}

const struct simnet_stats *simnet_stats(const struct simnet *net)
{
	return &net->st;
}

/* ---- event heap ---- */

static bool sn_before(const struct sn_ev *a, const struct sn_ev *b)
{
	return a->t < b->t || (a->t == b->t && a->seq < b->seq);
}

static int sn_push(struct simnet *net, uint64_t t, struct sn_pkt *p)
{
	size_t i;

	if (net->nheap == net->capheap) {
		size_t cap = net->capheap ? net->capheap * 2 : 256;
		struct sn_ev *h = realloc(net->heap, cap * sizeof(*h));

		if (!h)
			return -ENOMEM;
		net->heap = h;
		net->capheap = cap;
	}
	i = net->nheap++;
	net->heap[i] = (struct sn_ev){ .t = t, .seq = net->seq++, .pkt = p };
	while (i && sn_before(&net->heap[i], &net->heap[(i - 1) / 2])) {
		struct sn_ev tmp = net->heap[i];

		net->heap[i] = net->heap[(i - 1) / 2];
		net->heap[(i - 1) / 2] = tmp;
		i = (i - 1) / 2;
	}
	return 0;
}

static struct sn_ev sn_pop(struct simnet *net)
{
	struct sn_ev top = net->heap[0];
	size_t i = 0;

	net->heap[0] = net->heap[--net->nheap];
	for (;;) {
		size_t l = 2 * i + 1, r = l + 1, m = i;

		if (l < net->nheap && sn_before(&net->heap[l], &net->heap[m]))
			m = l;
		if (r < net->nheap && sn_before(&net->heap[r], &net->heap[m]))
			m = r;
		if (m == i)
			break;
		struct sn_ev tmp = net->heap[i];

		net->heap[i] = net->heap[m];
		net->heap[m] = tmp;
		i = m;
	}
	return top;
}

static struct sn_pkt *sn_pkt_get(struct simnet *net)
{
	struct sn_pkt *p = net->free_pkts;

	if (p) {
		net->free_pkts = p->next_free;
		return p;
	}
	if (net->nall == net->capall) {
		size_t cap = net->capall ? net->capall * 2 : 256;
		struct sn_pkt **a = realloc(net->all_pkts, cap * sizeof(*a));

		if (!a)
			return NULL;
		net->all_pkts = a;
		net->capall = cap;
	}
	p = malloc(sizeof(*p));
	if (p)
		net->all_pkts[net->nall++] = p;
	return p;
}

static void sn_pkt_put(struct simnet *net, struct sn_pkt *p)
{
	p->next_free = net->free_pkts;
	net->free_pkts = p;
}

/* ---- sending ---- */

/* A client's link with a rate (ns_per_kib), or still draining what it queued at one: the
 * packet departs once what is ahead of it has, and arrives in that order (jitter does not
 * reorder a queue; after the limit is lifted neither). Links without either: unchanged. */
static void sn_queue(struct simnet *net, unsigned client, bool up, size_t bytes,
		     const struct simnet_link *l, uint64_t *t)
{
	struct sn_node *n = &net->nodes[client];
	uint64_t *busy = &n->busy_ns[up ? 0 : 1], *last = &n->last_t[up ? 0 : 1];

	if (!l->ns_per_kib && *busy <= net->now && *last <= net->now)
		return;
	if (*busy < net->now)
		*busy = net->now;
	*busy += bytes * l->ns_per_kib / 1024;
	*t += *busy - net->now;
	if (*t < *last)
		*t = *last; /* same time: delivered in sending order (heap seq) */
	*last = *t;
}

static int sn_enqueue(struct simnet *net, unsigned src, unsigned dst, const uint8_t *hdr,
		      size_t hlen, const void *payload, size_t len, bool clean)
{
	bool up = src >= net->cfg.nengines;
	const struct simnet_link *l = up ? &net->cfg.up : &net->cfg.down;
	struct simnet_link plain = { .delay_ns = l->delay_ns };
	unsigned copies = 1;

	net->st.sent++;
	if (net->nodes[src].down || net->nodes[dst].down) {
		net->st.down_drops++;
		return 0;
	}
	if (clean) {
		l = &plain;
	} else if (net->filter && net->filter(net->filter_arg, src, dst, hdr, hlen + len)) {
		net->st.lost++;
		return 0;
	} else if (l->loss > 0 && sn_unit(net) < l->loss) {
		net->st.lost++;
		return 0;
	}
	if (l->dup > 0 && sn_unit(net) < l->dup) {
		net->st.duplicated++;
		copies = 2;
	}
	for (unsigned k = 0; k < copies; k++) {
		struct sn_pkt *p = sn_pkt_get(net);
		uint64_t t = net->now + (l->delay_ns ? l->delay_ns : 1);

		if (!p)
			return -ENOMEM;
		if (l->jitter_ns)
			t += simnet_rand(net) % (l->jitter_ns + 1);
		if (l->reorder > 0 && sn_unit(net) < l->reorder) {
			t += l->reorder_ns;
			net->st.reordered++;
		}
		if (up)
			t += net->nodes[src].extra_ns;
		sn_queue(net, up ? src : dst, up, hlen + len, l, &t);
		p->dst = dst;
		p->from = simnet_addr(net, src);
		memcpy(p->data, hdr, hlen);
		if (len)
			memcpy(p->data + hlen, payload, len);
		p->len = hlen + len;
		if (sn_push(net, t, p)) {
			sn_pkt_put(net, p);
			return -ENOMEM;
		}
	}
	return 0;
}

static int sn_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		   const void *payload, size_t len)
{
	struct sn_ep *ep = ctx;
	struct simnet *net = ep->net;
	size_t hlen = tally_proto_hdr_len(hdr); /* a signed packet's auth block included */
	unsigned dst;

	if (len > TALLY_MAX_PAYLOAD || hlen + len > TALLY_HDR_LEN + TALLY_MAX_PAYLOAD)
		return -EMSGSIZE;
	if (ep->node >= net->cfg.nengines) {
		dst = to->core;
		if (dst >= net->cfg.nengines) {
			net->st.bad_dest++;
			return -EHOSTUNREACH;
		}
	} else {
		if (to->cookie < 1 || to->cookie > net->nnodes ||
		    to->cookie - 1 < net->cfg.nengines) {
			net->st.bad_dest++;
			return -EHOSTUNREACH;
		}
		dst = (unsigned)(to->cookie - 1);
	}
	return sn_enqueue(net, ep->node, dst, hdr, hlen, payload, len, false);
}

int simnet_inject(struct simnet *net, unsigned from_node, const struct tally_addr *to,
		  const void *buf, size_t len)
{
	unsigned dst;

	if (from_node >= net->nnodes || len > TALLY_HDR_LEN + TALLY_MAX_PAYLOAD)
		return -EINVAL;
	dst = from_node >= net->cfg.nengines ? to->core : (unsigned)(to->cookie - 1);
	if (dst >= net->nnodes)
		return -EHOSTUNREACH;
	return sn_enqueue(net, from_node, dst, buf, len, NULL, 0, true);
}

static uint64_t sn_now(void *ctx)
{
	return ((struct sn_ep *)ctx)->net->now;
}

/* ---- time ---- */

static void sn_poll_engines(struct simnet *net)
{
	for (unsigned i = 0; i < net->cfg.nengines; i++) {
		struct sn_node *n = &net->nodes[i];

		if (n->ops.timers && !n->down)
			n->ops.timers(n->arg);
	}
}

/* Deliver everything due at or before now. */
static unsigned sn_deliver(struct simnet *net)
{
	unsigned n = 0;
	bool engine_rx = false;

	while (net->nheap && net->heap[0].t <= net->now) {
		struct sn_ev ev = sn_pop(net);
		struct sn_pkt *p = ev.pkt;
		struct sn_node *d = &net->nodes[p->dst];

		if (d->ops.rx && !d->down) {
			d->ops.rx(d->arg, p->data, p->len, &p->from);
			net->st.delivered++;
			n++;
			if (p->dst == net->polling_node)
				net->poll_hits++;
			if (p->dst < net->cfg.nengines)
				engine_rx = true;
		} else {
			net->st.down_drops++;
		}
		sn_pkt_put(net, p);
	}
	if (engine_rx)
		sn_poll_engines(net);
	return n;
}

static uint64_t sn_next_time(struct simnet *net, uint64_t limit)
{
	uint64_t t = limit;

	if (net->nheap && net->heap[0].t < t)
		t = net->heap[0].t;
	if (net->cfg.engine_poll_ns && net->next_engine_poll < t)
		t = net->next_engine_poll;
	return t;
}

static void sn_advance(struct simnet *net, uint64_t t)
{
	if (t > net->now)
		net->now = t;
	if (net->cfg.engine_poll_ns && net->now >= net->next_engine_poll) {
		sn_poll_engines(net);
		net->next_engine_poll = net->now + net->cfg.engine_poll_ns;
	}
}

unsigned simnet_step(struct simnet *net, uint64_t max_ns)
{
	uint64_t limit = net->now + (max_ns ? max_ns : 1);

	/* Every node's timers run each step: callers start operations between steps, so a
	 * node's own idea of its next wake-up may be stale. Ticks are cheap when idle. */
	for (unsigned i = 0; i < net->nnodes; i++) {
		struct sn_node *n = &net->nodes[i];
		uint64_t w;

		if (!n->ops.tick || n->down)
			continue;
		w = n->ops.tick(n->arg);
		if (w != UINT64_MAX && net->now + (w ? w : 1) < limit)
			limit = net->now + (w ? w : 1);
	}
	sn_advance(net, sn_next_time(net, limit));
	return sn_deliver(net);
}

void simnet_run_for(struct simnet *net, uint64_t ns)
{
	uint64_t end = net->now + ns;

	while (net->now < end)
		simnet_step(net, end - net->now);
}

/* Blocking poll of one node: deliver to everyone until something reached `node` or the
 * timeout passed. Other nodes' tick hooks do not run (see simnet.h). */
static int sn_poll(void *ctx, uint64_t timeout_ns)
{
	struct sn_ep *ep = ctx;
	struct simnet *net = ep->net;
	uint64_t deadline = net->now + timeout_ns;
	unsigned saved = net->polling_node, hits;

	net->polling_node = ep->node;
	net->poll_hits = 0;
	if (!timeout_ns) /* non-blocking: what is due now, time stands still */
		sn_deliver(net);
	while (timeout_ns) {
		sn_advance(net, sn_next_time(net, deadline));
		sn_deliver(net);
		if (net->poll_hits || net->now >= deadline)
			break;
	}
	hits = net->poll_hits;
	net->polling_node = saved;
	return (int)hits;
}

static const struct tally_xport_ops sn_ops = {
	.send = sn_send,
	.now_ns = sn_now,
	.poll = sn_poll,
};

const struct tally_xport_ops *simnet_ops(void)
{
	return &sn_ops;
}
