"""The accurate arithmetic behind fp32 results (``PRECISE``), on the kernels' device: the fp64
arithmetic of fp32 activations against mpmath, and softmax's fp32 exp.

Kernels that store fp32 evaluate their activations in fp64 and round once at the store, so what
they owe is an fp64 value much nearer the truth than fp32's half ulp (2^-24, 6e-8 relative), and,
once rounded, an fp32 value within an ulp of the rounded truth. Each piece is held to its own
contract: ``_rows.exp_wide`` (degree-7 fit, 5.5e-11) to 2e-10, which a fit a degree short (~2e-9)
misses; the reciprocal's refinement to 1e-14 (on the CPU from a seed cut to 20 bits, on the GPU
from the hardware's ``rcp.approx.ftz.f64`` as the kernels use it); and the activations and their
slopes (erfc's polynomial, 1.0e-9) to 2e-9. Slopes that cross zero (gelu's at its minimum,
z = -0.75) are held relative to the sum of their terms' sizes. ``_rows.exp`` (fp32, x <= 0) is
held to 1.5 fp32 ulps of the truth, subnormal results included.
"""

import math

import mpmath
import numpy as np
import pytest
import torch
import triton
import triton.language as tl

import references._activations as ref
from kernels import _activations, _rows
from kernels._runtime import interpreting, kernel_device_type

EXP_BOUND = 2e-10
EXP_FP32_ULPS = 1.5
RECIPROCAL_BOUND = 1e-14
ACTIVATION_BOUND = 2e-9
BLOCK = 512
FP32_TINY = torch.finfo(torch.float32).tiny
_POINTS_FOR_GELU = np.random.default_rng(5).normal(0, 4, 4000)


