/* SPDX-License-Identifier: Apache-2.0
 * it_client — the DPDK side of test_tallyd_it: a worker process on the client end of a
 * net_memif link that runs the client session over the DPDK client transport against
 * tallyd. usage: it_client SOCKET FILE_PREFIX SERVER_IP LOCAL_IP
 * Resolves tallyd's MAC by ARP, JOINs (world 1; job = the second byte of LOCAL_IP), registers an f32 key of several chunks
 * and runs allreduce rounds; a single worker's sum is its own data, so every RESULT must
 * equal the input bit for bit. Prints "it_client: OK" and exits 0, else says what failed.
 * With "blast SECONDS PAYLOAD" after QUEUES it measures tallyd --io-forward instead.
 * When done it waits for SIGTERM before closing its port (see linger()).
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include <rte_cycles.h>
#include <rte_eal.h>
#include <rte_ethdev.h>
#include <rte_mbuf.h>

#include "tally_client.h"
#include "tally_dpdk.h"

#define NELEMS 5000 /* 20000 bytes: two full 8 KiB chunks and a short one */
#define ROUNDS 6

/* net_memif in DPDK 22.11 unmaps a link's rings from its control thread when the peer
 * disconnects, racing a datapath thread that is polling that link (a crash, seen about
 * one run in ten). So a finished client stops polling and waits, without touching the
 * port, until told to exit (SIGTERM/SIGINT, or stdin closed): the test stops tallyd first,
 * whose lcores stop polling before it closes its ports. */
static void it_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	(void)from;
	tally_client_rx(arg, buf, len);
}

static void linger(void)
{
	sigset_t set;
	int sig;

	fflush(stdout);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigwait(&set, &sig);
}

static int fail(const char *what, int rc)
{
	fprintf(stderr, "it_client: %s: %s\n", what, strerror(rc < 0 ? -rc : rc));
	return 1;
}

/* --blast: the I/O baseline against tallyd --io-forward. Sends UDP frames with `payload`
 * bytes to core 0's port, keeps at most `window` in flight, counts the bounced ones. */
static int blast(uint16_t port, uint16_t nq, struct rte_mempool *pool, uint32_t sip,
		 uint32_t dip, const uint8_t dmac[6], double seconds, uint32_t payload)
{
	struct rte_ether_addr smac;
	struct rte_mbuf *tx[32], *rx[32];
	uint8_t hdr[TALLY_PKT_HDRS_LEN];
	uint64_t sent = 0, got = 0, bytes = 0, hz = rte_get_tsc_hz();
	const uint64_t window = 1024;

	rte_eth_macaddr_get(port, &smac);
	tally_pkt_build_udp(hdr, smac.addr_bytes, dmac, sip, dip, rte_cpu_to_be_16(9169),
			     rte_cpu_to_be_16(9170), payload, 0);
	uint64_t t0 = rte_rdtsc(), end = t0 + (uint64_t)(seconds * (double)hz);
	while (rte_rdtsc() < end) {
		if (sent - got < window && rte_pktmbuf_alloc_bulk(pool, tx, 32) == 0) {
			for (int i = 0; i < 32; i++) {
				uint8_t *d = (uint8_t *)rte_pktmbuf_append(tx[i],
					(uint16_t)(TALLY_PKT_HDRS_LEN + payload));
				memcpy(d, hdr, TALLY_PKT_HDRS_LEN);
			}
			uint16_t n = rte_eth_tx_burst(port, 0, tx, 32);
			sent += n;
			if (n < 32)
				rte_pktmbuf_free_bulk(tx + n, 32u - n);
		}
		for (uint16_t q = 0; q < nq; q++) {
			uint16_t n = rte_eth_rx_burst(port, q, rx, 32);
			for (uint16_t i = 0; i < n; i++)
				bytes += rx[i]->pkt_len;
			got += n;
			rte_pktmbuf_free_bulk(rx, n);
		}
	}
	double dt = (double)(rte_rdtsc() - t0) / (double)hz;
	printf("it_client: blast payload=%u B frames=%u B sent=%llu bounced=%llu in %.2f s: "
	       "%.3f Mpps, %.2f Gbit/s of frames back\n", payload,
	       payload + TALLY_PKT_HDRS_LEN, (unsigned long long)sent, (unsigned long long)got,
	       dt, (double)got / dt / 1e6, (double)bytes * 8 / dt / 1e9);
	return got ? 0 : 1;
}

static double g_blast_s;
static uint32_t g_blast_payload;

