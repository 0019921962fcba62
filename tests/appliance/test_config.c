/* SPDX-License-Identifier: Apache-2.0
 * test_config.c — tallyd's configuration (flags, config file, validation: every bad input
 * gets an error naming the problem), sizing arithmetic, EAL arguments and the hugepage
 * check. No EAL is started.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>

#include <cmocka.h>

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include "tallyd_config.h"
#include "tallyd_eal.h"
#include "tallyd_size.h"

static char err[512];

/* Parse a NULL-terminated argument list into c; returns the parse result. */
static int args(struct tallyd_conf *c, const char *const *argv)
{
	char *v[64];
	int n = 0;

	v[n++] = (char *)"tallyd";
	while (argv[n - 1])
		v[n] = (char *)argv[n - 1], n++;
	tallyd_conf_init(c);
	err[0] = '\0';
	return tallyd_conf_args(c, n, v, err, sizeof(err));
}

static int args_valid(struct tallyd_conf *c, const char *const *argv)
{
	int rc = args(c, argv);
	return rc ? rc : tallyd_conf_validate(c, err, sizeof(err));
}

static void test_defaults_and_flags(void **state)
{
	(void)state;
	struct tallyd_conf c;
	const char *a[] = { "--port", "net_memif0,role=server,socket=/tmp/x.sock",
			    "--ip", "10.0.0.1/24", "--mac", "02:00:00:00:00:01", "--queues", "2",
			    "--lcores", "2-3", "--base-port=9200", "--mem", "1G", "--det-pool", "4M",
			    "--log-level", "debug", "--open-admission", "--idle-backoff", "off",
			    "--tx-flush-us", "20", "--", "--no-huge", "--file-prefix", "tallyd-t",
			    NULL };

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(c.nports, 1);
	assert_true(c.port[0].is_vdev);
	assert_string_equal(c.port[0].dev, "net_memif0,role=server,socket=/tmp/x.sock");
	assert_int_equal(c.port[0].ip, htonl(0x0a000001));
	assert_int_equal(c.port[0].mask, htonl(0xffffff00));
	assert_true(c.port[0].mac_set);
	assert_int_equal(c.port[0].queues, 2);
	assert_int_equal(c.port[0].nlcores, 2);
	assert_int_equal(c.port[0].lcores[0], 2);
	assert_int_equal(c.port[0].lcores[1], 3);
	assert_int_equal(c.base_port, 9200);
	assert_int_equal(c.mem_budget, 1ull << 30);
	assert_int_equal(c.det_pool, 4u << 20);
	assert_int_equal(c.log_level, 8);
	assert_true(c.open_admission);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_POLL); /* --idle-backoff off: spin */
	assert_int_equal(c.tx_flush_us, 20);
	assert_int_equal(c.eal_argc, 3);
	assert_string_equal(c.eal_argv[2], "tallyd-t");
	assert_int_equal(tallyd_conf_ncores(&c), 2);
	/* --control is --ctl-socket (issue 5's name); --control-config names a saved config */
	const char *b[] = { "--control", "/tmp/t.sock", "--control-config", "/tmp/t.json", NULL };
	assert_int_equal(args(&c, b), 0);
	assert_string_equal(c.ctl_path, "/tmp/t.sock");
	assert_string_equal(c.ctl_config, "/tmp/t.json");
	/* defaults */
	tallyd_conf_init(&c);
	assert_int_equal(c.base_port, 9170);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_INTERRUPT);
	assert_int_equal(c.idle_max_us, 20);
	assert_int_equal(c.max_chunk, 8192);
	assert_int_equal(c.max_jobs, 16);
	const char *mj[] = { "--max-jobs", "64", NULL };
	assert_int_equal(args(&c, mj), 0);
	assert_int_equal(c.max_jobs, 64);
	tallyd_conf_init(&c);
	assert_false(c.open_admission);
	assert_false(c.io_forward);
	assert_string_equal(c.ctl_config, "");
}

