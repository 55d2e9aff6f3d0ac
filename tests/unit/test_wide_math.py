"""The accurate arithmetic behind fp32 results (``PRECISE``), on the kernels' device: the fp32
activations and their fp64 slopes against mpmath, softmax's fp32 exp, and the fp64 reciprocal.

fp32 results take an activation's exp or erfc in fp32, with eager's accuracy, and the algebra
around it in fp64, value and slope (``kernels/_activations.py``). Each piece is held to its own
contract, in fp32 ulps: ``_rows.exp`` (fp32, x <= 0) to 1.5 of the truth, subnormal results
included; the exp of an fp64 argument (``_exp_wide_argument``: the fp32 exp of its head,
corrected by its tail) to 1.5 of e^x at the unrounded x; values to 2 (4.5 for gelu, whose erfcf
CUDA documents within 4 ulp, taken at the fp32 head of its argument and corrected for the tail); slopes
to 2 of the sum of their terms' sizes (5 for gelu), so slopes that cross zero (gelu's at its
minimum, z = -0.75) are held to their terms. Below fp32's least normal an error up to that
number passes, as in the harness's envelope: the GPU flushes subnormal fp32 results. The
reciprocal's refinement (softmax's fp32 row sums) is held to 1e-14 relative: on the CPU from a
seed cut to 20 bits, on the GPU from the hardware's ``rcp.approx.ftz.f64`` as the kernels use it.
"""

import mpmath
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import references._activations as ref
from kernels import _activations, _rows
from kernels._runtime import interpreting, kernel_device_type

EXP_FP32_ULPS = 1.5
RECIPROCAL_BOUND = 1e-14
FP32_EPS = 2.0**-23
VALUE_ULPS = {"sigmoid": 2.0, "silu": 2.0, "gelu_tanh": 2.0, "gelu": 4.5}
SLOPE_ULPS = {"sigmoid": 2.0, "silu": 2.0, "gelu_tanh": 2.0, "gelu": 5.0}
BLOCK = 512
FP32_TINY = torch.finfo(torch.float32).tiny


@triton.jit
def _exp_wide_argument_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _activations._exp_wide_argument(x), mask=offs < n)


@triton.jit
def _exp_fp32_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _rows.exp(x, True), mask=offs < n)


@triton.jit
def _reciprocal_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    tl.store(out_ptr + offs, _rows.reciprocal_moderate(x, True), mask=offs < n)


