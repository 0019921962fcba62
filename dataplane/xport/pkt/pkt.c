/* SPDX-License-Identifier: Apache-2.0
 * pkt_pkt.c — Ethernet/ARP/IPv4/ICMP/UDP parse and build on byte buffers (see
 * tally_pkt.h). Fields are read byte by byte: frames are not aligned for us.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tally_pkt.h"

#define ETHERTYPE_IPV4 0x0800
#define ETHERTYPE_ARP 0x0806
#define IPPROTO_ICMP_ 1
#define IPPROTO_UDP_ 17

static const char *const pkt_drop_names[TALLY_PKT_D_COUNT] = {
	[TALLY_PKT_D_NONE] = "none",
	[TALLY_PKT_D_ETH_TRUNC] = "eth_truncated",
	[TALLY_PKT_D_ETHERTYPE] = "ethertype",
	[TALLY_PKT_D_ARP_MALFORMED] = "arp_malformed",
	[TALLY_PKT_D_ARP_NOT_OURS] = "arp_not_ours",
	[TALLY_PKT_D_ARP_OTHER] = "arp_other",
	[TALLY_PKT_D_IP_TRUNC] = "ip_truncated",
	[TALLY_PKT_D_IP_VERSION] = "ip_version",
	[TALLY_PKT_D_IP_IHL] = "ip_ihl",
	[TALLY_PKT_D_IP_LEN] = "ip_length",
	[TALLY_PKT_D_IP_CSUM] = "ip_checksum",
	[TALLY_PKT_D_IP_FRAG] = "ip_fragment",
	[TALLY_PKT_D_IP_NOT_OURS] = "ip_not_ours",
	[TALLY_PKT_D_IP_MARTIAN] = "ip_martian_source",
	[TALLY_PKT_D_IP_PROTO] = "ip_protocol",
	[TALLY_PKT_D_UDP_TRUNC] = "udp_truncated",
	[TALLY_PKT_D_UDP_LEN] = "udp_length",
	[TALLY_PKT_D_UDP_PORT] = "udp_port",
	[TALLY_PKT_D_ICMP_TRUNC] = "icmp_truncated",
	[TALLY_PKT_D_ICMP_CSUM] = "icmp_checksum",
	[TALLY_PKT_D_ICMP_TYPE] = "icmp_type",
	[TALLY_PKT_D_MULTISEG] = "multi_segment",
	[TALLY_PKT_D_HW_CSUM_BAD] = "hw_checksum_bad",
	[TALLY_PKT_D_RING_FULL] = "dispatch_ring_full",
	[TALLY_PKT_D_TX_FULL] = "tx_full",
	[TALLY_PKT_D_RELAY_FULL] = "tx_relay_ring_full",
	[TALLY_PKT_D_PROBE_SHED] = "dispatch_probe_shed",
	[TALLY_PKT_D_NO_MBUF] = "no_mbuf",
};

const char *tally_pkt_drop_name(enum tally_pkt_drop d)
{
	if ((unsigned)d >= TALLY_PKT_D_COUNT)
		return "unknown";
	return pkt_drop_names[d];
}

static inline uint16_t rd16(const uint8_t *p)
{
	return (uint16_t)(p[0] << 8 | p[1]);
}

static inline void wr16(uint8_t *p, uint16_t v)
{
	p[0] = (uint8_t)(v >> 8);
	p[1] = (uint8_t)v;
}

/* 32-bit values stay in network order: copy the bytes. */
static inline uint32_t rd32n(const uint8_t *p)
{
	uint32_t v;
	memcpy(&v, p, 4);
	return v;
}

uint16_t tally_pkt_csum(const void *buf, size_t len)
{
	const uint8_t *p = buf;
	uint64_t sum = 0;
	size_t i;

	for (i = 0; i + 1 < len; i += 2)
		sum += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (len & 1)
		sum += (uint32_t)p[len - 1] << 8;
	while (sum >> 16)
		sum = (sum & 0xffff) + (sum >> 16);
	return (uint16_t)~sum;
}

static enum tally_pkt_class pkt_drop(struct tally_pkt_parsed *out, enum tally_pkt_drop d)
{
	out->cls = TALLY_PKT_C_DROP;
	out->drop = d;
	return TALLY_PKT_C_DROP;
}

