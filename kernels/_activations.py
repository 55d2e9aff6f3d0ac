"""Activation functions and their derivatives for Triton kernels.

Shared by every kernel that applies an activation (add_mul_act, bias_gelu, glu, linear_act), so
each form is written, tested and fixed once. Everything here runs unchanged on the GPU and under
Triton's CPU interpreter: no libdevice calls (they fail in the interpreter), no ``tanh``, and
tensors on the left of global constants (``constexpr * tensor`` fails in the interpreter). The
exceptions take a stand-in under the interpreter: the reciprocal (``_rows.reciprocal_moderate``:
on the GPU a single ``rcp.approx`` instruction, fp32 for the fast path or its fp64 form refined
with PRECISE; a division under the interpreter), erfcf and expf in exact gelu's fp32 value and
gradient (:func:`_erfc`, :func:`_exp_as_eager`: fp64 evaluations rounded to fp32), and the
gradient's uncontracted add (libdevice's ``add_rn``; numpy's add never contracts).

``ACT`` names the activation (a ``tl.constexpr`` string, so each kernel is compiled for one).
``PRECISE`` (constexpr) is set by kernels that store fp32: the activation is then evaluated in
fp64 and **returned in fp64**, so that the caller rounds once, at its store, after its own last
multiply (a gated unit's ``act(a) * b``, a gradient's ``grad * act'(z)``). Three are the
exceptions, each eager's own fp32 computation: exact gelu's value (:func:`gelu_as_eager`) and
input gradient (:func:`gelu_grad_as_eager`, bias-GELU's backward), and SwiGLU's SiLU
(:func:`silu_as_eager`, which glu's kernel calls itself). fp32
evaluation, even with accurate exp and division, composes five to seven roundings: 2-4 ulp at
worst, against eager's ~1 on the CPU, which exceeds the harness's envelope where it has no slack
(glu's silu gradient in the sigmoid's tail: 2.3x eager's envelope; exact gelu at its minimum:
1.96x). In fp64 the result is correctly rounded but for near-ties. The fp64 work is written for
what fp32 results need, about 1e-9 relative, not for fp64's own ulp: the exp is
``_rows.exp_wide`` (11 operations, libdevice's takes 16 and a branch) and the reciprocals a refined
hardware seed (``_rows.reciprocal_moderate``: 3 fused multiply-adds where IEEE division takes 9 and
a slow path), because the fp64 lanes (64 an SM on an H100) bound these kernels, and libdevice's
forms leave them far slower. In these forms SwiGLU's fp32 forward, 12 bytes an element for its
fp64 work, ran near copy bandwidth on an H100 but not on an H200, whose memory is faster and whose
lanes are not, hence :func:`silu_as_eager`; exact gelu's fp64 value, 54 fp64 operation slots an
element (conversions included), stays well below it on either, hence :func:`gelu_as_eager`
(docs/performance.md).
Without PRECISE (16-bit outputs) everything is fp32 with the fast exp and reciprocal, whose ~1e-5
relative error stays far below a 16-bit ulp, and the result is fp32.

* ``relu``: ``z`` where ``z > 0``, else 0 (NaN kept); its slope is 0 at ``z <= 0`` and 1
  elsewhere (1 for NaN: torch's threshold_backward). Exact in any precision, never widened.
* ``sigmoid``, ``silu``: the sigmoid from ``exp(-|z|)``, which never overflows, and its derivative
  as ``exp(-|z|) / (1 + exp(-|z|))^2``, which avoids the cancellation in ``s * (1 - s)``.
* ``gelu_tanh``: ``0.5 z (1 + tanh(u))`` written as the identical ``z * sigmoid(2u)``,
  ``u = sqrt(2/pi) (z + 0.044715 z^3)`` (no tanh primitive, and no cancellation in the tail).
* ``gelu`` (the exact form): ``z Phi(z)`` with ``Phi(z) = erfc(-z / sqrt(2)) / 2`` and slope
  ``Phi(z) + z phi(z)``. The usual ``0.5 (1 + erf(z / sqrt(2)))`` cancels for negative z (at
  z = -2 it has lost three bits, past z = -5.5 everything), so Phi comes from an erfc written
  here (there is no erfc primitive; ``tl.math.erf`` exists on both backends, but it is the
  cancelling form).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import NamedTuple

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from kernels import _partials, _rows
from kernels._runtime import interpreting, resident_programs, sm_count

# Kernels accept any subset of these; each spec lists its own.
ACTIVATIONS = ("relu", "sigmoid", "silu", "gelu_tanh", "gelu")

_TWO_SQRT_2_OVER_PI = tl.constexpr(2.0 * math.sqrt(2.0 / math.pi))
_GELU_C = tl.constexpr(0.044715)
_SQRT2 = tl.constexpr(math.sqrt(2.0))
_TWO_SQRT2 = tl.constexpr(2.0 * math.sqrt(2.0))
_NEG_HALF_LOG2E = tl.constexpr(-0.5 * math.log2(math.e))
_INV_SQRT_2PI = tl.constexpr(1.0 / math.sqrt(2.0 * math.pi))
_NEG_SQRT1_2 = tl.constexpr(-math.sqrt(0.5))  # the reference's constant, rounded to fp32 as eager's is
_NEG_TWO_OVER_SQRT_PI = tl.constexpr(-2.0 / math.sqrt(math.pi))  # erfc's derivative's, as autograd's formula has it
_LIBDEVICE = tl.constexpr(not interpreting())  # libdevice's functions exist on the GPU only
# erfc's polynomial is fitted up to a = 10.066; past |z| = 10.06 sqrt(2) = 14.227 (just inside it),
# where gelu's value is a few of fp32's least subnormals (1.4e-45), |z| is clamped for the
# polynomial only, which keeps it in range while exp(-z^2 / 2) takes the value on down to 0.
_ERFC_CLAMP_Z = tl.constexpr(10.06 * math.sqrt(2.0))


# ----------------------------------------------------------------------------------------------
# sigmoid family
# ----------------------------------------------------------------------------------------------


@triton.jit
def sigmoid_and_slope(z, PRECISE: tl.constexpr):
    """sigmoid(z) and its derivative sigmoid(z) * sigmoid(-z), from exp(-|z|) (no overflow)."""
    if PRECISE:
        e = _rows.exp_wide(-tl.abs(z))
    else:
        e = _rows.exp(-tl.abs(z), False)
    inv = _rows.reciprocal_moderate(1.0 + e, PRECISE)
    return tl.where(z >= 0, inv, e * inv), e * inv * inv


@triton.jit
def _gelu_inner(z):
    """2u for gelu's tanh form, u = sqrt(2/pi) * (z + c z^3), so that tanh(u) = 2 sigmoid(2u) - 1."""
    return (z * z * z * _GELU_C + z) * _TWO_SQRT_2_OVER_PI


