/* SPDX-License-Identifier: Apache-2.0
 * udp_io.c — the kernel UDP transport's packet path: per-socket send queues flushed with
 * sendmmsg (one UDP GSO super-datagram per run of same-destination packets when the kernel
 * takes it), recvmmsg batches with GRO split back into packets, and the poll loop.
 */
#include "udp_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/udp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <sched.h>
#include <unistd.h>

#include "tally_proto.h"

uint64_t udp_now_ns(void *ctx)
{
	struct timespec ts;

	(void)ctx;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t udp_dst_key(const struct sockaddr_in *a)
{
	return (uint64_t)a->sin_addr.s_addr << 16 | a->sin_port;
}

/* Listen mode with GSO: the send order puts each destination's packets together (each
 * destination's own order kept), so a RESULT fan-out to W workers, queued chunk by chunk
 * and rank by rank, leaves as a few super-datagrams per worker instead of one datagram
 * per packet (a run to one destination is what GSO can join). Order across destinations
 * means nothing on the wire. Returns 1 when ord[] is not the queue's own order. */
static int udp_group_dst(const struct udp_sock *s, uint32_t *ord)
{
	uint8_t used[1024];
	uint32_t n = 0;
	int moved = 0;

	memset(used, 0, s->nq);
	for (uint32_t i = 0; i < s->nq; i++) {
		if (used[i])
			continue;
		uint64_t key = udp_dst_key(&s->dst[i]);

		for (uint32_t j = i; j < s->nq; j++)
			if (!used[j] && udp_dst_key(&s->dst[j]) == key) {
				used[j] = 1;
				moved |= n != j;
				ord[n++] = j;
			}
	}
	return moved;
}

/* Bytes of slot j in use: the header alone when its payload is referenced. */
static uint32_t udp_slot_bytes(const struct udp_sock *s, uint32_t j)
{
	return s->ref && s->ref[j].pl ? s->ref[j].hl : s->lens[j];
}

/* The packets ord[sent..nq) that did not go stay queued, in that order, at the front. */
static void udp_keep_unsent(struct tally_udp *u, struct udp_sock *s, const uint32_t *ord,
			    uint32_t sent, int moved)
{
	uint32_t left = s->nq - sent;

	if (!moved) {
		for (uint32_t k = 0; k < left; k++)
			memmove(s->slots + (size_t)k * UDP_SLOT,
				s->slots + (size_t)(sent + k) * UDP_SLOT, udp_slot_bytes(s, sent + k));
		memmove(s->lens, s->lens + sent, left * sizeof(*s->lens));
		if (s->dst)
			memmove(s->dst, s->dst + sent, left * sizeof(*s->dst));
		if (s->ref)
			memmove(s->ref, s->ref + sent, left * sizeof(*s->ref));
		return;
	}
	/* grouped: gather through the scratch queue (sources lie anywhere in the queue) */
	for (uint32_t k = 0; k < left; k++) {
		uint32_t j = ord[sent + k];

		memcpy(u->sscratch + (size_t)k * UDP_SLOT, s->slots + (size_t)j * UDP_SLOT,
		       udp_slot_bytes(s, j));
		u->slens[k] = s->lens[j];
		u->sdst[k] = s->dst[j];
		u->sref[k] = s->ref[j];
	}
	for (uint32_t k = 0; k < left; k++) {
		s->lens[k] = u->slens[k];
		s->dst[k] = u->sdst[k];
		s->ref[k] = u->sref[k];
		memcpy(s->slots + (size_t)k * UDP_SLOT, u->sscratch + (size_t)k * UDP_SLOT,
		       udp_slot_bytes(s, k));
	}
}

/* Packet j left (or was dropped): its RESULT buffer is one reference freer. */
static void udp_unref(struct udp_sock *s, uint32_t j)
{
	if (s->ref && s->ref[j].pl) {
		s->ref[j].xb->queued--;
		s->ref[j].pl = NULL;
	}
}

void udp_drop_refs(struct tally_udp *u, struct udp_sock *s)
{
	uint32_t w = 0;

	if (!s->ref)
		return;
	for (uint32_t j = 0; j < s->nq; j++) {
		if (s->ref[j].pl) {
			u->st.tx_errors++;
			continue;
		}
		if (w != j) {
			memmove(s->slots + (size_t)w * UDP_SLOT, s->slots + (size_t)j * UDP_SLOT,
				s->lens[j]);
			s->lens[w] = s->lens[j];
			s->dst[w] = s->dst[j];
			s->ref[w] = s->ref[j];
		}
		w++;
	}
	s->nq = w;
}

/* The iovecs of packet j (the slot, and a referenced payload after it): how many. */
static uint32_t udp_pkt_iov(const struct udp_sock *s, uint32_t j, struct iovec *iov)
{
	uint8_t *slot = s->slots + (size_t)j * UDP_SLOT;

	if (s->ref && s->ref[j].pl) {
		iov[0].iov_base = slot;
		iov[0].iov_len = s->ref[j].hl;
		iov[1].iov_base = (void *)s->ref[j].pl;
		iov[1].iov_len = s->lens[j] - s->ref[j].hl;
		return 2;
	}
	iov[0].iov_base = slot;
	iov[0].iov_len = s->lens[j];
	return 1;
}

/* sendmmsg one socket's queue; GSO groups runs of equal-length packets to one destination
 * (the last of a run may be shorter). Unsent packets stay queued on EAGAIN. */
int udp_flush_sock(struct tally_udp *u, struct udp_sock *s)
{
	uint32_t i = 0, nm = 0, nv = 0, first[1024], cnt[1024], ord[1024];
	int rc = 0, moved = 0;

	if (!s->nq)
		return 0;
	if (u->cfg.gso && s->dst && u->sscratch)
		moved = udp_group_dst(s, ord);
	if (!moved)
		for (uint32_t k = 0; k < s->nq; k++)
			ord[k] = k;
	while (i < s->nq) {
		struct msghdr *mh = &u->smsg[nm].msg_hdr;
		uint32_t len = s->lens[ord[i]], n = 1, total = len;

		if (u->cfg.gso)
			while (i + n < s->nq && n < UDP_GSO_MAX_SEGS &&
			       total + s->lens[ord[i + n]] <= UDP_GSO_MAX_BYTES &&
			       s->lens[ord[i + n]] <= len && s->lens[ord[i + n - 1]] == len &&
			       (!s->dst || udp_dst_key(&s->dst[ord[i + n]]) ==
					   udp_dst_key(&s->dst[ord[i]]))) {
				total += s->lens[ord[i + n]];
				n++;
			}
		memset(mh, 0, sizeof(*mh));
		mh->msg_iov = &u->siov[nv];
		for (uint32_t k = 0; k < n; k++)
			nv += udp_pkt_iov(s, ord[i + k], &u->siov[nv]);
		mh->msg_iovlen = (size_t)(&u->siov[nv] - mh->msg_iov);
		if (s->dst) {
			mh->msg_name = &s->dst[ord[i]];
			mh->msg_namelen = sizeof(s->dst[ord[i]]);
		}
		if (n > 1) {
			struct cmsghdr *cm;

			mh->msg_control = u->sctl + (size_t)nm * UDP_CTL_LEN;
			mh->msg_controllen = UDP_CTL_LEN;
			cm = CMSG_FIRSTHDR(mh);
			cm->cmsg_level = SOL_UDP;
			cm->cmsg_type = UDP_SEGMENT;
			cm->cmsg_len = CMSG_LEN(sizeof(uint16_t));
			*(uint16_t *)(void *)CMSG_DATA(cm) = (uint16_t)len;
			mh->msg_controllen = CMSG_SPACE(sizeof(uint16_t));
		}
		first[nm] = i;
		cnt[nm++] = n;
		i += n;
	}
	uint32_t done = 0, sent_pkts = 0;
	int gso_refused = 0;

	while (done < nm) {
		int r = sendmmsg(s->fd, &u->smsg[done], nm - done, MSG_DONTWAIT);

		u->st.tx_calls++;
		if (r > 0) {
			for (int k = 0; k < r; k++) {
				uint32_t m = done + (uint32_t)k;

				sent_pkts += cnt[m];
				u->st.tx_pkts += cnt[m];
				for (uint32_t q = 0; q < cnt[m]; q++) {
					u->st.tx_bytes += s->lens[ord[first[m] + q]];
					udp_unref(s, ord[first[m] + q]);
				}
				if (cnt[m] > 1)
					u->st.tx_gso_sends++;
			}
			done += (uint32_t)r;
			continue;
		}
		if (errno == EAGAIN || errno == ENOBUFS)
			break; /* keep the rest queued for the next flush */
		if (errno == EINTR)
			continue;
		if (cnt[done] > 1 && (errno == EIO || errno == EINVAL || errno == ENOPROTOOPT ||
				      errno == EOPNOTSUPP)) {
			/* The path refuses GSO: switch it off for good and resend unsegmented. */
			u->cfg.gso = 0;
			u->gso_refused = 1;
			udp_err(u, "udp: GSO refused (%s), sending datagrams one by one",
				strerror(errno));
			gso_refused = 1;
			break;
		}
		/* ECONNREFUSED (nobody listens yet), EMSGSIZE...: drop this message, go on. */
		if (errno == ECONNREFUSED)
			s->refused = 1;
		if (!rc)
			rc = -errno;
		u->st.tx_errors += cnt[done];
		sent_pkts += cnt[done];
		for (uint32_t q = 0; q < cnt[done]; q++)
			udp_unref(s, ord[first[done] + q]);
		done++;
	}
	u->active |= sent_pkts != 0;
	if (sent_pkts < s->nq)
		udp_keep_unsent(u, s, ord, sent_pkts, moved);
	s->nq -= sent_pkts;
	if (gso_refused)
		return udp_flush_sock(u, s);
	return rc;
}

int tally_udp_flush(struct tally_udp *u)
{
	int rc = 0;

	for (uint16_t i = 0; i < u->npfd; i++) {
		int r = udp_flush_sock(u, &u->socks[u->pfd_core[i]]);

		if (r && !rc)
			rc = r;
	}
	return rc;
}

/* Queue one packet on core to->core's socket: the header, then the payload copied into
 * the slot, or (xb) referenced where it lies. */
static int udp_enqueue(struct tally_udp *u, const struct tally_addr *to, const uint8_t *hdr,
		       const void *payload, size_t len, struct udp_xbuf *xb)
{
	struct udp_sock *s;
	uint8_t *slot;
	int rc;

	if (len > TALLY_MAX_PAYLOAD || to->core >= u->cfg.ncores) {
		u->st.tx_errors++;
		return -EINVAL;
	}
	s = &u->socks[to->core];
	if (!s->slots) {
		if (u->cfg.listen) {
			u->st.tx_errors++;
			return -EINVAL;
		}
		rc = udp_open(u, (uint16_t)to->core);
		if (rc) {
			u->st.tx_errors++;
			return rc;
		}
	}
	if (s->nq == u->cfg.batch) {
		udp_flush_sock(u, s);
		if (s->nq == u->cfg.batch) {
			u->st.tx_errors++;
			return -ENOBUFS;
		}
	}
	slot = s->slots + (size_t)s->nq * UDP_SLOT;
	size_t hl = tally_proto_hdr_len(hdr); /* with its auth block, if signed */
	memcpy(slot, hdr, hl);
	if (xb && len && s->ref) {
		s->ref[s->nq] = (struct udp_ref){ .pl = payload, .xb = xb, .hl = (uint32_t)hl };
		xb->queued++;
	} else {
		if (len)
			memcpy(slot + hl, payload, len);
		if (s->ref)
			s->ref[s->nq].pl = NULL;
	}
	s->lens[s->nq] = (uint32_t)(hl + len);
	if (s->dst) {
		memset(&s->dst[s->nq], 0, sizeof(s->dst[s->nq]));
		s->dst[s->nq].sin_family = AF_INET;
		s->dst[s->nq].sin_addr.s_addr = to->ip;
		s->dst[s->nq].sin_port = to->port;
	}
	s->nq++;
	if (s->nq == u->cfg.batch)
		udp_flush_sock(u, s);
	return 0;
}

int udp_send(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		    const void *payload, size_t len)
{
	return udp_enqueue(ctx, to, hdr, payload, len, NULL);
}

int udp_send_buf(void *ctx, const struct tally_addr *to, const uint8_t *hdr,
		 const void *payload, size_t len, void *buf)
{
	return udp_enqueue(ctx, to, hdr, payload, len, buf);
}

int udp_buf_busy(void *ctx, const void *buf)
{
	(void)ctx;
	return ((const struct udp_xbuf *)buf)->queued != 0;
}

/* Drain one socket (a few batches); returns datagrams delivered. */
static int udp_rx_sock(struct tally_udp *u, uint16_t core)
{
	struct udp_sock *s = &u->socks[core];
	uint32_t batch = u->cfg.batch;
	size_t blen = u->rbuf_len;
	int delivered = 0;

	for (int round = 0; round < UDP_RX_ROUNDS; round++) {
		struct sockaddr_in from[64];
		uint32_t nb = batch < 64 ? batch : 64;
		int r;

		for (uint32_t i = 0; i < nb; i++) {
			struct msghdr *mh = &u->rmsg[i].msg_hdr;

			u->riov[i].iov_base = u->rbuf + (size_t)i * blen;
			u->riov[i].iov_len = blen;
			memset(mh, 0, sizeof(*mh));
			mh->msg_iov = &u->riov[i];
			mh->msg_iovlen = 1;
			mh->msg_name = &from[i];
			mh->msg_namelen = sizeof(from[i]);
			mh->msg_control = u->rctl + (size_t)i * UDP_CTL_LEN;
			mh->msg_controllen = UDP_CTL_LEN;
		}
		r = recvmmsg(s->fd, u->rmsg, nb, MSG_DONTWAIT, NULL);
		u->st.rx_calls++;
		if (r <= 0) {
			if (r < 0 && errno == ECONNREFUSED) /* an ICMP port unreachable */
				s->refused = 1;
			else if (r < 0 && errno != EAGAIN && errno != EINTR)
				udp_err(u, "udp: recvmmsg on core %u's socket: %s", core,
					strerror(errno));
			break;
		}
		for (int i = 0; i < r; i++) {
			struct msghdr *mh = &u->rmsg[i].msg_hdr;
			size_t len = u->rmsg[i].msg_len, seg = len;
			const uint8_t *p = u->riov[i].iov_base;
			struct tally_addr a = { .core = core };
			struct cmsghdr *cm;

			if (mh->msg_flags & MSG_TRUNC) {
				u->st.rx_truncated++;
				continue;
			}
			for (cm = CMSG_FIRSTHDR(mh); cm; cm = CMSG_NXTHDR(mh, cm))
				if (cm->cmsg_level == SOL_UDP && cm->cmsg_type == UDP_GRO) {
					int gs;

					memcpy(&gs, CMSG_DATA(cm), sizeof(gs));
					if (gs > 0 && (size_t)gs < len) {
						seg = (size_t)gs;
						u->st.rx_gro_batches++;
					}
				}
			a.ip = from[i].sin_addr.s_addr;
			a.port = from[i].sin_port;
			for (size_t off = 0; off < len; off += seg) {
				size_t l = len - off < seg ? len - off : seg;

				u->st.rx_pkts++;
				u->st.rx_bytes += l;
				if (u->rx)
					u->rx(u->rx_arg, p + off, l, &a);
				delivered++;
			}
		}
		if ((uint32_t)r < nb)
			break;
	}
	u->active |= delivered != 0;
	return delivered;
}

static int udp_rx_all(struct tally_udp *u)
{
	int n = 0;

	for (uint16_t i = 0; i < u->npfd; i++)
		n += udp_rx_sock(u, u->pfd_core[i]);
	return n;
}

/* Busy poll: a RESULT usually lands within tens of microseconds of the last push; taking it
 * while still on the CPU skips a sleep and a scheduler wake-up, which on a loaded host costs
 * far more than the spin. Bounded by the budget and by the caller's timeout. Between two
 * empty looks the thread yields: where other threads wait for this CPU (the peer rank, the
 * appliance, on a small host) they run at once and the spin costs them nothing, where none
 * does the yield returns at once. Without it the spin held the CPU its peers needed for
 * the rest of its time slice (measured on 2 shared cores, hvd_allreduce: 134 MB/s against
 * ~1100 without spinning and ~1400 spinning with the yield, perf/README.md). */
static int udp_spin(struct tally_udp *u, uint64_t *timeout_ns)
{
	uint64_t budget = u->busy_ns < *timeout_ns ? u->busy_ns : *timeout_ns;
	uint64_t t0 = udp_now_ns(NULL), now = t0;
	int n = 0;

	u->st.spins++;
	while (now - t0 < budget) {
		n = udp_rx_all(u);
		if (n) {
			u->st.spin_hits++;
			break;
		}
		sched_yield();
		now = udp_now_ns(NULL);
	}
	u->st.spin_ns += now - t0;
	*timeout_ns -= now - t0 < *timeout_ns ? now - t0 : *timeout_ns;
	return n;
}

/* Spin before this wait? Only within UDP_SPIN_RECENT_NS of the last datagram sent or
 * received: during a burst the next one is likely within the spin, while a socket idle
 * for longer (between training steps, an appliance with no job) sleeps at once instead of
 * spinning at every poll timeout. */
static int udp_spin_now(struct tally_udp *u)
{
	uint64_t now = udp_now_ns(NULL);

	if (u->active) {
		u->active = 0;
		u->busy_until_ns = now + UDP_SPIN_RECENT_NS;
	}
	return now < u->busy_until_ns;
}

int udp_poll(void *ctx, uint64_t timeout_ns)
{
	struct tally_udp *u = ctx;
	int n = 0;

	tally_udp_flush(u);
	n = udp_rx_all(u);
	if (!n && timeout_ns && u->busy_ns && u->npfd && udp_spin_now(u))
		n = udp_spin(u, &timeout_ns);
	if (n || !timeout_ns) {
		if (n) /* what the rx callbacks queued (next chunks, RESULTs) goes out now */
			tally_udp_flush(u);
		return n;
	}
	if (!u->npfd) {
		struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
				       (long)(timeout_ns % 1000000000ull) };
		nanosleep(&ts, NULL);
		return 0;
	}
	{
		struct timespec ts = { (time_t)(timeout_ns / 1000000000ull),
				       (long)(timeout_ns % 1000000000ull) };
		uint64_t t0 = udp_now_ns(NULL);
		int r = ppoll(u->pfd, u->npfd, &ts, NULL);

		u->st.blocks++;
		u->st.block_ns += udp_now_ns(NULL) - t0;
		if (r < 0 && errno != EINTR) {
			udp_err(u, "udp: ppoll: %s", strerror(errno));
			return -errno;
		}
		if (r <= 0)
			return 0;
	}
	for (uint16_t i = 0; i < u->npfd; i++)
		if (u->pfd[i].revents)
			n += udp_rx_sock(u, u->pfd_core[i]);
	tally_udp_flush(u);
	return n;
}

/* The session asks while it waits for a JOIN: the pending socket error is read here too, so
 * an ICMP that came while nothing was received still counts (not the datapath: a syscall
 * is fine). */
int udp_peer_error(void *ctx, uint32_t core)
{
	struct tally_udp *u = ctx;
	struct udp_sock *s;
	socklen_t sl = sizeof(int);
	int e = 0;

	if (core >= TALLY_UDP_MAX_CORES || !u->socks[core].slots)
		return 0;
	s = &u->socks[core];
	if (!getsockopt(s->fd, SOL_SOCKET, SO_ERROR, &e, &sl) && e == ECONNREFUSED)
		s->refused = 1;
	if (!s->refused)
		return 0;
	s->refused = 0;
	u->st.refused++;
	return -ECONNREFUSED;
}