static int run(const char *server_ip, const char *local_ip, uint16_t nq)
{
	struct tally_dpdk_client_cfg xc;
	struct tally_dpdk_port_cfg pc;
	struct rte_mempool *pool;
	char err[256];
	uint16_t port;
	int rc;

	pool = rte_pktmbuf_pool_create("itc_pool", 2047, 128, 0, RTE_PKTMBUF_HEADROOM + 9216,
				       (int)rte_socket_id());
	if (!pool)
		return fail("mempool", rte_errno);
	if (tally_dpdk_port_find("net_memif0", &port))
		return fail("no memif port", ENODEV);
	memset(&pc, 0, sizeof(pc));
	struct rte_mempool *pools[8] = { pool, pool, pool, pool, pool, pool, pool, pool };
	pc.nb_rxq = pc.nb_txq = nq;
	pc.rx_desc = pc.tx_desc = 512;
	pc.rx_pools = pools;
	if ((rc = tally_dpdk_port_setup(port, &pc, err, sizeof(err)))) {
		fprintf(stderr, "it_client: %s\n", err);
		return 1;
	}
	/* memif connects in the background */
	struct rte_eth_link link;
	uint64_t end = rte_get_tsc_cycles() + rte_get_tsc_hz() * 10;
	do {
		rte_eth_link_get_nowait(port, &link);
		rte_delay_ms(10);
	} while (!link.link_status && rte_get_tsc_cycles() < end);
	if (!link.link_status)
		return fail("memif link down", ETIMEDOUT);

	memset(&xc, 0, sizeof(xc));
	xc.port_id = port;
	xc.pool = pool;
	xc.nb_rxq = nq;
	if (tally_pkt_parse_ipv4(server_ip, &xc.server_ip) ||
	    tally_pkt_parse_ipv4(local_ip, &xc.local_ip))
		return fail("addresses", EINVAL);
	struct tally_dpdk_client *x = tally_dpdk_client_create(&xc, &rc);
	if (!x)
		return fail("transport", rc);
	if ((rc = tally_dpdk_client_resolve(x, 5000)))
		return fail("ARP for the appliance", rc);
	if (g_blast_s > 0) {
		rc = blast(port, nq, pool, xc.local_ip, xc.server_ip, tally_dpdk_client_server_mac(x),
			   g_blast_s, g_blast_payload);
		tally_dpdk_client_destroy(x);
		linger();
		rte_eth_dev_stop(port);
		rte_eth_dev_close(port);
		return rc;
	}

	struct tally_client_cfg cc;
	memset(&cc, 0, sizeof(cc));
	tally_client_cfg_defaults(&cc);
	cc.job_id = (ntohl(xc.local_ip) >> 16) & 0xff; /* one job per subnet: 10.77.x.x → 77 */
	cc.token = 0xfeedbeefull;
	cc.rank = 0;
	cc.world_size = 1;
	struct tally_client *c = tally_client_create(&cc, &tally_dpdk_client_ops, x, &rc);
	if (!c)
		return fail("session", rc);
	tally_dpdk_client_set_rx(x, it_rx, c);
	if ((rc = tally_client_join(c, 5000))) {
		fprintf(stderr, "it_client: %s\n", tally_client_strerror(c));
		return fail("JOIN", rc);
	}
	struct tally_register reg;
	memset(&reg, 0, sizeof(reg));
	reg.nelems = NELEMS;
	reg.dtype = TALLY_DT_F32;
	reg.participants = 1;
	reg.quorum = 1;
	if ((rc = tally_client_register(c, 3, &reg))) {
		fprintf(stderr, "it_client: %s\n", tally_client_strerror(c));
		return fail("REGISTER", rc);
	}
	static float in[NELEMS], out[NELEMS];
	for (uint32_t r = 0; r < ROUNDS; r++) {
		for (int i = 0; i < NELEMS; i++)
			in[i] = (float)i * 0.25f - (float)r * 3.5f;
		memset(out, 0xff, sizeof(out));
		if ((rc = tally_client_allreduce(c, 3, r, in, out))) {
			fprintf(stderr, "it_client: %s\n", tally_client_strerror(c));
			return fail("allreduce", rc);
		}
		if (memcmp(in, out, sizeof(in))) {
			fprintf(stderr, "it_client: round %u: result differs from the input\n", r);
			return 1;
		}
	}
	const struct tally_client_stats *cs = tally_client_stats(c);
	const struct tally_dpdk_client_stats *xs = tally_dpdk_client_stats(x);
	printf("it_client: rounds=%d results=%llu retransmits=%llu rx=%llu tx=%llu\n", ROUNDS,
	       (unsigned long long)cs->results, (unsigned long long)cs->retransmits,
	       (unsigned long long)xs->rx_pkts, (unsigned long long)xs->tx_pkts);
	tally_client_bye(c);
	tally_client_destroy(c);
	tally_dpdk_client_destroy(x);
	printf("it_client: OK\n");
	linger();
	rte_eth_dev_stop(port);
	rte_eth_dev_close(port);
	return 0;
}

int main(int argc, char **argv)
{
	char vdev[160];

	if (argc == 9 && !strcmp(argv[6], "blast")) {
		g_blast_s = atof(argv[7]);
		g_blast_payload = (uint32_t)strtoul(argv[8], NULL, 10);
		if (g_blast_payload < 64 || g_blast_payload > 9000 || g_blast_s <= 0) {
			fprintf(stderr, "it_client: blast SECONDS PAYLOAD(64..9000)\n");
			return 2;
		}
		argc = 6;
	}
	if (argc != 5 && argc != 6) {
		fprintf(stderr, "usage: it_client SOCKET FILE_PREFIX SERVER_IP LOCAL_IP [QUEUES "
			"[blast SECONDS PAYLOAD]]\n");
		return 2;
	}
	unsigned long nq = argc == 6 ? strtoul(argv[5], NULL, 10) : 1;
	if (nq < 1 || nq > 8) {
		fprintf(stderr, "it_client: QUEUES is 1..8\n");
		return 2;
	}
	snprintf(vdev, sizeof(vdev), "net_memif0,role=client,socket=%s", argv[1]);
	/* SIGTERM/SIGINT are taken by linger() (blocked before EAL starts its threads) */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	char *eal[] = { argv[0], "--no-huge", "-m", "256", "--no-pci", "--file-prefix", argv[2],
			"--vdev", vdev, "-l", "0", "--log-level=pmd.net.memif:warning", NULL };
	if (rte_eal_init((int)(sizeof(eal) / sizeof(eal[0])) - 1, eal) < 0) {
		fprintf(stderr, "it_client: EAL init failed\n");
		return 1;
	}
	int rc = run(argv[3], argv[4], (uint16_t)nq);
	rte_eal_cleanup();
	return rc;
}