# ----------------------------------------------------------------------------------------------
# erfc and the normal distribution
# ----------------------------------------------------------------------------------------------
#
# erfc(a) for a >= 0 is written as exp(-a^2) * w(q) / (1 + 2a), q = (a - 2) / (a + 2): the factor
# w = (1 + 2a) exp(a^2) erfc(a) is smooth and bounded (1 at a = 0, 2/sqrt(pi) as a -> inf) and q
# maps [0, inf) onto [-1, 1), so one polynomial in q covers every a (N. Juffa's construction).
# The coefficients are Chebyshev least-squares fits of w with relative weights on q in
# [-1, 0.6685] (a up to 10.066, where erfc underflows in fp32): degree 11 in fp64, max relative
# error 1.0e-9, for PRECISE; degree 7 rounded to fp32, 1.3e-6, for 16-bit results, whose ulp is
# 1e-3 (fp16) or 8e-3 (bf16). Phi(z) for z <= 0 is erfc(|z| / sqrt(2)) / 2 itself, and for z > 0
# it is 1 - erfc(|z| / sqrt(2)) / 2, which lies in [1/2, 1]: no cancellation anywhere, and no
# libdevice call (erf, erfc and tanh fail in the interpreter, and 1 + erf would be the cancelling
# form anyway).
#
# With PRECISE all of it is evaluated in fp64 (module docstring). For erfc that matters most: an
# all-fp32 version with every trick at hand (a^2 split into an exact head and a small tail, a
# Fast2Sum-compensated denominator, the corrections folded into one factor) still reaches 2.1 eps
# of relative error (3.5 ulp), 1.96x eager's envelope at gelu's minimum (z = -0.75: gelu' = 0
# gives the envelope no slack there, and the CPU's eager erfc is within 0.8 ulp). In fp64 what
# remains is the polynomials' 1e-9: within 0.52 ulp after rounding to fp32, near zero too (no
# separate erf series is needed there: Phi is r, or 1 - r with r near 1/2, which loses nothing of
# r's relative accuracy). The fp64 path is 42 fp64 operations an element (exp and reciprocal
# included). 16-bit results, the case that matters for speed, take the fp32 path: one exp2 of
# -z^2/2 and two approximate reciprocals, relative error under 7e-6. What is evaluated is Phi
# itself (the coefficients halved, exactly) from |z| (q and 1 + 2a rescaled, so a = |z|/sqrt(2) is
# never formed). On sm_90 bias_gelu's 16-bit forward is then 30.5 SASS instructions an element,
# where Triton's division, the halving and the scaling of z as separate steps take 47: at 16-bit
# copy bandwidth an H100 issues ~45 an element, so the count is what decides how near the memory
# roofline exact gelu gets.


