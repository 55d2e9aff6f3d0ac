"""The fp64 arithmetic behind fp32 activations (``PRECISE``), against mpmath, on the kernels' device.

Kernels that store fp32 evaluate their activations in fp64 and round once at the store, so what
they owe is an fp64 value much nearer the truth than fp32's half ulp (2^-24, 6e-8 relative). The
helpers are written to about 1e-9 (``_rows.exp_wide``: a degree-8 polynomial, 3e-10; erfc's
polynomial 1.0e-9), and on a GPU the reciprocal is a hardware seed refined by one cubic step. Each
test holds its helper to 2e-9 relative (a thirtieth of the half ulp), which a polynomial a degree
short (7e-9), a seed left unrefined or a reduction step dropped would miss. Gradients that cross
zero (gelu's slope at its minimum, z = -0.75) are held to 2e-9 of the sum of their terms' sizes.
"""

import math

import mpmath
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

from kernels import _activations, _rows
from kernels._runtime import kernel_device_type

BOUND = 2e-9
BLOCK = 512


@triton.jit
def _exp_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _rows.exp_wide(x), mask=offs < n)


@triton.jit
def _reciprocal_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    tl.store(out_ptr + offs, _rows.reciprocal_moderate(x, True), mask=offs < n)


@triton.jit
def _activation_kernel(z_ptr, value_ptr, slope_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(z_ptr + offs, mask=offs < n, other=0.0)
    value, slope = _activations.activate_with_slope(z, ACT, True)
    tl.store(value_ptr + offs, value, mask=offs < n)
    tl.store(slope_ptr + offs, slope, mask=offs < n)


def _run(kernel, x: np.ndarray, outputs: int = 1, **meta) -> list[np.ndarray]:
    device = kernel_device_type()
    xt = torch.from_numpy(x).to(device)
    outs = [torch.empty(x.shape, dtype=torch.float64, device=device) for _ in range(outputs)]
    kernel[(triton.cdiv(x.size, BLOCK),)](xt, *outs, x.size, BLOCK=BLOCK, **meta)
    return [o.cpu().numpy() for o in outs]


def _relative_excess(got: np.ndarray, want: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(got - want) / scale))


def test_exp_wide_is_within_2e9_relative():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        -rng.exponential(3.0, 2000), rng.uniform(-745.0, 0.0, 1000), -np.abs(rng.normal(0, 1e-6, 200)),
        # reduction boundaries (k changes at odd multiples of ln 2 / 2) and the ends of the range
        -np.arange(1, 200) * math.log(2) / 2, [0.0, -0.0, -708.0, -720.0, -745.0],
    ])
    (got,) = _run(_exp_kernel, x)
    want = np.array([float(mpmath.exp(v)) for v in x])
    # below fp64's least normal (x < -708) the result is a subnormal: a few of its least units more
    assert np.all(np.abs(got - want) <= BOUND * want + 4 * 5e-324), np.max(np.abs(got - want) / want)


def test_exp_wide_special_values():
    (got,) = _run(_exp_kernel, np.array([-np.inf, np.nan, -746.0, -800.0, -1e300]))
    assert got[0] == 0.0 and np.isnan(got[1]) and np.all(got[2:] == 0.0)


def test_reciprocal_of_moderate_fp64_is_within_2e9_relative():
    rng = np.random.default_rng(1)
    b = np.concatenate([1.0 + rng.random(2000), np.exp(rng.uniform(0.0, 80.0, 2000)), [1.0, 2.0, 3.0, 2.0**100]])
    (got,) = _run(_reciprocal_kernel, b)
    want = np.array([float(1 / mpmath.mpf(v)) for v in b])
    assert _relative_excess(got, want, want) < BOUND


def _gelu_truth(z):
    cdf, density = mpmath.ncdf(z), mpmath.npdf(z)
    return z * cdf, cdf + z * density, abs(cdf) + abs(z * density)


def _sigmoid_truth(z):
    s = 1 / (1 + mpmath.exp(-z))
    return s, s * (1 - s), s * (1 - s)


def _silu_truth(z):
    s = 1 / (1 + mpmath.exp(-z))
    return z * s, s + z * s * (1 - s), abs(s) + abs(z * s * (1 - s))


TRUTHS = {"gelu": _gelu_truth, "sigmoid": _sigmoid_truth, "silu": _silu_truth}


@pytest.mark.parametrize("act", sorted(TRUTHS))
def test_precise_activation_and_slope_are_within_2e9(act):
    """The value to 2e-9 relative, the slope to 2e-9 of its terms' sizes, on z from gelu's far
    tail (erfc underflows past -14.2) through its minimum and zero to large positive z."""
    rng = np.random.default_rng(2)
    z = np.concatenate([
        rng.normal(0, 3, 1500), rng.uniform(-14.2, 8.0, 1500), rng.normal(0, 1e-3, 300),
        np.linspace(-0.8, -0.7, 200), np.linspace(-0.75, 0.75, 201), [0.0, 1e-30, -1e-30, 30.0, -30.0],
    ]).astype(np.float32)
    value, slope = _run(_activation_kernel, z, outputs=2, ACT=act)
    with mpmath.workdps(30):
        truth = [TRUTHS[act](mpmath.mpf(float(v))) for v in z]
    want_value = np.array([float(t[0]) for t in truth])
    want_slope = np.array([float(t[1]) for t in truth])
    slope_scale = np.array([float(t[2]) for t in truth])
    # below fp32's least normal the results round to subnormals (or 0: gelu past z = -14.2), whose
    # ulp is that of the least normal, as in the harness's envelope
    tiny = torch.finfo(torch.float32).tiny
    assert _relative_excess(value, want_value, np.maximum(np.abs(want_value), tiny)) < BOUND
    assert _relative_excess(slope, want_slope, np.maximum(slope_scale, tiny)) < BOUND
