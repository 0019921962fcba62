/* SPDX-License-Identifier: Apache-2.0
 * test_pkt.c — Ethernet/ARP/IPv4/ICMP/UDP parse and build of the DPDK transport: checksums,
 * round trips, ARP and ICMP answers, and every malformed frame dropped with its reason.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include "tally_pkt.h"

static const uint8_t our_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x01 };
static const uint8_t peer_mac[6] = { 0x02, 0x00, 0x00, 0x00, 0x00, 0x02 };

static struct tally_pkt_ifaddr ifa(void)
{
	struct tally_pkt_ifaddr a;

	memset(&a, 0, sizeof(a));
	a.ip = htonl(0x0a000001);   /* 10.0.0.1 */
	a.mask = htonl(0xffffff00); /* /24 */
	memcpy(a.mac, our_mac, 6);
	a.base_port = 9170;
	a.nports = 2;
	return a;
}

/* A valid UDP frame from 10.0.0.2:5000 to 10.0.0.1:dport with n payload bytes. */
static size_t udp_frame(uint8_t *f, uint16_t dport, size_t n)
{
	size_t h = tally_pkt_build_udp(f, peer_mac, our_mac, htonl(0x0a000002), htonl(0x0a000001),
					htons(5000), htons(dport), n, 7);
	for (size_t i = 0; i < n; i++)
		f[h + i] = (uint8_t)i;
	return h + n;
}

static void fix_ip_csum(uint8_t *f)
{
	f[24] = f[25] = 0;
	uint16_t c = tally_pkt_csum(f + 14, (size_t)(f[14] & 0xf) * 4);
	f[24] = (uint8_t)(c >> 8);
	f[25] = (uint8_t)c;
}

static void test_csum_known_answer(void **state)
{
	(void)state;
	/* the classic example header: checksum 0xb861 */
	uint8_t h[20] = { 0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11,
			  0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8, 0x00, 0xc7 };
	assert_int_equal(tally_pkt_csum(h, 20), 0xb861);
	h[10] = 0xb8;
	h[11] = 0x61;
	assert_int_equal(tally_pkt_csum(h, 20), 0);
	/* odd length pads with a zero byte */
	uint8_t o[3] = { 0x01, 0x02, 0x03 };
	assert_int_equal(tally_pkt_csum(o, 3), (uint16_t)~(0x0102 + 0x0300));
}

static void test_udp_roundtrip(void **state)
{
	(void)state;
	uint8_t f[2000];
	struct tally_pkt_ifaddr a = ifa();
	struct tally_pkt_parsed p;
	size_t len = udp_frame(f, 9171, 1000);

	assert_int_equal(len, 42 + 1000);
	assert_int_equal(tally_pkt_csum(f + 14, 20), 0);
	assert_int_equal(tally_pkt_parse(f, len, &a, &p), TALLY_PKT_C_UDP);
	assert_int_equal(p.l4_off, 42);
	assert_int_equal(p.l4_len, 1000);
	assert_int_equal(p.src_ip, htonl(0x0a000002));
	assert_int_equal(p.sport, htons(5000));
	assert_int_equal(p.dport, htons(9171));
	assert_memory_equal(p.src_mac, peer_mac, 6);
	assert_int_equal(f[p.l4_off + 999], (uint8_t)999);
	/* Ethernet padding after the datagram is ignored */
	assert_int_equal(tally_pkt_parse(f, len + 10, &a, &p), TALLY_PKT_C_UDP);
	assert_int_equal(p.l4_len, 1000);
	/* too large for a datagram */
	assert_int_equal(tally_pkt_build_udp(f, peer_mac, our_mac, 1, 2, 3, 4, 65535, 0), 0);
}

static void test_bounce(void **state)
{
	(void)state;
	uint8_t f[200];
	struct tally_pkt_ifaddr a = ifa();
	struct tally_pkt_parsed p;
	size_t len = udp_frame(f, 9170, 100);

	tally_pkt_udp_bounce(f);
	assert_memory_equal(f, peer_mac, 6);
	assert_memory_equal(f + 6, our_mac, 6);
	assert_int_equal(tally_pkt_csum(f + 14, 20), 0); /* still valid */
	/* seen from the peer, it is a datagram from our port 9170 to its port 5000 */
	struct tally_pkt_ifaddr peer = a;
	peer.ip = htonl(0x0a000002);
	memcpy(peer.mac, peer_mac, 6);
	peer.base_port = 5000;
	peer.nports = 1;
	assert_int_equal(tally_pkt_parse(f, len, &peer, &p), TALLY_PKT_C_UDP);
	assert_int_equal(p.sport, htons(9170));
	assert_int_equal(p.src_ip, htonl(0x0a000001));
}

