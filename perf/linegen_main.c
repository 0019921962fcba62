/* SPDX-License-Identifier: Apache-2.0
 * tally-linegen — `tally-perf linegen` against a real appliance over a transport of the
 * registry (--transport udp|dpdk --host ADDR ...): perf_linegen.c built with its port.
 */
#include "perf_cmds.h"

int main(int argc, char **argv)
{
	return perf_linegen_main(argc, argv);
}
