/* SPDX-License-Identifier: Apache-2.0
 * udp_relay.h — a UDP relay on loopback between one worker and one appliance (each core's
 * port: base + core) that the test can stall (drop one direction or both) for a while: a
 * host that does not hear one appliance for a moment, the others unaffected. */
#ifndef TESTS_FAULTS_UDP_RELAY_H
#define TESTS_FAULTS_UDP_RELAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <netinet/in.h>

#define UDP_RELAY_CORES 2
#define UDP_RELAY_STALL_UP 1   /* drop what the worker sends */
#define UDP_RELAY_STALL_DOWN 2 /* drop what the appliance sends the worker */
#define UDP_RELAY_STALL_BOTH 3

struct udp_relay {
	unsigned port;                         /* the worker's side: base port */
	int front[UDP_RELAY_CORES];            /* bound to port + core (the worker's side) */
	int up[UDP_RELAY_CORES];               /* connected to the appliance's port + core */
	struct sockaddr_in peer[UDP_RELAY_CORES];
	int have_peer[UDP_RELAY_CORES];
	atomic_int stall;                      /* UDP_RELAY_STALL_* bits */
	atomic_int stop;
	atomic_ulong dropped, forwarded, dropped_back;
	pthread_t thr;
};

/* Relay base ports [port, port + UDP_RELAY_CORES) to the appliance at appl_port on
 * 127.0.0.1; 0, or -1 (no free ports, a socket call failed). */
int udp_relay_start(struct udp_relay *r, unsigned appl_port);
void udp_relay_stop(struct udp_relay *r);

#endif
