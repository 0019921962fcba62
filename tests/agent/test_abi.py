#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Python package's ctypes structures match libtally_agent's (sizes from
tally_agent_struct_size), and a package from another build is refused at import with a
message naming the structure."""
import ctypes
import sys

import tally._lib as L

fails = 0


def check(cond, what):
    global fails
    print(("ok   " if cond else "FAIL ") + what)
    fails += not cond


for c, t in (("tally_agent_cfg", L.AgentCfg), ("tally_agent_stats", L.AgentStats),
             ("tally_opt_cfg", L.OptCfg)):
    n = L.lib.tally_agent_struct_size(c.encode())
    check(n > 0 and n == ctypes.sizeof(t), f"{c}: library {n} bytes, package {ctypes.sizeof(t)}")
check(L.lib.tally_agent_struct_size(b"no_such_struct") == 0, "an unknown name has size 0")


class OldCfg(ctypes.Structure):  # an older layout: without the last three fields
    _fields_ = L.AgentCfg._fields_[:-3]


saved = L.AgentCfg
L.AgentCfg = OldCfg
try:
    L._check_layout()
    check(False, "a stale AgentCfg is refused")
except ImportError as e:
    check("tally_agent_cfg" in str(e) and "different builds" in str(e), f"refused: {e}")
finally:
    L.AgentCfg = saved
L._check_layout()  # and the real one passes again
print(f"{fails} failed")
sys.exit(1 if fails else 0)
