/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until the client component lands */
#include "tally_proto.h"
