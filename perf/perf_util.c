/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until this benchmark lands */
#include "perf_cmds.h"