@triton.jit
def _erfc_w_precise(q):
    """w(q) / 2, degree 11, fp64 coefficients (evaluated in fp64)."""
    p = q * 4.026518892337185e-05 + 8.581305192716194e-05
    p = p * q + -0.00020042470667277893
    p = p * q + -0.0007116428197450763
    p = p * q + 0.0006259658689647771
    p = p * q + 0.004355031072829077
    p = p * q + -0.004015241700529352
    p = p * q + -0.02710899051472966
    p = p * q + 0.08202549065845663
    p = p * q + -0.08301525649494458
    p = p * q + -0.04638190920178844
    return p * q + 0.6384891912986763


@triton.jit
def _erfc_w_fast(q):
    """w(q) / 2, degree 7, fp32 coefficients."""
    p = q * 0.0009645514655858278 + 0.0038322454784065485
    p = p * q + -0.004391487687826157
    p = p * q + -0.026986997574567795
    p = p * q + 0.08212482184171677
    p = p * q + -0.08302468061447144
    p = p * q + -0.046388328075408936
    return p * q + 0.6384893655776978


@triton.jit
def _normal_cdf_and_density(z, PRECISE: tl.constexpr):
    """(Phi(z), exp(-z^2 / 2)) in z's dtype (fp64 with PRECISE, fp32 without; see above): Phi(z) =
    erfc(a) / 2 for z <= 0, a = |z| / sqrt(2), and 1 - erfc(a) / 2 above. Written in |z| itself:
    q = (a - 2) / (a + 2) is the same ratio of |z| - 2 sqrt(2) and |z| + 2 sqrt(2), and
    1 + 2a = 1 + sqrt(2) |z|, so a is never formed; the polynomials carry erfc's halving (exactly,
    a power of two)."""
    y = tl.abs(z)
    c = tl.minimum(y, _ERFC_CLAMP_Z)
    num = c + _TWO_SQRT2
    den = c * _SQRT2 + 1.0
    if PRECISE:
        e = _rows.exp_wide(z * z * -0.5)
        # q and 1 / den from one reciprocal
        inv = _rows.reciprocal_moderate(num * den, PRECISE)
        # past the clamp (|z| > 14.227) c only keeps the polynomial in range: e is 1.1e-44 there and
        # falls on, so the value is a few least subnormals at most (and NaN stays NaN through e)
        r = e * (_erfc_w_precise((c - _TWO_SQRT2) * den * inv) * num * inv)
    else:
        e = tl.math.exp2(z * z * _NEG_HALF_LOG2E)
        # two approximate reciprocals: fewer multiplies than sharing one, and within 1 ulp each
        q = (c - _TWO_SQRT2) * _rows.reciprocal_moderate(num, PRECISE)
        # 16-bit results: past the range r is ~1e-44, below any 16-bit value's half ulp, so the
        # select that makes it 0 would change no output
        r = e * (_erfc_w_fast(q) * _rows.reciprocal_moderate(den, PRECISE))
    return tl.where(z > 0, 1.0 - r, r), e


