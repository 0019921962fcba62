/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until this benchmark lands */
#include "perf_cmds.h"
#include <errno.h>
int perf_engine_main(int argc, char **argv) { (void)argc; (void)argv; return -ENOSYS; }
