/* SPDX-License-Identifier: Apache-2.0
 * test_agent_numa.c — NUMA-local staging memory: the PCI device → node lookup over a fake
 * sysfs tree, and allocations that land on the node asked for (node 0 exists everywhere). */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "agent_internal.h"

static char root[64];

static void fake_dev(const char *id, const char *content)
{
	char p[256];

	snprintf(p, sizeof(p), "%s/bus/pci/devices/%s", root, id);
	assert_int_equal(mkdir(p, 0755), 0);
	if (content) {
		strncat(p, "/numa_node", sizeof(p) - strlen(p) - 1);
		FILE *f = fopen(p, "w");
		assert_non_null(f);
		fputs(content, f);
		fclose(f);
	}
}

static int setup(void **state)
{
	char p[128];

	(void)state;
	snprintf(root, sizeof(root), "/tmp/tally-numa-%d", (int)getpid());
	const char *parts[] = { "", "/bus", "/bus/pci", "/bus/pci/devices" };
	for (unsigned i = 0; i < 4; i++) {
		snprintf(p, sizeof(p), "%s%s", root, parts[i]);
		if (mkdir(p, 0755))
			return -1;
	}
	return 0;
}

static int teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) ? -1 : 0;
}

static void test_node_of_pci(void **state)
{
	(void)state;
	fake_dev("0000:3b:00.0", "1\n");
	fake_dev("0000:af:00.0", "-1\n");      /* firmware without SRAT */
	fake_dev("0000:d8:00.0", NULL);         /* no numa_node file */
	fake_dev("0000:5e:00.0", "zero\n");

	assert_int_equal(agent_numa_node_of_pci(root, "0000:3b:00.0"), 1);
	/* CUDA prints the id in capitals */
	assert_int_equal(agent_numa_node_of_pci(root, "0000:3B:00.0"), 1);
	assert_int_equal(agent_numa_node_of_pci(root, "0000:af:00.0"), -ENOENT);
	assert_int_equal(agent_numa_node_of_pci(root, "0000:d8:00.0"), -ENOENT);
	assert_int_equal(agent_numa_node_of_pci(root, "0000:5e:00.0"), -ENOENT);
	assert_int_equal(agent_numa_node_of_pci(root, "0000:00:01.0"), -ENOENT);
	/* nothing that could walk out of sysfs */
	assert_int_equal(agent_numa_node_of_pci(root, "../../etc"), -EINVAL);
	assert_int_equal(agent_numa_node_of_pci(root, ""), -EINVAL);
	assert_int_equal(agent_numa_node_of_pci(root, "0000:3b:00.0/x"), -EINVAL);
}

static void test_alloc_on_node(void **state)
{
	char err[128] = "";
	size_t map = 0;

	(void)state;
	for (size_t bytes = 1; bytes <= (8u << 20); bytes *= 64) {
		uint8_t *p = agent_numa_alloc(bytes, 0, err, sizeof(err));

		assert_non_null(p);
		assert_int_equal((uintptr_t)p % 4096, 0);
		assert_int_equal(agent_numa_kind(p, &map), AGENT_HOST_NUMA);
		assert_true(map >= bytes + AGENT_NUMA_HDR);
		for (size_t i = 0; i < bytes; i += 4096)
			assert_int_equal(p[i], 0);
		/* the first and the last page were placed on node 0 at allocation */
		assert_int_equal(agent_numa_node_of(p), 0);
		assert_int_equal(agent_numa_node_of(p + bytes - 1), 0);
		memset(p, 0x5a, bytes);
		agent_numa_free(p);
	}
	assert_null(agent_numa_alloc(4096, 1024, err, sizeof(err)));
	assert_non_null(strstr(err, "out of range"));
	assert_null(agent_numa_alloc(4096, -1, err, sizeof(err)));
}

static void test_kind_of_foreign_buffer(void **state)
{
	uint8_t *raw = calloc(1, 2 * AGENT_NUMA_HDR);

	(void)state;
	assert_non_null(raw);
	assert_int_equal(agent_numa_kind(raw + AGENT_NUMA_HDR, NULL), -EINVAL);
	agent_numa_free(raw + AGENT_NUMA_HDR); /* not ours: left alone */
	agent_numa_set_kind(raw + AGENT_NUMA_HDR, AGENT_HOST_CUDA, 123);
	size_t map = 0;
	assert_int_equal(agent_numa_kind(raw + AGENT_NUMA_HDR, &map), AGENT_HOST_CUDA);
	assert_int_equal(map, 123);
	free(raw);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_node_of_pci),
		cmocka_unit_test(test_alloc_on_node),
		cmocka_unit_test(test_kind_of_foreign_buffer),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
