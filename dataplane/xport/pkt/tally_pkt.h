/* SPDX-License-Identifier: Apache-2.0
 * tally_pkt.h — Ethernet / ARP / IPv4 / ICMP / UDP parsing and building on plain byte
 * buffers (an mbuf's data, or a test's array). No DPDK types, so every rule is unit-testable
 * without an EAL. Addresses and ports in the structs are in network byte order unless a
 * field says otherwise.
 *
 * What a frame must be to reach the engine: Ethernet II (no VLAN), IPv4 version 4 with
 * 5 <= ihl, ihl*4 <= total length <= bytes present, a correct header checksum, not a
 * fragment, destined to our address, from a plausible source, UDP with
 * 8 <= udp length <= IP payload, destination port in [base, base + nports).
 * Everything else is an ARP request for us, an ICMP echo request for us, or a drop with a
 * reason.
 */
#ifndef TALLY_PKT_PKT_H
#define TALLY_PKT_PKT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_PKT_ETH_LEN 14
#define TALLY_PKT_IP_LEN 20
#define TALLY_PKT_UDP_LEN 8
#define TALLY_PKT_HDRS_LEN (TALLY_PKT_ETH_LEN + TALLY_PKT_IP_LEN + TALLY_PKT_UDP_LEN)
#define TALLY_PKT_ARP_FRAME_LEN 42

/* Why a received frame was dropped (counted per lcore by reason). */
enum tally_pkt_drop {
	TALLY_PKT_D_NONE = 0,
	TALLY_PKT_D_ETH_TRUNC,     /* shorter than an Ethernet header */
	TALLY_PKT_D_ETHERTYPE,     /* neither IPv4 nor ARP (VLAN tags included) */
	TALLY_PKT_D_ARP_MALFORMED, /* truncated, or not Ethernet/IPv4 ARP */
	TALLY_PKT_D_ARP_NOT_OURS,  /* ARP request for another address */
	TALLY_PKT_D_ARP_OTHER,     /* ARP reply or other op the receiver does not use */
	TALLY_PKT_D_IP_TRUNC,      /* shorter than the IPv4 header it announces */
	TALLY_PKT_D_IP_VERSION,
	TALLY_PKT_D_IP_IHL,        /* ihl < 5 */
	TALLY_PKT_D_IP_LEN,        /* total length < ihl*4 or > bytes present */
	TALLY_PKT_D_IP_CSUM,
	TALLY_PKT_D_IP_FRAG,       /* MF set or fragment offset != 0 */
	TALLY_PKT_D_IP_NOT_OURS,   /* destination is not our address */
	TALLY_PKT_D_IP_MARTIAN,    /* source is 0, ours, multicast, broadcast, or loopback */
	TALLY_PKT_D_IP_PROTO,      /* neither UDP nor ICMP */
	TALLY_PKT_D_UDP_TRUNC,
	TALLY_PKT_D_UDP_LEN,       /* udp length < 8 or > IP payload */
	TALLY_PKT_D_UDP_PORT,      /* destination port outside [base, base + nports) */
	TALLY_PKT_D_ICMP_TRUNC,
	TALLY_PKT_D_ICMP_CSUM,
	TALLY_PKT_D_ICMP_TYPE,     /* not an echo request */
	TALLY_PKT_D_MULTISEG,      /* a frame in several mbufs (no zero-copy view) */
	TALLY_PKT_D_HW_CSUM_BAD,   /* the NIC flagged a bad IP or L4 checksum */
	TALLY_PKT_D_RING_FULL,     /* software dispatch ring to the owning core full */
	TALLY_PKT_D_TX_FULL,       /* transmit buffer full (device back-pressure) */
	TALLY_PKT_D_NO_MBUF,       /* mempool empty when building a packet */
	TALLY_PKT_D_RELAY_FULL,    /* TX relay ring to the core that sends on that port full */
	TALLY_PKT_D_PROBE_SHED,    /* PULL probe not dispatched: the owning core's ring is 3/4
				    * full, the rest kept for pushes and control packets */
	TALLY_PKT_D_COUNT
};

const char *tally_pkt_drop_name(enum tally_pkt_drop d);