@triton.jit
def _widen(z, PRECISE: tl.constexpr):
    """z in the activations' compute dtype: fp64 with PRECISE, else as it is (fp32)."""
    if PRECISE:
        return z.to(tl.float64)
    else:
        return z


@triton.jit
def gelu_and_slope(z, PRECISE: tl.constexpr):
    """Exact GELU z Phi(z) and its slope Phi(z) + z phi(z) of fp32 z, in the compute dtype.

    Phi(z) = erfc(t) / 2 and phi(z) = exp(-t^2) / sqrt(2 pi) with t = -z / sqrt(2). With PRECISE
    t is formed in fp64, so the kernel does not share eager's rounding of t (amplified 2t^2-fold
    in the tail): its error is its own half ulp, wherever eager's lies.
    """
    z = _widen(z, PRECISE)
    cdf, e = _normal_cdf_and_density(z, PRECISE)
    return z * cdf, cdf + z * (e * _INV_SQRT_2PI)


@triton.jit
def gelu_as_eager(z):
    """Exact GELU's value for fp32 results, as eager computes the reference in fp32:
    ``(z / 2) erfc(z * -sqrt(1/2))`` with z rounded to fp32 (an exact fp64 sum rounds as eager's
    fp32 add does), the argument rounded as eager's multiply rounds it, and CUDA's erfcf, which is
    what torch.erfc runs: on the GPU, eager's value bit for bit but for flushed subnormals, in fp32
    arithmetic.

    It is one of the three fp32 results here not evaluated in fp64 (:func:`silu_as_eager` and
    :func:`gelu_grad_as_eager` are the others). In fp64 (erfc's polynomial, an exp, a reciprocal: 54 fp64 slots an element)
    bias-GELU's fp32 forward is bound by the fp64 lanes (64 an SM on an H100), well below copy
    bandwidth; in eager's form it runs near copy bandwidth on an H100 (docs/performance.md).
    Rounded as eager rounds, the tail's amplified roundings (z's, the argument's) are eager's own,
    so its error is eager's; the other activations (SwiGLU's forward value aside) keep fp64,
    because their fp32 values, computed in another order than eager's, exceed twice eager's error
    in the tail (GEGLU's tanh form: 2.25x). Bias-GELU's gradient is eager's as well
    (:func:`gelu_grad_as_eager`); the other kernels' slopes stay fp64 (:func:`gelu_and_slope`)."""
    z = z.to(tl.float32)
    return (z * 0.5) * _erfc(z * _NEG_SQRT1_2)


