/* SPDX-License-Identifier: Apache-2.0
 * guard_craft.c — the attacker of the security suite: crafts Tally packets (JOIN, BYE,
 * REGISTER, PUSH) or bare IP fragments with any source MAC, IP and port and sends them as
 * raw Ethernet frames through an AF_PACKET socket on one interface (root, in the test's
 * namespace). Headers are built with libtally_pkt, the Tally header and CRC32C with
 * libtally_proto, so what it sends is what a real peer would, except for what it forges.
 *
 *   guard_craft --iface IF --smac MAC --dmac MAC --src IP --sport N --dst IP --dport N
 *               --op join|bye|register|push|frag [--job N] [--token N] [--rank N]
 *               [--world N] [--key N] [--nelems N] [--count N] [--gap-us N]
 *               [--vary job|key|rank]
 * Exit 0 when every frame was sent, 1 on a send error, 2 on bad arguments.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <net/if.h>
#include <linux/if_ether.h>
#include <linux/if_packet.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "tally_pkt.h"
#include "tally_proto.h"

struct opts {
	const char *iface, *op, *vary;
	uint8_t smac[6], dmac[6];
	uint32_t src, dst;
	uint16_t sport, dport;
	uint32_t job, rank, world, key, nelems, count, gap_us;
	uint64_t token;
};

static int usage(const char *why)
{
	fprintf(stderr, "guard_craft: %s (see the comment at the top of guard_craft.c)\n", why);
	return 2;
}

static int parse(struct opts *o, int argc, char **argv)
{
	o->world = 4;
	o->nelems = 1024;
	o->count = 1;
	for (int i = 1; i + 1 < argc; i += 2) {
		const char *n = argv[i], *v = argv[i + 1];
		unsigned long long x = strtoull(v, NULL, 0);
		if (!strcmp(n, "--iface")) o->iface = v;
		else if (!strcmp(n, "--op")) o->op = v;
		else if (!strcmp(n, "--vary")) o->vary = v;
		else if (!strcmp(n, "--smac")) { if (tally_pkt_parse_mac(v, o->smac)) return -1; }
		else if (!strcmp(n, "--dmac")) { if (tally_pkt_parse_mac(v, o->dmac)) return -1; }
		else if (!strcmp(n, "--src")) { if (tally_pkt_parse_ipv4(v, &o->src)) return -1; }
		else if (!strcmp(n, "--dst")) { if (tally_pkt_parse_ipv4(v, &o->dst)) return -1; }
		else if (!strcmp(n, "--sport")) o->sport = (uint16_t)x;
		else if (!strcmp(n, "--dport")) o->dport = (uint16_t)x;
		else if (!strcmp(n, "--job")) o->job = (uint32_t)x;
		else if (!strcmp(n, "--token")) o->token = x;
		else if (!strcmp(n, "--rank")) o->rank = (uint32_t)x;
		else if (!strcmp(n, "--world")) o->world = (uint32_t)x;
		else if (!strcmp(n, "--key")) o->key = (uint32_t)x;
		else if (!strcmp(n, "--nelems")) o->nelems = (uint32_t)x;
		else if (!strcmp(n, "--count")) o->count = (uint32_t)x;
		else if (!strcmp(n, "--gap-us")) o->gap_us = (uint32_t)x;
		else return -1;
	}
	return o->iface && o->op && o->src && o->dst && o->sport && o->dport ? 0 : -1;
}

/* The Tally datagram of packet i (header + payload) into out; its length. */
static size_t craft(const struct opts *o, uint32_t i, uint8_t *out)
{
	struct tally_hdr h;
	uint8_t pl[TALLY_REGISTER_LEN > TALLY_JOIN_LEN ? TALLY_REGISTER_LEN : TALLY_JOIN_LEN];
	size_t plen = 0;

	memset(&h, 0, sizeof(h));
	h.job_id = o->job + (o->vary && !strcmp(o->vary, "job") ? i : 0);
	h.rank = o->rank + (o->vary && !strcmp(o->vary, "rank") ? i : 0);
	h.token = o->token;
	h.key = o->key + (o->vary && !strcmp(o->vary, "key") ? i : 0);
	if (!strcmp(o->op, "join")) {
		struct tally_join j = { .world_size = o->world, .caps = TALLY_CAP_HELD };
		h.op = TALLY_OP_JOIN;
		tally_proto_put_join(pl, &j);
		plen = TALLY_JOIN_LEN;
	} else if (!strcmp(o->op, "bye")) {
		h.op = TALLY_OP_BYE;
	} else if (!strcmp(o->op, "register")) {
		struct tally_register r = { .nelems = o->nelems, .chunk_elems = 2048,
					    .dtype = TALLY_DT_F32, .participants = 1,
					    .quorum = 1 };
		h.op = TALLY_OP_REGISTER;
		tally_proto_put_register(pl, &r);
		plen = TALLY_REGISTER_LEN;
	} else { /* push (also the body of a fragment): 16 f32 of chunk 0, round 0 */
		static const float v[16] = { 1e9f, -1e9f, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7 };
		h.op = TALLY_OP_PUSH;
		h.dtype = TALLY_DT_F32;
		h.count = 16;
		memcpy(out + TALLY_HDR_LEN, v, sizeof(v));
		tally_proto_finish(out, &h, out + TALLY_HDR_LEN, sizeof(v));
		return TALLY_HDR_LEN + sizeof(v);
	}
	memcpy(out + TALLY_HDR_LEN, pl, plen);
	tally_proto_finish(out, &h, pl, plen);
	return TALLY_HDR_LEN + plen;
}

/* First fragment of a datagram that never completes: MF set, offset 0. */
static void make_fragment(uint8_t *frame)
{
	uint8_t *ip = frame + 14;
	uint32_t sum = 0;

	ip[6] = 0x20; /* MF, not DF */
	ip[7] = 0;
	ip[10] = ip[11] = 0;
	for (int k = 0; k < 20; k += 2)
		sum += (uint32_t)ip[k] << 8 | ip[k + 1];
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	ip[10] = (uint8_t)(~sum >> 8);
	ip[11] = (uint8_t)~sum;
}

int main(int argc, char **argv)
{
	struct opts o;
	uint8_t frame[TALLY_PKT_HDRS_LEN + TALLY_HDR_LEN + 256];
	int fd, rc = 0;

	memset(&o, 0, sizeof(o));
	if (parse(&o, argc, argv))
		return usage("bad or missing arguments");
	struct sockaddr_ll to = { .sll_family = AF_PACKET, .sll_halen = 6,
				  .sll_ifindex = (int)if_nametoindex(o.iface) };
	if (!to.sll_ifindex)
		return usage("no such interface");
	memcpy(to.sll_addr, o.dmac, 6);
	fd = socket(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
	if (fd < 0) {
		perror("guard_craft: socket(AF_PACKET)");
		return 1;
	}
	for (uint32_t i = 0; i < o.count; i++) {
		size_t len = craft(&o, i, frame + TALLY_PKT_HDRS_LEN);
		tally_pkt_build_udp(frame, o.smac, o.dmac, o.src, o.dst, htons(o.sport),
				    htons(o.dport), len, (uint16_t)(i + 1));
		if (!strcmp(o.op, "frag"))
			make_fragment(frame);
		if (sendto(fd, frame, TALLY_PKT_HDRS_LEN + len, 0, (struct sockaddr *)&to,
			   sizeof(to)) < 0) {
			perror("guard_craft: sendto");
			rc = 1;
			break;
		}
		if (o.gap_us)
			usleep(o.gap_us);
	}
	close(fd);
	return rc;
}