static void expect_drop(const uint8_t *f, size_t len, enum tally_pkt_drop why)
{
	struct tally_pkt_ifaddr a = ifa();
	struct tally_pkt_parsed p;

	assert_int_equal(tally_pkt_parse(f, len, &a, &p), TALLY_PKT_C_DROP);
	assert_string_equal(tally_pkt_drop_name(p.drop), tally_pkt_drop_name(why));
}

static void test_malformed_dropped_by_reason(void **state)
{
	(void)state;
	uint8_t f[2000], g[2000];
	size_t len = udp_frame(f, 9170, 64);

	/* every prefix of a valid frame is dropped (never read past the end) */
	for (size_t n = 0; n < len; n++) {
		struct tally_pkt_ifaddr a = ifa();
		struct tally_pkt_parsed p;
		assert_int_equal(tally_pkt_parse(f, n, &a, &p), TALLY_PKT_C_DROP);
	}
	expect_drop(f, 13, TALLY_PKT_D_ETH_TRUNC);
	expect_drop(f, 20, TALLY_PKT_D_IP_TRUNC);
	expect_drop(f, 40, TALLY_PKT_D_IP_LEN); /* total length says more than arrived */

#define MUTATE(stmt, why) \
	do { memcpy(g, f, len); stmt; expect_drop(g, len, why); } while (0)
	MUTATE(g[12] = 0x86; g[13] = 0xdd, TALLY_PKT_D_ETHERTYPE);             /* IPv6 */
	MUTATE(g[12] = 0x81; g[13] = 0x00, TALLY_PKT_D_ETHERTYPE);             /* VLAN */
	MUTATE(g[14] = 0x65; fix_ip_csum(g), TALLY_PKT_D_IP_VERSION);
	MUTATE(g[14] = 0x44; fix_ip_csum(g), TALLY_PKT_D_IP_IHL);
	MUTATE(g[14] = 0x4f; g[16] = 0; g[17] = 40; fix_ip_csum(g), TALLY_PKT_D_IP_LEN); /* 60 B hdr */
	MUTATE(g[16] = 0; g[17] = 10; fix_ip_csum(g), TALLY_PKT_D_IP_LEN);     /* tot < ihl */
	MUTATE(g[25] ^= 1, TALLY_PKT_D_IP_CSUM);
	MUTATE(g[20] |= 0x20; fix_ip_csum(g), TALLY_PKT_D_IP_FRAG);            /* MF */
	MUTATE(g[21] = 1; fix_ip_csum(g), TALLY_PKT_D_IP_FRAG);                /* offset */
	MUTATE(g[33] = 9; fix_ip_csum(g), TALLY_PKT_D_IP_NOT_OURS);
	MUTATE(g[26] = 0; g[27] = 0; g[28] = 0; g[29] = 0; fix_ip_csum(g), TALLY_PKT_D_IP_MARTIAN);
	MUTATE(g[29] = 1; fix_ip_csum(g), TALLY_PKT_D_IP_MARTIAN);             /* ourselves */
	MUTATE(g[29] = 255; fix_ip_csum(g), TALLY_PKT_D_IP_MARTIAN);           /* broadcast */
	MUTATE(g[26] = 224; fix_ip_csum(g), TALLY_PKT_D_IP_MARTIAN);           /* multicast */
	MUTATE(g[26] = 127; fix_ip_csum(g), TALLY_PKT_D_IP_MARTIAN);           /* loopback */
	MUTATE(g[23] = 6; fix_ip_csum(g), TALLY_PKT_D_IP_PROTO);               /* TCP */
	MUTATE(g[16] = 0; g[17] = 24; fix_ip_csum(g), TALLY_PKT_D_UDP_TRUNC);
	MUTATE(g[38] = 0; g[39] = 7, TALLY_PKT_D_UDP_LEN);
	MUTATE(g[38] = 0x7f; g[39] = 0, TALLY_PKT_D_UDP_LEN);                  /* past IP */
	MUTATE(g[36] = 0x23; g[37] = 0xd1, TALLY_PKT_D_UDP_PORT);              /* 9169 */
	MUTATE(g[36] = 0x23; g[37] = 0xd4, TALLY_PKT_D_UDP_PORT);              /* 9172 */
#undef MUTATE
	/* a UDP length shorter than the IP payload is honoured */
	memcpy(g, f, len);
	g[38] = 0;
	g[39] = 8 + 10;
	struct tally_pkt_ifaddr a = ifa();
	struct tally_pkt_parsed p;
	assert_int_equal(tally_pkt_parse(g, len, &a, &p), TALLY_PKT_C_UDP);
	assert_int_equal(p.l4_len, 10);
	/* nports 0 accepts any port */
	a.nports = 0;
	g[36] = 0;
	g[37] = 53;
	assert_int_equal(tally_pkt_parse(g, len, &a, &p), TALLY_PKT_C_UDP);
	/* every reason has a distinct name */
	for (int i = 0; i < TALLY_PKT_D_COUNT; i++)
		for (int j = 0; j < i; j++)
			assert_string_not_equal(tally_pkt_drop_name(i), tally_pkt_drop_name(j));
	assert_string_equal(tally_pkt_drop_name(TALLY_PKT_D_COUNT), "unknown");
}

