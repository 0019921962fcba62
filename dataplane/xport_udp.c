/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until the kernel UDP transport lands */
#include "tally_xport.h"