/* idle = interrupt|sleep|poll, the old idle-backoff switch, and the sleep cap */
static void test_idle_settings(void **state)
{
	(void)state;
	struct tallyd_conf c;
	const char *sl[] = { "--idle", "sleep", "--idle-max-us", "50", "--idle-polls", "200",
			     NULL };
	const char *po[] = { "--idle=poll", NULL };

	assert_int_equal(args(&c, sl), 0);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_SLEEP);
	assert_int_equal(c.idle_max_us, 50);
	assert_int_equal(c.idle_polls, 200);
	assert_string_equal(tallyd_idle_name(c.idle_mode), "sleep");
	/* the old switch: on keeps an explicit sleep, off spins, on after off interrupts */
	assert_int_equal(tallyd_conf_set(&c, "idle-backoff", "on", err, sizeof(err)), 0);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_SLEEP);
	assert_int_equal(tallyd_conf_set(&c, "no-idle-backoff", NULL, err, sizeof(err)), 0);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_POLL);
	assert_int_equal(tallyd_conf_set(&c, "idle-backoff", "on", err, sizeof(err)), 0);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_INTERRUPT);
	assert_string_equal(tallyd_idle_name(c.idle_mode), "interrupt");
	assert_int_equal(args(&c, po), 0);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_POLL);
	assert_string_equal(tallyd_idle_name(c.idle_mode), "poll");
	assert_int_equal(tallyd_conf_set(&c, "idle", "interrupt", err, sizeof(err)), 0);
	assert_int_equal(c.idle_mode, TALLYD_IDLE_INTERRUPT);
}

static void test_pci_and_two_ports(void **state)
{
	(void)state;
	struct tallyd_conf c;
	const char *a[] = { "--port", "0000:3b:00.0", "--ip", "10.0.0.1/24", "--queues", "2",
			    "--port", "3b:00.1", "--ip", "10.0.1.1/24", NULL };

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(c.nports, 2);
	assert_false(c.port[0].is_vdev);
	assert_false(c.port[1].is_vdev);
	assert_int_equal(tallyd_conf_ncores(&c), 3);
}

/* Each bad input fails with an error that contains `needle`. */
static void expect_bad(const char *const *a, int validate, const char *needle)
{
	struct tallyd_conf c;
	int rc = validate ? args_valid(&c, a) : args(&c, a);

	if (rc == 0 || !strstr(err, needle))
		fail_msg("args starting '%s %s': rc %d, error '%s' (wanted '%s')", a[0],
			 a[1] ? a[1] : "", rc, err, needle);
}

#define BAD(needle, validate, ...) \
	do { const char *a_[] = { __VA_ARGS__, NULL }; expect_bad(a_, validate, needle); } while (0)

