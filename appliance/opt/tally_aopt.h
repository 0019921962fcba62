/* SPDX-License-Identifier: Apache-2.0
 * tally_aopt.h — the one option table of both appliances (tallyd and tally-udpd). Each
 * option is one row: its name (the long flag --name and the config-file key `name = value`),
 * an older spelling, the appliances that take it, its type and range, the noun its
 * validation message uses, and its --help text. From the table come: the command line and
 * config-file parsers, every validation message (it names the option and the allowed
 * range), --help, and --config-save (the settings as a config file that --config reads
 * back). An option both appliances take is one row.
 *
 * Each appliance describes itself once (struct tally_aopt_app): where in its own
 * configuration struct each option's field lives (by option id, so the table needs no
 * appliance header), and a hook for the few options with a parser of their own (tallyd's
 * port settings, tally-udpd's --ip). Config files: one setting a line, `name = value` or
 * `name` alone for a switch, `#` starts a comment, no `config` inside a config file.
 */
#ifndef TALLY_AOPT_H
#define TALLY_AOPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define TALLY_AOPT_TALLYD 1u
#define TALLY_AOPT_UDPD 2u
#define TALLY_AOPT_BOTH (TALLY_AOPT_TALLYD | TALLY_AOPT_UDPD)

#define TALLY_AOPT_MAX_CORES 64       /* tallyd's datapath cores (TALLYD_MAX_CORES) */
#define TALLY_AOPT_UDPD_MAX_CORES 256 /* tally-udpd's engines (TALLY_UDP_MAX_CORES) */
#define TALLY_AOPT_IDLE_MAX_US 1000   /* an idle sleep never adds milliseconds to a round */

enum tally_aopt_type {
	TALLY_AOPT_UINT,     /* decimal or 0x hex in min..max; field of 1, 2, 4 or 8 bytes */
	TALLY_AOPT_SIZE,     /* 4096, 64K, 512M, 2G (K/M/G, optional iB or B): bytes */
	TALLY_AOPT_BOOL,     /* on/off, yes/no, true/false, 1/0; an int field */
	TALLY_AOPT_STRING,   /* 1..sizeof(field)-1 characters; a char array */
	TALLY_AOPT_ENUM,     /* one of `choices` ("a|b|c", "x/y": two spellings): an int */
	TALLY_AOPT_CUSTOM,   /* the appliance's own parser (struct tally_aopt_app.set) */
	TALLY_AOPT_GUARD,    /* tally_actl_guard_set on the field (struct tally_actl_guard) */
	TALLY_AOPT_RDMA,     /* tally_actl_verbs_set on the field (struct tally_actl_verbs) */
};

/* Which field of an appliance's configuration an option sets. */
enum tally_aopt_id {
	TALLY_AOPT_ID_NONE = 0,      /* no field of its own (custom options) */
	TALLY_AOPT_ID_BASE_PORT, TALLY_AOPT_ID_CORES, TALLY_AOPT_ID_MEM, TALLY_AOPT_ID_DET_POOL,
	TALLY_AOPT_ID_MAX_CHUNK, TALLY_AOPT_ID_MAX_JOBS, TALLY_AOPT_ID_OPEN_ADMISSION,
	TALLY_AOPT_ID_LOG_LEVEL, TALLY_AOPT_ID_DRAIN_TIMEOUT, TALLY_AOPT_ID_DEAD_RANK_TIMEOUT,
	TALLY_AOPT_ID_JOB_IDLE_TIMEOUT, TALLY_AOPT_ID_CTL_SOCKET, TALLY_AOPT_ID_CTL_CONFIG,
	TALLY_AOPT_ID_CHECK_CONFIG, TALLY_AOPT_ID_CONFIG_SAVE, TALLY_AOPT_ID_HELP,
	TALLY_AOPT_ID_GUARD, TALLY_AOPT_ID_RDMA,
	/* tallyd */
	TALLY_AOPT_ID_FRAME_SIZE, TALLY_AOPT_ID_RX_DESC, TALLY_AOPT_ID_TX_DESC, TALLY_AOPT_ID_MTU,
	TALLY_AOPT_ID_IO_FORWARD, TALLY_AOPT_ID_RSS, TALLY_AOPT_ID_TX_FLUSH_US,
	TALLY_AOPT_ID_IDLE, TALLY_AOPT_ID_IDLE_POLLS, TALLY_AOPT_ID_IDLE_MAX_US,
	TALLY_AOPT_ID_DISPATCH_RING,
	/* tally-udpd */
	TALLY_AOPT_ID_JOB, TALLY_AOPT_ID_WORLD, TALLY_AOPT_ID_TOKEN, TALLY_AOPT_ID_KEY_FILE,
	TALLY_AOPT_ID_NO_AUTH, TALLY_AOPT_ID_GSO, TALLY_AOPT_ID_GRO, TALLY_AOPT_ID_STATS,
	TALLY_AOPT_ID_COUNT
};

