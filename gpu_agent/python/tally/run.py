# SPDX-License-Identifier: Apache-2.0
"""`python3 -m tally.run ARGS` is `torchrun ARGS` on the torch this Python has, with the fix
Debian's torch 1.13 under Python 3.11 needs: its torchrun fails before starting any worker
with "AttributeError: 'NoneType' object has no attribute 'get'" (torch's Std.from_str maps
its own default --redirects / --tee "0" to None: IntFlag iteration skips 0 since Python
3.11). The fix maps a plain number to Std(number), nothing else; on a torch without the bug
nothing changes. Debian's torch 2.x has no libuv: its stores are made without it
(examples/train.py torch_store_compat)."""
import sys


def fix_std():
    """Patch torch.distributed.elastic's Std.from_str where it returns None for a number."""
    import torch.distributed.elastic.multiprocessing.api as api
    if getattr(api.Std.from_str, "_tally_fixed", False):
        return
    orig = api.Std.from_str.__func__

    def from_str(cls, vm):
        r = orig(cls, vm)
        return cls(int(vm)) if r is None and vm.isdigit() else r
    from_str._tally_fixed = True
    api.Std.from_str = classmethod(from_str)


def no_libuv():
    """Debian's torch 2.x: every TCPStore of this process (and USE_LIBUV=0 for the workers)
    without libuv where a libuv store cannot be made; nothing on torch 1.13."""
    import os
    import torch.distributed as dist
    try:
        dist.TCPStore("127.0.0.1", 0, is_master=True, use_libuv=True)
        return
    except TypeError:
        return  # torch < 2.2: no libuv store at all
    except RuntimeError as e:
        if "libuv" not in str(e):
            raise
    os.environ["USE_LIBUV"] = "0"


def main(argv=None):
    fix_std()
    no_libuv()
    from torch.distributed.run import main as torchrun
    sys.argv[0] = "torchrun"
    return torchrun(argv)


if __name__ == "__main__":
    sys.exit(main())