static void test_bad_flags(void **state)
{
	(void)state;
	BAD("unknown setting 'prot'", 0, "--prot", "x");
	BAD("unexpected argument 'x'", 0, "x");
	BAD("'--ip' needs a value", 0, "--port", "net_null0", "--ip");
	BAD("needs a 'port' before it", 0, "--ip", "10.0.0.1/24");
	BAD("neither a PCI address", 0, "--port", "eth0");
	BAD("neither a PCI address", 0, "--port", "3b:00.x");
	BAD("prefix length", 0, "--port", "net_null0", "--ip", "10.0.0.1");
	BAD("expected xx:xx", 0, "--port", "net_null0", "--mac", "02:00:00:00:00");
	BAD("unicast, non-zero", 0, "--port", "net_null0", "--mac", "01:00:5e:00:00:01");
	BAD("unicast, non-zero", 0, "--port", "net_null0", "--mac", "00:00:00:00:00:00");
	BAD("queues must be a whole number in 1..64", 0, "--port", "net_null0", "--queues", "0");
	BAD("queues must be", 0, "--port", "net_null0", "--queues", "2x");
	BAD("'lcores 3-1'", 0, "--port", "net_null0", "--lcores", "3-1");
	BAD("'lcores 1,1'", 0, "--port", "net_null0", "--lcores", "1,1");
	BAD("UDP base port", 0, "--base-port", "70000");
	BAD("UDP base port", 0, "--base-port", "-1");
	BAD("size like 512M", 0, "--mem", "12X");
	BAD("size like 512M", 0, "--mem", "-5M");
	BAD("size like 512M", 0, "--det-pool", "M");
	BAD("RX descriptors", 0, "--rx-desc", "32");
	BAD("dispatch ring size", 0, "--dispatch-ring", "16");
	BAD("largest chunk", 0, "--max-chunk", "9001");
	BAD("number of jobs", 0, "--max-jobs", "65");
	BAD("number of jobs", 0, "--max-jobs", "0");
	BAD("log level", 0, "--log-level", "loud");
	BAD("say on or off", 0, "--idle-backoff", "maybe");
	BAD("'idle busy': say interrupt, sleep or poll", 0, "--idle", "busy");
	BAD("'idle': say interrupt, sleep or poll", 0, "--idle=");
	BAD("'idle-max-us 5000': must be a whole number in 1..1000", 0, "--idle-max-us", "5000");
	BAD("'idle-max-us 0': must be", 0, "--idle-max-us", "0");
	BAD("'idle-polls x': must be", 0, "--idle-polls", "x");
	BAD("'no-idle-backoff' takes no value", 0, "--no-idle-backoff=1");
	BAD("config file /nonexistent/tallyd.conf", 0, "--config", "/nonexistent/tallyd.conf");
	BAD("a path of 1..", 0, "--ctl-socket", "");
	BAD("'control': a path of 1..", 0, "--control", "");
	BAD("'control-config': a path of 1..", 0, "--control-config", "");
}

static void test_bad_combinations(void **state)
{
	(void)state;
	BAD("no port", 1, "--mem", "64M");
	BAD("no address", 1, "--port", "net_null0");
	BAD("not a usable unicast", 1, "--port", "net_null0", "--ip", "224.0.0.1/24");
	BAD("not a usable unicast", 1, "--port", "net_null0", "--ip", "127.0.0.1/8");
	BAD("network or broadcast", 1, "--port", "net_null0", "--ip", "10.0.0.255/24");
	BAD("network or broadcast", 1, "--port", "net_null0", "--ip", "10.0.0.0/24");
	BAD("2 queues but 3 lcores", 1, "--port", "net_null0", "--ip", "10.0.0.1/24", "--queues",
	    "2", "--lcores", "1-3");
	BAD("same address", 1, "--port", "net_null0", "--ip", "10.0.0.1/24", "--port",
	    "net_null1", "--ip", "10.0.0.1/24");
	BAD("listed twice", 1, "--port", "net_null0", "--ip", "10.0.0.1/24", "--port",
	    "net_null0", "--ip", "10.0.0.2/24");
	BAD("lcore 2 polls a queue of port 0 and of port 1", 1, "--port", "net_null0", "--ip",
	    "10.0.0.1/24", "--lcores", "1,2", "--port", "net_null1", "--ip", "10.0.1.1/24",
	    "--lcores", "2");
	BAD("runs past UDP port 65535", 1, "--base-port", "65535", "--port", "net_null0", "--ip",
	    "10.0.0.1/24", "--queues", "2");
	BAD("powers of two", 1, "--port", "net_null0", "--ip", "10.0.0.1/24", "--rx-desc", "1000");
	BAD("dispatch-ring 1000: must be a power of two", 1, "--port", "net_null0", "--ip",
	    "10.0.0.1/24", "--dispatch-ring", "1000");
	BAD("raise frame-size or lower max-chunk", 1, "--port", "net_null0", "--ip", "10.0.0.1/24",
	    "--frame-size", "2048", "--max-chunk", "4096");
	BAD("at least 1 MiB per core", 1, "--port", "net_null0", "--ip", "10.0.0.1/24",
	    "--queues", "4", "--mem", "3M");
	BAD("open-admission makes no sense", 1, "--port", "net_null0", "--ip", "10.0.0.1/24",
	    "--io-forward", "--open-admission");
}