static enum tally_pkt_class pkt_parse_arp(const uint8_t *a, size_t len,
					  const struct tally_pkt_ifaddr *ifa,
					  struct tally_pkt_parsed *out)
{
	if (len < 28)
		return pkt_drop(out, TALLY_PKT_D_ARP_MALFORMED);
	if (rd16(a) != 1 || rd16(a + 2) != ETHERTYPE_IPV4 || a[4] != 6 || a[5] != 4)
		return pkt_drop(out, TALLY_PKT_D_ARP_MALFORMED);
	uint16_t op = rd16(a + 6);
	memcpy(out->src_mac, a + 8, 6);
	out->src_ip = rd32n(a + 14);
	out->dst_ip = rd32n(a + 24);
	if (out->dst_ip != ifa->ip)
		return pkt_drop(out, TALLY_PKT_D_ARP_NOT_OURS);
	if (op == 1) {
		out->cls = TALLY_PKT_C_ARP_REQ;
		return out->cls;
	}
	if (op == 2) {
		out->cls = TALLY_PKT_C_ARP_REPLY;
		return out->cls;
	}
	return pkt_drop(out, TALLY_PKT_D_ARP_OTHER);
}

static int pkt_martian(uint32_t src_n, const struct tally_pkt_ifaddr *ifa)
{
	uint32_t s = ntohl(src_n);
	uint32_t m = ntohl(ifa->mask);

	if (s == 0 || src_n == ifa->ip || s == 0xffffffffu)
		return 1;
	if ((s >> 28) == 0xe || (s >> 24) == 127) /* multicast, loopback */
		return 1;
	/* the directed broadcast of our own subnet (masks shorter than /31 have one) */
	if (m && m < 0xfffffffeu && (s & m) == (ntohl(ifa->ip) & m) && (s | m) == 0xffffffffu)
		return 1;
	return 0;
}

static enum tally_pkt_class pkt_parse_icmp(const uint8_t *icmp, size_t len,
					   struct tally_pkt_parsed *out)
{
	if (len < 8)
		return pkt_drop(out, TALLY_PKT_D_ICMP_TRUNC);
	if (tally_pkt_csum(icmp, len) != 0)
		return pkt_drop(out, TALLY_PKT_D_ICMP_CSUM);
	if (icmp[0] != 8 || icmp[1] != 0)
		return pkt_drop(out, TALLY_PKT_D_ICMP_TYPE);
	out->cls = TALLY_PKT_C_ICMP_ECHO;
	return out->cls;
}

enum tally_pkt_class tally_pkt_parse(const uint8_t *frame, size_t len,
				       const struct tally_pkt_ifaddr *ifa,
				       struct tally_pkt_parsed *out)
{
	memset(out, 0, sizeof(*out));
	if (len < TALLY_PKT_ETH_LEN)
		return pkt_drop(out, TALLY_PKT_D_ETH_TRUNC);
	uint16_t et = rd16(frame + 12);
	const uint8_t *l3 = frame + TALLY_PKT_ETH_LEN;
	size_t l3len = len - TALLY_PKT_ETH_LEN;

	if (et == ETHERTYPE_ARP)
		return pkt_parse_arp(l3, l3len, ifa, out);
	if (et != ETHERTYPE_IPV4)
		return pkt_drop(out, TALLY_PKT_D_ETHERTYPE);
	memcpy(out->src_mac, frame + 6, 6);
	if (l3len < TALLY_PKT_IP_LEN)
		return pkt_drop(out, TALLY_PKT_D_IP_TRUNC);
	if ((l3[0] >> 4) != 4)
		return pkt_drop(out, TALLY_PKT_D_IP_VERSION);
	size_t ihl = (size_t)(l3[0] & 0xf) * 4;
	if (ihl < TALLY_PKT_IP_LEN)
		return pkt_drop(out, TALLY_PKT_D_IP_IHL);
	if (ihl > l3len)
		return pkt_drop(out, TALLY_PKT_D_IP_TRUNC);
	size_t tot = rd16(l3 + 2);
	if (tot < ihl || tot > l3len) /* shorter than the header, or more than arrived */
		return pkt_drop(out, TALLY_PKT_D_IP_LEN);
	if (tally_pkt_csum(l3, ihl) != 0)
		return pkt_drop(out, TALLY_PKT_D_IP_CSUM);
	if (rd16(l3 + 6) & 0x3fff) /* MF or a fragment offset */
		return pkt_drop(out, TALLY_PKT_D_IP_FRAG);
	out->src_ip = rd32n(l3 + 12);
	out->dst_ip = rd32n(l3 + 16);
	if (out->dst_ip != ifa->ip)
		return pkt_drop(out, TALLY_PKT_D_IP_NOT_OURS);
	if (pkt_martian(out->src_ip, ifa))
		return pkt_drop(out, TALLY_PKT_D_IP_MARTIAN);