@triton.jit
def silu_as_eager(z):
    """SiLU's value for fp32 results as eager computes it: ``z / (1 + exp(-z))`` in fp32, with
    CUDA's expf (libdevice's, what eager's kernel calls) and an IEEE division: on the GPU eager's
    value bit for bit, in fp32 arithmetic (as :func:`gelu_as_eager` is exact gelu's). The
    interpreter has no libdevice and takes the fp64 value rounded to fp32 (within half an ulp).

    SwiGLU's fp32 forward takes it: its fp64 form (an exp and a reciprocal, the conversions) binds
    the fp64 lanes where the memory system is fast (an H200: 0.92x torch.compile's time,
    benchmarks/results/2026-11-28-h200-24); in fp32 it is a memory-bound pass. Its error is
    F.silu's own; the harness's reference is the tail-stable ``z * sigmoid(z)``, against whose fp32
    run glu's fp32 forward scores at most 1.70 at the nightly profile (within the budget). The
    slope (the backward) stays fp64: eager's autograd through that reference in fp32 (IEEE
    divisions, both of the sigmoid's branches) made SwiGLU's fp32 forward+backward 33% slower on
    an H200 than the fp64 slope (benchmarks/results/2026-11-29-h200-32 call 5)."""
    if _LIBDEVICE:
        return tl.math.div_rn(z, 1.0 + libdevice.exp(-z))
    else:
        wide = z.to(tl.float64)
        return (wide * sigmoid_and_slope(wide, True)[0]).to(tl.float32)


@triton.jit
def gelu_grad_as_eager(z, g):
    """Exact GELU's input gradient for fp32 results, ``g * gelu'(z)``, as eager's autograd computes
    it through the reference ``(z * 0.5) * erfc(z * -sqrt(1/2))`` in fp32 (references/_activations.py):
    with ``t = z * -sqrt(1/2)``, the product's two branches ``(g * erfc(t)) * 0.5`` and erfc's
    derivative ``((exp(-(t * t)) * -2/sqrt(pi)) * (g * (z * 0.5))) * -sqrt(1/2)``, each product
    rounded to fp32 where eager's kernels round it, CUDA's erfcf and expf, and the two branches
    added as autograd adds them (an IEEE add, not contracted into an fma with the product before
    it). On the GPU that is eager's gradient bit for bit but for flushed subnormals (the kernel
    flushes a subnormal value or product to zero); under the interpreter erfc and exp are the fp64
    evaluations rounded to fp32.

    Bias-GELU's fp32 backward takes it: the fp64 slope (:func:`gelu_and_slope`, 42 fp64 slots an
    element) binds the fp64 lanes, at 0.78x torch.compile's time on an H200 (benchmarks/results/
    2026-11-29-h200-31, call 8), where this is fp32 work under a memory-bound pass. Its error is
    eager's own, roundings of z and t included (the harness's envelope is eager's error)."""
    t = z * _NEG_SQRT1_2
    from_value = (g * _erfc(t)) * 0.5
    from_erfc = ((_exp_as_eager(-(t * t)) * _NEG_TWO_OVER_SQRT_PI) * (g * (z * 0.5))) * _NEG_SQRT1_2
    if _LIBDEVICE:
        return libdevice.add_rn(from_erfc, from_value)
    else:
        return from_erfc + from_value


@triton.jit
def _exp_as_eager(x):
    """e**x of fp32 ``x <= 0`` in fp32: libdevice's expf on the GPU (CUDA's, which torch.exp calls);
    the interpreter takes :func:`kernels._rows.exp_wide` in fp64 rounded to fp32."""
    if _LIBDEVICE:
        return libdevice.exp(x)
    else:
        return _rows.exp_wide(x.to(tl.float64)).to(tl.float32)


@triton.jit
def _erfc(t):
    """erfc of fp32 t in fp32: libdevice's erfcf on the GPU (CUDA's, which torch.erfc calls); the
    interpreter has no libdevice, and takes the same function evaluated in fp64 (within 1e-9
    relative, more accurate than erfcf) and rounded to fp32."""
    if _LIBDEVICE:
        return libdevice.erfc(t)
    else:
        return (_normal_cdf_and_density(t.to(tl.float64) * -_SQRT2, True)[0] * 2.0).to(tl.float32)


# ----------------------------------------------------------------------------------------------
# The activations
# ----------------------------------------------------------------------------------------------


