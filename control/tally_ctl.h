/* SPDX-License-Identifier: Apache-2.0
 * tally_ctl.h — the appliance's control plane: JSON-RPC 2.0 over a unix stream socket.
 *
 *  - One schema table (ctl_schema.c) names every method (object_verb), its parameters (type,
 *    range, default, help) and its result. The server's dispatch, the parameter validation,
 *    the config-file replay and tallyctl's argument parsing and --help all come from it.
 *  - A backend (the appliance, or a fake in tests) supplies one handler per method. Handlers
 *    run on the thread that polls the server (tallyd's main thread, never a datapath core).
 *  - The server is non-blocking (epoll), bounded (request size, clients, output), times out
 *    slow clients and checks peer credentials (root, the server's own uid, or a member of the
 *    allowed group).
 *  - Framing: a stream of JSON values (objects, or arrays for batches); whitespace between
 *    them is ignored, so both newline-delimited and SPDK-style clients work.
 */
#ifndef TALLY_CTL_H
#define TALLY_CTL_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TALLY_CTL_DEFAULT_SOCKET "/run/tally/tallyd.sock"
#define TALLY_CTL_DEFAULT_GROUP "tally"
#define TALLY_CTL_MAX_REQUEST (64u * 1024u)

/* JSON-RPC error codes (the standard ones, then Tally's in the server range). */
enum tally_ctl_code {
	TALLY_CTL_E_PARSE = -32700,
	TALLY_CTL_E_INVALID_REQUEST = -32600,
	TALLY_CTL_E_METHOD_NOT_FOUND = -32601,
	TALLY_CTL_E_INVALID_PARAMS = -32602,
	TALLY_CTL_E_INTERNAL = -32603,
	TALLY_CTL_E_APPLIANCE = -32000,   /* the appliance refused: data.errno says why */
	TALLY_CTL_E_REFUSED = -32001,     /* peer credentials not allowed */
	TALLY_CTL_E_TOO_LARGE = -32002,   /* request over the size limit (connection closed) */
	TALLY_CTL_E_BUSY = -32003,        /* too many clients */
	TALLY_CTL_E_NOT_IMPLEMENTED = -32004,
};

/* ---- schema ---------------------------------------------------------------------------- */
enum tally_ctl_ptype {
	TALLY_CTL_T_UINT,   /* JSON integer in [min, max] */
	TALLY_CTL_T_U64,    /* 64-bit unsigned: JSON integer, or string (decimal or 0x hex) */
	TALLY_CTL_T_BOOL,
	TALLY_CTL_T_STRING,
	TALLY_CTL_T_ENUM,   /* string, one of choices "a|b|c" */
};

/* The log levels log_set_level takes (the appliances' --log-level takes these and, before
 * them, emerg, alert and crit; "error" is spelt "err" there too). */
#define TALLY_CTL_LOG_LEVELS "error|warning|notice|info|debug"

struct tally_ctl_param {
	const char *name;      /* JSON name; tallyctl option is --name with '_' → '-' */
	enum tally_ctl_ptype type;
	uint8_t required;
	uint8_t positional;    /* tallyctl: may be given positionally, in table order */
	uint8_t cli_only;      /* tallyctl option, never sent (e.g. --watch) */
	uint8_t one_of;        /* the method needs at least one of its one_of parameters */
	uint64_t min, max;     /* UINT range */
	const char *def;       /* default (CLI text form), NULL: none */
	const char *choices;   /* ENUM */
	const char *help;
	uint8_t flag;          /* BOOL: tallyctl --name alone means true (--name=false too) */
};

enum tally_ctl_method_id {
	TALLY_CTL_M_APPLIANCE_STATUS,
	TALLY_CTL_M_STATS_GET,
	TALLY_CTL_M_STATS_RESET,
	TALLY_CTL_M_JOBS_LIST,
	TALLY_CTL_M_JOB_GET,
	TALLY_CTL_M_JOB_ADD,
	TALLY_CTL_M_KEYS_LIST,
	TALLY_CTL_M_CHUNKS_STUCK,
	TALLY_CTL_M_WORKERS_LIST,
	TALLY_CTL_M_JOB_SET_POLICY,
	TALLY_CTL_M_JOB_EVICT,
	TALLY_CTL_M_APPLIANCE_DRAIN,
	TALLY_CTL_M_APPLIANCE_SHUTDOWN,
	TALLY_CTL_M_LOG_SET_LEVEL,
	TALLY_CTL_M_CONFIG_SAVE,
	TALLY_CTL_M_COUNT
};

struct tally_ctl_method {
	enum tally_ctl_method_id id;
	const char *name;      /* JSON-RPC method */
	const char *cmd;       /* tallyctl command */
	const char *help;
	const char *result;    /* what the result holds */
	const struct tally_ctl_param *params;
	unsigned nparams;
	uint8_t replayable;    /* allowed in a config file */
	uint8_t need_one_of;   /* at least one one_of parameter must be given */
};

const struct tally_ctl_method *tally_ctl_methods(size_t *n);
const struct tally_ctl_method *tally_ctl_method_by_name(const char *name);
const struct tally_ctl_method *tally_ctl_method_by_cmd(const char *cmd);
const struct tally_ctl_param *tally_ctl_param_find(const struct tally_ctl_method *m,
						   const char *name);
const char *tally_ctl_ptype_name(enum tally_ctl_ptype t);