/* An ARP request from the peer for `target`. */
static void arp_request(uint8_t *f, uint32_t target)
{
	struct tally_pkt_ifaddr peer = ifa();

	peer.ip = htonl(0x0a000002);
	memcpy(peer.mac, peer_mac, 6);
	tally_pkt_build_arp_request(f, &peer, target);
}

static void test_arp(void **state)
{
	(void)state;
	uint8_t f[64];
	struct tally_pkt_ifaddr a = ifa();
	struct tally_pkt_parsed p;
	const uint8_t bcast[6] = { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff };

	arp_request(f, a.ip);
	assert_memory_equal(f, bcast, 6);
	assert_int_equal(tally_pkt_parse(f, 42, &a, &p), TALLY_PKT_C_ARP_REQ);
	assert_int_equal(p.src_ip, htonl(0x0a000002));
	assert_int_equal(tally_pkt_arp_reply(f, &a), 42);
	/* the reply: to the asker, from us, op 2, our MAC and IP as sender */
	assert_memory_equal(f, peer_mac, 6);
	assert_memory_equal(f + 6, our_mac, 6);
	assert_int_equal(f[20] << 8 | f[21], 2);
	assert_memory_equal(f + 22, our_mac, 6);
	assert_memory_equal(f + 28, &a.ip, 4);
	assert_memory_equal(f + 32, peer_mac, 6);
	uint32_t tpa = htonl(0x0a000002);
	assert_memory_equal(f + 38, &tpa, 4);
	/* the peer sees it as a reply for it, telling our MAC */
	struct tally_pkt_ifaddr peer = a;
	peer.ip = htonl(0x0a000002);
	assert_int_equal(tally_pkt_parse(f, 42, &peer, &p), TALLY_PKT_C_ARP_REPLY);
	assert_memory_equal(p.src_mac, our_mac, 6);
	assert_int_equal(p.src_ip, a.ip);

	arp_request(f, htonl(0x0a000009));
	expect_drop(f, 42, TALLY_PKT_D_ARP_NOT_OURS);
	arp_request(f, a.ip);
	expect_drop(f, 41, TALLY_PKT_D_ARP_MALFORMED);
	f[19] = 16; /* plen */
	expect_drop(f, 42, TALLY_PKT_D_ARP_MALFORMED);
	arp_request(f, a.ip);
	f[21] = 3; /* RARP request */
	expect_drop(f, 42, TALLY_PKT_D_ARP_OTHER);
}

static size_t icmp_echo(uint8_t *f, size_t data)
{
	size_t h = tally_pkt_build_udp(f, peer_mac, our_mac, htonl(0x0a000002), htonl(0x0a000001),
					0, 0, data + 8 - 8, 0x1234);
	/* turn the UDP frame into ICMP: protocol 1, an 8-byte echo header + data */
	f[14 + 9] = 1;
	fix_ip_csum(f);
	uint8_t *ic = f + 34;
	memset(ic, 0, 8);
	ic[0] = 8;
	ic[4] = 0xab; ic[5] = 0xcd; /* identifier */
	ic[7] = 3;                  /* sequence */
	for (size_t i = 0; i < data; i++)
		ic[8 + i] = (uint8_t)(i * 3);
	uint16_t c = tally_pkt_csum(ic, 8 + data);
	ic[2] = (uint8_t)(c >> 8);
	ic[3] = (uint8_t)c;
	return h + data;
}

