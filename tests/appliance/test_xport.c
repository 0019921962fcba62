/* SPDX-License-Identifier: Apache-2.0
 * test_xport.c — the engine-side DPDK transport on a net_ring loopback port (EAL with
 * --no-huge, in process): a RESULT is a header mbuf chained to the payload attached as an
 * external buffer (zero copy, the shared info's count returns when the mbuf is freed),
 * small payloads are copied, devices without chains get one linear copy, buffered frames
 * leave on the TSC deadline, an ARP request is answered in place.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "tally_proto.h"
#include "tally_dpdk.h"

static struct rte_mempool *rx_pool, *hdr_pool;
static uint16_t port;
static struct tally_dpdk_tx tx;
static struct tally_pkt_ifaddr ifa;
static struct tally_addr peer;
static uint8_t payload[8192] __attribute__((aligned(64)));

static uint16_t rx_all(struct rte_mbuf **m, uint16_t max)
{
	return rte_eth_rx_burst(port, 0, m, max);
}

static void test_result_is_a_zero_copy_chain(void **state)
{
	(void)state;
	uint8_t hdr[TALLY_HDR_LEN];
	struct rte_mbuf *m[4];

	for (size_t i = 0; i < sizeof(payload); i++)
		payload[i] = (uint8_t)(i * 13);
	memset(hdr, 0x5a, sizeof(hdr));
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, payload, sizeof(payload)), 0);
	assert_int_equal(tally_dpdk_tx_pending(&tx), 1);
	assert_int_equal(rte_mbuf_ext_refcnt_read(&tx.shinfo), 2); /* ours + the frame's */
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(tally_dpdk_tx_pending(&tx), 0);
	assert_int_equal(rx_all(m, 4), 1);
	assert_int_equal(m[0]->nb_segs, 2);
	assert_int_equal(m[0]->pkt_len, 42 + 64 + sizeof(payload));
	assert_int_equal(m[0]->data_len, 42 + 64);
	/* the second segment IS the engine's buffer */
	assert_ptr_equal(rte_pktmbuf_mtod(m[0]->next, uint8_t *), payload);
	assert_true(RTE_MBUF_HAS_EXTBUF(m[0]->next));
	/* headers: from our address and core port to the peer, as the peer would parse them */
	struct tally_pkt_ifaddr pa = ifa;
	struct tally_pkt_parsed p;
	pa.ip = peer.ip;
	memcpy(pa.mac, peer.mac, 6);
	pa.base_port = ntohs(peer.port);
	pa.nports = 1;
	uint8_t frame[42 + 64 + sizeof(payload)];
	rte_pktmbuf_read(m[0], 0, sizeof(frame), frame);
	assert_int_equal(tally_pkt_parse(frame, sizeof(frame), &pa, &p), TALLY_PKT_C_UDP);
	assert_int_equal(p.src_ip, ifa.ip);
	assert_int_equal(ntohs(p.sport), ifa.base_port + 3); /* core 3 */
	assert_int_equal(p.l4_len, 64 + sizeof(payload));
	assert_memory_equal(frame + 42, hdr, 64);
	assert_memory_equal(frame + 106, payload, sizeof(payload));
	rte_pktmbuf_free(m[0]);
	assert_int_equal(rte_mbuf_ext_refcnt_read(&tx.shinfo), 1);
	assert_int_equal(tx.st.tx_pkts, 1);
	assert_int_equal(tx.st.tx_bytes, 42 + 64 + sizeof(payload));
}

static void test_small_payload_copied(void **state)
{
	(void)state;
	uint8_t hdr[TALLY_HDR_LEN] = { 1 }, small[16];
	struct rte_mbuf *m[4];

	memset(small, 7, sizeof(small));
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, small, sizeof(small)), 0);
	small[0] = 99; /* a stack buffer may change right after send */
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(rx_all(m, 4), 1);
	assert_int_equal(m[0]->nb_segs, 1);
	assert_int_equal(m[0]->pkt_len, 42 + 64 + 16);
	assert_int_equal(rte_pktmbuf_mtod(m[0], uint8_t *)[106], 7);
	rte_pktmbuf_free(m[0]);
	/* header-only packets too; a bad port index or payload is refused */
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, NULL, 0), 0);
	struct tally_addr bad = peer;
	bad.cookie = 5;
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &bad, hdr, small, 16), -22);
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, NULL, 16), -22);
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, payload,
						    TALLY_MAX_PAYLOAD + 1), -22);
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(rx_all(m, 4), 1);
	assert_int_equal(m[0]->pkt_len, 42 + 64);
	rte_pktmbuf_free(m[0]);
}

static void test_no_chains_linear_copy(void **state)
{
	(void)state;
	uint8_t hdr[TALLY_HDR_LEN] = { 2 };
	struct rte_mbuf *m[4];

	tx.port[0].copy_pool = rx_pool;
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, payload, 4000), 0);
	tx.port[0].copy_pool = NULL;
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(rx_all(m, 4), 1);
	assert_int_equal(m[0]->nb_segs, 1);
	assert_int_equal(m[0]->pkt_len, 42 + 64 + 4000);
	assert_memory_equal(rte_pktmbuf_mtod_offset(m[0], uint8_t *, 106), payload, 4000);
	rte_pktmbuf_free(m[0]);
	assert_int_equal(rte_mbuf_ext_refcnt_read(&tx.shinfo), 1);
}

