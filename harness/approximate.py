"""The documented error of the GPU's approximate functions, as an allowance per output element.

A kernel may compute ``exp`` with the hardware's fast approximation (Triton's ``tl.exp`` on fp32
is ``ex2.approx`` of a product with log2(e)), or ``sigmoid`` as ``1 / (1 + exp(-x))`` on top of it.
Such a kernel is correct by the field's standard, yet differs from eager (libdevice's accurate
functions) by more than eager's own error where the argument is large: an fp32 softmax on the fast
exp is 25 ulps off at an element of 3e-31, whose exponent argument is -70.

A spec declares what its kernel approximates, ``Numerics(approximate_math={"exp": hook})``: the
hook is called like the reference on the fp64 inputs and returns, for each element of each
output, the argument of that function whose result the element carries (softmax: ``x - max``).
:func:`allowance` turns it into the function's documented bound, in fp32 ulps of the oracle's
value, and the comparison passes an element within that bound whatever the budget
(``harness.numerics``). The bound grows with the argument exactly as the documentation says, so
it matters in the tails and nowhere else: a fast exp with a 4-ulp error near 0 still fails.

Bounds (CUDA C++ Programming Guide, "Mathematical Functions", intrinsic functions):

* ``exp``: ``__expf(x)`` errs by at most ``2 + floor(|1.173 x|)`` ulps.
* ``sigmoid`` = ``1 / (1 + exp(-x))``: the exp's relative error reaches the result scaled by
  ``1 - sigmoid(x)``, plus the division's (``__fdividef``: 2 ulps) and the addition's rounding
  (half an ulp, counted as 1).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

_FP32_EPS = torch.finfo(torch.float32).eps


def exp_ulps(x: torch.Tensor) -> torch.Tensor:
    return 2.0 + torch.floor((1.173 * x).abs())


def sigmoid_ulps(x: torch.Tensor) -> torch.Tensor:
    return (1.0 - torch.sigmoid(x)) * exp_ulps(-x) + 3.0


FUNCTIONS: dict[str, Callable[[torch.Tensor], torch.Tensor]] = {"exp": exp_ulps, "sigmoid": sigmoid_ulps}


def allowance(function: str, argument: torch.Tensor, oracle: torch.Tensor) -> torch.Tensor:
    """What an element may err by when computed through ``function``'s fast form at ``argument``:
    the documented ulps, in fp32 ulps of the oracle's value (fp64, the output's shape)."""
    ulps = FUNCTIONS[function](argument.detach().to(torch.float64))
    magnitude = oracle.detach().to(torch.float64).abs()
    allowed = ulps * _FP32_EPS * magnitude
    # An infinite argument (a masked logit, -inf) makes an exact 0 or a NaN: no allowance there.
    return torch.where(ulps.isfinite() & (magnitude > 0), allowed, 0.0).expand_as(oracle)