static const char *write_file(const char *text)
{
	static char path[64];
	snprintf(path, sizeof(path), "/tmp/tallyd-test-%d.conf", (int)getpid());
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	fputs(text, f);
	fclose(f);
	return path;
}

static void test_config_file(void **state)
{
	(void)state;
	struct tallyd_conf c;
	const char *path = write_file("# tallyd test config\n"
				      "eal = --no-huge --file-prefix tallyd-cf\n"
				      "port = net_memif0,role=server,socket=/tmp/y.sock  # memif\n"
				      "ip = 10.1.0.1/16\n"
				      "queues = 2\n"
				      "\n"
				      "open-admission\n"
				      "mem = 64M\n"
				      "control_config = /etc/tally/saved.json\n"
				      "base-port = 9300\n");
	const char *a[] = { "--config", path, "--base-port", "9400", NULL };

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(c.eal_argc, 3);
	assert_string_equal(c.port[0].dev, "net_memif0,role=server,socket=/tmp/y.sock");
	assert_int_equal(c.port[0].mask, htonl(0xffff0000));
	assert_int_equal(c.port[0].queues, 2);
	assert_true(c.open_admission);
	assert_int_equal(c.mem_budget, 64u << 20);
	assert_int_equal(c.base_port, 9400); /* the flag after --config wins */
	assert_string_equal(c.ctl_config, "/etc/tally/saved.json");

	path = write_file("port = net_null0\nip = 10.0.0.1/24\nqueues = lots\n");
	const char *b[] = { "--config", path, NULL };
	assert_int_not_equal(args(&c, b), 0);
	assert_non_null(strstr(err, ":3: 'queues lots'"));
	path = write_file("config = /etc/other.conf\n");
	assert_int_not_equal(args(&c, b), 0);
	assert_non_null(strstr(err, ":1: a config file cannot include another"));
	path = write_file("port = net_null0\nfrobnicate = 3\n");
	assert_int_not_equal(args(&c, b), 0);
	assert_non_null(strstr(err, ":2: unknown setting 'frobnicate'"));
	unlink(path);
}

/* The example shipped in appliance/ stays valid. */
static void test_example_config(void **state)
{
	(void)state;
	struct tallyd_conf c;
	const char *path = getenv("TALLYD_EXAMPLE_CONF");

	assert_non_null(path);
	const char *a[] = { "--config", path, NULL };
	if (args_valid(&c, a))
		fail_msg("%s", err);
	assert_int_equal(c.nports, 1);
	assert_false(c.port[0].is_vdev);
	assert_int_equal(c.port[0].queues, 2);
	assert_int_equal(c.mem_budget, 2ull << 30);
}

