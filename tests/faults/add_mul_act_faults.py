"""Broken ``add_mul_act`` variants: the real Triton kernels, then a wrong final step in backward.

Both have the signature of ``kernels.add_mul_act.add_mul_act`` and a correct forward.
"""

from __future__ import annotations

import torch

from kernels import add_mul_act as production


class _FaultyAddMulAct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, y, bias, alpha, activation, fault):
        ctx.save_for_backward(x, y, bias)
        ctx.alpha, ctx.activation, ctx.fault = alpha, activation, fault
        return production._forward(x, y, bias, alpha, activation)

    @staticmethod
    def backward(ctx, grad):
        x, y, bias = ctx.saved_tensors
        grad = grad.to(x.dtype)  # the plan's key holds no dtype of grad: plan and launch on the same one
        grad_x, grad_y, partials = production._backward_plan(x, y, bias, ctx.activation, grad)(
            grad, x, y, bias, alpha=ctx.alpha, like=x
        )
        if ctx.fault == "grad_y_without_alpha":  # planted: grad_y = grad_x
            grad_y = grad_x.clone()
        if ctx.fault == "grad_bias_first_group":  # planted: only the first row group is reduced
            partials = partials[:1]
        return grad_x, grad_y, partials.sum(dim=0).to(bias.dtype), None, None, None


def add_mul_act_grad_y_without_alpha(x, y, bias, alpha=1.0, activation="relu"):
    """Backward returns ``grad_y = grad_x``, forgetting the factor alpha.

    Exposed by any gradient check with ``alpha != 1`` (alpha = 1 hides it).
    """
    alpha = production._validate(x, y, bias, alpha, activation)
    return _FaultyAddMulAct.apply(x, y, bias, alpha, activation, "grad_y_without_alpha")


def add_mul_act_grad_bias_first_group(x, y, bias, alpha=1.0, activation="relu"):
    """grad_bias sums only the first row group's partial sums, not all rows.

    Exposed when the backward splits the rows into several groups: under the interpreter a group
    is 2 row tiles (2 rows for N = 64, 4 for N = 32, 16 for N <= 8), so three or more rows
    usually suffice; on a GPU whenever there is more than one row tile. A single group is right.
    """
    alpha = production._validate(x, y, bias, alpha, activation)
    return _FaultyAddMulAct.apply(x, y, bias, alpha, activation, "grad_bias_first_group")


FAULTS = {
    f.__name__: f for f in (add_mul_act_grad_y_without_alpha, add_mul_act_grad_bias_first_group)
}