@triton.jit
def activate(z, ACT: tl.constexpr, PRECISE: tl.constexpr):
    """act(z) for fp32 z; fp64 with PRECISE (relu: z's dtype; exact gelu: fp32, eager's own value),
    the caller rounds at its store."""
    if ACT == "relu":
        return tl.where(z <= 0, 0.0, z)  # keeps NaN, as torch.relu does
    elif ACT == "sigmoid":
        return sigmoid_and_slope(_widen(z, PRECISE), PRECISE)[0]
    elif ACT == "silu":
        z = _widen(z, PRECISE)
        return z * sigmoid_and_slope(z, PRECISE)[0]
    elif ACT == "gelu_tanh":  # z * sigmoid(2u), u = sqrt(2/pi) * (z + c z^3)
        z = _widen(z, PRECISE)
        return z * sigmoid_and_slope(_gelu_inner(z), PRECISE)[0]
    elif PRECISE:  # gelu of fp32 results: eager's own value (below)
        return gelu_as_eager(z)
    else:  # gelu: z Phi(z)
        return gelu_and_slope(z, PRECISE)[0]


@triton.jit
def activation_slope(z, ACT: tl.constexpr, PRECISE: tl.constexpr):
    """d act / d z for fp32 z, in the compute dtype (as :func:`activate`)."""
    return activate_with_slope(z, ACT, PRECISE)[1]


@triton.jit
def activate_with_slope(z, ACT: tl.constexpr, PRECISE: tl.constexpr):
    """(act(z), act'(z)), sharing the exp/erfc work (a gated unit's backward needs both)."""
    if ACT == "relu":
        return tl.where(z <= 0, 0.0, z), tl.where(z <= 0, 0.0, 1.0)
    elif ACT == "sigmoid":
        return sigmoid_and_slope(_widen(z, PRECISE), PRECISE)
    elif ACT == "silu":
        z = _widen(z, PRECISE)
        s, ds = sigmoid_and_slope(z, PRECISE)
        return z * s, s + z * ds
    elif ACT == "gelu_tanh":
        z = _widen(z, PRECISE)
        s, ds = sigmoid_and_slope(_gelu_inner(z), PRECISE)
        return z * s, s + z * ds * ((z * z * (3.0 * _GELU_C) + 1.0) * _TWO_SQRT_2_OVER_PI)
    else:
        return gelu_and_slope(z, PRECISE)


# ----------------------------------------------------------------------------------------------
# grad_bias: how the kernels that add a bias before the activation reduce its gradient
# ----------------------------------------------------------------------------------------------
# grad_bias is the sum of grad_z over rows. Each backward program walks a fixed group of row tiles
# for one column block, keeps the running sum in fp64 registers and writes one partial row; a
# small sum over the partials finishes it. No atomics, and the grouping depends only on the shape
# and the device (its SM count, and how many of the compiled kernel's programs an SM holds, sized
# with the gradient laid out dense whatever its layout: the native path, which copies a strided
# gradient dense, and the Python path, which reads it in place, group alike), so the result is
# bitwise reproducible. On a GPU there are as many programs as the device holds at
# once: one wave, the fastest count of programs per SM or within 2% of it; more start a second,
# partly filled wave (chosen by benchmarks/tune_rows.py elementwise_backward on an H100,
# benchmarks/results/2026-11-24-h100-4). Under the interpreter groups are 2 tiles, so that small
# test cases already produce several partials.
INTERPRETER_TILES_PER_GROUP = 2


@functools.lru_cache(maxsize=None)
def _stand_in(device: torch.device) -> torch.Tensor:
    """An aligned fp64 row standing in for the partials when the backward's variant is sized: only
    its dtype and alignment reach the kernel's specialisation."""
    return torch.empty((1, 1), dtype=torch.float64, device=device)