	const uint8_t *l4 = l3 + ihl;
	size_t l4len = tot - ihl;
	if (l3[9] == IPPROTO_ICMP_)
		return pkt_parse_icmp(l4, l4len, out);
	if (l3[9] != IPPROTO_UDP_)
		return pkt_drop(out, TALLY_PKT_D_IP_PROTO);
	if (l4len < TALLY_PKT_UDP_LEN)
		return pkt_drop(out, TALLY_PKT_D_UDP_TRUNC);
	size_t ulen = rd16(l4 + 4);
	if (ulen < TALLY_PKT_UDP_LEN || ulen > l4len)
		return pkt_drop(out, TALLY_PKT_D_UDP_LEN);
	memcpy(&out->sport, l4, 2);
	memcpy(&out->dport, l4 + 2, 2);
	uint16_t dport = rd16(l4 + 2);
	if (ifa->nports && (dport < ifa->base_port ||
			    (uint32_t)dport >= (uint32_t)ifa->base_port + ifa->nports))
		return pkt_drop(out, TALLY_PKT_D_UDP_PORT);
	out->l4_off = (uint32_t)(TALLY_PKT_ETH_LEN + ihl + TALLY_PKT_UDP_LEN);
	out->l4_len = (uint32_t)(ulen - TALLY_PKT_UDP_LEN);
	out->cls = TALLY_PKT_C_UDP;
	return out->cls;
}

size_t tally_pkt_arp_reply(uint8_t *frame, const struct tally_pkt_ifaddr *ifa)
{
	uint8_t *a = frame + TALLY_PKT_ETH_LEN;
	uint8_t sha[6], spa[4];

	memcpy(sha, a + 8, 6);
	memcpy(spa, a + 14, 4);
	memcpy(frame, sha, 6); /* reply unicast to the asker */
	memcpy(frame + 6, ifa->mac, 6);
	wr16(a + 6, 2);
	memcpy(a + 8, ifa->mac, 6);
	memcpy(a + 14, &ifa->ip, 4);
	memcpy(a + 18, sha, 6);
	memcpy(a + 24, spa, 4);
	return TALLY_PKT_ARP_FRAME_LEN;
}

static void pkt_swap(uint8_t *a, uint8_t *b, size_t n)
{
	uint8_t t[6];

	memcpy(t, a, n);
	memcpy(a, b, n);
	memcpy(b, t, n);
}

size_t tally_pkt_icmp_echo_reply(uint8_t *frame, size_t len)
{
	uint8_t *ip = frame + TALLY_PKT_ETH_LEN;
	size_t ihl = (size_t)(ip[0] & 0xf) * 4;
	size_t tot = rd16(ip + 2);
	uint8_t *icmp = ip + ihl;

	(void)len;
	pkt_swap(frame, frame + 6, 6);
	pkt_swap(ip + 12, ip + 16, 4);
	ip[8] = 64; /* fresh TTL */
	wr16(ip + 10, 0);
	wr16(ip + 10, tally_pkt_csum(ip, ihl));
	icmp[0] = 0; /* echo reply; identifier, sequence and data stay */
	wr16(icmp + 2, 0);
	wr16(icmp + 2, tally_pkt_csum(icmp, tot - ihl));
	return TALLY_PKT_ETH_LEN + tot;
}

void tally_pkt_udp_bounce(uint8_t *frame)
{
	uint8_t *ip = frame + TALLY_PKT_ETH_LEN;
	uint8_t *udp = ip + (size_t)(ip[0] & 0xf) * 4;

	pkt_swap(frame, frame + 6, 6);
	pkt_swap(ip + 12, ip + 16, 4);
	pkt_swap(udp, udp + 2, 2);
}

