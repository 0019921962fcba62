/* SPDX-License-Identifier: Apache-2.0
 * actl_guard.c — the trust settings both appliances take, with the same names on the
 * command line and in the config file: the source allow-list, open admission's subnet,
 * claim limit and timeout, per-job quotas, the control socket's idle timeout. Parsed and
 * checked here once; tally_actl_guard_engine() turns them into engine settings per core.
 * Every bad value gets a sentence that names the setting (their rows and --help texts are in
 * the option table, appliance/opt). THREAT_MODEL.md says why.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <arpa/inet.h>

#include "tally_actl.h"
#include "tally_ctl.h"

static int gerr(char *err, size_t len, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static int gerr(char *err, size_t len, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(err, len, fmt, ap);
	va_end(ap);
	return -EINVAL;
}

void tally_actl_guard_init(struct tally_actl_guard *g)
{
	memset(g, 0, sizeof(*g));
	g->ctl_idle_timeout_ms = TALLY_CTL_IDLE_TIMEOUT_MS;
}

int tally_actl_parse_cidr(const char *s, struct tally_engine_cidr *out)
{
	uint32_t ip, mask;

	if (tally_pkt_parse_cidr(s, &ip, &mask))
		return -EINVAL;
	if (ip & ~mask)
		return -EDOM; /* host bits set: the caller says which network was meant */
	out->net = ip;
	out->mask = mask;
	return 0;
}

static int guard_cidr(const char *n, const char *v, struct tally_engine_cidr *out, char *err,
		      size_t el)
{
	char net[INET_ADDRSTRLEN];
	int rc = tally_actl_parse_cidr(v, out);

	if (rc == -EDOM) {
		uint32_t ip, mask;
		tally_pkt_parse_cidr(v, &ip, &mask);
		ip &= mask;
		inet_ntop(AF_INET, &ip, net, sizeof(net));
		return gerr(err, el, "'%s %s': host bits set; the network is %s/%s", n, v, net,
			    strchr(v, '/') + 1);
	}
	if (rc)
		return gerr(err, el, "'%s %s': expected a network like 10.0.0.0/24 (prefix "
			    "length 1..32)", n, v);
	return 0;
}

/* "4096", "64K", "512M", "2G" (an optional "iB" or "B" after the suffix). */
static int guard_size(const char *s, uint64_t *out)
{
	char *end;
	unsigned shift = 0;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 10);
	if (errno)
		return -EINVAL;
	switch (*end) {
	case 'K': case 'k': shift = 10; end++; break;
	case 'M': case 'm': shift = 20; end++; break;
	case 'G': case 'g': shift = 30; end++; break;
	default: break;
	}
	if (shift && *end == 'i')
		end++;
	if (shift && *end == 'B')
		end++;
	if (*end || (shift && v > (ULLONG_MAX >> shift)))
		return -EINVAL;
	*out = (uint64_t)v << shift;
	return 0;
}

static int guard_num(const char *n, const char *v, unsigned long long lo,
		     unsigned long long hi, int size_ok, unsigned long long *out, char *err,
		     size_t el)
{
	uint64_t x;
	char *end;

	if (size_ok && !guard_size(v, &x)) {
		*out = x;
	} else {
		errno = 0;
		*out = strtoull(v, &end, 10);
		if (v[0] < '0' || v[0] > '9' || errno || *end)
			goto bad;
	}
	if (*out < lo || *out > hi)
		goto bad;
	return 0;
bad:
	return gerr(err, el, "'%s %s': %s in %llu..%llu", n, v,
		    size_ok ? "a size (like 512M, 2G) or a number" : "a whole number", lo, hi);
}

int tally_actl_guard_set(struct tally_actl_guard *g, const char *n, const char *v, char *err,
			 size_t el)
{
	static const char *const names[] = { "allow", "admit-subnet", "admit-timeout-ms",
					     "admit-claims", "quota-keys", "quota-bytes",
					     "quota-ranks", "ctl-idle-timeout-ms",
					     "rejoin-timeout-ms" };
	unsigned long long x;
	size_t i;

	for (i = 0; i < sizeof(names) / sizeof(names[0]); i++)
		if (!strcmp(n, names[i]))
			break;
	if (i == sizeof(names) / sizeof(names[0]))
		return 1;
	if (!v || !*v)
		return gerr(err, el, "'%s' needs a value", n);
	if (!strcmp(n, "allow")) {
		if (g->nallow >= TALLY_ENGINE_MAX_ALLOW)
			return gerr(err, el, "'allow %s': at most %d allow entries", v,
				    TALLY_ENGINE_MAX_ALLOW);
		int rc = guard_cidr(n, v, &g->allow[g->nallow], err, el);
		if (!rc)
			g->nallow++;
		return rc;
	}
	if (!strcmp(n, "admit-subnet"))
		return guard_cidr(n, v, &g->admit_subnet, err, el);
	int big = !strcmp(n, "quota-bytes");
	unsigned long long hi = big ? (1ull << 40) :
				!strcmp(n, "quota-ranks") ? TALLY_MAX_WORKERS :
				!strcmp(n, "admit-claims") ? 64 : UINT32_MAX;
	if (guard_num(n, v, !strcmp(n, "ctl-idle-timeout-ms") ? 100 : 0, hi, big, &x, err, el))
		return -EINVAL;
	if (big)
		g->quota_bytes = x;
	else if (!strcmp(n, "quota-keys"))
		g->quota_keys = (uint32_t)x;
	else if (!strcmp(n, "quota-ranks"))
		g->quota_ranks = (uint32_t)x;
	else if (!strcmp(n, "admit-claims"))
		g->admit_claims = (uint32_t)x;
	else if (!strcmp(n, "admit-timeout-ms"))
		g->admit_timeout_ms = (uint32_t)x;
	else if (!strcmp(n, "rejoin-timeout-ms"))
		g->rejoin_timeout_ms = (uint32_t)x;
	else
		g->ctl_idle_timeout_ms = (uint32_t)x;
	return 0;
}

void tally_actl_guard_engine(const struct tally_actl_guard *g, struct tally_engine_cfg *ec,
			     unsigned split)
{
	if (!split)
		split = 1;
	ec->nallow = g->nallow;
	memcpy(ec->allow, g->allow, sizeof(ec->allow));
	ec->admit_subnet = g->admit_subnet;
	ec->admit_timeout_ns = (uint64_t)g->admit_timeout_ms * 1000000u;
	ec->admit_claims = g->admit_claims;
	ec->quota_ranks = g->quota_ranks;
	ec->rejoin_timeout_ns = (uint64_t)g->rejoin_timeout_ms * 1000000u;
	/* Keys and memory are spread over the cores (key % cores): so is the quota. By
	 * default one job may take half of a core's memory and key table, so a second job
	 * always fits whatever the first does. */
	uint64_t keys = ec->max_keys ? ec->max_keys : 65536;
	ec->quota_keys = g->quota_keys ? (g->quota_keys + split - 1) / split :
			 (uint32_t)(keys / 2);
	ec->quota_bytes = g->quota_bytes ? (g->quota_bytes + split - 1) / split :
			  ec->mem_budget / 2;
}