static void test_deadline_flush(void **state)
{
	(void)state;
	uint8_t hdr[TALLY_HDR_LEN] = { 3 };
	struct rte_mbuf *m[40];

	uint64_t keep = tx.flush_cycles;

	/* a deadline long enough that a busy machine's preemption cannot pass it */
	tx.flush_cycles = rte_get_tsc_hz() / 5;
	assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, NULL, 0), 0);
	tally_dpdk_tx_flush(&tx, 0); /* deadline not reached yet */
	assert_int_equal(tally_dpdk_tx_pending(&tx), 1);
	assert_int_equal(rx_all(m, 40), 0);
	rte_delay_us_sleep(250000);
	tally_dpdk_tx_flush(&tx, 0);
	tx.flush_cycles = keep;
	assert_int_equal(tally_dpdk_tx_pending(&tx), 0);
	assert_int_equal(rx_all(m, 40), 1);
	rte_pktmbuf_free(m[0]);
	/* a full burst leaves at once, deadline or not */
	for (int i = 0; i < TALLY_DPDK_BURST; i++)
		assert_int_equal(tally_dpdk_engine_ops.send(&tx, &peer, hdr, NULL, 0), 0);
	assert_int_equal(tally_dpdk_tx_pending(&tx), 0);
	assert_int_equal(rx_all(m, 40), TALLY_DPDK_BURST);
	rte_pktmbuf_free_bulk(m, TALLY_DPDK_BURST);
}

static void test_arp_answered(void **state)
{
	(void)state;
	struct tally_pkt_ifaddr pa = ifa;
	struct tally_pkt_parsed p;
	struct rte_mbuf *m = rte_pktmbuf_alloc(rx_pool), *r[4];

	pa.ip = peer.ip;
	memcpy(pa.mac, peer.mac, 6);
	uint8_t *d = (uint8_t *)rte_pktmbuf_append(m, 60); /* padded to the Ethernet minimum */
	memset(d, 0, 60);
	tally_pkt_build_arp_request(d, &pa, ifa.ip);
	assert_int_equal(tally_pkt_parse(d, 60, &ifa, &p), TALLY_PKT_C_ARP_REQ);
	tally_dpdk_answer(&tx, 0, m, TALLY_PKT_C_ARP_REQ);
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(rx_all(r, 4), 1);
	assert_int_equal(r[0]->pkt_len, 42);
	assert_int_equal(tally_pkt_parse(rte_pktmbuf_mtod(r[0], uint8_t *), 42, &pa, &p),
			 TALLY_PKT_C_ARP_REPLY);
	assert_memory_equal(p.src_mac, ifa.mac, 6);
	rte_pktmbuf_free(r[0]);
}

static int setup(void **state)
{
	(void)state;
	char prefix[48];
	snprintf(prefix, sizeof(prefix), "--file-prefix=tallyd-ut%d", (int)getpid());
	char *argv[] = { "test_xport", "--no-huge", "-m", "128", "--no-pci", prefix,
			 "--vdev=net_ring0", "-l", "0", "--log-level=warning", NULL };
	if (rte_eal_init(10, argv) < 0)
		return -1;
	rx_pool = rte_pktmbuf_pool_create("ut_rx", 511, 0, 0, RTE_PKTMBUF_HEADROOM + 9216, 0);
	hdr_pool = rte_pktmbuf_pool_create("ut_hdr", 511, 0, 0, TALLY_DPDK_HDR_ROOM, 0);
	if (!rx_pool || !hdr_pool || tally_dpdk_port_find("net_ring0", &port))
		return -1;
	struct tally_dpdk_port_cfg pc = { .nb_rxq = 1, .nb_txq = 1, .rx_desc = 256,
					  .tx_desc = 256, .rx_pools = &rx_pool };
	char err[256];
	if (tally_dpdk_port_setup(port, &pc, err, sizeof(err))) {
		fprintf(stderr, "%s\n", err);
		return -1;
	}
	memset(&ifa, 0, sizeof(ifa));
	ifa.ip = htonl(0x0a000001);
	ifa.mask = htonl(0xffffff00);
	const uint8_t mac[6] = { 2, 0, 0, 0, 0, 1 }, pmac[6] = { 2, 0, 0, 0, 0, 2 };
	memcpy(ifa.mac, mac, 6);
	ifa.base_port = 9170;
	ifa.nports = 4;
	tally_dpdk_tx_init(&tx, 3, hdr_pool, 10);
	tally_dpdk_tx_add_port(&tx, port, 0, &ifa);
	memset(&peer, 0, sizeof(peer));
	peer.ip = htonl(0x0a000002);
	peer.port = htons(40000);
	memcpy(peer.mac, pmac, 6);
	peer.cookie = 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
	rte_eal_cleanup();
	char cmd[96];
	snprintf(cmd, sizeof(cmd), "rm -rf /var/run/dpdk/tallyd-ut%d", (int)getpid());
	if (system(cmd) != 0)
		fprintf(stderr, "could not remove the EAL runtime directory\n");
	return 0;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_result_is_a_zero_copy_chain),
		cmocka_unit_test(test_small_payload_copied),
		cmocka_unit_test(test_no_chains_linear_copy),
		cmocka_unit_test(test_deadline_flush),
		cmocka_unit_test(test_arp_answered),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
