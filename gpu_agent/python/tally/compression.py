# SPDX-License-Identifier: Apache-2.0
"""Horovod's compression names (hvd.Compression.fp16) for Tally: each is the name of a
worker-stage codec of the agent (gpu_agent/agent_codec/, tally.Agent.set_codec):

    Compression.none    no compression
    Compression.fp16    f32 gradients sent as f16, summed in f32 by the appliance, widened
                        back to f32 (half the wire bytes, f16 precision and range)

1-bit compression (codec "onebit") needs its optimizer's two-stage error feedback and is
reached through tally.optim.OneBitAdam / OneBitLamb, not through this class."""


class Compression:
    """Codec names for DistributedOptimizer(compression=...) and the DDP hook."""
    none = "none"
    fp16 = "fp16"


def codec_name(compression):
    """The agent codec name of a compression argument (None or a Compression member)."""
    if compression is None or compression == Compression.none:
        return None
    if compression == Compression.fp16:
        return "fp16"
    raise ValueError(f"tally: compression must be Compression.none or Compression.fp16, not {compression!r}")