size_t tally_pkt_build_udp(uint8_t out[TALLY_PKT_HDRS_LEN], const uint8_t src_mac[6],
			    const uint8_t dst_mac[6], uint32_t src_ip, uint32_t dst_ip,
			    uint16_t sport, uint16_t dport, size_t payload_len, uint16_t ip_id)
{
	if (payload_len > 65535 - TALLY_PKT_IP_LEN - TALLY_PKT_UDP_LEN)
		return 0;
	uint8_t *ip = out + TALLY_PKT_ETH_LEN;
	uint8_t *udp = ip + TALLY_PKT_IP_LEN;

	memcpy(out, dst_mac, 6);
	memcpy(out + 6, src_mac, 6);
	wr16(out + 12, ETHERTYPE_IPV4);
	ip[0] = 0x45;
	ip[1] = 0;
	wr16(ip + 2, (uint16_t)(TALLY_PKT_IP_LEN + TALLY_PKT_UDP_LEN + payload_len));
	wr16(ip + 4, ip_id);
	wr16(ip + 6, 0x4000); /* DF */
	ip[8] = 64;
	ip[9] = IPPROTO_UDP_;
	wr16(ip + 10, 0);
	memcpy(ip + 12, &src_ip, 4);
	memcpy(ip + 16, &dst_ip, 4);
	wr16(ip + 10, tally_pkt_csum(ip, TALLY_PKT_IP_LEN));
	memcpy(udp, &sport, 2);
	memcpy(udp + 2, &dport, 2);
	wr16(udp + 4, (uint16_t)(TALLY_PKT_UDP_LEN + payload_len));
	wr16(udp + 6, 0);
	return TALLY_PKT_HDRS_LEN;
}

size_t tally_pkt_build_arp_request(uint8_t out[TALLY_PKT_ARP_FRAME_LEN],
				    const struct tally_pkt_ifaddr *ifa, uint32_t target_ip)
{
	uint8_t *a = out + TALLY_PKT_ETH_LEN;

	memset(out, 0xff, 6);
	memcpy(out + 6, ifa->mac, 6);
	wr16(out + 12, ETHERTYPE_ARP);
	wr16(a, 1);
	wr16(a + 2, ETHERTYPE_IPV4);
	a[4] = 6;
	a[5] = 4;
	wr16(a + 6, 1);
	memcpy(a + 8, ifa->mac, 6);
	memcpy(a + 14, &ifa->ip, 4);
	memset(a + 18, 0, 6);
	memcpy(a + 24, &target_ip, 4);
	return TALLY_PKT_ARP_FRAME_LEN;
}

int tally_pkt_parse_ipv4(const char *s, uint32_t *ip)
{
	struct in_addr a;

	if (!s || inet_pton(AF_INET, s, &a) != 1)
		return -EINVAL;
	*ip = a.s_addr;
	return 0;
}

int tally_pkt_parse_cidr(const char *s, uint32_t *ip, uint32_t *mask)
{
	char buf[32];
	const char *slash = s ? strchr(s, '/') : NULL;
	char *end;

	if (!slash || (size_t)(slash - s) >= sizeof(buf))
		return -EINVAL;
	memcpy(buf, s, (size_t)(slash - s));
	buf[slash - s] = '\0';
	if (tally_pkt_parse_ipv4(buf, ip))
		return -EINVAL;
	errno = 0;
	long len = strtol(slash + 1, &end, 10);
	if (errno || end == slash + 1 || *end || len < 1 || len > 32)
		return -EINVAL;
	*mask = htonl(len == 32 ? 0xffffffffu : ~(0xffffffffu >> len));
	return 0;
}

int tally_pkt_parse_mac(const char *s, uint8_t mac[6])
{
	if (!s || strlen(s) != 17)
		return -EINVAL;
	for (int i = 0; i < 6; i++) {
		const char *p = s + i * 3;
		int v = 0;

		for (int j = 0; j < 2; j++) {
			char c = p[j];
			int d = (c >= '0' && c <= '9') ? c - '0' :
				(c >= 'a' && c <= 'f') ? c - 'a' + 10 :
				(c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
			if (d < 0)
				return -EINVAL;
			v = v * 16 + d;
		}
		if (i < 5 && p[2] != ':')
			return -EINVAL;
		mac[i] = (uint8_t)v;
	}
	return 0;
}

/* "0000:3b:00.0" (domain:bus:device.function) or "3b:00.0" */
int tally_pkt_is_pci(const char *s)
{
	unsigned d, b, dev, f;
	char tail;

	if (!s)
		return 0;
	if (sscanf(s, "%4x:%2x:%2x.%1x%c", &d, &b, &dev, &f, &tail) == 4)
		return strlen(s) == 12;
	if (sscanf(s, "%2x:%2x.%1x%c", &b, &dev, &f, &tail) == 3)
		return strlen(s) == 7;
	return 0;
}
