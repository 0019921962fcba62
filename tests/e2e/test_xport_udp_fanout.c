/* SPDX-License-Identifier: Apache-2.0
 * test_xport_udp_fanout.c — a listening UDP transport (tally-udpd's) sending RESULT-like
 * packets to several clients, queued interleaved (chunk by chunk, client by client, as an
 * engine answers): with GSO each client's packets leave as super-datagrams (counted), every
 * client gets all of its own in the order queued, a shorter packet inside a run included;
 * without GSO nothing is joined. Clients receive with GRO, so the split is checked too.
 * sendmmsg is wrapped (-Wl,--wrap=sendmmsg) to make the kernel take part of a grouped flush
 * and then refuse (EAGAIN): what did not go stays queued and leaves in order next time.
 * RESULT-like packets sent with send_buf (the payload referenced in the sender's buffer, one
 * buffer shared by every client's copy, as the engine's fan-out does) arrive byte for byte
 * in order among copied ones, and buf_busy holds while a copy is queued, partial flush too.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <sys/socket.h>

#include <cmocka.h>

#include "tally_proto.h"
#include "tally_udp.h"

/* partial >= 0: the next sendmmsg sends at most `partial` messages, every later one fails
 * with EAGAIN until partial is set back to -1 */
static int partial = -1;
int __real_sendmmsg(int fd, struct mmsghdr *m, unsigned int n, int flags);
int __wrap_sendmmsg(int fd, struct mmsghdr *m, unsigned int n, int flags);

int __wrap_sendmmsg(int fd, struct mmsghdr *m, unsigned int n, int flags)
{
	if (partial < 0)
		return __real_sendmmsg(fd, m, n, flags);
	if (partial == 0) {
		errno = EAGAIN;
		return -1;
	}
	unsigned int k = n < (unsigned int)partial ? n : (unsigned int)partial;

	partial = 0;
	return __real_sendmmsg(fd, m, k, flags);
}

#define NCLI 3
#define NSEQ 150     /* packets per client: more than one batch of 64 in all */
#define PLEN 1200u   /* payload of most packets */
#define SHORT_SEQ 70 /* this one is shorter: a GSO run must end with it */

struct srv_log {
	struct tally_addr from[NCLI];
	int known[NCLI];
};

struct cli_log {
	uint32_t next; /* the next sequence number expected */
	int bad;
};

static size_t plen(uint32_t seq)
{
	return seq == SHORT_SEQ ? 100 : PLEN;
}

static void srv_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct srv_log *l = arg;
	uint8_t c = ((const uint8_t *)buf)[0];

	if (len >= 1 && c < NCLI) {
		l->from[c] = *from;
		l->known[c] = 1;
	}
}

static void cli_rx(void *arg, const void *buf, size_t len, const struct tally_addr *from)
{
	struct cli_log *l = arg;
	const uint8_t *p = buf;
	uint32_t seq;

	(void)from;
	if (len < TALLY_HDR_LEN) {
		l->bad++;
		return;
	}
	memcpy(&seq, p + 4, 4);
	if (seq != l->next || len != TALLY_HDR_LEN + plen(seq)) {
		l->bad++;
		return;
	}
	/* p[1]: a payload shared by every client (sent by reference), not the client's own */
	for (size_t i = TALLY_HDR_LEN; i < len; i++)
		if (p[i] != (uint8_t)((p[1] ? 0 : p[0]) + seq + i)) {
			l->bad++;
			return;
		}
	l->next++;
}

/* A listening server (gso as given) on port and NCLI clients, each of which has said hello
 * so the server knows its address (asserted). */
static struct tally_udp *open_cluster(int gso, uint16_t port, struct srv_log *sl,
				      struct tally_udp **cli, struct cli_log *cl)
{
	const struct tally_xport_ops *ops = tally_udp_ops();
	struct tally_udp_cfg scfg = { .host = "127.0.0.1", .listen = 1, .ncores = 1, .gso = gso,
				      .gro = 1, .base_port = port };
	uint8_t hello[TALLY_HDR_LEN] = { 0 };
	struct tally_udp *srv;
	char err[256];
	int rc = 0;

	srv = tally_udp_create(&scfg, srv_rx, sl, &rc, err, sizeof(err));
	assert_non_null(srv);
	for (unsigned c = 0; c < NCLI; c++) {
		struct tally_udp_cfg ccfg = { .host = "127.0.0.1", .gro = 1, .base_port = port };
		struct tally_addr to = { .core = 0 };

		cli[c] = tally_udp_create(&ccfg, cli_rx, &cl[c], &rc, err, sizeof(err));
		assert_non_null(cli[c]);
		hello[0] = (uint8_t)c; /* the server learns the client's address */
		assert_int_equal(ops->send(cli[c], &to, hello, NULL, 0), 0);
		ops->poll(cli[c], 0);
	}
	for (int i = 0; i < 100 && !(sl->known[0] && sl->known[1] && sl->known[2]); i++)
		ops->poll(srv, 1000000);
	for (unsigned c = 0; c < NCLI; c++)
		assert_true(sl->known[c]);
	return srv;
}