@triton.jit
def _exp_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _rows.exp_wide(x), mask=offs < n)


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
def _gelu_as_eager_kernel(z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(z_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _activations.gelu_as_eager(z.to(tl.float64)), mask=offs < n)


@triton.jit
def _gelu_grad_as_eager_kernel(zg_ptr, out_ptr, n2, BLOCK: tl.constexpr):
    """zg: z's n values, then g's; the gradients go to out's first n."""
    n = n2 // 2
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(zg_ptr + offs, mask=offs < n, other=0.0)
    g = tl.load(zg_ptr + n + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _activations.gelu_grad_as_eager(z, g), mask=offs < n)


@triton.jit
def _silu_as_eager_kernel(z_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(z_ptr + offs, mask=offs < n, other=0.0)
    tl.store(out_ptr + offs, _activations.silu_as_eager(z), mask=offs < n)


@triton.jit
def _activation_kernel(z_ptr, value_ptr, slope_ptr, n, ACT: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    z = tl.load(z_ptr + offs, mask=offs < n, other=0.0)
    value, slope = _activations.activate_with_slope(z, ACT, True)
    tl.store(value_ptr + offs, value, mask=offs < n)
    tl.store(slope_ptr + offs, slope, mask=offs < n)


def _run(kernel, x: np.ndarray, outputs: int = 1, out_dtype: torch.dtype = torch.float64, **meta) -> list[np.ndarray]:
    device = kernel_device_type()
    xt = torch.from_numpy(x).to(device)
    outs = [torch.empty(x.shape, dtype=out_dtype, device=device) for _ in range(outputs)]
    with _rows.launch_guard(xt):  # IEEE specials without numpy's warnings in the interpreter
        kernel[(triton.cdiv(x.size, BLOCK),)](xt, *outs, x.size, BLOCK=BLOCK, **meta)
    return [o.cpu().numpy() for o in outs]


def _relative_excess(got: np.ndarray, want: np.ndarray, scale: np.ndarray) -> float:
    return float(np.max(np.abs(got - want) / scale))


def test_exp_wide_is_within_2e10_relative():
    rng = np.random.default_rng(0)
    x = np.concatenate([
        -rng.exponential(3.0, 2000), rng.uniform(-745.0, 0.0, 1000), -np.abs(rng.normal(0, 1e-6, 200)),
        # reduction boundaries (k changes at odd multiples of ln 2 / 2) and the ends of the range
        -np.arange(1, 200) * np.log(2) / 2, [0.0, -0.0, -708.0, -720.0, -745.0],
    ])
    (got,) = _run(_exp_kernel, x)
    want = np.array([float(mpmath.exp(v)) for v in x])
    # below fp64's least normal (x < -708) the result is a subnormal: a few of its least units more
    assert np.all(np.abs(got - want) <= EXP_BOUND * want + 4 * 5e-324), np.max(np.abs(got - want) / want)


def test_exp_wide_special_values():
    (got,) = _run(_exp_kernel, np.array([-np.inf, np.nan, -746.0, -800.0, -1e300]))
    assert got[0] == 0.0 and np.isnan(got[1]) and np.all(got[2:] == 0.0)


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
    cdf, density = mpmath.ncdf(z), mpmath.npdf(z)
    return z * cdf, cdf + z * density, abs(cdf) + abs(z * density)


def _sigmoid_truth(z):
    s = 1 / (1 + mpmath.exp(-z))
    return s, s * (1 - s), s * (1 - s)


def _silu_truth(z):
    s = 1 / (1 + mpmath.exp(-z))
    return z * s, s + z * s * (1 - s), abs(s) + abs(z * s * (1 - s))


TRUTHS = {"gelu": _gelu_truth, "sigmoid": _sigmoid_truth, "silu": _silu_truth}
REFERENCES = {"gelu": ref.gelu, "sigmoid": ref.sigmoid, "silu": ref.silu}


@pytest.mark.parametrize("act", sorted(TRUTHS))
def test_precise_activation_and_slope_are_within_2e9(act):
    """The value to 2e-9 relative and, rounded to fp32, within an fp32 ulp of the rounded truth;
    the slope to 2e-9 of its terms' sizes; on z from far past gelu's clamp (|z| > 14.227, where its
    values are fp32 subnormals) through its minimum and zero to large positive z."""
    rng = np.random.default_rng(2)
    z = np.concatenate([
        rng.normal(0, 3, 1500), rng.uniform(-14.2, 8.0, 1500), rng.normal(0, 1e-3, 300),
        np.linspace(-0.8, -0.7, 200), np.linspace(-0.75, 0.75, 201), np.linspace(-14.4, -14.1, 301),
        [0.0, 1e-30, -1e-30, 30.0, -30.0, -14.25, -20.0, -38.6, -1e30, 1e30, -3.4e38, 3.4e38],
    ]).astype(np.float32)
    value, slope = _run(_activation_kernel, z, outputs=2, ACT=act)
    with mpmath.workdps(30):
        truth = [TRUTHS[act](mpmath.mpf(float(v))) for v in z]
    want_value = np.array([float(t[0]) for t in truth])
    want_slope = np.array([float(t[1]) for t in truth])
    slope_scale = np.array([float(t[2]) for t in truth])
    # below fp32's least normal the results round to subnormals (or 0), whose ulp is that of the
    # least normal, as in the harness's envelope; the fp32 check below looks at them one by one
    assert _relative_excess(value, want_value, np.maximum(np.abs(want_value), FP32_TINY)) < ACTIVATION_BOUND
    assert _relative_excess(slope, want_slope, np.maximum(slope_scale, FP32_TINY)) < ACTIVATION_BOUND
    rounded, want_rounded = value.astype(np.float32), want_value.astype(np.float32)
    assert np.all(np.abs(rounded - want_rounded) <= np.spacing(np.abs(want_rounded)))


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


def test_exact_gelu_value_of_fp32_results_is_eager_s():
    """Exact gelu's fp32 value is the reference computed by torch in fp32 on the same device: bit
    for bit on the GPU (the same erfcf, the same roundings) but for flushed subnormals; under the
    interpreter, whose erfc is
    an fp64 stand-in, within two fp32 ulps of the CPU's (whose erfcf errs by about one), and nearer
    the truth where they differ."""
    z = np.concatenate([_POINTS_FOR_GELU, [0.0, -0.0, 14.25, -14.25, -20.0, 1e30, -1e30]]).astype(np.float32)
    (got,) = _run(_gelu_as_eager_kernel, z, out_dtype=torch.float32)
    zt = torch.from_numpy(z).to(kernel_device_type())
    eager = ref.gelu(zt).cpu().numpy()
    if not interpreting():
        # bit for bit, but where eager's value is an fp32 subnormal: the GPU kernel flushes those
        # to zero (H100: gelu(-13.3) = -2.1e-43), as the harness's envelope allows
        normal = np.abs(eager) >= FP32_TINY
        np.testing.assert_array_equal(got[normal], eager[normal])
        assert np.all(np.abs(got[~normal] - eager[~normal]) < FP32_TINY)
        return
    ulp = np.spacing(np.maximum(np.abs(eager), FP32_TINY))
    assert np.all(np.abs(got - eager) <= 2 * ulp)
    truth = ref.gelu(torch.from_numpy(z).double()).numpy()
    assert np.abs(got - truth).sum() <= np.abs(eager - truth).sum()


def test_exact_gelu_gradient_of_fp32_results_is_eager_autograd_s():
    """Exact gelu's fp32 input gradient is eager's autograd through the reference in fp32 on the
    same device: bit for bit on the GPU (the same erfcf and expf, the same roundings, the branches
    added without an fma), NaN where eager's is NaN, but for flushed subnormals. The kernel flushes
    a subnormal value or product to zero (H200: z = -13.2, gradient 2.64e-37 against eager's
    2.63e-37); where one of eager's fp32 intermediates is subnormal, flushing each moves the result
    by less than the least normal times the factors after it, at most ``5 + |g| (0.5 + 0.75 |z|)``
    least normals in all, and everywhere else the bits must match. Under the interpreter, whose
    erfc and exp are fp64 stand-ins: within two fp32 ulps of the CPU's gradient, measured on the
    size of its two terms (they cancel at gelu's minimum), and no farther from the truth overall."""
    z = np.concatenate([_POINTS_FOR_GELU, [0.0, -0.0, -0.7517916, 14.25, -14.25, -20.0, 1e30, -1e30, np.inf,
                                           -np.inf]]).astype(np.float32)
    g = np.random.default_rng(6).normal(0, 1, z.size).astype(np.float32)
    (got,) = _run(_gelu_grad_as_eager_kernel, np.stack([z, g]), out_dtype=torch.float32)
    got = got[0]

    def autograd(zt, gt):
        zt = zt.clone().requires_grad_(True)
        ref.gelu(zt).backward(gt)
        return zt.grad

    device = kernel_device_type()
    eager = autograd(torch.from_numpy(z).to(device), torch.from_numpy(g).to(device)).cpu().numpy()
    if not interpreting():
        zt, gt = torch.from_numpy(z).to(device), torch.from_numpy(g).to(device)
        c, k = -math.sqrt(0.5), -2.0 / math.sqrt(math.pi)  # Python floats, as the reference and autograd use them
        t = zt * c
        e, ex, gz = torch.erfc(t), torch.exp(-(t * t)), gt * (zt * 0.5)  # eager's intermediates, in its order
        steps = [e, gt * e, gt * e * 0.5, ex, ex * k, gz, ex * k * gz, ex * k * gz * c, torch.from_numpy(eager)]
        subnormal = np.zeros(z.shape, bool)
        for v in steps:
            v = np.abs(v.cpu().numpy())
            subnormal |= (v > 0) & (v < FP32_TINY)
        allowed = FP32_TINY * (5 + np.abs(g) * (0.5 + 0.75 * np.abs(z)))
        np.testing.assert_array_equal(got[~subnormal], eager[~subnormal])
        assert np.all(np.abs(got - eager)[subnormal] <= allowed[subnormal])
        return
    finite = np.isfinite(eager)
    np.testing.assert_array_equal(got[~finite], eager[~finite])
    got, eager, z, g = got[finite], eager[finite], z[finite], g[finite]
    wide = torch.from_numpy(z).double()
    terms = np.abs(g) * (0.5 * torch.erfc(wide * -np.sqrt(0.5)).numpy()
                         + np.abs(z) * torch.exp(-0.5 * wide * wide).numpy() / np.sqrt(2 * np.pi))
    assert np.all(np.abs(got - eager) <= 2 * np.spacing(np.maximum(terms, FP32_TINY).astype(np.float32)))
    truth = autograd(wide, torch.from_numpy(g).double()).numpy()
    assert np.abs(got - truth).sum() <= np.abs(eager - truth).sum()


def test_silu_value_of_fp32_results_is_eager_f_silu_s():
    """SwiGLU's fp32 SiLU is ``F.silu`` as eager computes it on the same device: bit for bit on the
    GPU (x / (1 + expf(-x)), an IEEE division) but for flushed subnormals; under the interpreter,
    the fp64 value rounded, within two fp32 ulps of the CPU's and nearer the truth."""
    z = np.concatenate([_POINTS_FOR_GELU * 6, [0.0, -0.0, 88.0, -88.0, -100.0, -104.0, 1e30, -1e30, np.inf,
                                               -np.inf]]).astype(np.float32)
    (got,) = _run(_silu_as_eager_kernel, z, out_dtype=torch.float32)
    eager = torch.nn.functional.silu(torch.from_numpy(z).to(kernel_device_type())).cpu().numpy()
    if not interpreting():
        normal = ~(np.abs(eager) < FP32_TINY)
        np.testing.assert_array_equal(got[normal], eager[normal])
        assert np.all(np.abs(got[~normal] - eager[~normal]) < FP32_TINY)
        return
    finite = np.isfinite(eager)
    np.testing.assert_array_equal(got[~finite], eager[~finite])
    got, eager, z = got[finite], eager[finite], z[finite]
    normal = np.abs(eager) >= FP32_TINY  # below, the CPU's vectorised exp may give 0 for a subnormal
    assert np.all(np.abs(got - eager)[normal] <= 2 * np.spacing(np.abs(eager[normal])))
    assert np.all(np.abs(got - eager)[~normal] < FP32_TINY)
    truth = torch.nn.functional.silu(torch.from_numpy(z).double()).numpy()
    assert np.abs(got - truth).sum() <= np.abs(eager - truth).sum()
