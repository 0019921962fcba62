/* SPDX-License-Identifier: Apache-2.0
 * test_tallyd_it.c — tallyd as a process on DPDK virtual devices (--no-huge):
 *  - net_af_packet on a veth whose peer is in a network namespace "tallyd-it<pid>": the
 *    kernel there pings tallyd (ICMP echo through a raw socket), resolves its MAC by ARP,
 *    and JOINs over a kernel UDP socket (JOIN_OK; a wrong token gets ERROR); malformed
 *    datagrams are dropped and counted by reason; SIGTERM drains and exits 0.
 *  - net_memif with a DPDK client process (it_client) running the client session over
 *    the DPDK client transport: ARP, JOIN, REGISTER and allreduce rounds with RESULTs sent
 *    as header + external-buffer chains; with one core, and with two cores where frames
 *    for core 1 arrive on core 0's queue and are dispatched in software.
 * Needs root (namespaces, veth); skipped otherwise. Everything created is removed in the
 * teardown, which cmocka runs even when a test fails.
 */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <cmocka.h>

#include "it_util.h"
#include "tally_proto.h"

#define TALLYD_IP "10.77.0.1"
#define PEER_IP "10.77.0.2"

static char ns[32], veth_a[16], veth_b[16], sock_path[64], sock_path2[64], prefix[40];
static char ctl_path[64]; /* each tallyd its own control socket */
static struct it_proc tallyd, client, client2;
static const char *tallyd_bin, *client_bin;

static void cleanup(void)
{
	it_kill(&client);
	it_kill(&client2);
	it_kill(&tallyd);
	if (ns[0])
		it_sh("ip netns del %s 2>/dev/null", ns);
	if (veth_a[0])
		it_sh("ip link del %s 2>/dev/null", veth_a);
	if (sock_path[0])
		unlink(sock_path);
	if (sock_path2[0])
		unlink(sock_path2);
	unlink(ctl_path);
	it_sh("rm -rf /var/run/dpdk/%s /var/run/dpdk/%sc /var/run/dpdk/%sd 2>/dev/null", prefix,
	      prefix, prefix);
}