/* Queue rounds [from, to) of every client, interleaved. */
static void queue_seq(struct tally_udp *srv, const struct srv_log *sl, uint32_t from, uint32_t to)
{
	static uint8_t pkt[TALLY_HDR_LEN + PLEN];

	for (uint32_t seq = from; seq < to; seq++)
		for (unsigned c = 0; c < NCLI; c++) {
			memset(pkt, 0, TALLY_HDR_LEN);
			pkt[0] = (uint8_t)c;
			memcpy(pkt + 4, &seq, 4);
			for (size_t i = TALLY_HDR_LEN; i < TALLY_HDR_LEN + plen(seq); i++)
				pkt[i] = (uint8_t)(c + seq + i);
			assert_int_equal(tally_udp_ops()->send(srv, &sl->from[c], pkt,
							       pkt + TALLY_HDR_LEN, plen(seq)), 0);
		}
}

/* Poll every client until each has taken `want` datagrams, 5 s at most (the asserts after
 * it say what is missing). */
static void poll_until(struct tally_udp *srv, struct tally_udp **cli, const struct cli_log *cl,
		       uint32_t want)
{
	const struct tally_xport_ops *ops = tally_udp_ops();
	uint64_t t0 = ops->now_ns(srv);
	unsigned done = 0;

	while (done < NCLI && ops->now_ns(srv) - t0 < 5000000000ull) {
		done = 0;
		for (unsigned c = 0; c < NCLI; c++) {
			ops->poll(cli[c], 100000);
			done += cl[c].next == want;
		}
	}
}

static void run_fanout(int gso)
{
	struct tally_udp *srv, *cli[NCLI];
	struct srv_log sl = { 0 };
	struct cli_log cl[NCLI] = { 0 };

	srv = open_cluster(gso, (uint16_t)(21000 + getpid() % 20000 + gso * 2), &sl, cli, cl);
	/* interleaved, as an engine answers a chunk to every rank before the next chunk */
	queue_seq(srv, &sl, 0, NSEQ);
	assert_int_equal(tally_udp_flush(srv), 0);
	poll_until(srv, cli, cl, NSEQ);
	const struct tally_udp_stats *ss = tally_udp_stats(srv);
	uint64_t gro = 0;

	for (unsigned c = 0; c < NCLI; c++) {
		assert_int_equal(cl[c].bad, 0);
		assert_int_equal(cl[c].next, NSEQ); /* all, in the order queued */
		gro += tally_udp_stats(cli[c])->rx_gro_batches;
	}
	assert_int_equal(ss->tx_pkts, NCLI * NSEQ);
	if (gso) { /* interleaved destinations were still joined, several packets a send */
		assert_true(ss->tx_gso_sends > 0);
		assert_true(gro > 0);
		assert_true(ss->tx_pkts > 4 * (ss->tx_gso_sends + 2 * NCLI));
	} else {
		assert_int_equal(ss->tx_gso_sends, 0);
	}
	printf("gso %d: %llu packets, %llu sendmmsg calls, %llu GSO sends, %llu GRO batches at "
	       "the clients\n", gso, (unsigned long long)ss->tx_pkts,
	       (unsigned long long)ss->tx_calls, (unsigned long long)ss->tx_gso_sends,
	       (unsigned long long)gro);
	for (unsigned c = 0; c < NCLI; c++)
		tally_udp_destroy(cli[c]);
	tally_udp_destroy(srv);
}

/* A grouped flush the kernel takes only in part (one message: client 0's run), then EAGAIN:
 * the rest (clients 1 and 2, gathered back to the queue's front) goes with the next flush,
 * before what was queued after it, every packet once, each client's in order. */
static void test_fanout_partial(void **state)
{
	struct tally_udp *srv, *cli[NCLI];
	struct srv_log sl = { 0 };
	struct cli_log cl[NCLI] = { 0 };

	(void)state;
	srv = open_cluster(1, (uint16_t)(21000 + getpid() % 20000 + 5), &sl, cli, cl);
	queue_seq(srv, &sl, 0, 10); /* 30 packets: under one batch, nothing flushed yet */
	partial = 1;
	assert_int_equal(tally_udp_flush(srv), 0);
	assert_int_equal(tally_udp_stats(srv)->tx_pkts, 10); /* client 0's run only */
	partial = -1;
	queue_seq(srv, &sl, 10, 20);
	assert_int_equal(tally_udp_flush(srv), 0);
	assert_int_equal(tally_udp_stats(srv)->tx_pkts, NCLI * 20);
	poll_until(srv, cli, cl, 20);
	for (unsigned c = 0; c < NCLI; c++) {
		assert_int_equal(cl[c].bad, 0);
		assert_int_equal(cl[c].next, 20);
		tally_udp_destroy(cli[c]);
	}
	tally_udp_destroy(srv);
}

/* Rounds [from, to) of every client, interleaved; even rounds as send_buf: one payload
 * (pl[seq]) shared by the clients, referenced, its state in xb[seq]. */
