/* SPDX-License-Identifier: Apache-2.0
 * ctl_exp.h — tally-exporter internals: the Prometheus text rendering of the control
 * plane's answers (ctl_exp_render.c, generic over the JSON so new counters appear without
 * code changes), the small HTTP/1.0 server (ctl_exp_http.c) and the control-socket query
 * (ctl_exp_query.c). The daemon is ctl_exp_main.c.
 */
#ifndef CTL_EXP_H
#define CTL_EXP_H

#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* ---- growable text buffer ---------------------------------------------------------------- */
struct ctl_exp_buf {
	char *p;
	size_t len, cap;
	int oom;            /* an append failed: the text is incomplete */
};
void ctl_exp_buf_printf(struct ctl_exp_buf *b, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
void ctl_exp_buf_free(struct ctl_exp_buf *b);

/* ---- metric families (ctl_exp_fam.c) ------------------------------------------------------ */
struct ctl_exp_fam {
	char name[128];
	const char *type;        /* "counter" or "gauge" */
	char help[192];
	struct ctl_exp_buf samples;
};

struct ctl_exp_out {
	struct ctl_exp_fam *fam;
	size_t n, cap;
	char app[160];           /* appliance="..." put first in every sample's labels */
	int oom;
};

/* One sample of family name (created with type and help on its first sample; a name
 * already used with another type is dropped). labels: `k="v",...` or "". */
void ctl_exp_sample(struct ctl_exp_out *o, const char *name, const char *type, const char *help,
		    const char *labels, double v);
/* Appends HELP, TYPE and the samples of every family, in first-use order; frees o. */
int ctl_exp_out_finish(struct ctl_exp_out *o, struct ctl_exp_buf *text);
/* Appends key="value" (escaped) to lb, with a comma when lb is not empty. */
void ctl_exp_label(char *lb, size_t len, const char *key, const char *val);
void ctl_exp_label_int(char *lb, size_t len, const char *key, const json_t *v);
/* Lower case, anything outside [a-z0-9_] replaced with '_'. */
void ctl_exp_sanitize(char *s);
/* field in base units: *_ms, *_us, *_ns, *_s → *_seconds; returns the scale to apply. */
double ctl_exp_base_unit(const char *field, char *out, size_t len);
/* Stuck chunks per job and per (job, missing rank); jobs (may be NULL) get a 0 each. */
void ctl_exp_render_stuck(struct ctl_exp_out *o, const json_t *stuck, const json_t *jobs);
int ctl_exp_is_num(const json_t *v);      /* number or boolean */
double ctl_exp_num(const json_t *v);      /* booleans are 0 / 1 */

/* ---- what one refresh read from the control socket --------------------------------------- */
struct ctl_exp_snap {
	int up;                  /* every call answered */
	double query_s;          /* seconds the control queries took */
	json_t *status, *stats, *jobs, *workers, *stuck; /* results, NULL when not answered */
};
void ctl_exp_snap_clear(struct ctl_exp_snap *s);

/* Exporter self-counters rendered beside the appliance's. */
struct ctl_exp_self {
	uint64_t refreshes, control_errors, http_requests, http_rejected, http_timeouts;
};

/* Renders the exposition text (format 0.0.4) of snap into out (appended). appliance is
 * the value of the `appliance` label on every series. 0 or -ENOMEM. */
int ctl_exp_render(const struct ctl_exp_snap *snap, const struct ctl_exp_self *self,
		   const char *appliance, struct ctl_exp_buf *out);

/* Queries status, stats, jobs, workers and stuck chunks (older than stuck_ms) over the
 * socket at path, each call bounded by timeout_ms. Fills snap (cleared first). */
void ctl_exp_query(const char *path, int timeout_ms, unsigned stuck_ms,
		   struct ctl_exp_snap *snap);

/* ---- HTTP ---------------------------------------------------------------------------------- */
struct ctl_exp_http;
/* The body of GET /metrics: the caller refreshes its cache and returns text it keeps
 * (valid until the next call). NULL: 503. */
typedef const struct ctl_exp_buf *(*ctl_exp_body_fn)(void *arg);

struct ctl_exp_http_cfg {
	const char *host;        /* numeric IPv4 or IPv6 address */
	uint16_t port;
	unsigned max_conns;      /* connections beyond this are answered 503 and closed */
	unsigned timeout_ms;     /* a connection must send its request and take the answer in this */
	size_t max_request;      /* request head bytes */
};

struct ctl_exp_http *ctl_exp_http_open(const struct ctl_exp_http_cfg *cfg, int *err);
/* Serves what is ready, waiting at most timeout_ms. 0 or negative errno. */
int ctl_exp_http_poll(struct ctl_exp_http *h, int timeout_ms, ctl_exp_body_fn fn, void *arg,
		      struct ctl_exp_self *self);
void ctl_exp_http_close(struct ctl_exp_http *h);

#endif
