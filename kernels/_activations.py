"""Activation functions and their derivatives for Triton kernels.

Shared by every kernel that applies an activation (add_mul_act, bias_gelu, glu, linear_act), so
each form is written, tested and fixed once. Everything here runs on the GPU and under Triton's
CPU interpreter. The interpreter has no libdevice and no inline PTX, so the two calls that need
them (erfcf, the fast reciprocal) take a stand-in there: see :func:`_erfc` and
``_rows.reciprocal_moderate``. Tensors stay on the left of global constants (``constexpr *
tensor`` fails in the interpreter).

``ACT`` names the activation (a ``tl.constexpr`` string, so each kernel is compiled for one).
Arithmetic is fp32; ``PRECISE`` (constexpr) is set by kernels that store fp32 and picks accurate
functions where 16-bit results take fast ones:

* **fp32 results (PRECISE)**: the kernels form their argument exactly in fp64 (``x + bias``:
  ``_rows.widen``); the transcendental function is taken in fp32 with eager's accuracy
  (``_rows.exp``, within 1.5 ulp where eager's expf is within 2; CUDA's own erfcf for gelu, through
  libdevice, which is what eager's torch.erfc runs) at the fp32 head of its fp64 argument, with a
  first-order correction for the tail (:func:`_exp_wide_argument`, :func:`gelu_and_slope`); the
  algebra around it is fp64: ``1 + e``, the reciprocal, the products, the slope's ``s + z ds``.
  Values and slopes are returned in fp64 and the caller rounds once, at its store, after its own
  products (``act(a) * b``, ``grad * act'(z)``). What is left is the exp's or erfc's own error, at
  most scaled by 1 in these forms. All in fp32 (z rounded, as eager rounds it), five to seven
  roundings compose, a sum of both signs among them, and the rounding of z or of an exp's
  argument is amplified in the tails: the harness's runs found the results above its budget of
  twice eager's error (SwiGLU's gradient at 4.4 on the CPU, GEGLU's tanh-form value at 2.25 on the
  H100, bias-GELU's gradient at 5.5 at z = -8, where eager's own roundings happened to cancel).
  Everything used to be evaluated in fp64, an fp64 exp and erfc included: 54 fp64 slots an
  element for exact bias-GELU's fp32 forward, which bound it by the 64 fp64 lanes of an H100 SM at
  74% of copy bandwidth (``benchmarks/results/2026-11-24-h100-10``).
* **16-bit results** take the fast exp (``ex2.approx``), one approximate reciprocal and a short
  erfc polynomial: relative errors under 7e-6, far below a 16-bit ulp.

* ``relu``: ``z`` where ``z > 0``, else 0 (NaN kept); its slope is 0 at ``z <= 0`` and 1
  elsewhere (1 for NaN: torch's threshold_backward). Exact in any precision.
* ``sigmoid``, ``silu``: the sigmoid from ``exp(-|z|)``, which never overflows, and its derivative
  as ``exp(-|z|) / (1 + exp(-|z|))^2``, which avoids the cancellation in ``s * (1 - s)``.
* ``gelu_tanh``: ``0.5 z (1 + tanh(u))`` written as the identical ``z * sigmoid(2u)``,
  ``u = sqrt(2/pi) (z + 0.044715 z^3)`` (no tanh primitive, and no cancellation in the tail).
* ``gelu`` (the exact form): ``z Phi(z)`` with ``Phi(z) = erfc(-z / sqrt(2)) / 2`` and slope
  ``Phi(z) + z phi(z)``. The usual ``0.5 (1 + erf(z / sqrt(2)))`` cancels for negative z (at
  z = -2 it has lost three bits, past z = -5.5 everything), so Phi comes from an erfc, as in the
  references (``references/_activations.py``).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import torch
import triton
import triton.language as tl
from triton.language.extra import libdevice

from kernels import _rows
from kernels._runtime import interpreting, resident_programs, sm_count

# Kernels accept any subset of these; each spec lists its own.
ACTIVATIONS = ("relu", "sigmoid", "silu", "gelu_tanh", "gelu")

_TWO_SQRT_2_OVER_PI = tl.constexpr(2.0 * math.sqrt(2.0 / math.pi))
_GELU_C = tl.constexpr(0.044715)
_SQRT2 = tl.constexpr(math.sqrt(2.0))
_TWO_SQRT2 = tl.constexpr(2.0 * math.sqrt(2.0))
_NEG_HALF_LOG2E = tl.constexpr(-0.5 * math.log2(math.e))
_INV_SQRT_2PI = tl.constexpr(1.0 / math.sqrt(2.0 * math.pi))
_NEG_SQRT1_2 = tl.constexpr(-math.sqrt(0.5))
_TWO_OVER_SQRT_PI = tl.constexpr(2.0 / math.sqrt(math.pi))
_LIBDEVICE = tl.constexpr(not interpreting())  # libdevice's functions exist on the GPU only
_SHIFT = tl.constexpr(64.0 * math.log(2.0))  # e^x = 2^-64 e^(x + 64 ln 2)
_TWO_TO_MINUS_64 = tl.constexpr(2.0**-64)
# erfc's polynomial is fitted up to a = 10.066; past |z| = 10.06 sqrt(2) = 14.227 (just inside it),
# where gelu's value is a few of fp32's least subnormals (1.4e-45), |z| is clamped for the
# polynomial only, which keeps it in range while exp(-z^2 / 2) takes the value on down to 0.
_ERFC_CLAMP_Z = tl.constexpr(10.06 * math.sqrt(2.0))


# ----------------------------------------------------------------------------------------------
# sigmoid family
# ----------------------------------------------------------------------------------------------


@triton.jit
def _sigmoid_fast(z):
    """sigmoid(z) in fp32 from exp(-|z|) (no overflow), for 16-bit results: the fast exp and one
    approximate reciprocal."""
    e = _rows.exp(-tl.abs(z), False)
    inv = _rows.reciprocal_moderate(1.0 + e, False)
    return tl.where(z >= 0, inv, e * inv)


@triton.jit
def sigmoid_and_slope(z, PRECISE: tl.constexpr):
    """sigmoid(z) and its derivative sigmoid(z) * sigmoid(-z) = e / (1 + e)^2 (e = exp(-|z|), no
    cancellation): with PRECISE in fp64 from the fp32 exp (module docstring), else in fp32.
    z is fp32, or with PRECISE fp64 (gelu_tanh's 2u, formed in fp64: :func:`_exp_wide_argument`)."""
    if PRECISE and z.dtype == tl.float64:
        e = _exp_wide_argument(-tl.abs(z))
    else:
        e = _slope_dtype(_rows.exp(-tl.abs(z), PRECISE), PRECISE)
    inv = _rows.reciprocal_moderate(1.0 + e, PRECISE)
    return tl.where(z >= 0, inv, e * inv), e * inv * inv


@triton.jit
def _exp_wide_argument(x):
    """e^x of fp64 x <= 0, in fp64, from the fp32 exp: ``e^(h + t) = e^h (1 + t)`` with h the fp32
    rounding of x and t = x - h (|t| <= 2^-24 |x|, so t^2 / 2 is far below an fp32 ulp). The
    argument of a slope's exp (gelu_tanh's 2u, exact gelu's -z^2 / 2) is then not rounded to fp32
    first: that rounding costs |x| 2^-24 of relative error, 3e-6 at x = -52, where the nightly CPU
    run found GEGLU's tanh-form gradient at 2.4 times eager's error. Below x = -80 the exp is taken
    at x + 64 ln 2 and scaled by 2^-64, so that it stays a normal fp32 number (a subnormal one
    keeps few bits, and the slopes multiply it by z and more) down to x = -131; past -148 the
    result is 0 (fp32 slopes of such sizes round to 0 unless multiplied by 1e20)."""
    low, gone = x < -80.0, x < -148.0
    x = tl.where(low, tl.where(gone, -148.0, x) + _SHIFT, x)  # NaN passes unchanged
    head = x.to(tl.float32)
    e = _rows.exp(head, True).to(tl.float64) * (1.0 + (x - head.to(tl.float64)))
    return tl.where(gone, 0.0, tl.where(low, e * _TWO_TO_MINUS_64, e))


@triton.jit
def _slope_dtype(v, PRECISE: tl.constexpr):
    """v in the dtype values and slopes are combined in: fp64 with PRECISE, else as it is (fp32)."""
    if PRECISE:
        return v.to(tl.float64)
    else:
        return v


@triton.jit
def _gelu_inner(z):
    """2u for gelu's tanh form, u = sqrt(2/pi) * (z + c z^3), so that tanh(u) = 2 sigmoid(2u) - 1."""
    return (z * z * z * _GELU_C + z) * _TWO_SQRT_2_OVER_PI


# ----------------------------------------------------------------------------------------------
# erfc and the normal distribution
# ----------------------------------------------------------------------------------------------
#
# fp32 results take erfc from libdevice (:func:`_erfc`), CUDA's erfcf, which is what eager's
# torch.erfc runs on the GPU, at the fp32 head of its argument, with a first-order correction for
# the tail (:func:`gelu_and_slope`).
#
# 16-bit results, and the interpreter's stand-in for erfcf, take the construction below. erfc(a)
# for a >= 0 is written as exp(-a^2) * w(q) / (1 + 2a), q = (a - 2) / (a + 2): the factor
# w = (1 + 2a) exp(a^2) erfc(a) is smooth and bounded (1 at a = 0, 2/sqrt(pi) as a -> inf) and q
# maps [0, inf) onto [-1, 1), so one polynomial in q covers every a (N. Juffa's construction).
# The coefficients are Chebyshev least-squares fits of w with relative weights on q in
# [-1, 0.6685] (a up to 10.066, where erfc underflows in fp32): degree 11 in fp64, max relative
# error 1.0e-9, for the stand-in (evaluated in fp64); degree 7 rounded to fp32, 1.3e-6, for 16-bit
# results, whose ulp is 1e-3 (fp16) or 8e-3 (bf16). Phi(z) for z <= 0 is erfc(|z| / sqrt(2)) / 2
# itself, and for z > 0 it is 1 - erfc(|z| / sqrt(2)) / 2, which lies in [1/2, 1]: no
# cancellation anywhere. The 16-bit path is one exp2 of -z^2/2 and two approximate reciprocals,
# relative error under 7e-6. What is evaluated is Phi itself (the coefficients halved, exactly)
# from |z| (q and 1 + 2a rescaled, so a = |z|/sqrt(2) is never formed). On sm_90 bias_gelu's 16-bit
# forward is then 30.5 SASS instructions an element, from 47 with Triton's division, the halving
# and the scaling of z as separate steps: at 16-bit copy bandwidth an H100 issues ~45 an element,
# so the count is what decides how near the memory roofline exact gelu gets.


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
def _normal_cdf_and_density_fast(z):
    """(Phi(z), exp(-z^2 / 2)) of fp32 z for 16-bit results (see above): Phi(z) = erfc(a) / 2 for
    z <= 0, a = |z| / sqrt(2), and 1 - erfc(a) / 2 above. Written in |z| itself: q = (a - 2) /
    (a + 2) is the same ratio of |z| - 2 sqrt(2) and |z| + 2 sqrt(2), and 1 + 2a = 1 + sqrt(2) |z|,
    so a is never formed; the polynomial carries erfc's halving (exactly, a power of two)."""
    c = tl.minimum(tl.abs(z), _ERFC_CLAMP_Z)
    e = tl.math.exp2(z * z * _NEG_HALF_LOG2E)
    # two approximate reciprocals: fewer multiplies than sharing one, and within 1 ulp each
    q = (c - _TWO_SQRT2) * _rows.reciprocal_moderate(c + _TWO_SQRT2, False)
    # past the clamp r is ~1e-44, below any 16-bit value's half ulp, so the select that makes it 0
    # would change no output
    r = e * (_erfc_w_fast(q) * _rows.reciprocal_moderate(c * _SQRT2 + 1.0, False))
    return tl.where(z > 0, 1.0 - r, r), e


@triton.jit
def _erfc(t):
    """erfc of fp32 t in fp32, as eager's ``torch.erfc`` computes it on the GPU: libdevice's erfcf
    (CUDA's, which torch calls). The interpreter has no libdevice: there it is the same function
    evaluated in fp64 (within 1e-9 relative, so more accurate than erfcf) and rounded to fp32."""
    if _LIBDEVICE:
        return libdevice.erfc(t)
    else:
        return (_cdf_wide(t.to(tl.float64) * -_SQRT2) * 2.0).to(tl.float32)


@triton.jit
def _cdf_wide(z):
    """Phi(z) of fp64 z to about 1e-9 relative, every z: the interpreter's erfc (above), where
    tl.exp and the division are numpy's, exact to fp64's ulp."""
    c = tl.minimum(tl.abs(z), _ERFC_CLAMP_Z)
    num = c + _TWO_SQRT2
    den = c * _SQRT2 + 1.0
    inv = 1.0 / (num * den)  # q and 1 / den from one division
    # past the clamp (|z| > 14.227) c only keeps the polynomial in range: the exp is 1.1e-44 there
    # and falls on, so the value is a few least subnormals of fp32 at most (NaN stays NaN through it)
    r = tl.exp(z * z * -0.5) * (_erfc_w_precise((c - _TWO_SQRT2) * den * inv) * num * inv)
    return tl.where(z > 0, 1.0 - r, r)


@triton.jit
def gelu_and_slope(z, PRECISE: tl.constexpr):
    """Exact GELU z Phi(z) and its slope Phi(z) + z phi(z): with PRECISE in fp64 (z fp32 or fp64),
    Phi from erfcf at the fp32 head of ``t = -z / sqrt(2)`` corrected to first order by its tail,
    ``erfc(h + d) = erfc(h) - 2 / sqrt(pi) e^(-t^2) d`` (the next term is below 1e-10 of the value
    for |t| <= 10), and phi from the accurate exp; the fast forms in fp32 without (z fp32)."""
    if PRECISE:
        z = z.to(tl.float64)
        t = z * _NEG_SQRT1_2
        head = t.to(tl.float32)
        density = _exp_wide_argument(z * z * -0.5)  # e^(-t^2)
        # where e^(-t^2) is 0 (|z| > 17) so is the correction, and t - head may be inf - inf
        tail = tl.where(density > 0, density * (t - head.to(tl.float64)), 0.0)
        cdf = (_erfc(head).to(tl.float64) - tail * _TWO_OVER_SQRT_PI) * 0.5
    else:
        cdf, density = _normal_cdf_and_density_fast(z)
    return z * cdf, cdf + z * (density * _INV_SQRT_2PI)


# ----------------------------------------------------------------------------------------------
# The activations
# ----------------------------------------------------------------------------------------------


@triton.jit
def activate(z, ACT: tl.constexpr, PRECISE: tl.constexpr):
    """act(z): with PRECISE for fp32 or fp64 z (an exact sum), in fp64 (relu: z's dtype), the caller
    rounds at its store; without, for fp32 z, in fp32."""
    if ACT == "relu":
        return tl.where(z <= 0, 0.0, z)  # keeps NaN, as torch.relu does
    elif PRECISE:  # the value beside the slope, which the compiler drops
        return activate_with_slope(z, ACT, PRECISE)[0]
    elif ACT == "sigmoid":
        return _sigmoid_fast(z)
    elif ACT == "silu":
        return z * _sigmoid_fast(z)
    elif ACT == "gelu_tanh":  # z * sigmoid(2u), u = sqrt(2/pi) * (z + c z^3)
        return z * _sigmoid_fast(_gelu_inner(z))
    else:  # gelu: z Phi(z)
        return z * _normal_cdf_and_density_fast(z)[0]


@triton.jit
def activation_slope(z, ACT: tl.constexpr, PRECISE: tl.constexpr):
    """d act / d z for fp32 z: fp64 with PRECISE (the caller rounds at its store, after its own
    products), fp32 without."""
    return activate_with_slope(z, ACT, PRECISE)[1]


@triton.jit
def activate_with_slope(z, ACT: tl.constexpr, PRECISE: tl.constexpr):
    """(act(z), act'(z)), sharing the exp/erfc work (a gated unit's backward needs both): fp64 with
    PRECISE (relu aside), fp32 without."""
    if ACT == "relu":
        return tl.where(z <= 0, 0.0, z), tl.where(z <= 0, 0.0, 1.0)
    elif ACT == "sigmoid":
        return sigmoid_and_slope(z, PRECISE)
    elif ACT == "silu":
        s, ds = sigmoid_and_slope(z, PRECISE)
        z = _slope_dtype(z, PRECISE)
        return z * s, s + z * ds
    elif ACT == "gelu_tanh":
        z = _slope_dtype(z, PRECISE)
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
# and the device (its SM count, and how many of the compiled kernel's programs an SM holds), so
# the result is bitwise reproducible. On a GPU there are as many programs as the device holds at
# once: one wave. The H100 sweep of programs per SM (tune_rows.py elementwise_backward, results/
# 2026-11-24-h100-4/call7) found the best count at what an SM holds (bias_gelu's tanh backward:
# 80 registers, 3 programs of 8 warps: 0.3629 ms at 3 a SM, 0.3838 at the 8 used before, 0.4535
# at 4, where a second wave runs a third full) or within 2% of it. Under the interpreter groups
# are 2 tiles, so that small test cases already produce several partials.
INTERPRETER_TILES_PER_GROUP = 2
# Programs per SM forced for a sweep (tune_rows.py's knob); None: as many as an SM holds.
GPU_PROGRAMS_PER_SM: int | None = None


@functools.lru_cache(maxsize=None)
def _stand_in(device: torch.device) -> torch.Tensor:
    """An aligned fp64 row standing in for the partials when the backward's variant is sized: only
    its dtype and alignment reach the kernel's specialisation."""
    return torch.empty((1, 1), dtype=torch.float64, device=device)


def bias_grad_groups(kernel, t: torch.Tensor, row_tiles: int, col_blocks: int, make_args, meta: dict) -> int:
    """Row tiles per program of a backward ``kernel`` that reduces grad_bias over (column block,
    row group) programs: ``make_args(partials, tiles_per_group)`` gives the kernel's arguments,
    ``meta`` its constexprs and launch options; ``t`` is the tensor whose device the kernel runs
    on. The kernel must not specialise on ``tiles_per_group`` (``do_not_specialize``): the variant
    sized with a stand-in is then the one launched."""
    if _rows._SMALL_TILES:
        return INTERPRETER_TILES_PER_GROUP
    per_sm = GPU_PROGRAMS_PER_SM
    if per_sm is None:  # sized with a stand-in partials row (fresh, so aligned alike)
        with _rows.launch_guard(t):
            per_sm = resident_programs(kernel, make_args(_stand_in(t.device), 2), meta, t.device)
    return _rows.tiles_per_group(row_tiles, per_sm * sm_count(t.device) // col_blocks)


def bind_bias_grad(kernel, t: torch.Tensor, row_tiles: int, col_blocks: int, make_args, meta: dict, *,
                   runtime: int) -> tuple[Callable[..., object], tuple[int, int]]:
    """A backward ``kernel`` that reduces grad_bias, bound for an op's plan (``_launch.Kernel.bind``,
    ``runtime`` per-call arguments first): (the launcher, the shape of its fp64 partials). The
    arguments are as for :func:`bias_grad_groups`."""
    tiles_per_group = bias_grad_groups(kernel, t, row_tiles, col_blocks, make_args, meta)
    shape = (triton.cdiv(row_tiles, tiles_per_group), t.shape[-1])
    partials = torch.empty(shape, dtype=torch.float64, device=t.device)
    return kernel.bind((col_blocks, shape[0]), make_args(partials, tiles_per_group), meta, runtime=runtime), shape


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