/* What a frame is. */
enum tally_pkt_class {
	TALLY_PKT_C_DROP = 0,  /* see tally_pkt_parsed.drop */
	TALLY_PKT_C_UDP,       /* a UDP datagram for us: payload at l4_off, l4_len bytes */
	TALLY_PKT_C_ARP_REQ,   /* an ARP request for our address: answer it */
	TALLY_PKT_C_ARP_REPLY, /* an ARP reply addressed to us: sender in src_ip/src_mac */
	TALLY_PKT_C_ICMP_ECHO  /* an ICMP echo request for us: answer it */
};

/* The local interface a frame is checked against. */
struct tally_pkt_ifaddr {
	uint32_t ip;        /* network order */
	uint32_t mask;      /* network order, e.g. htonl(0xffffff00) */
	uint8_t mac[6];
	uint16_t base_port; /* host order: first accepted UDP destination port */
	uint16_t nports;    /* host order: ports accepted; 0 accepts any */
};

struct tally_pkt_parsed {
	enum tally_pkt_class cls;
	enum tally_pkt_drop drop;
	uint8_t src_mac[6];
	uint32_t src_ip, dst_ip;   /* network order */
	uint16_t sport, dport;     /* network order */
	uint32_t l4_off;           /* UDP payload offset in the frame */
	uint32_t l4_len;           /* UDP payload bytes */
};

/* Internet checksum (RFC 1071) of len bytes, folded and complemented. A header whose
 * checksum field is correct sums to 0 with this function. */
uint16_t tally_pkt_csum(const void *buf, size_t len);

/* Classify and validate a frame of len bytes. Never reads past frame[len). */
enum tally_pkt_class tally_pkt_parse(const uint8_t *frame, size_t len,
				       const struct tally_pkt_ifaddr *ifa,
				       struct tally_pkt_parsed *out);

/* Turn an ARP request (classified TALLY_PKT_C_ARP_REQ) into our reply in place. Returns
 * the reply's length (42 bytes; the caller trims the frame to it). */
size_t tally_pkt_arp_reply(uint8_t *frame, const struct tally_pkt_ifaddr *ifa);

/* Turn an ICMP echo request (classified TALLY_PKT_C_ICMP_ECHO) of len bytes into the
 * echo reply in place. Returns the reply's length (the IP total length + 14: Ethernet
 * padding is trimmed). */
size_t tally_pkt_icmp_echo_reply(uint8_t *frame, size_t len);

/* --io-forward: send a UDP frame back where it came from (swap MACs, IPs, ports; the IP
 * checksum does not change under a swap). */
void tally_pkt_udp_bounce(uint8_t *frame);

/* Write Ethernet + IPv4 + UDP headers (42 bytes) for payload_len bytes of UDP payload.
 * IP: DF, TTL 64, the given id, checksum computed; UDP checksum 0 (the Tally header carries
 * a CRC32C of the payload). Returns 42, or 0 when the datagram would exceed 65535. */
size_t tally_pkt_build_udp(uint8_t out[TALLY_PKT_HDRS_LEN], const uint8_t src_mac[6],
			    const uint8_t dst_mac[6], uint32_t src_ip, uint32_t dst_ip,
			    uint16_t sport, uint16_t dport, size_t payload_len, uint16_t ip_id);

/* An ARP request (broadcast) asking who has target_ip. Returns 42. */
size_t tally_pkt_build_arp_request(uint8_t out[TALLY_PKT_ARP_FRAME_LEN],
				    const struct tally_pkt_ifaddr *ifa, uint32_t target_ip);

/* Parse "a.b.c.d" (network order out); 0 or -EINVAL. */
int tally_pkt_parse_ipv4(const char *s, uint32_t *ip);
/* Parse "a.b.c.d/len" (len 1..32); 0 or -EINVAL. */
int tally_pkt_parse_cidr(const char *s, uint32_t *ip, uint32_t *mask);
/* Parse "xx:xx:xx:xx:xx:xx"; 0 or -EINVAL. */
int tally_pkt_parse_mac(const char *s, uint8_t mac[6]);
/* A PCI address as DPDK takes it, "0000:3b:00.0" or "3b:00.0": 1, else 0. */
int tally_pkt_is_pci(const char *s);

#ifdef __cplusplus
}
#endif
#endif
