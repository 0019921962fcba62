/* SPDX-License-Identifier: Apache-2.0
 * test_xport.c — the engine-side DPDK transport on a net_ring loopback port (EAL with
 * --no-huge, in process): a RESULT is a header mbuf chained to the payload attached as an
 * external buffer (zero copy, the shared info's count returns when the mbuf is freed),
 * small payloads are copied, devices without chains get one linear copy, buffered frames
 * leave on the TSC deadline, an ARP request is answered in place, and an engine over this
 * transport does not reuse a RESULT buffer while a copy of it is still queued.
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

#include "tally_dpdk.h"
#include "tally_engine.h"
#include "tally_proto.h"

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

/* Feed the engine one packet built from hd and a payload. */
static enum tally_reason xp_rx(struct tally_engine *e, struct tally_hdr *hd, const void *pl,
			       size_t plen, const struct tally_addr *from)
{
	static uint8_t buf[TALLY_HDR_LEN + TALLY_MAX_PAYLOAD];

	if (plen)
		memcpy(buf + TALLY_HDR_LEN, pl, plen);
	tally_proto_finish(buf, hd, buf + TALLY_HDR_LEN, plen);
	return tally_engine_rx(e, buf, TALLY_HDR_LEN + plen, from);
}

static enum tally_reason xp_push(struct tally_engine *e, uint32_t rank, uint32_t round, float v,
				 const struct tally_addr *from)
{
	static float pl[1024];
	struct tally_hdr hd;

	for (int i = 0; i < 1024; i++)
		pl[i] = v + (float)i;
	memset(&hd, 0, sizeof(hd));
	hd.op = TALLY_OP_PUSH;
	hd.job_id = 7;
	hd.token = 0x1234;
	hd.rank = rank;
	hd.key = 1;
	hd.round = round;
	hd.count = 1024;
	hd.dtype = TALLY_DT_F32;
	return xp_rx(e, &hd, pl, sizeof(pl), from);
}

/* The RESULT buffer rule over the real transport: a RESULT copy still queued (an unsent
 * mbuf holding a reference on its chunk buffer's own shinfo) keeps round r+2 out of that
 * buffer (TOO_EARLY, counted) until the mbuf is freed; then the push is accepted, and the
 * queued copy's bytes never changed. */
static void test_result_buffer_busy_until_freed(void **state)
{
	(void)state;
	struct tally_engine_cfg cfg;
	struct rte_mbuf *m[16];
	struct tally_addr a[2] = { peer, peer };
	int err = 0;

	a[1].port = htons(40001);
	memset(&cfg, 0, sizeof(cfg));
	cfg.mem_budget = 8u << 20;
	struct tally_engine *e = tally_engine_create(&cfg, &tally_dpdk_engine_ops, &tx, &err);
	assert_non_null(e);
	assert_int_equal(tally_engine_job_add(e, 7, 0x1234, 2), 0);
	for (uint32_t r = 0; r < 2; r++) {
		struct tally_hdr hd;
		struct tally_join j = { .world_size = 2, .max_chunk_bytes = 8192 };
		uint8_t pl[TALLY_JOIN_LEN];

		tally_proto_put_join(pl, &j);
		memset(&hd, 0, sizeof(hd));
		hd.op = TALLY_OP_JOIN;
		hd.job_id = 7;
		hd.token = 0x1234;
		hd.rank = r;
		assert_int_equal(xp_rx(e, &hd, pl, sizeof(pl), &a[r]), TALLY_OK);
	}
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(rx_all(m, 16), 2); /* JOIN_OKs, copied */
	rte_pktmbuf_free_bulk(m, 2);
	struct tally_register reg = { .nelems = 1024, .chunk_elems = 1024,
				      .dtype = TALLY_DT_F32, .participants = 2, .quorum = 2 };
	assert_int_equal(tally_engine_key_register(e, 7, 1, &reg), 0);

	/* rounds 0 and 1 complete; their 4 RESULT copies stay queued */
	for (uint32_t rd = 0; rd < 2; rd++)
		for (uint32_t r = 0; r < 2; r++)
			assert_int_equal(xp_push(e, r, rd, (float)(10 * rd + r + 1), &a[r]),
					 TALLY_OK);
	assert_int_equal(tally_dpdk_tx_pending(&tx), 4);
	assert_int_equal(xp_push(e, 0, 2, 100.0f, &a[0]), TALLY_R_TOO_EARLY);
	assert_int_equal(tally_engine_stats(e)->result_busy, 1);
	/* transmitted, but the frames still sit in the ring: still referenced */
	tally_dpdk_tx_flush(&tx, 1);
	assert_int_equal(xp_push(e, 0, 2, 100.0f, &a[0]), TALLY_R_TOO_EARLY);
	assert_int_equal(tally_engine_stats(e)->result_busy, 2);
	assert_int_equal(tally_engine_stats(e)->drops[TALLY_R_TOO_EARLY], 2);
	assert_int_equal(rx_all(m, 16), 4);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(m[i]->nb_segs, 2);
		assert_true(RTE_MBUF_HAS_EXTBUF(m[i]->next));
		/* each chunk buffer's own count: the engine's reference + 2 copies */
		assert_int_equal(rte_mbuf_ext_refcnt_read(m[i]->next->shinfo), 3);
		float want = i < 2 ? 3.0f : 23.0f; /* (1 + 2) and (11 + 12), + 2i each */
		float buf[1024];
		const float *got = rte_pktmbuf_read(m[i], 106, sizeof(buf), buf);
		assert_non_null(got);
		for (int k = 0; k < 1024; k++)
			assert_true(got[k] == want + 2.0f * (float)k);
	}
	/* round 0's copies gone: its buffer may take round 2 */
	rte_pktmbuf_free_bulk(m, 2);
	assert_int_equal(xp_push(e, 0, 2, 100.0f, &a[0]), TALLY_OK);
	assert_int_equal(tally_engine_stats(e)->result_busy, 2);
	/* round 1's buffer: round 3 waits for its copies (m[2], m[3]) too */
	assert_int_equal(xp_push(e, 1, 2, 100.0f, &a[1]), TALLY_OK);
	tally_dpdk_tx_flush(&tx, 1);
	unsigned n = rx_all(m + 4, 12);
	assert_int_equal(n, 2); /* round 2's RESULTs (other buffer) */
	rte_pktmbuf_free_bulk(m + 4, 2);
	assert_int_equal(xp_push(e, 0, 3, 1.0f, &a[0]), TALLY_R_TOO_EARLY); /* m[2], m[3] */
	rte_pktmbuf_free_bulk(m + 2, 2);
	assert_int_equal(xp_push(e, 0, 3, 1.0f, &a[0]), TALLY_OK);
	assert_int_equal(tally_engine_stats(e)->result_busy, 3);
	tally_dpdk_tx_flush(&tx, 1);
	n = rx_all(m, 16);
	rte_pktmbuf_free_bulk(m, n);
	tally_engine_destroy(e);
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
		cmocka_unit_test(test_result_buffer_busy_until_freed),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
