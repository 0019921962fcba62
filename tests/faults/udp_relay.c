/* SPDX-License-Identifier: Apache-2.0
 * udp_relay.c — see udp_relay.h. One thread polls both sides of every core's pair. */
#include <arpa/inet.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "udp_relay.h"
#include "udpd_proc.h"

static void relay_front(struct udp_relay *r, unsigned i)
{
	static __thread unsigned char buf[65536];
	socklen_t l = sizeof(r->peer[i]);
	ssize_t n = recvfrom(r->front[i], buf, sizeof(buf), MSG_DONTWAIT,
			     (struct sockaddr *)&r->peer[i], &l);

	if (n < 0)
		return;
	r->have_peer[i] = 1;
	if (atomic_load(&r->stall) & UDP_RELAY_STALL_UP) {
		atomic_fetch_add(&r->dropped, 1);
		return;
	}
	if (send(r->up[i], buf, (size_t)n, 0) == n)
		atomic_fetch_add(&r->forwarded, 1);
}

static void relay_up(struct udp_relay *r, unsigned i)
{
	static __thread unsigned char buf[65536];
	ssize_t n = recv(r->up[i], buf, sizeof(buf), MSG_DONTWAIT);

	if (n > 0 && (atomic_load(&r->stall) & UDP_RELAY_STALL_DOWN)) {
		atomic_fetch_add(&r->dropped_back, 1);
		return;
	}
	if (n > 0 && r->have_peer[i])
		sendto(r->front[i], buf, (size_t)n, 0, (struct sockaddr *)&r->peer[i],
		       sizeof(r->peer[i]));
}

static void *relay_main(void *arg)
{
	struct udp_relay *r = arg;
	struct pollfd p[2 * UDP_RELAY_CORES];

	for (unsigned i = 0; i < UDP_RELAY_CORES; i++) {
		p[2 * i] = (struct pollfd){.fd = r->front[i], .events = POLLIN};
		p[2 * i + 1] = (struct pollfd){.fd = r->up[i], .events = POLLIN};
	}
	while (!atomic_load(&r->stop)) {
		if (poll(p, 2 * UDP_RELAY_CORES, 20) <= 0)
			continue;
		for (unsigned i = 0; i < UDP_RELAY_CORES; i++) {
			if (p[2 * i].revents & POLLIN)
				relay_front(r, i);
			if (p[2 * i + 1].revents & POLLIN)
				relay_up(r, i);
		}
	}
	return NULL;
}

static int relay_sock(unsigned bind_port, unsigned conn_port)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int s = socket(AF_INET, SOCK_DGRAM, 0), big = 4 << 20;

	if (s < 0)
		return -1;
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &big, sizeof(big));
	setsockopt(s, SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
	a.sin_port = htons((uint16_t)bind_port);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	a.sin_port = htons((uint16_t)conn_port);
	if (conn_port && connect(s, (struct sockaddr *)&a, sizeof(a)))
		goto fail;
	return s;
fail:
	close(s);
	return -1;
}

int udp_relay_start(struct udp_relay *r, unsigned appl_port)
{
	memset(r, 0, sizeof(*r));
	for (unsigned i = 0; i < UDP_RELAY_CORES; i++)
		r->front[i] = r->up[i] = -1;
	r->port = udpd_free_ports();
	if (!r->port)
		return -1;
	for (unsigned i = 0; i < UDP_RELAY_CORES; i++) {
		r->front[i] = relay_sock(r->port + i, 0);
		r->up[i] = relay_sock(0, appl_port + i);
		if (r->front[i] < 0 || r->up[i] < 0)
			goto fail;
	}
	if (pthread_create(&r->thr, NULL, relay_main, r))
		goto fail;
	return 0;
fail:
	udp_relay_stop(r);
	return -1;
}

void udp_relay_stop(struct udp_relay *r)
{
	if (!r->port)
		return; /* never started (a zeroed relay) */
	if (r->thr) {
		atomic_store(&r->stop, 1);
		pthread_join(r->thr, NULL);
		r->thr = 0;
	}
	for (unsigned i = 0; i < UDP_RELAY_CORES; i++) {
		if (r->front[i] >= 0)
			close(r->front[i]);
		if (r->up[i] >= 0)
			close(r->up[i]);
		r->front[i] = r->up[i] = -1;
	}
	r->port = 0;
}
