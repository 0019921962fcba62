/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until the DPDK transport lands */
#include "tally_xport.h"
