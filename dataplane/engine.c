/* SPDX-License-Identifier: Apache-2.0 */
/* placeholder until the engine component lands */
#include "tally_proto.h"
