# SPDX-License-Identifier: Apache-2.0
"""Fused multi-tensor optimizer steps of libtally_agent (tally_opt.h) on torch tensors.

step(kind, params, grads, m, v, **hyper) updates f32 tensors in place: CPU tensors with the
CPU twin (AVX-512 or scalar), CUDA tensors with the fused kernels (one launch per batch).
"""
import ctypes

from . import _lib

KINDS = {"sgd": _lib.OPT_SGD, "adam": _lib.OPT_ADAM, "adamw": _lib.OPT_ADAMW, "lamb": _lib.OPT_LAMB}


def _ptr(t):
    if t is None:
        return None
    if not t.is_contiguous() or str(t.dtype) != "torch.float32":
        raise ValueError("tally.optim: tensors must be contiguous float32")
    return ctypes.c_void_p(t.data_ptr())


def step(kind, params, grads, m=None, v=None, *, lr, weight_decay=0.0, momentum=0.0,
         dampening=0.0, nesterov=False, first=False, betas=(0.9, 0.999), eps=1e-8, step=1):
    """One fused update of every tensor in `params` (lists of equal length)."""
    cfg = _lib.OptCfg()
    _lib.lib.tally_opt_cfg_defaults(ctypes.byref(cfg), KINDS[kind])
    cfg.lr, cfg.weight_decay, cfg.momentum, cfg.dampening = lr, weight_decay, momentum, dampening
    cfg.nesterov, cfg.first = int(bool(nesterov)), int(bool(first))
    cfg.beta1, cfg.beta2, cfg.eps, cfg.step = betas[0], betas[1], eps, int(step)
    why = ctypes.c_char_p()
    if _lib.lib.tally_opt_cfg_check(ctypes.byref(cfg), ctypes.byref(why)):
        raise ValueError("tally.optim: " + why.value.decode())
    n = len(params)
    m = m if m is not None else [None] * n
    v = v if v is not None else [None] * n
    arr = (_lib.OptTensor * n)()
    cuda = None
    for i in range(n):
        p = params[i]
        for other in (grads[i], m[i], v[i]):
            if other is not None and (other.numel() != p.numel() or other.device != p.device):
                raise ValueError(f"tally.optim: tensor {i}: grad/state shape or device differs from the parameter")
        if cuda is None:
            cuda = p.is_cuda
        elif cuda != p.is_cuda:
            raise ValueError("tally.optim: mixing CPU and CUDA tensors in one step")
        arr[i] = _lib.OptTensor(_ptr(p), _ptr(grads[i]), _ptr(m[i]), _ptr(v[i]), p.numel())
    if cuda:
        import torch
        stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
        rc = _lib.lib.tally_opt_step_cuda(ctypes.byref(cfg), arr, n, stream)
        if rc:
            raise RuntimeError(f"tally.optim: CUDA step failed ({rc}): {_lib.lib.tally_opt_cuda_error().decode()}")
    else:
        rc = _lib.lib.tally_opt_step_cpu(ctypes.byref(cfg), arr, n)
        if rc:
            raise RuntimeError(f"tally.optim: CPU step failed ({rc})")


# 1-bit Adam / 1-bit LAMB (compressed momentum through the appliance) and plain LAMB
from .onebit import Lamb, OneBitAdam, OneBitLamb, TallyExchange  # noqa: E402,F401