@triton.jit
def _refine_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """The refinement from 1 / x with its low 32 significand bits cleared (a 20-bit seed)."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    seed = ((1.0 / x).to(tl.int64, bitcast=True) & -0x100000000).to(tl.float64, bitcast=True)
    tl.store(out_ptr + offs, _rows.refine_reciprocal(x, seed), mask=offs < n)


@triton.jit
def _activation_kernel(z_ptr, value_ptr, slope_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    """The fp32 value (``activate``) and the fp64 slope (``activate_with_slope``) of fp32 results."""
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(z_ptr + offs, mask=offs < n, other=0.0)
    tl.store(value_ptr + offs, _activations.activate(z, ACT, True), mask=offs < n)
    tl.store(slope_ptr + offs, _activations.activation_slope(z, ACT, True), mask=offs < n)


def _run(kernel, x: np.ndarray, outputs: int = 1, out_dtype: torch.dtype = torch.float64, **meta) -> list[np.ndarray]:
    device = kernel_device_type()
    xt = torch.from_numpy(x).to(device)
    outs = [torch.empty(x.shape, dtype=out_dtype, device=device) for _ in range(outputs)]
    with _rows.launch_guard(xt):  # IEEE specials without numpy's warnings in the interpreter
        kernel[(triton.cdiv(x.size, BLOCK),)](xt, *outs, x.size, BLOCK=BLOCK, **meta)
    return [o.cpu().numpy() for o in outs]


def _relative_excess(got: np.ndarray, want: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(got - want) / scale))


def test_exp_of_an_fp64_argument_is_within_one_and_a_half_ulps_of_the_unrounded_one():
    """Arguments that fp32 cannot hold (their rounding alone would cost up to |x| 2^-24, 52 times
    the bound at x = -104) from 0 down to -131, where the result is far below fp32's least normal
    (relative to the result itself: the slopes multiply it by z and more); about -148 or below, 0;
    -inf and NaN give 0 and NaN."""
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(-131.0, 0.0, 3000), -rng.exponential(3.0, 2000), -np.abs(rng.normal(0, 1e-5, 300)),
                        rng.uniform(-90.0, -75.0, 500), [-80.0 - 1e-9, -80.0 + 1e-9]])
    x = x[x.astype(np.float32).astype(np.float64) != x]
    (got,) = _run(_exp_wide_argument_kernel, x)
    want = np.array([float(mpmath.exp(v)) for v in x])
    excess = np.max(np.abs(got - want) / want) / FP32_EPS
    assert excess <= EXP_FP32_ULPS, excess
    rounded = x.astype(np.float32).astype(np.float64)  # what an fp32 argument would have given
    assert np.max(np.abs(np.exp(rounded) - want) / want) / FP32_EPS > 4 * EXP_FP32_ULPS
    (special,) = _run(_exp_wide_argument_kernel, np.array([-np.inf, np.nan, -149.0, -1e300, -0.0]))
    assert np.all(special[[0, 2, 3]] < 1e-63) and np.isnan(special[1]) and special[4] == 1.0


def test_fp32_exp_of_nonpositive_x_is_within_one_and_a_half_ulps():
    """Softmax's fp32 exp: within 1.5 fp32 ulps of the truth from 0 down to -104, past fp32's least
    normal result (x = -87.34) into the subnormals, where the ulp is the least subnormal's; the
    ends, multiples of ln(2) / 2 (the reduction's k changes at the odd ones) and the specials
    exactly. The interpreter, whose multiply-adds round twice, is at 1.21 over every fp32 in
    [-104, 0]; an emulation of the GPU's fused form at 0.94; a polynomial a degree short at 2.8."""
    rng = np.random.default_rng(3)
    x = np.concatenate([
        rng.uniform(-104.0, 0.0, 3000), -rng.exponential(2.0, 2000), -np.abs(rng.normal(0, 1e-5, 300)),
        rng.uniform(-104.0, -87.0, 1000), -np.arange(1, 300) * np.log(2) / 2, [0.0, -0.0, -1e-45, -104.0],
    ]).astype(np.float32)
    (got,) = _run(_exp_fp32_kernel, x, out_dtype=torch.float32)
    want = np.exp(x.astype(np.float64))
    ulp = np.spacing(np.maximum(want, FP32_TINY).astype(np.float32)).astype(np.float64)
    assert np.max(np.abs(got - want) / ulp) <= EXP_FP32_ULPS, np.max(np.abs(got - want) / ulp)
    # NaNs with payloads too: the exponent's integer add does not keep a NaN whose low bits are
    # set (the GPU's own NaN is 0x7fffffff), so the result must carry it some other way
    nans = np.array([0x7FC00000, 0x7FC001FF, 0x7FFFFFFF, 0xFFFFFFFF, 0x7F800001], dtype=np.uint32).view(np.float32)
    with np.errstate(invalid="ignore"):  # NaNs with payloads, cast on purpose
        x = np.concatenate([[-np.inf, -104.5, -1e30, 0.0], nans]).astype(np.float32)
    (special,) = _run(_exp_fp32_kernel, x, out_dtype=torch.float32)
    np.testing.assert_array_equal(special[:4], [0.0, 0.0, 0.0, 1.0])
    assert np.all(np.isnan(special[4:])), special[4:]


def _divisors() -> np.ndarray:
    rng = np.random.default_rng(1)
    return np.concatenate([1.0 + rng.random(2000), np.exp(rng.uniform(0.0, 80.0, 2000)), [1.0, 2.0, 3.0, 2.0**100]])


@pytest.mark.parametrize("kernel", [_refine_kernel, _reciprocal_kernel],
                         ids=["refined_20_bit_seed", "as_kernels_use_it"])
def test_reciprocal_of_moderate_fp64_is_within_1e14_relative(kernel):
    b = _divisors()
    (got,) = _run(kernel, b)
    want = np.array([float(1 / mpmath.mpf(v)) for v in b])
    assert _relative_excess(got, want, want) < RECIPROCAL_BOUND


def test_a_20_bit_seed_alone_misses_the_reciprocal_bound():
    """The refinement test's seed is the coarse one it claims (or that test would prove nothing)."""
    b = _divisors()
    seed = (1 / b).view(np.int64) & -0x100000000
    assert _relative_excess(seed.view(np.float64), 1 / b, 1 / b) > 1e-7


def _gelu_truth(z):
    z = mpmath.mpf(float(z))
    cdf, density = mpmath.ncdf(z), mpmath.npdf(z)
    return z * cdf, cdf + z * density, abs(cdf) + abs(z * density)


def _sigmoid_truth(z):
    z = mpmath.mpf(float(z))
    s = 1 / (1 + mpmath.exp(-z))
    return s, s * (1 - s), s * (1 - s)


def _silu_truth(z):
    z = mpmath.mpf(float(z))
    s = 1 / (1 + mpmath.exp(-z))
    return z * s, s + z * s * (1 - s), abs(s) + abs(z * s * (1 - s))


def _gelu_tanh_truth(z):
    z = mpmath.mpf(float(z))
    k = mpmath.sqrt(2 / mpmath.pi)
    s = 1 / (1 + mpmath.exp(-2 * k * (z + mpmath.mpf(0.044715) * z**3)))
    du = 2 * k * (1 + 3 * mpmath.mpf(0.044715) * z**2)
    return z * s, s + z * s * (1 - s) * du, abs(s) + abs(z * s * (1 - s) * du)


TRUTHS = {"gelu": _gelu_truth, "sigmoid": _sigmoid_truth, "silu": _silu_truth, "gelu_tanh": _gelu_tanh_truth}
REFERENCES = {"gelu": ref.gelu, "sigmoid": ref.sigmoid, "silu": ref.silu, "gelu_tanh": ref.gelu_tanh}


def _points() -> np.ndarray:
    """z from far past the fp32 range of gelu's values (|z| > 14.2: subnormals) through its minimum
    and zero to large positive z."""
    rng = np.random.default_rng(2)
    return np.concatenate([
        rng.normal(0, 3, 1500), rng.uniform(-14.2, 8.0, 1500), rng.normal(0, 1e-3, 300),
        np.linspace(-0.8, -0.7, 200), np.linspace(-0.75, 0.75, 201), np.linspace(-14.4, -14.1, 301),
        rng.uniform(-60.0, -10.0, 300),
        [0.0, 1e-30, -1e-30, 30.0, -30.0, -14.25, -20.0, -38.6, -1e30, 1e30, -3.4e38, 3.4e38],
    ]).astype(np.float32)


@pytest.mark.parametrize("act", sorted(TRUTHS))
def test_precise_activation_value_and_slope_are_within_their_ulps(act):
    """Values in fp32 ulps of the truth, slopes in fp32 ulps of their terms' sizes, up to fp32's
    least normal where the truth is below it (module docstring)."""
    z = _points()
    value, slope = _run(_activation_kernel, z, outputs=2, ACT=act)
    with mpmath.workdps(40):
        truth = [TRUTHS[act](v) for v in z]
    want_value = np.array([float(t[0]) for t in truth])
    want_slope = np.array([float(t[1]) for t in truth])
    slope_scale = np.array([float(t[2]) for t in truth])
    for name, got, want, scale, ulps in (("slope", slope, want_slope, slope_scale, SLOPE_ULPS[act]),
                                         ("value", value, want_value, np.abs(want_value), VALUE_ULPS[act])):
        excess = np.abs(got - want) / np.maximum(ulps * FP32_EPS * scale, FP32_TINY)
        worst = int(np.argmax(excess))
        assert excess[worst] <= 1.0, f"{name} at z={z[worst]}: {got[worst]} against {want[worst]}"


@pytest.mark.parametrize("act", sorted(TRUTHS))
def test_precise_activation_special_values_follow_the_reference(act):
    """+-inf and NaN: the value where the fp64 reference has one (NaN where it is NaN, the same
    infinity), and a NaN slope only where the reference's gradient is NaN too."""
    z = np.array([np.inf, -np.inf, np.nan], dtype=np.float32)
    value, slope = _run(_activation_kernel, z, outputs=2, ACT=act)
    zt = torch.tensor(z, dtype=torch.float64, requires_grad=True)
    want = REFERENCES[act](zt)
    (want_slope,) = torch.autograd.grad(want.sum(), zt)
    want, want_slope = want.detach().numpy(), want_slope.numpy()
    np.testing.assert_array_equal(value, want)
    np.testing.assert_array_equal(np.isnan(slope), np.isnan(want_slope))


@pytest.mark.skipif(interpreting(), reason="the hardware seed runs only on a GPU; the interpreter divides exactly")
def test_hardware_reciprocal_seed_needs_its_refinement():
    """On the GPU the seed alone is coarse (or the refinement test above would not exercise it)."""
    b = torch.from_numpy(_divisors()).to(kernel_device_type())
    seed = torch.empty_like(b)
    _seed_kernel[(triton.cdiv(b.numel(), BLOCK),)](b, seed, b.numel(), BLOCK=BLOCK)
    exact = 1 / b
    assert float(((seed - exact).abs() / exact).max()) > RECIPROCAL_BOUND


@triton.jit
def _seed_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=1.0)
    tl.store(out_ptr + offs, _rows.reciprocal_seed(x), mask=offs < n)