static void test_parse_helpers(void **state)
{
	(void)state;
	uint64_t v;
	uint16_t ids[8], n;

	assert_int_equal(tallyd_parse_size("4096", &v), 0);
	assert_int_equal(v, 4096);
	assert_int_equal(tallyd_parse_size("3K", &v), 0);
	assert_int_equal(v, 3072);
	assert_int_equal(tallyd_parse_size("2GiB", &v), 0);
	assert_int_equal(v, 2ull << 30);
	assert_int_equal(tallyd_parse_size("5MB", &v), 0);
	assert_int_equal(v, 5u << 20);
	assert_int_equal(tallyd_parse_size("99999999999999G", &v), -22);
	assert_int_equal(tallyd_parse_size("1T", &v), -22);
	assert_int_equal(tallyd_parse_lcores("1-3,7", ids, 8, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(ids[3], 7);
	assert_int_equal(tallyd_parse_lcores("0-8", ids, 8, &n), -7); /* -E2BIG */
	assert_int_equal(tallyd_parse_lcores("1,,x", ids, 8, &n), -22);
	assert_int_equal(tallyd_parse_lcores("", ids, 8, &n), -22);
}

static void test_sizing(void **state)
{
	(void)state;
	struct tallyd_conf c;
	struct tallyd_sizing s;
	const char *a[] = { "--port", "net_null0", "--ip", "10.0.0.1/24", "--queues", "2",
			    "--mem", "64M", "--rx-desc", "512", "--tx-desc", "256", NULL };

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(tallyd_size(&c, 2u << 20, &s, err, sizeof(err)), 0);
	assert_int_equal(s.ncores, 2);
	/* RX: descriptors + burst + dispatch ring + TX (desc + buffer) + caches, to 2^k-1 */
	unsigned want_rx = 512 + 32 + 1024 + (256 + 64) + 256 * 3;
	assert_true(s.rx_mbufs >= want_rx && s.rx_mbufs < 2 * want_rx);
	assert_int_equal((s.rx_mbufs + 1) & s.rx_mbufs, 0);
	assert_int_equal(s.rx_elt, sizeof(struct rte_mbuf) + RTE_PKTMBUF_HEADROOM + 9216);
	unsigned want_hdr = 2 * (256 + 64) + 256 * 3;
	assert_true(s.hdr_mbufs >= want_hdr && s.hdr_mbufs < 2 * want_hdr);
	assert_true(s.rx_pool_bytes >= (size_t)s.rx_mbufs * s.rx_elt);
	assert_int_equal(s.engine_bytes, 32u << 20);
	assert_int_equal(s.total, 2 * (s.rx_pool_bytes + s.hdr_pool_bytes + s.engine_bytes) +
			 s.ring_bytes + s.overhead);
	assert_int_equal(s.hugepages, (s.total + (2u << 20) - 1) / (2u << 20));
	/* more memory for keys: more pages, exactly the difference */
	struct tallyd_sizing s2;
	c.mem_budget = 128u << 20;
	assert_int_equal(tallyd_size(&c, 2u << 20, &s2, err, sizeof(err)), 0);
	assert_int_equal(s2.total - s.total, 64u << 20);
	/* io-forward needs no engine memory */
	c.io_forward = 1;
	assert_int_equal(tallyd_size(&c, 2u << 20, &s2, err, sizeof(err)), 0);
	assert_int_equal(s2.engine_bytes, 0);
	/* 1 GiB pages: fewer of them */
	c.io_forward = 0;
	assert_int_equal(tallyd_size(&c, 1u << 30, &s2, err, sizeof(err)), 0);
	assert_true(s2.hugepages >= 1 && s2.hugepages < s.hugepages);
	/* a header pool beyond 16-bit extbuf refcounts is refused */
	c.tx_desc = 16384;
	assert_int_equal(tallyd_size(&c, 2u << 20, &s2, err, sizeof(err)), -22);
	assert_non_null(strstr(err, "lower tx-desc"));
}

static void test_hugepage_check(void **state)
{
	(void)state;
	struct tallyd_conf c;
	struct tallyd_sizing s;
	size_t psz;
	unsigned long freep;
	const char *a[] = { "--port", "net_null0", "--ip", "10.0.0.1/24", NULL };
	const char *path = write_file("MemTotal: 1000 kB\nHugePages_Total:     512\n"
				      "HugePages_Free:      100\nHugepagesize:       2048 kB\n");

	assert_int_equal(tallyd_hugepages(path, &psz, &freep), 0);
	assert_int_equal(psz, 2u << 20);
	assert_int_equal(freep, 100);
	path = write_file("MemTotal: 1000 kB\n");
	assert_int_equal(tallyd_hugepages(path, &psz, &freep), -2);
	unlink(path);

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(tallyd_size(&c, 2u << 20, &s, err, sizeof(err)), 0);
	assert_int_equal(tallyd_eal_check_memory(&c, &s, s.hugepages, err, sizeof(err)), 0);
	assert_int_equal(tallyd_eal_check_memory(&c, &s, s.hugepages - 1, err, sizeof(err)), -12);
	char want[64];
	snprintf(want, sizeof(want), "needs %lu pages of 2048 kB", s.hugepages);
	assert_non_null(strstr(err, want));
	assert_non_null(strstr(err, "/proc/sys/vm/nr_hugepages"));
	/* --no-huge needs none */
	tallyd_conf_eal_add(&c, "--no-huge");
	assert_int_equal(tallyd_eal_check_memory(&c, &s, 0, err, sizeof(err)), 0);
}

static void test_eal_prepare(void **state)
{
	(void)state;
	struct tallyd_conf c;
	struct tallyd_sizing s;
	unsigned cpus[2] = { 0, 1 };
	const char *a[] = { "--port", "net_memif0,role=server", "--ip", "10.0.0.1/24", "--queues",
			    "2", "--", "--no-huge", NULL };

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(tallyd_size(&c, 2u << 20, &s, err, sizeof(err)), 0);
	assert_int_equal(tallyd_eal_prepare(&c, &s, cpus, 2, err, sizeof(err)), 0);
	int i = tallyd_conf_eal_has(&c, "--vdev");
	assert_true(i >= 0);
	assert_string_equal(c.eal_argv[i + 1], "net_memif0,role=server");
	assert_true(tallyd_conf_eal_has(&c, "--no-pci") >= 0);
	/* main lcore 0 on CPU 0, the two datapath lcores spread over the CPUs */
	i = tallyd_conf_eal_has(&c, "--lcores");
	assert_true(i >= 0);
	assert_string_equal(c.eal_argv[i], "--lcores=0@0,1@1,2@0");
	assert_int_equal(c.port[0].nlcores, 2);
	assert_int_equal(c.port[0].lcores[1], 2);
	/* --no-huge gets the memory it needs */
	i = tallyd_conf_eal_has(&c, "-m");
	assert_true(i >= 0);
	assert_int_equal(strtoul(c.eal_argv[i + 1], NULL, 10), (s.total >> 20) + 64);

	/* given core list, device and memory are left alone; a PCI port gets -a */
	const char *b[] = { "--port", "0000:3b:00.0", "--ip", "10.0.0.1/24", "--", "-l", "0-1",
			    "--no-huge", "-m", "512", NULL };
	assert_int_equal(args_valid(&c, b), 0);
	assert_int_equal(tallyd_size(&c, 2u << 20, &s, err, sizeof(err)), 0);
	assert_int_equal(tallyd_eal_prepare(&c, &s, cpus, 2, err, sizeof(err)), 0);
	assert_int_equal(tallyd_conf_eal_has(&c, "--lcores"), -1);
	assert_int_equal(tallyd_conf_eal_has(&c, "--no-pci"), -1);
	i = tallyd_conf_eal_has(&c, "-a");
	assert_true(i >= 0);
	assert_string_equal(c.eal_argv[i + 1], "0000:3b:00.0");
	assert_int_equal(c.port[0].nlcores, 0); /* assigned from EAL's workers later */
	int m = 0;
	for (int k = 0; k < c.eal_argc; k++)
		m += !strcmp(c.eal_argv[k], "-m");
	assert_int_equal(m, 1);
}

/* `cores` below the number of ports: port p polled by core p % cores, one queue each; the
 * EAL map names each core's lcore once; what cannot work is refused naming the setting. */
static void test_ports_over_cores(void **state)
{
	(void)state;
	struct tallyd_conf c;
	struct tallyd_sizing s;
	unsigned cpus[2] = { 0, 1 };
	const char *a[] = { "--port", "net_memif0,role=server", "--ip", "10.0.0.1/24", "--port",
			    "net_memif1,role=server", "--ip", "10.0.1.1/24", "--port",
			    "net_memif2,role=server", "--ip", "10.0.2.1/24", "--cores", "2", "--",
			    "--no-huge", NULL };

	assert_int_equal(args_valid(&c, a), 0);
	assert_int_equal(tallyd_conf_ncores(&c), 2);
	assert_false(tallyd_conf_port_shared(&c, 0));
	assert_false(tallyd_conf_port_shared(&c, 1));
	assert_true(tallyd_conf_port_shared(&c, 2));
	assert_int_equal(tallyd_size(&c, 2u << 20, &s, err, sizeof(err)), 0);
	assert_int_equal(tallyd_eal_prepare(&c, &s, cpus, 2, err, sizeof(err)), 0);
	int i = tallyd_conf_eal_has(&c, "--lcores");
	assert_true(i >= 0);
	assert_string_equal(c.eal_argv[i], "--lcores=0@0,1@1,2@0");
	assert_int_equal(c.port[0].lcores[0], 1);
	assert_int_equal(c.port[1].lcores[0], 2);
	assert_int_equal(c.port[2].nlcores, 1);
	assert_int_equal(c.port[2].lcores[0], 1); /* port 2: core 2 % 2 = 0 */
	/* without cores: a core per port, one RX ring each */
	const char *b[] = { "--port", "net_memif0,role=server", "--ip", "10.0.0.1/24", "--port",
			    "net_memif1,role=server", "--ip", "10.0.1.1/24", "--port",
			    "net_memif2,role=server", "--ip", "10.0.2.1/24", NULL };
	assert_int_equal(args_valid(&c, b), 0);
	assert_int_equal(tallyd_conf_ncores(&c), 3);
	assert_false(tallyd_conf_port_shared(&c, 2));
	/* cores = ports: one port each, as without cores */
	const char *e[] = { "--port", "net_null0", "--ip", "10.0.0.1/24", "--port", "net_null1",
			    "--ip", "10.0.1.1/24", "--cores", "2", NULL };
	assert_int_equal(args_valid(&c, e), 0);
	assert_int_equal(tallyd_conf_ncores(&c), 2);
	assert_false(tallyd_conf_port_shared(&c, 1));
	BAD("cores 3 with 2 ports", 1, "--port", "net_null0", "--ip", "10.0.0.1/24", "--port",
	    "net_null1", "--ip", "10.0.1.1/24", "--cores", "3");
	BAD("port 1: queues 2 with cores 1: a port dealt over the cores has one queue", 1,
	    "--port", "net_null0", "--ip", "10.0.0.1/24", "--port", "net_null1", "--ip",
	    "10.0.1.1/24", "--queues", "2", "--cores", "1");
	BAD("port 0: lcores with cores 1", 1, "--port", "net_null0", "--ip", "10.0.0.1/24",
	    "--lcores", "1", "--port", "net_null1", "--ip", "10.0.1.1/24", "--cores", "1");
}

/* rdma-listen: verbs only (no port, `cores` lcores) or beside ports; the rdma-* settings
 * with tally-udpd's names, ranges and texts (appliance/ctl/actl_verbs.c). */
static void test_rdma(void **state)
{
	(void)state;
	struct tallyd_conf c;
	struct tallyd_sizing s;
	unsigned cpus[2] = { 0, 1 };
	const char *a[] = { "--rdma-listen", "192.0.2.1:9170", "--cores", "2", "--rdma-slots",
			    "64", "--rdma-gid-index", "1", "--rdma-max-conns", "16", "--",
			    "--no-huge", NULL };

#ifndef TALLY_HAVE_VERBS /* a build without libibverbs-dev / librdmacm-dev */
	BAD("built without verbs (install libibverbs-dev and librdmacm-dev and rebuild; meson "
	    "option verbs)", 1, "--rdma-listen", "192.0.2.1:9170", "--cores", "2");
	return;
#endif
	assert_int_equal(args_valid(&c, a), 0);
	assert_string_equal(c.rdma.listen, "192.0.2.1:9170");
	assert_int_equal(c.rdma.slots, 64);
	assert_int_equal(c.rdma.gid_index, 1);
	assert_int_equal(c.rdma.max_conns, 16);
	assert_int_equal(tallyd_conf_ncores(&c), 2);
	/* no port: no mbuf pools; EAL without PCI, the two lcores after the main one */
	assert_int_equal(tallyd_size(&c, 2u << 20, &s, err, sizeof(err)), 0);
	assert_int_equal(s.rx_pool_bytes + s.hdr_pool_bytes, 0);
	assert_int_equal(tallyd_eal_prepare(&c, &s, cpus, 2, err, sizeof(err)), 0);
	assert_true(tallyd_conf_eal_has(&c, "--no-pci") >= 0);
	int i = tallyd_conf_eal_has(&c, "--lcores");
	assert_true(i >= 0);
	assert_string_equal(c.eal_argv[i], "--lcores=0@0,1@1,2@0");
	assert_int_equal(c.ncore_lcores, 2);
	assert_int_equal(c.core_lcores[1], 2);
	/* beside a port; the defaults */
	const char *b[] = { "--port", "net_null0", "--ip", "10.0.0.1/24", "--rdma-listen",
			    "10.0.0.1:9170", NULL };
	assert_int_equal(args_valid(&c, b), 0);
	assert_int_equal(tallyd_conf_ncores(&c), 1);
	assert_int_equal(c.rdma.gid_index, -1);
	assert_int_equal(c.rdma.slots, 0);
	/* the same texts as tally-udpd's */
	BAD("'rdma-slots 3': want a power of two in 4..4096", 0, "--rdma-slots", "3");
	BAD("'rdma-slots 8192': want a power of two", 0, "--rdma-slots", "8192");
	BAD("'rdma-gid-index 256': want -1 (rdma_cm chooses) or a GID index 0..255", 0,
	    "--rdma-gid-index", "256");
	BAD("'rdma-max-conns 0': want 1..1024 connections", 0, "--rdma-max-conns", "0");
	BAD("'rdma-listen eth0': want ADDR:PORT", 0, "--rdma-listen", "eth0");
	BAD("unknown setting 'rdma-foo'", 0, "--rdma-foo", "1");
	BAD("the datapath cores", 0, "--cores", "65");
	BAD("or --rdma-listen ADDR:PORT for verbs only", 1, "--cores", "2");
	BAD("cores 2 with 1 ports: with ports, cores deals them over fewer lcores", 1, "--port",
	    "net_null0", "--ip", "10.0.0.1/24", "--cores", "2", "--rdma-listen",
	    "10.0.0.1:9170");
	BAD("io-forward runs no engine: drop rdma-listen", 1, "--port", "net_null0", "--ip",
	    "10.0.0.1/24", "--io-forward", "--rdma-listen", "10.0.0.1:9170");
	/* and in a config file */
	const char *path = write_file("rdma-listen = 192.0.2.1:9171\ncores = 3\nrdma-slots = 32\n");
	const char *f[] = { "--config", path, NULL };
	assert_int_equal(args_valid(&c, f), 0);
	unlink(path);
	assert_string_equal(c.rdma.listen, "192.0.2.1:9171");
	assert_int_equal(tallyd_conf_ncores(&c), 3);
	assert_int_equal(c.rdma.slots, 32);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_defaults_and_flags),
		cmocka_unit_test(test_idle_settings),
		cmocka_unit_test(test_pci_and_two_ports),
		cmocka_unit_test(test_bad_flags),
		cmocka_unit_test(test_bad_combinations),
		cmocka_unit_test(test_config_file),
		cmocka_unit_test(test_example_config),
		cmocka_unit_test(test_parse_helpers),
		cmocka_unit_test(test_sizing),
		cmocka_unit_test(test_hugepage_check),
		cmocka_unit_test(test_eal_prepare),
		cmocka_unit_test(test_ports_over_cores),
		cmocka_unit_test(test_rdma),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