struct tally_aopt {
	const char *name;          /* --name on the command line, `name = value` in a file */
	const char *also;          /* another spelling (older), or NULL */
	unsigned apps;             /* TALLY_AOPT_TALLYD and/or TALLY_AOPT_UDPD */
	unsigned also_apps;        /* the appliances that take `also` */
	enum tally_aopt_type type;
	enum tally_aopt_id id;
	unsigned long long min, max; /* UINT, SIZE: the allowed range */
	const char *choices;       /* ENUM */
	int is_switch;             /* on the command line it takes no value (--name=VALUE may) */
	int show_def;              /* --help appends the appliance's default */
	int no_save;               /* --config-save leaves it out (help, check-config) */
	const char *what;          /* the message's noun: "'n v': WHAT must be a whole number
				    * in a..b"; "" : "must be ..."; NULL: "a whole number in" */
	const char *arg;           /* --help's placeholder (N, SIZE, PATH), NULL for a switch */
	const char *help;          /* --help text; '\n' continues on an indented line */
	const char *section;       /* --help heading printed before this option, or NULL */
	/* The same setting as a parameter of a control method (tally_ctl.h's schema): its
	 * range and, where help is NULL, its help come from there (tally-udpd's --job,
	 * --token, --world, --key-file, --no-auth are job_add's parameters). */
	const char *ctl_method, *ctl_param;
};

/* Where an appliance keeps one option's value: offsetof and sizeof of its field. */
struct tally_aopt_field {
	enum tally_aopt_id id;
	size_t off, size;
	int bias;                  /* ENUM: stored value = choice index + bias */
};

struct tally_aopt_app {
	unsigned app;              /* TALLY_AOPT_TALLYD or TALLY_AOPT_UDPD */
	const char *prog;          /* for messages: "tallyd", "tally-udpd" */
	const struct tally_aopt_field *fields;
	size_t nfields;
	/* TALLY_AOPT_CUSTOM options: 0, or -EINVAL with a sentence in err. */
	int (*set)(void *conf, const struct tally_aopt *o, const char *v, char *err, size_t el);
	/* --config-save of the custom options (may be NULL). */
	void (*save)(FILE *f, const void *conf);
	/* Arguments after "--" (tallyd: EAL). NULL: "--" is refused. 0 or -EINVAL. */
	int (*rest)(void *conf, int argc, char **argv, char *err, size_t el);
	const char *usage;         /* --help's first lines */
	const char *usage_tail;    /* --help's last lines, or NULL */
};

/* The table: every option of both appliances. */
const struct tally_aopt *tally_aopt_table(size_t *n);
/* The option `name` (or its other spelling) that appliance `app` takes, or NULL. */
const struct tally_aopt *tally_aopt_find(unsigned app, const char *name);
/* The row with what it takes from the control schema filled in (range, help): `o` itself
 * or `tmp`. */
const struct tally_aopt *tally_aopt_row(const struct tally_aopt *o, struct tally_aopt *tmp);

/* "4096", "64K", "512M", "2GiB", "5MB" → bytes. 0 or -EINVAL. */
int tally_aopt_parse_size(const char *s, uint64_t *out);
/* A UINT option's value checked against its range: 0, or -EINVAL with the message. */
int tally_aopt_uint(const struct tally_aopt *o, const char *n, const char *v,
		    unsigned long long *out, char *err, size_t el);
/* "'n v'" (or "'n'" for no or an empty value) followed by the formatted reason. */
int tally_aopt_err(char *err, size_t el, const char *n, const char *v, const char *fmt, ...)
	__attribute__((format(printf, 5, 6)));

/* Apply one setting by name (either spelling). 0, or -EINVAL with a sentence in err. */
int tally_aopt_set(const struct tally_aopt_app *a, void *conf, const char *name,
		   const char *value, char *err, size_t el);
/* Read a config file. 0 or a negative errno; err says file:line and why. */
int tally_aopt_file(const struct tally_aopt_app *a, void *conf, const char *path, char *err,
		    size_t el);
/* argv (argv[0] the program; --config FILE, -h, --name VALUE, --name=VALUE, switches). */
int tally_aopt_args(const struct tally_aopt_app *a, void *conf, int argc, char **argv,
		    char *err, size_t el);

/* --help: the appliance's options from the table, defaults from `defaults`. */
void tally_aopt_usage(const struct tally_aopt_app *a, const void *defaults, FILE *f);
/* --config-save: every setting of `conf` as a config file (`name = value` lines). */
void tally_aopt_save(const struct tally_aopt_app *a, const void *conf, FILE *f);

#endif