static void on_signal(int sig)
{
	cleanup();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int setup_netns(void **state)
{
	(void)state;
	client.pid = client2.pid = tallyd.pid = -1;
	client.out = client2.out = tallyd.out = -1;
	if (geteuid() != 0)
		return 0; /* the test skips */
	snprintf(ns, sizeof(ns), "tallyd-it%d", (int)getpid());
	snprintf(veth_a, sizeof(veth_a), "tallyd%da", (int)getpid() % 1000000);
	snprintf(veth_b, sizeof(veth_b), "tallyd%db", (int)getpid() % 1000000);
	if (it_sh("ip netns add %s && ip link add %s type veth peer name %s && "
		  "ip link set %s netns %s && ip link set %s up && "
		  "ip -n %s addr add %s/24 dev %s && ip -n %s link set %s up && "
		  "ip -n %s link set lo up", ns, veth_a, veth_b, veth_b, ns, veth_a, ns, PEER_IP,
		  veth_b, ns, veth_b, ns)) {
		cleanup();
		fail_msg("cannot create namespace %s with veth %s/%s", ns, veth_a, veth_b);
	}
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	cleanup();
	ns[0] = veth_a[0] = sock_path[0] = sock_path2[0] = '\0';
	return 0;
}

/* A socket of the given type in namespace ns. */
static int ns_socket(int type, int proto)
{
	char path[64];
	int self = open("/proc/self/ns/net", O_RDONLY);

	snprintf(path, sizeof(path), "/var/run/netns/%s", ns);
	int nsfd = open(path, O_RDONLY);
	assert_true(self >= 0 && nsfd >= 0);
	assert_int_equal(setns(nsfd, CLONE_NEWNET), 0);
	int s = socket(AF_INET, type, proto);
	assert_int_equal(setns(self, CLONE_NEWNET), 0);
	close(nsfd);
	close(self);
	assert_true(s >= 0);
	struct timeval tv = { .tv_sec = 0, .tv_usec = 500000 };
	setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	return s;
}

static struct sockaddr_in sin_of(const char *ip, uint16_t port)
{
	struct sockaddr_in a;

	memset(&a, 0, sizeof(a));
	a.sin_family = AF_INET;
	a.sin_port = htons(port);
	inet_pton(AF_INET, ip, &a.sin_addr);
	return a;
}

static uint16_t csum(const uint8_t *p, size_t n)
{
	uint32_t s = 0;

	for (size_t i = 0; i + 1 < n; i += 2)
		s += (uint32_t)(p[i] << 8 | p[i + 1]);
	if (n & 1)
		s += (uint32_t)p[n - 1] << 8;
	while (s >> 16)
		s = (s & 0xffff) + (s >> 16);
	return (uint16_t)~s;
}

/* ping: ICMP echo from the namespace; 1 when a matching reply came back. */
static int ping_once(int s, uint16_t id, uint16_t seq)
{
	uint8_t req[64], rep[256];
	struct sockaddr_in to = sin_of(TALLYD_IP, 0);

	memset(req, 0, sizeof(req));
	req[0] = 8;
	req[4] = (uint8_t)(id >> 8);
	req[5] = (uint8_t)id;
	req[6] = (uint8_t)(seq >> 8);
	req[7] = (uint8_t)seq;
	for (int i = 8; i < 64; i++)
		req[i] = (uint8_t)(i * 7 + seq);
	uint16_t c = csum(req, sizeof(req));
	req[2] = (uint8_t)(c >> 8);
	req[3] = (uint8_t)c;
	if (sendto(s, req, sizeof(req), 0, (struct sockaddr *)&to, sizeof(to)) != sizeof(req))
		return 0;
	for (int tries = 0; tries < 4; tries++) {
		ssize_t n = recv(s, rep, sizeof(rep), 0); /* raw: IP header included */
		if (n < 20 + 64)
			continue;
		size_t ihl = (size_t)(rep[0] & 0xf) * 4;
		const uint8_t *ic = rep + ihl;
		if ((size_t)n - ihl == 64 && ic[0] == 0 && !memcmp(ic + 4, req + 4, 60) &&
		    csum(ic, 64) == 0)
			return 1;
	}
	return 0;
}

static ssize_t tally_request(int s, uint16_t port, uint8_t op, uint64_t token, const void *pl,
			     size_t len, uint8_t *reply, size_t rlen)
{
	uint8_t pkt[TALLY_HDR_LEN + 64];
	struct tally_hdr h;
	struct sockaddr_in to = sin_of(TALLYD_IP, port);

	memset(&h, 0, sizeof(h));
	h.op = op;
	h.job_id = 41;
	h.token = token;
	h.rank = 0;
	tally_proto_finish(pkt, &h, pl, len);
	memcpy(pkt + TALLY_HDR_LEN, pl, len);
	for (int tries = 0; tries < 5; tries++) {
		if (sendto(s, pkt, TALLY_HDR_LEN + len, 0, (struct sockaddr *)&to, sizeof(to)) < 0)
			return -errno;
		ssize_t n = recv(s, reply, rlen, 0);
		if (n > 0)
			return n;
	}
	return -ETIMEDOUT;
}

static void test_kernel_peer(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char dev[96], mac[64], neigh[256];
	snprintf(dev, sizeof(dev), "net_af_packet0,iface=%s", veth_a);
	snprintf(prefix, sizeof(prefix), "tallyd-it%d", (int)getpid());
	char eal[128];
	snprintf(eal, sizeof(eal), "--no-huge --file-prefix %s", prefix);
	char *argv[] = { (char *)tallyd_bin, "--port", dev, "--ip", TALLYD_IP "/24",
			 "--open-admission", "--mem", "8M", "--rx-desc", "256", "--tx-desc", "256",
			 "--ctl-socket", ctl_path, "--eal", eal, NULL };

	assert_int_equal(it_start(&tallyd, argv), 0);
	if (!it_wait_for(&tallyd, "tallyd: ready", 30000))
		fail_msg("tallyd did not start:\n%s", tallyd.log);

	/* ICMP echo */
	int icmp = ns_socket(SOCK_RAW, IPPROTO_ICMP);
	int ok = 0;
	for (uint16_t seq = 1; seq <= 10 && ok < 3; seq++)
		ok += ping_once(icmp, (uint16_t)getpid(), seq);
	close(icmp);
	if (ok < 3)
		fail_msg("%d of 3 pings answered\n%s", ok, tallyd.log);

	/* ARP: the namespace learned the address of tallyd's port (the veth's MAC) */
	assert_int_equal(it_sh_out(mac, sizeof(mac), "cat /sys/class/net/%s/address", veth_a), 0);
	mac[strcspn(mac, "\n")] = '\0';
	assert_int_equal(it_sh_out(neigh, sizeof(neigh), "ip -n %s neigh show %s", ns, TALLYD_IP),
			 0);
	if (!strstr(neigh, mac))
		fail_msg("neighbour entry '%s' lacks %s", neigh, mac);

	/* JOIN from a kernel UDP socket: JOIN_OK with the appliance's geometry */
	int udp = ns_socket(SOCK_DGRAM, 0);
	uint8_t jp[TALLY_JOIN_LEN], reply[2048];
	struct tally_join j = { .world_size = 1, .caps = 0, .max_chunk_bytes = 8192 };
	struct tally_pkt pkt;
	struct tally_join_ok jok;
	tally_proto_put_join(jp, &j);
	ssize_t n = tally_request(udp, 9170, TALLY_OP_JOIN, 0x1234, jp, sizeof(jp), reply,
				  sizeof(reply));
	assert_true(n > 0);
	assert_int_equal(tally_proto_decode(reply, (size_t)n, &pkt), TALLY_OK);
	assert_int_equal(pkt.hdr.op, TALLY_OP_JOIN_OK);
	assert_int_equal(tally_proto_get_join_ok(&pkt, &jok), TALLY_OK);
	assert_int_equal(jok.ncores, 1);
	assert_int_equal(jok.base_port, 9170);
	assert_int_equal(jok.world_size, 1);
	/* the job's token is now fixed: another token is refused with an ERROR */
	n = tally_request(udp, 9170, TALLY_OP_JOIN, 0x9999, jp, sizeof(jp), reply, sizeof(reply));
	assert_true(n > 0);
	assert_int_equal(tally_proto_decode(reply, (size_t)n, &pkt), TALLY_OK);
	assert_int_equal(pkt.hdr.op, TALLY_OP_ERROR);
	assert_int_equal(pkt.hdr.reason, TALLY_R_WRONG_TOKEN);

	/* dropped and counted: a port no core owns, and garbage for core 0 */
	struct sockaddr_in bad = sin_of(TALLYD_IP, 9175);
	sendto(udp, "nope", 4, 0, (struct sockaddr *)&bad, sizeof(bad));
	bad = sin_of(TALLYD_IP, 9170);
	sendto(udp, "this is no tally packet", 23, 0, (struct sockaddr *)&bad, sizeof(bad));
	usleep(200000);
	close(udp);

	/* SIGTERM: drain, totals, exit 0 */
	int rc = it_stop(&tallyd, SIGTERM, 20000);
	if (rc != 0)
		fail_msg("tallyd exit status %d\n%s", rc, tallyd.log);
	assert_non_null(strstr(tallyd.log, "drained"));
	assert_true(it_counter(&tallyd, "icmp") >= 3);
	assert_true(it_counter(&tallyd, "arp") >= 1);
	assert_int_equal(it_counter(&tallyd, "udp_port"), 1);
	assert_true(it_counter(&tallyd, "engine_rejects") >= 2); /* wrong token, garbage */
	assert_true(it_counter(&tallyd, "tally") >= 3); /* 2 JOINs, the garbage */
	assert_int_equal(it_counter(&tallyd, "wrong_token"), 1);
	assert_int_equal(it_counter(&tallyd, "truncated"), 1); /* 23 bytes: no header */
}

static int setup_memif(void **state)
{
	(void)state;
	client.pid = client2.pid = tallyd.pid = -1;
	client.out = client2.out = tallyd.out = -1;
	if (geteuid() != 0)
		return 0; /* the test skips: memif sockets and DPDK runtime directories */
	snprintf(sock_path, sizeof(sock_path), "/tmp/tallyd-it%d.sock", (int)getpid());
	snprintf(sock_path2, sizeof(sock_path2), "/tmp/tallyd-it%d-2.sock", (int)getpid());
	snprintf(prefix, sizeof(prefix), "tallyd-itm%d", (int)getpid());
	return 0;
}

/* tallyd with `cores` cores on one memif port (no RSS, no rte_flow: every frame lands on
 * queue 0 and frames for core 1 go through the software dispatch ring). */
static void run_memif(int cores)
{
	if (geteuid() != 0)
		skip();
	char dev[128], eal[128], cprefix[48], q[8];
	snprintf(dev, sizeof(dev), "net_memif0,role=server,socket=%s", sock_path);
	snprintf(eal, sizeof(eal), "--no-huge --file-prefix %s", prefix);
	snprintf(cprefix, sizeof(cprefix), "%sc", prefix);
	snprintf(q, sizeof(q), "%d", cores);
	char *argv[] = { (char *)tallyd_bin, "--port", dev, "--ip", TALLYD_IP "/24", "--queues", q,
			 "--open-admission", "--mem", "16M", "--rx-desc", "512", "--tx-desc", "512",
			 "--ctl-socket", ctl_path, "--eal", eal, NULL };

	assert_int_equal(it_start(&tallyd, argv), 0);
	if (!it_wait_for(&tallyd, "tallyd: ready", 30000))
		fail_msg("tallyd did not start:\n%s", tallyd.log);
	char *cargv[] = { (char *)client_bin, sock_path, cprefix, TALLYD_IP, PEER_IP, q, NULL };
	assert_int_equal(it_start(&client, cargv), 0);
	if (!it_wait_for(&client, "it_client: OK", 60000))
		fail_msg("it_client failed\n--- client:\n%s\n--- tallyd:\n%s", client.log,
			 tallyd.log);
	/* the finished client idles (no polling): stop tallyd first, then the client */
	int rc = it_stop(&tallyd, SIGTERM, 20000);
	if (rc != 0)
		fail_msg("tallyd exit status %d\n%s", rc, tallyd.log);
	rc = it_stop(&client, SIGTERM, 20000);
	if (rc != 0)
		fail_msg("it_client exit status %d\n%s", rc, client.log);
	assert_true(it_counter(&tallyd, "arp") >= 1);
	assert_true(it_counter(&tallyd, "tally") >= 10);
	assert_int_equal(it_counter(&tallyd, "engine_rejects"), 0);
	/* 6 rounds of 3 chunks, each complete with its first push (one worker); retransmits
	 * count as late pushes, never as sums */
	assert_int_equal(it_counter(&tallyd, "pushes"), 18);
	assert_int_equal(it_counter(&tallyd, "completions"), 18);
	assert_true(it_counter(&tallyd, "results") >= 18);
	if (cores > 1) {
		assert_non_null(strstr(tallyd.log, "dispatched in software"));
		assert_true(it_counter(&tallyd, "dispatched") >= 1);
	} else {
		assert_int_equal(it_counter(&tallyd, "dispatched"), 0);
	}
}

static void test_memif_dpdk_client(void **state)
{
	(void)state;
	run_memif(1);
}

static void test_memif_two_cores_sw_dispatch(void **state)
{
	(void)state;
	run_memif(2);
}

/* Two memif ports, one core each, a worker (its own job) on each: every key is owned by
 * core 1, so the worker on port 0 is served by core 1 — its frames are dispatched from
 * core 0, and core 1's answers leave through core 0's TX queue (relayed). */
static void test_memif_two_ports_relay(void **state)
{
	(void)state;
	if (geteuid() != 0)
		skip();
	char dev[128], dev2[128], eal[128], cprefix[48], cprefix2[48];
	snprintf(dev, sizeof(dev), "net_memif0,role=server,socket=%s", sock_path);
	snprintf(dev2, sizeof(dev2), "net_memif1,role=server,socket=%s", sock_path2);
	snprintf(eal, sizeof(eal), "--no-huge --file-prefix %s", prefix);
	snprintf(cprefix, sizeof(cprefix), "%sc", prefix);
	snprintf(cprefix2, sizeof(cprefix2), "%sd", prefix);
	char *argv[] = { (char *)tallyd_bin, "--port", dev, "--ip", TALLYD_IP "/24",
			 "--port", dev2, "--ip", "10.78.0.1/24", "--open-admission", "--mem", "16M",
			 "--rx-desc", "512", "--tx-desc", "512", "--ctl-socket", ctl_path, "--eal", eal, NULL };

	assert_int_equal(it_start(&tallyd, argv), 0);
	if (!it_wait_for(&tallyd, "tallyd: ready", 30000))
		fail_msg("tallyd did not start:\n%s", tallyd.log);
	char *c1[] = { (char *)client_bin, sock_path, cprefix, TALLYD_IP, PEER_IP, "1", NULL };
	char *c2[] = { (char *)client_bin, sock_path2, cprefix2, "10.78.0.1", "10.78.0.2", "1",
		       NULL };
	assert_int_equal(it_start(&client, c1), 0);
	assert_int_equal(it_start(&client2, c2), 0);
	int ok1 = it_wait_for(&client, "it_client: OK", 60000);
	int ok2 = it_wait_for(&client2, "it_client: OK", 60000);
	if (!ok1 || !ok2)
		fail_msg("it_client failed\n--- client 1:\n%s\n--- client 2:\n%s\n"
			 "--- tallyd:\n%s", client.log, client2.log, tallyd.log);
	int rc = it_stop(&tallyd, SIGTERM, 20000);
	if (rc != 0)
		fail_msg("tallyd exit status %d\n%s", rc, tallyd.log);
	assert_int_equal(it_stop(&client, SIGTERM, 20000), 0);
	assert_int_equal(it_stop(&client2, SIGTERM, 20000), 0);
	assert_int_equal(it_counter(&tallyd, "pushes"), 36);
	assert_int_equal(it_counter(&tallyd, "completions"), 36);
	assert_true(it_counter(&tallyd, "dispatched") >= 18);
	assert_true(it_counter(&tallyd, "relayed") >= 18);
	assert_int_equal(it_counter(&tallyd, "engine_rejects"), 0);
}

int main(void)
{
	tallyd_bin = getenv("TALLYD_BIN");
	client_bin = getenv("TALLYD_IT_CLIENT");
	if (!tallyd_bin || !client_bin) {
		fprintf(stderr, "TALLYD_BIN and TALLYD_IT_CLIENT must name the programs\n");
		return 1;
	}
	if (getenv("TALLYD_IT_FILTER")) /* run some tests only, e.g. "*memif*" */
		cmocka_set_test_filter(getenv("TALLYD_IT_FILTER"));
	snprintf(ctl_path, sizeof(ctl_path), "/tmp/tallyd-it%d.ctl", (int)getpid());
	signal(SIGTERM, on_signal);
	signal(SIGINT, on_signal);
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_kernel_peer, setup_netns, teardown),
		cmocka_unit_test_setup_teardown(test_memif_dpdk_client, setup_memif, teardown),
		cmocka_unit_test_setup_teardown(test_memif_two_cores_sw_dispatch, setup_memif,
						teardown),
		cmocka_unit_test_setup_teardown(test_memif_two_ports_relay, setup_memif, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
