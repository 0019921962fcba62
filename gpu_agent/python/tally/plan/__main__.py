# SPDX-License-Identifier: Apache-2.0
"""tally-plan PROFILE --cluster CLUSTER.json [-o PLAN.json]: prints the plan and the predicted
time per minibatch, writes the plan as JSON."""
import argparse
import json
import sys

from .cost import ClusterError
from .planner import ProfileError, format_plan, plan


def main(argv=None):
    p = argparse.ArgumentParser(prog="tally-plan", description=__doc__.split("\n")[0])
    p.add_argument("profile", help="profile JSON (tally.plan.profile)")
    p.add_argument("--cluster", required=True,
                   help="cluster JSON: workers, link_gbit, alpha_us, appliance {count, "
                        "link_gbit, cores, engine_gbit}, overlap (false: a stage costs compute "
                        "+ sync, as tally.plan.runtime; default true, PipeDream's max), "
                        "host_cores (the workers share one host of that many cores: an "
                        "emulated cluster; a profile with solo=True times); or "
                        "{\"levels\": [those, innermost first]} (each level's workers: units "
                        "of the level below)")
    p.add_argument("-o", "--output", default=None, help="write the plan JSON here")
    p.add_argument("--json", action="store_true", help="print the plan JSON, not the table")
    o = p.parse_args(argv)
    try:
        pl = plan(o.profile, o.cluster)
    except (ClusterError, ProfileError) as e:
        print(f"tally-plan: {e}", file=sys.stderr)
        return 2
    print(json.dumps(pl, indent=1) if o.json else format_plan(pl))
    if o.output:
        with open(o.output, "w") as f:
            json.dump(pl, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