static void test_icmp_echo(void **state)
{
	(void)state;
	uint8_t f[256], orig[256];
	struct tally_pkt_ifaddr a = ifa();
	struct tally_pkt_parsed p;
	size_t len = icmp_echo(f, 56);

	memcpy(orig, f, len);
	assert_int_equal(tally_pkt_parse(f, len, &a, &p), TALLY_PKT_C_ICMP_ECHO);
	/* padded frame: the reply is trimmed to the IP length */
	assert_int_equal(tally_pkt_icmp_echo_reply(f, len + 6), len);
	assert_memory_equal(f, peer_mac, 6);
	assert_memory_equal(f + 6, our_mac, 6);
	assert_memory_equal(f + 26, orig + 30, 4); /* addresses swapped */
	assert_memory_equal(f + 30, orig + 26, 4);
	assert_int_equal(tally_pkt_csum(f + 14, 20), 0);
	assert_int_equal(f[34], 0); /* echo reply */
	assert_int_equal(tally_pkt_csum(f + 34, len - 34), 0);
	assert_memory_equal(f + 38, orig + 38, len - 38); /* id, seq, data unchanged */

	uint8_t g[256];
	memcpy(g, orig, len);
	g[40] ^= 0xff; /* data corrupted: checksum fails */
	expect_drop(g, len, TALLY_PKT_D_ICMP_CSUM);
	memcpy(g, orig, len);
	g[34] = 13; /* timestamp request, checksum fixed */
	g[36] = g[37] = 0;
	uint16_t c = tally_pkt_csum(g + 34, len - 34);
	g[36] = (uint8_t)(c >> 8);
	g[37] = (uint8_t)c;
	expect_drop(g, len, TALLY_PKT_D_ICMP_TYPE);
	memcpy(g, orig, len);
	g[16] = 0;
	g[17] = 20 + 4; /* IP length leaves 4 bytes of ICMP */
	fix_ip_csum(g);
	expect_drop(g, len, TALLY_PKT_D_ICMP_TRUNC);
}

static void test_address_parsers(void **state)
{
	(void)state;
	uint32_t ip, mask;
	uint8_t mac[6];

	assert_int_equal(tally_pkt_parse_cidr("192.168.1.10/24", &ip, &mask), 0);
	assert_int_equal(ip, htonl(0xc0a8010a));
	assert_int_equal(mask, htonl(0xffffff00));
	assert_int_equal(tally_pkt_parse_cidr("10.0.0.1/32", &ip, &mask), 0);
	assert_int_equal(mask, 0xffffffffu);
	assert_int_equal(tally_pkt_parse_cidr("10.0.0.1/1", &ip, &mask), 0);
	assert_int_equal(mask, htonl(0x80000000));
	const char *bad_cidr[] = { "10.0.0.1", "10.0.0.1/", "10.0.0.1/0", "10.0.0.1/33",
				   "10.0.0/24", "10.0.0.256/24", "10.0.0.1/24x", "/24", "" };
	for (size_t i = 0; i < sizeof(bad_cidr) / sizeof(bad_cidr[0]); i++)
		assert_int_equal(tally_pkt_parse_cidr(bad_cidr[i], &ip, &mask), -22);
	assert_int_equal(tally_pkt_parse_mac("02:aB:0c:00:ff:10", mac), 0);
	const uint8_t want[6] = { 0x02, 0xab, 0x0c, 0x00, 0xff, 0x10 };
	assert_memory_equal(mac, want, 6);
	const char *bad_mac[] = { "02:ab:0c:00:ff", "02:ab:0c:00:ff:1", "02-ab-0c-00-ff-10",
				  "02:ab:0c:00:ff:1g", " 2:ab:0c:00:ff:10", "02:ab:0c:00:ff:100" };
	for (size_t i = 0; i < sizeof(bad_mac) / sizeof(bad_mac[0]); i++)
		assert_int_equal(tally_pkt_parse_mac(bad_mac[i], mac), -22);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_csum_known_answer),
		cmocka_unit_test(test_udp_roundtrip),
		cmocka_unit_test(test_bounce),
		cmocka_unit_test(test_malformed_dropped_by_reason),
		cmocka_unit_test(test_arp),
		cmocka_unit_test(test_icmp_echo),
		cmocka_unit_test(test_address_parsers),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