def bias_grad_groups(kernel, t: torch.Tensor, row_tiles: int, col_blocks: int, make_args, meta: dict) -> int:
    """Row tiles per program of a backward ``kernel`` that reduces grad_bias over (column block,
    row group) programs: ``make_args(partials, tiles_per_group)`` gives the kernel's arguments,
    ``meta`` its constexprs and launch options; ``t`` is the tensor whose device the kernel runs
    on. The kernel must not specialise on ``tiles_per_group`` (``do_not_specialize``), so that a
    variant sized with a stand-in partials row sizes the one launched."""
    if _rows._SMALL_TILES:
        return INTERPRETER_TILES_PER_GROUP
    per_sm = _rows.ELEMENTWISE.backward_programs_per_sm  # None but where a sweep forces a count
    if per_sm is None:  # sized with a stand-in partials row (fresh, so aligned alike)
        with _rows.launch_guard(t):
            per_sm = resident_programs(kernel, make_args(_stand_in(t.device), 2), meta, t.device)
    return _rows.tiles_per_group(row_tiles, per_sm * sm_count(t.device) // col_blocks)


class BiasGrad(NamedTuple):
    """A backward that reduces grad_bias, bound for an op's plan (:func:`bind_bias_grad`)."""

    launch: Callable[..., object]  # the kernel, bound (``_launch.Kernel.bind``); writes the partials
    partials_shape: tuple[int, int]  # fp64, one row per row group
    finish: Callable[..., object]  # ``finish(partials, grad_bias)``: their sum, rounded once into grad_bias
    dtype: torch.dtype  # grad_bias's, which ``finish`` was compiled for

    def grad_bias(self, partials: torch.Tensor) -> torch.Tensor:
        """grad_bias ((N,), :attr:`dtype`) from the partials the launch wrote."""
        out = torch.empty(partials.shape[-1], dtype=self.dtype, device=partials.device)
        self.finish(partials, out)
        return out


def bind_bias_grad(kernel, t: torch.Tensor, row_tiles: int, col_blocks: int, make_args, meta: dict, *,
                   runtime: int, dtype: torch.dtype, sizing_args=None) -> BiasGrad:
    """A backward ``kernel`` that reduces grad_bias, bound for an op's plan (``runtime`` per-call
    arguments first), with the sum of its partials (``kernels/_partials.py``) into a grad_bias of
    ``dtype``. The arguments are as for :func:`bias_grad_groups`; ``sizing_args``, where given,
    stands in for ``make_args`` when the grouping is sized (the arguments with the gradient laid
    out dense: the grouping above)."""
    tiles_per_group = bias_grad_groups(kernel, t, row_tiles, col_blocks, sizing_args or make_args, meta)
    shape = (triton.cdiv(row_tiles, tiles_per_group), t.shape[-1])
    partials = torch.empty(shape, dtype=torch.float64, device=t.device)
    out = torch.empty(shape[1], dtype=dtype, device=t.device)
    launch = kernel.bind((col_blocks, shape[0]), make_args(partials, tiles_per_group), meta, runtime=runtime)
    return BiasGrad(launch, shape, _partials.bind(partials, out, 1, shape[0], shape[1], tl.float64), dtype)


def launch_bias_grad(kernel, t: torch.Tensor, row_tiles: int, col_blocks: int, make_args,
                     meta: dict) -> torch.Tensor:
    """Launch a backward ``kernel`` over (column block, row group) programs and return its fp64
    partial rows of grad_bias, one per group (:func:`bias_grad_groups` says what the arguments are;
    ``t``'s last dimension is the partials')."""
    tiles_per_group = bias_grad_groups(kernel, t, row_tiles, col_blocks, make_args, meta)
    partials = torch.empty((triton.cdiv(row_tiles, tiles_per_group), t.shape[-1]), dtype=torch.float64,
                           device=t.device)
    with _rows.launch_guard(t):
        kernel[(col_blocks, partials.shape[0])](*make_args(partials, tiles_per_group), **meta)
    return partials