/* Validates params (NULL = {}) against m and returns a new object with defaults filled in
 * and U64 values normalised to JSON integers when they fit, else NULL with msg naming the
 * field. */
json_t *tally_ctl_params_check(const struct tally_ctl_method *m, const json_t *params,
			       char *msg, size_t msglen);
/* Parses text (CLI form) as parameter p: a new JSON value, or NULL with msg. */
json_t *tally_ctl_param_parse(const struct tally_ctl_param *p, const char *text, char *msg,
			      size_t msglen);
/* Reads a validated U64 parameter (integer or string). 0, -ENOENT (absent), -EINVAL. */
int tally_ctl_get_u64(const json_t *params, const char *name, uint64_t *out);

/* ---- dispatch -------------------------------------------------------------------------- */
/* A handler returns 0 with *result set (a new reference; NULL means null), or a negative
 * errno with msg filled. -EINVAL is answered as invalid-params, others as appliance error. */
typedef int (*tally_ctl_handler_fn)(void *ctx, const json_t *params, json_t **result,
				    char *msg, size_t msglen);

struct tally_ctl_backend {
	void *ctx;
	tally_ctl_handler_fn handlers[TALLY_CTL_M_COUNT]; /* NULL: not implemented */
};

/* One parsed JSON-RPC message (object or batch array): returns the response (new
 * reference), or NULL when nothing is to be answered (notifications). */
json_t *tally_ctl_handle(const struct tally_ctl_backend *b, const json_t *msg);
json_t *tally_ctl_error(const json_t *id, int code, const char *message, const json_t *data);

/* Replays a config file {"calls":[{"method":..,"params":..}, ...]} through the backend.
 * Only replayable methods are allowed. Stops at the first failing call. 0 or negative errno
 * with msg saying which call failed and why. */
int tally_ctl_replay_file(const struct tally_ctl_backend *b, const char *path, char *msg,
			  size_t msglen);
int tally_ctl_replay(const struct tally_ctl_backend *b, const json_t *doc, char *msg,
		     size_t msglen);

/* ---- server ---------------------------------------------------------------------------- */
struct tally_ctl_server;

struct tally_ctl_server_cfg {
	const char *path;            /* default TALLY_CTL_DEFAULT_SOCKET */
	const char *group;           /* default TALLY_CTL_DEFAULT_GROUP; ignored if it does not exist */
	gid_t allow_gid;             /* if allow_gid_set: use this gid instead of group */
	int allow_gid_set;
	mode_t mode;                 /* default 0660 */
	size_t max_request;          /* default TALLY_CTL_MAX_REQUEST */
	size_t max_output;           /* answer bytes queued for a client, beyond one answer (16 MiB) */
	unsigned max_clients;        /* default 64 */
	unsigned reserved_clients;   /* more for root and the server's uid, never taken by
				      * others (default TALLY_CTL_RESERVED_CLIENTS) */
	unsigned request_timeout_ms; /* a started request must complete in this (default 5000) */
	unsigned idle_timeout_ms;    /* idle connections closed after (default
				      * TALLY_CTL_IDLE_TIMEOUT_MS); when max_clients are connected
				      * a new one evicts the client idle the longest (stats.evicted),
				      * so idle connections never lock the operator out */
	/* Log sink (syslog priorities); NULL: stderr. */
	void (*log)(void *lctx, int prio, const char *msg);
	void *log_ctx;
};

struct tally_ctl_server_stats {
	uint64_t accepted, refused, busy, closed;
	uint64_t requests, errors, parse_errors, too_large, timeouts, output_overflow;
	unsigned clients;
	uint64_t evicted;            /* idle clients closed to make room for a new one */
	uint64_t reserved;           /* operator clients let in beyond max_clients */
};
#define TALLY_CTL_IDLE_TIMEOUT_MS 10000u
#define TALLY_CTL_RESERVED_CLIENTS 4u

struct tally_ctl_server *tally_ctl_server_create(const struct tally_ctl_server_cfg *cfg,
						 const struct tally_ctl_backend *b, int *err);
/* Handles whatever is ready, waiting at most timeout_ms (0: never blocks). Returns the
 * number of events handled or negative errno. */
int tally_ctl_server_poll(struct tally_ctl_server *s, int timeout_ms);
/* The epoll fd, for callers that wait on it in their own loop. */
int tally_ctl_server_fd(const struct tally_ctl_server *s);
const char *tally_ctl_server_path(const struct tally_ctl_server *s);
void tally_ctl_server_stats(const struct tally_ctl_server *s, struct tally_ctl_server_stats *st);
/* Flushes pending answers (bounded wait), closes clients, removes the socket. */
void tally_ctl_server_destroy(struct tally_ctl_server *s);

/* ---- client ---------------------------------------------------------------------------- */
/* Connects; fd or negative errno with msg saying which path and why (missing, permission,
 * refused, not a socket). */
int tally_ctl_connect(const char *path, char *msg, size_t msglen);
/* One call. Returns 0 when answered: *result (success) or *error (the error object) is set,
 * new references. Negative errno on I/O failure, timeout (-ETIMEDOUT) or a bad answer
 * (-EPROTO). params may be NULL. */
int tally_ctl_call(int fd, const char *method, const json_t *params, int timeout_ms,
		   json_t **result, json_t **error);

#ifdef __cplusplus
}
#endif
#endif
