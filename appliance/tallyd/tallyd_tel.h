/* SPDX-License-Identifier: Apache-2.0
 * tallyd_tel.h — DPDK telemetry commands /tally/stats (every counter, as `tallyctl stats`
 * totals) and /tally/status. Register after the control plane started, unregister before
 * the lcores stop (telemetry commands cannot be removed: they answer "stopped").
 */
#ifndef TALLYD_TEL_H
#define TALLYD_TEL_H

struct tallyd;

void tallyd_tel_register(struct tallyd *d);
void tallyd_tel_unregister(void);

#endif