static void queue_seq_ref(struct tally_udp *srv, const struct srv_log *sl, uint32_t from,
			  uint32_t to, uint8_t (*pl)[PLEN], uint64_t (*xb)[4])
{
	const struct tally_xport_ops *ops = tally_udp_ops();
	static uint8_t pkt[TALLY_HDR_LEN + PLEN];

	for (uint32_t seq = from; seq < to; seq++) {
		for (size_t i = 0; i < plen(seq); i++)
			pl[seq][i] = (uint8_t)(seq + TALLY_HDR_LEN + i);
		for (unsigned c = 0; c < NCLI; c++) {
			memset(pkt, 0, TALLY_HDR_LEN);
			pkt[0] = (uint8_t)c;
			memcpy(pkt + 4, &seq, 4);
			if (seq % 2) {
				for (size_t i = TALLY_HDR_LEN; i < TALLY_HDR_LEN + plen(seq); i++)
					pkt[i] = (uint8_t)(c + seq + i);
				assert_int_equal(ops->send(srv, &sl->from[c], pkt,
							   pkt + TALLY_HDR_LEN, plen(seq)), 0);
				continue;
			}
			pkt[1] = 1;
			assert_int_equal(ops->send_buf(srv, &sl->from[c], pkt, pl[seq], plen(seq),
						       xb[seq]), 0);
		}
		if (seq % 2 == 0) /* queued (or sent, when a batch filled): busy until it left */
			assert_true(ops->buf_busy(srv, xb[seq]) || tally_udp_stats(srv)->tx_pkts);
	}
}

/* RESULT fan-out by reference: a partial flush keeps the unsent copies' buffers busy (and
 * the sent one's, until every copy left), the next flush sends them, all in order; a
 * batch filled while queuing flushes references too; destroy drops queued references
 * without touching their buffers. */
static void test_fanout_ref(void **state)
{
	static uint8_t pl[NSEQ][PLEN];
	static uint64_t xb[NSEQ][4];
	const struct tally_xport_ops *ops = tally_udp_ops();
	struct tally_udp *srv, *cli[NCLI];
	struct srv_log sl = { 0 };
	struct cli_log cl[NCLI] = { 0 };

	(void)state;
	assert_true(ops->buf_size > 0 && ops->buf_size <= sizeof(xb[0]));
	memset(xb, 0, sizeof(xb));
	srv = open_cluster(1, (uint16_t)(21000 + getpid() % 20000 + 7), &sl, cli, cl);
	queue_seq_ref(srv, &sl, 0, 10, pl, xb); /* 30 packets: under one batch */
	for (uint32_t seq = 0; seq < 10; seq += 2)
		assert_true(ops->buf_busy(srv, xb[seq]));
	partial = 1; /* client 0's run goes, then EAGAIN */
	assert_int_equal(tally_udp_flush(srv), 0);
	partial = -1;
	assert_int_equal(tally_udp_stats(srv)->tx_pkts, 10);
	for (uint32_t seq = 0; seq < 10; seq += 2) /* clients 1 and 2's copies still queued */
		assert_true(ops->buf_busy(srv, xb[seq]));
	queue_seq_ref(srv, &sl, 10, NSEQ, pl, xb); /* past a batch: flushes while queuing */
	assert_int_equal(tally_udp_flush(srv), 0);
	assert_int_equal(tally_udp_stats(srv)->tx_pkts, NCLI * NSEQ);
	assert_int_equal(tally_udp_stats(srv)->tx_errors, 0);
	for (uint32_t seq = 0; seq < NSEQ; seq += 2)
		assert_false(ops->buf_busy(srv, xb[seq]));
	assert_true(tally_udp_stats(srv)->tx_gso_sends > 0);
	/* the payloads may change now: every copy is in the kernel's hands */
	memset(pl, 0xee, sizeof(pl));
	poll_until(srv, cli, cl, NSEQ);
	for (unsigned c = 0; c < NCLI; c++) {
		assert_int_equal(cl[c].bad, 0);
		assert_int_equal(cl[c].next, NSEQ);
	}
	/* queued references at destroy: dropped, counted, their state left alone (the engine
	 * that owned it may be gone) */
	queue_seq_ref(srv, &sl, 0, 2, pl, xb);
	assert_true(ops->buf_busy(srv, xb[0]));
	uint64_t errs = tally_udp_stats(srv)->tx_errors;
	for (unsigned c = 0; c < NCLI; c++)
		tally_udp_destroy(cli[c]);
	assert_int_equal(errs, 0);
	tally_udp_destroy(srv);
	uint32_t q;

	memcpy(&q, xb[0], sizeof(q)); /* the transport's count of queued copies */
	assert_int_equal(q, NCLI);
}

static void test_fanout_gso(void **state)
{
	(void)state;
	run_fanout(1);
}

static void test_fanout_plain(void **state)
{
	(void)state;
	run_fanout(0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fanout_gso),
		cmocka_unit_test(test_fanout_plain),
		cmocka_unit_test(test_fanout_partial),
		cmocka_unit_test(test_fanout_ref),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
