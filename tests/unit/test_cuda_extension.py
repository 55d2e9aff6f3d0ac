"""add_mul_act's CUDA C++ implementation, as far as a machine without CUDA can check it.

The kernels themselves are verified by the harness on a GPU (``pytest --kernels add_mul_act``, where
the ``cuda`` implementation runs beside the Triton one). Here: that the spec registers it as a
CUDA-only implementation with a clear skip reason; that the loader builds into a cached, keyed
directory (``load_inline`` replaced by a recorder); that the element math header, compiled as host
C++, agrees with the references; and that the Python glue (row layouts, row groups, grad_bias,
autograd) is right, driven by a CPU stand-in that executes the kernels' contract in torch. Where
nvcc is installed, the math header is also compiled for the device.
"""

from __future__ import annotations

import ctypes
import math
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

import references.add_mul_act as reference
from harness.runner import skip_reason
from kernels._runtime import kernel_device_type
from kernels.cuda import _build
from kernels.cuda import add_mul_act as cuda_add_mul_act

CUDA_DIR = Path(_build.__file__).parent


def test_the_spec_registers_a_cuda_only_implementation_skipped_with_a_reason():
    import specs.add_mul_act as spec_module

    spec = spec_module.SPEC
    assert set(spec.implementations) == {"triton", "cuda"}
    impl = spec.implementations["cuda"]
    assert impl.requires_cuda and impl.description
    reason = skip_reason(spec, "cuda", torch.device("cpu"))
    assert reason is not None and "CUDA" in reason and "add_mul_act[cuda]" in reason
    assert skip_reason(spec, "triton", torch.device("cpu")) is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the behaviour without CUDA")
def test_loading_without_cuda_raises_a_clear_error():
    with pytest.raises(_build.CudaUnavailable, match="harness_add_mul_act"):
        _build.build(cuda_add_mul_act.SOURCE)


def test_the_source_holds_every_file_and_declares_every_exported_function():
    source = cuda_add_mul_act.SOURCE.cuda_source()
    assert source.index("namespace add_mul_act_math") < source.index("add_mul_act_fwd_kernel")
    for fn in cuda_add_mul_act.SOURCE.functions:
        assert f"void {fn}(" in cuda_add_mul_act.SOURCE.declarations
        assert f"void {fn}(" in source
    # the activation codes match the header's enum, in order
    header = (CUDA_DIR / "add_mul_act_math.h").read_text()
    assert "kRelu = 0, kSigmoid = 1, kSilu = 2, kGeluTanh = 3" in header
    assert cuda_add_mul_act.ACTIVATION_CODES == {"relu": 0, "sigmoid": 1, "silu": 2, "gelu_tanh": 3}
    assert set(cuda_add_mul_act.ACTIVATION_CODES) == set(cuda_add_mul_act.ACTIVATIONS)


