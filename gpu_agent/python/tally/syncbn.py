# SPDX-License-Identifier: Apache-2.0
"""Horovod's SyncBatchNorm on Tally: batch normalisation whose batch statistics are taken over
every rank's batch. Forward sums each channel's count, sum and sum of squares over the ranks,
backward the sums of dy and dy * x_hat, both through the appliance (tally.horovod allreduce,
op=Sum, f32). The weight's and bias's gradients stay local, for the optimizer to average, as
in torch's and Horovod's SyncBatchNorm. Every rank must run the same layers in the same order
(each layer's sums are named by its construction order)."""
import itertools

import torch
import torch.nn.functional as F
from torch.nn.modules.batchnorm import _BatchNorm

_ids = itertools.count()


def _sum(t, name):
    from .horovod import Sum, allreduce_
    return allreduce_(t.float().contiguous(), name=name, op=Sum)


class _Fn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, eps, name, stats):
        c = x.shape[1]
        xs = x.transpose(0, 1).reshape(c, -1).float()
        local = torch.cat([xs.sum(1), (xs * xs).sum(1), torch.tensor([float(xs.shape[1])])])
        tot = _sum(local, f"{name}.fwd")
        n = tot[-1]
        mean = tot[:c] / n
        var = (tot[c:2 * c] / n - mean * mean).clamp_min(0)
        invstd = torch.rsqrt(var + eps)
        shape = [1, c] + [1] * (x.dim() - 2)
        xhat = (x.float() - mean.view(shape)) * invstd.view(shape)
        ctx.save_for_backward(xhat, invstd, weight)
        ctx.n, ctx.name, ctx.dtype = n, name, x.dtype
        stats[:] = [mean, var * n / max(n - 1, 1)]
        w = weight.view(shape) if weight is not None else 1.0
        b = bias.view(shape) if bias is not None else 0.0
        return (xhat * w + b).to(x.dtype)

    @staticmethod
    def backward(ctx, dy):
        xhat, invstd, weight = ctx.saved_tensors
        c = xhat.shape[1]
        shape = [1, c] + [1] * (xhat.dim() - 2)
        dims = [0] + list(range(2, xhat.dim()))
        dy = dy.float()
        sdy_l, sdyx_l = dy.sum(dims), (dy * xhat).sum(dims)
        tot = _sum(torch.cat([sdy_l, sdyx_l]), f"{ctx.name}.bwd")
        sdy, sdyx = tot[:c], tot[c:]
        w = weight.float() if weight is not None else torch.ones(c)
        dx = (w * invstd).view(shape) / ctx.n * (ctx.n * dy - sdy.view(shape) - xhat * sdyx.view(shape))
        dw = sdyx_l.to(weight.dtype) if weight is not None else None
        db = sdy_l.to(weight.dtype) if weight is not None else None
        return dx.to(ctx.dtype), dw, db, None, None, None


class SyncBatchNorm(_BatchNorm):
    """hvd.SyncBatchNorm(num_features, eps, momentum, affine, track_running_stats)."""

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True):
        super().__init__(num_features, eps, momentum, affine, track_running_stats)
        self._tally_name = f"syncbn.{next(_ids)}"

    def _check_input_dim(self, x):
        if x.dim() < 2:
            raise ValueError(f"SyncBatchNorm: expected at least 2D input (got {x.dim()}D)")

    def forward(self, x):
        self._check_input_dim(x)
        if not self.training and self.track_running_stats:
            return F.batch_norm(x, self.running_mean, self.running_var, self.weight, self.bias, False, 0.0,
                                self.eps)
        stats = []
        y = _Fn.apply(x, self.weight, self.bias, self.eps, self._tally_name, stats)
        if self.training and self.track_running_stats:
            self.num_batches_tracked += 1
            m = self.momentum if self.momentum is not None else 1.0 / float(self.num_batches_tracked)
            with torch.no_grad():
                self.running_mean.mul_(1 - m).add_(stats[0].to(self.running_mean.dtype), alpha=m)
                self.running_var.mul_(1 - m).add_(stats[1].to(self.running_var.dtype), alpha=m)
        return y
