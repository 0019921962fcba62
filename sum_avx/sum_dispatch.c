/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until the reducers land */
#include "tally_sum.h"