def test_build_uses_a_keyed_cached_directory(monkeypatch, tmp_path):
    calls = []

    def fake_load_inline(**kwargs):
        calls.append(kwargs)
        return object()

    import torch.utils.cpp_extension as cpp_extension

    monkeypatch.setattr(cpp_extension, "load_inline", fake_load_inline)
    monkeypatch.setattr(_build, "unavailable_reason", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setenv("HARNESS_CUDA_CACHE", str(tmp_path))
    source = cuda_add_mul_act.SOURCE
    _build.build(source)
    (kw,) = calls
    key = _build.build_key(source, (9, 0))
    assert kw["name"] == f"harness_add_mul_act_{key}"
    assert Path(kw["build_directory"]) == tmp_path / kw["name"] and Path(kw["build_directory"]).is_dir()
    assert kw["functions"] == list(source.functions)
    assert kw["cuda_sources"] == [source.cuda_source()] and kw["cpp_sources"] == [source.declarations]
    assert "--use_fast_math" not in kw["extra_cuda_cflags"]
    # another device generation or another source is another build
    assert _build.build_key(source, (8, 0)) != key
    edited = _build.ExtensionSource(source.name, source.cuda_files, source.declarations + "\n", source.functions)
    assert _build.build_key(edited, (9, 0)) != key


def test_a_finished_build_is_imported_without_load_inline_and_a_broken_one_is_rebuilt(monkeypatch, tmp_path):
    import torch.utils.cpp_extension as cpp_extension

    calls = []
    monkeypatch.setattr(cpp_extension, "load_inline", lambda **kw: calls.append(kw) or object())
    monkeypatch.setattr(_build, "unavailable_reason", lambda: None)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    monkeypatch.setenv("HARNESS_CUDA_CACHE", str(tmp_path))
    source = cuda_add_mul_act.SOURCE
    _build.build(source)
    directory = Path(calls[0]["build_directory"])
    assert (directory / _build.FINISHED_MARKER).exists(), "a successful build is marked finished"
    _build.build(source)  # marked finished, but no library there: built again
    assert len(calls) == 2
    (directory / f"{calls[0]['name']}{cpp_extension.LIB_EXT}").write_text("not a shared library")
    with pytest.warns(UserWarning, match="does not import"):
        _build.build(source)
    assert len(calls) == 3
    (directory / _build.FINISHED_MARKER).unlink()  # a library without the marker may be partial: not imported
    _build.build(source)
    assert len(calls) == 4


def test_cache_root_follows_the_environment(monkeypatch, tmp_path):
    monkeypatch.delenv("HARNESS_CUDA_CACHE", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _build.cache_root() == tmp_path / "harness" / "cuda-extensions"
    monkeypatch.setenv("HARNESS_CUDA_CACHE", str(tmp_path / "x"))
    assert _build.cache_root() == tmp_path / "x"


# ----------------------------------------------------------------------------------------------
# The element math, compiled as host C++
# ----------------------------------------------------------------------------------------------

_SHIM = r"""
#include "add_mul_act_math.h"
using namespace add_mul_act_math;
template <typename T> static void run(int act, const T* z, T* y, T* dy, int n) {
  for (int i = 0; i < n; ++i) {
    switch (act) {
      case kRelu: activate_with_slope<kRelu>(z[i], y[i], dy[i]); break;
      case kSigmoid: activate_with_slope<kSigmoid>(z[i], y[i], dy[i]); break;
      case kSilu: activate_with_slope<kSilu>(z[i], y[i], dy[i]); break;
      default: activate_with_slope<kGeluTanh>(z[i], y[i], dy[i]); break;
    }
  }
}
extern "C" void eval_f32(int act, const float* z, float* y, float* dy, int n) { run(act, z, y, dy, n); }
extern "C" void eval_f64(int act, const double* z, double* y, double* dy, int n) { run(act, z, y, dy, n); }
"""


@pytest.fixture(scope="module")
def math_lib(tmp_path_factory):
    compiler = shutil.which("g++") or shutil.which("c++")
    if compiler is None:
        pytest.skip("no host C++ compiler")
    d = tmp_path_factory.mktemp("ama_math")
    (d / "shim.cpp").write_text(_SHIM)
    lib = d / "libama.so"
    # -ffp-contract=off: no fused multiply-adds, so the host build rounds like the plain formulas
    subprocess.run([compiler, "-O2", "-ffp-contract=off", "-shared", "-fPIC", f"-I{CUDA_DIR}", str(d / "shim.cpp"),
                    "-o", str(lib)], check=True, capture_output=True)
    return ctypes.CDLL(str(lib))


def _evaluate(lib, act: str, z: torch.Tensor):
    z = z.contiguous()
    y, dy = torch.empty_like(z), torch.empty_like(z)
    ctype = ctypes.c_float if z.dtype == torch.float32 else ctypes.c_double
    fn = lib.eval_f32 if z.dtype == torch.float32 else lib.eval_f64
    ptr = ctypes.POINTER(ctype)
    fn(ctypes.c_int(cuda_add_mul_act.ACTIVATION_CODES[act]), ctypes.cast(z.data_ptr(), ptr),
       ctypes.cast(y.data_ptr(), ptr), ctypes.cast(dy.data_ptr(), ptr), ctypes.c_int(z.numel()))
    return y, dy


def _oracle(act: str, z32: torch.Tensor):
    """fp64 values and autograd slopes of the reference activation at the (fp32) points."""
    z = z32.double().requires_grad_(True)
    y = reference.ACTIVATIONS[act](z)
    (dy,) = torch.autograd.grad(y.sum(), z)
    return y.detach(), dy


_POINTS = torch.cat([
    torch.linspace(-30, 30, 2401), torch.tensor([0.0, -0.0, 1e-30, -1e-30, 60.0, -60.0, 88.0, -100.0, -700.0]),
]).float()


def _bounds(act: str, z: torch.Tensor, want_y: torch.Tensor, want_dy: torch.Tensor, eps: float):
    """Allowed absolute errors of act and act' for a computation with unit roundoff ~eps.

    exp(-|v|) turns v's rounding into |v| roundings of relative error, in any implementation:
    v = z, or 2u ~ 0.07 z^3 for gelu_tanh (600 at z = -20). The slopes of silu and gelu_tanh are
    sums s + z s' (s = act / z) that cancel near the activations' minima: their error is bounded
    by the size of the terms, not of the sum. Results below the smallest normal number may be
    flushed or lose bits (subnormals), as in any implementation.
    """
    z = z.double()
    v = (z * z * z * 0.044715 + z) * 1.5957691216057308 if act == "gelu_tanh" else z
    rel = 8 * eps * (1 + v.abs())
    if act in ("silu", "gelu_tanh"):
        s = torch.where(z == 0, torch.full_like(z, 0.5), want_y / torch.where(z == 0, torch.ones_like(z), z))
        terms = s.abs() + (want_dy - s).abs()
    else:
        terms = want_dy.abs()
    tiny = torch.finfo(torch.float64 if eps < 1e-10 else torch.float32).tiny  # below it: subnormals
    return rel * want_y.abs() + tiny, 4 * rel * terms + tiny


@pytest.mark.parametrize("act", sorted(cuda_add_mul_act.ACTIVATION_CODES))
@pytest.mark.parametrize("dtype", [torch.float64, torch.float32], ids=["double", "float"])
def test_math_matches_the_reference(math_lib, act, dtype):
    """double (the fp32-output path): within a few fp64 roundings (times the conditioning), so that
    rounding to fp32 once is, but for near-ties, correct rounding. float (the 16-bit path): within a
    few fp32 roundings, far below a 16-bit ulp (1e-3 and 8e-3)."""
    z = _POINTS.to(dtype)
    y, dy = _evaluate(math_lib, act, z)
    want_y, want_dy = _oracle(act, _POINTS)
    bound_y, bound_dy = _bounds(act, z, want_y, want_dy, torch.finfo(dtype).eps)
    bad_y = (y.double() - want_y).abs() > bound_y
    bad_dy = (dy.double() - want_dy).abs() > bound_dy
    assert not bad_y.any(), (z[bad_y][:5], y[bad_y][:5], want_y[bad_y][:5])
    assert not bad_dy.any(), (z[bad_dy][:5], dy[bad_dy][:5], want_dy[bad_dy][:5])


def test_math_keeps_nan_and_relu_conventions(math_lib):
    z = torch.tensor([float("nan"), 0.0, -0.0, 2.0, -2.0], dtype=torch.float32)
    y, dy = _evaluate(math_lib, "relu", z)
    assert math.isnan(y[0]) and dy[0] == 1.0  # NaN kept; slope 1 as torch's threshold_backward
    assert y[1:].tolist() == [0.0, 0.0, 2.0, 0.0] and dy[1:].tolist() == [0.0, 0.0, 1.0, 0.0]
    for act in ("sigmoid", "silu", "gelu_tanh"):
        y, dy = _evaluate(math_lib, act, z[:1])
        assert math.isnan(y[0]) and math.isnan(dy[0]), act


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="nvcc is not installed")
def test_math_header_compiles_for_the_device(tmp_path):
    """The header through nvcc's device compilation (sm_90, ptxas included), without torch."""
    kernel = tmp_path / "k.cu"
    kernel.write_text(
        '#include "add_mul_act_math.h"\n'
        "using namespace add_mul_act_math;\n"
        "template <int A, typename T> __global__ void k(const T* z, T* y, T* dy, int n) {\n"
        "  int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
        "  if (i < n) activate_with_slope<A>(z[i], y[i], dy[i]);\n}\n"
        "template __global__ void k<kRelu, float>(const float*, float*, float*, int);\n"
        "template __global__ void k<kSilu, double>(const double*, double*, double*, int);\n"
        "template __global__ void k<kGeluTanh, float>(const float*, float*, float*, int);\n"
        "template __global__ void k<kSigmoid, double>(const double*, double*, double*, int);\n"
    )
    subprocess.run(["nvcc", "-c", "-std=c++17", "-gencode", "arch=compute_90,code=sm_90", f"-I{CUDA_DIR}",
                    str(kernel), "-o", str(tmp_path / "k.o")], check=True, capture_output=True, timeout=300)


# ----------------------------------------------------------------------------------------------
# The Python glue, driven by a CPU stand-in for the extension
# ----------------------------------------------------------------------------------------------


def _gather_rows(t: torch.Tensor, n_rows: int, n_cols: int, inner: int, stride_outer: int, stride_inner: int):
    """The (n_rows, n_cols) matrix that the CUDA kernels read from t's data pointer."""
    flat = torch.empty(0, dtype=t.dtype, device=t.device).set_(
        t.untyped_storage(), t.storage_offset(), (t.untyped_storage().nbytes() // t.element_size() - t.storage_offset(),))
    r = torch.arange(n_rows, device=t.device)
    start = (r // inner) * stride_outer + (r % inner) * stride_inner
    return flat[start[:, None] + torch.arange(n_cols, device=t.device)[None, :]]


class _StandIn:
    """Executes the extension's two functions in torch (fp64), honouring the same arguments."""

    names = {v: k for k, v in cuda_add_mul_act.ACTIVATION_CODES.items()}
    calls: list[tuple]

    def __init__(self):
        self.calls = []

    def add_mul_act_forward(self, x, y, bias, out, n_rows, n_cols, alpha, act, *layouts):
        self.calls.append(("forward", n_rows, n_cols, layouts))
        xs = _gather_rows(x, n_rows, n_cols, *layouts[0:3]).double()
        ys = _gather_rows(y, n_rows, n_cols, *layouts[3:6]).double()
        z = xs + alpha * ys + bias.double()
        out.view(n_rows, n_cols).copy_(reference.ACTIVATIONS[self.names[act]](z))

    def add_mul_act_backward(self, x, y, bias, grad, grad_x, grad_y, partial, n_rows, n_cols, alpha, act,
                             rows_per_group, *layouts):
        self.calls.append(("backward", n_rows, n_cols, rows_per_group, partial.shape[0], layouts))
        xs = _gather_rows(x, n_rows, n_cols, *layouts[0:3]).double()
        ys = _gather_rows(y, n_rows, n_cols, *layouts[3:6]).double()
        gs = _gather_rows(grad, n_rows, n_cols, *layouts[6:9]).double()
        with torch.enable_grad():  # called from inside a backward, where grad mode is off
            z = (xs + alpha * ys + bias.double()).requires_grad_(True)
            (slope,) = torch.autograd.grad(reference.ACTIVATIONS[self.names[act]](z).sum(), z)
        dz = gs * slope
        grad_x.view(n_rows, n_cols).copy_(dz)
        grad_y.view(n_rows, n_cols).copy_(alpha * dz)
        for g in range(partial.shape[0]):
            partial[g] = dz[g * rows_per_group:(g + 1) * rows_per_group].sum(0)


@pytest.mark.parametrize("layout", ["contiguous", "transposed_batch", "sliced_columns"])
def test_glue_passes_layouts_groups_and_gradients(layout):
    """On the kernels' device: the glue validates its inputs as the Triton wrapper does."""
    torch.manual_seed(0)
    device = kernel_device_type()
    base = torch.randn(3, 7, 19, device=device)
    if layout == "contiguous":
        x = base
    elif layout == "transposed_batch":
        x = base.transpose(0, 1).contiguous().transpose(0, 1)  # leading dims in the other order
    else:
        x = torch.randn(3, 7, 40, device=device)[..., 5:24]  # a row stride longer than the row
    x = x.clone() if layout == "contiguous" else x
    y = torch.randn(3, 7, 19, device=device)
    bias = torch.randn(19, device=device)
    grad = torch.randn(3, 7, 19, device=device).transpose(0, 1).contiguous().transpose(0, 1)
    stand_in = _StandIn()
    op = cuda_add_mul_act.make(stand_in, require_cuda=False)
    for act in cuda_add_mul_act.ACTIVATIONS:
        args = [t.detach().clone().requires_grad_(True) for t in (x, y, bias)]
        out = op(*args, alpha=-0.75, activation=act)
        (gx, gy, gb) = torch.autograd.grad(out, args, grad)
        # the truth in fp64 from the same fp32 inputs; the stand-in rounds once, to fp32
        ref_args = [t.detach().double().requires_grad_(True) for t in (x, y, bias)]
        want = reference.add_mul_act(*ref_args, alpha=-0.75, activation=act)
        (wx, wy, wb) = torch.autograd.grad(want, ref_args, grad.double())
        for got, expected in ((out, want), (gx, wx), (gy, wy), (gb, wb)):
            assert got.dtype == torch.float32 and got.is_contiguous()
            torch.testing.assert_close(got.double(), expected, rtol=1e-6, atol=1e-6)
    backward = [c for c in stand_in.calls if c[0] == "backward"]
    assert backward and all(groups > 1 for *_, groups, _ in backward)  # several partial rows
    assert not any(isinstance(a, torch.Tensor) for c in stand_in.calls for a in c[-1])


def test_row_groups_cover_every_row_once():
    for n_rows, n_cols, sms in [(1, 1, 132), (7, 3, 1), (8192, 16384, 132), (100000, 64, 132), (5, 100000, 2)]:
        per = cuda_add_mul_act.rows_per_group(n_rows, n_cols, sms)
        groups = -(-n_rows // per)
        assert per >= 1 and groups * per >= n_rows and (groups - 1) * per < n_rows and groups <= 65535


def test_glue_rejects_what_the_triton_kernel_rejects():
    op = cuda_add_mul_act.make(_StandIn(), require_cuda=True)
    device = kernel_device_type()
    x = torch.randn(2, 4, device=device)
    with pytest.raises(ValueError, match="activation"):
        op(x, x, torch.randn(4, device=device), activation="tanh")
    cpu = torch.randn(2, 4)  # refused on a CPU machine by the glue, on a GPU one by the shared check
    with pytest.raises(ValueError, match="(?i)cuda device"):
        op(cpu, cpu, torch.randn(4))


def test_a_stale_build_lock_is_removed_and_a_fresh_one_kept(tmp_path):
    import os
    import time

    fresh, stale = tmp_path / "fresh.lock", tmp_path / "stale.lock"
    fresh.touch()
    stale.touch()
    old = time.time() - _build.STALE_LOCK_S - 60
    os.utime(stale, (old, old))
    _build._remove_stale_lock(fresh)
    with pytest.warns(UserWarning, match="stale build lock"):
        _build._remove_stale_lock(stale)
    assert fresh.exists() and not stale.exists()
    _build._remove_stale_lock(tmp_path / "absent.lock")  # no lock: nothing to do
