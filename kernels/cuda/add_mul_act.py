"""``act(x + alpha * y + bias)`` as a CUDA C++ extension: the same op, contract and numerics as the
Triton kernel of ``kernels/add_mul_act.py``, built with ``load_inline`` at first use
(``kernels/cuda/_build.py``; sources ``add_mul_act_math.h`` and ``add_mul_act.cu`` beside this file).

Forward: one kernel reads x, y and bias once and writes the output (z and the activation in fp32;
for fp32 tensors both in fp64, rounded once at the store, as the Triton kernel's PRECISE path). Backward: one kernel recomputes z, writes ``grad_x = grad * act'(z)`` and
``grad_y = alpha * grad_x`` and sums grad_x over fixed groups of rows into fp64 partial rows; a
``torch.sum`` over those finishes ``grad_bias`` (no atomics: bitwise reproducible).

x, y and grad are read in place in any layout that ``kernels/_rows.py`` describes as rows (the
last dimension unit-stride, the leading dimensions folding into two strides), and copied otherwise;
the outputs are new contiguous tensors. Arguments are validated by the Triton module's own checks,
so both implementations reject the same calls with the same messages.
"""

from __future__ import annotations

import functools

import torch

from kernels import _ops, _rows
from kernels import add_mul_act as _triton
from kernels.cuda import _build

ACTIVATIONS = _triton.ACTIVATIONS
# Activation codes of add_mul_act_math.h's enum Activation.
ACTIVATION_CODES = {"relu": 0, "sigmoid": 1, "silu": 2, "gelu_tanh": 3}

SOURCE = _build.ExtensionSource(
    name="harness_add_mul_act",
    cuda_files=("add_mul_act_math.h", "add_mul_act.cu"),
    declarations=(
        "void add_mul_act_forward(torch::Tensor x, torch::Tensor y, torch::Tensor bias, torch::Tensor out, "
        "int64_t n_rows, int64_t n_cols, double alpha, int64_t act, int64_t x_inner, int64_t x_stride_outer, "
        "int64_t x_stride_inner, int64_t y_inner, int64_t y_stride_outer, int64_t y_stride_inner);\n"
        "void add_mul_act_backward(torch::Tensor x, torch::Tensor y, torch::Tensor bias, torch::Tensor grad, "
        "torch::Tensor grad_x, torch::Tensor grad_y, torch::Tensor partial, int64_t n_rows, int64_t n_cols, "
        "double alpha, int64_t act, int64_t rows_per_group, int64_t x_inner, int64_t x_stride_outer, "
        "int64_t x_stride_inner, int64_t y_inner, int64_t y_stride_outer, int64_t y_stride_inner, "
        "int64_t g_inner, int64_t g_stride_outer, int64_t g_stride_inner);\n"
    ),
    functions=("add_mul_act_forward", "add_mul_act_backward"),
)

# The backward's blocks are 256 columns wide (kThreads in add_mul_act.cu), 8 programs an SM (the
# Triton kernels' grouping before it was sized by residency, kernels/_activations.py; not swept).
_BLOCK_COLS = 256
_PROGRAMS_PER_SM = 8
_MAX_GROUPS = 65535  # gridDim.y


def rows_per_group(n_rows: int, n_cols: int, sm_count: int) -> int:
    """Rows per backward group: enough groups to fill the device, few partial rows; the grouping
    depends only on the shape and the device (reproducible)."""
    col_blocks = -(-n_cols // _BLOCK_COLS)
    programs = _build_programs(sm_count)
    groups = max(1, min(n_rows, programs // col_blocks, _MAX_GROUPS))
    return -(-n_rows // groups)


def _build_programs(sm_count: int) -> int:
    return _PROGRAMS_PER_SM * sm_count


def _extension():
    return _build.load(SOURCE)


def _forward(ext, x, y, bias, alpha: float, activation: str) -> torch.Tensor:
    out = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    xl, yl = _rows.row_layout(x), _rows.row_layout(y)
    ext.add_mul_act_forward(
        xl.tensor, yl.tensor, bias.contiguous(), out, xl.rows, xl.n, float(alpha), ACTIVATION_CODES[activation],
        *xl.kernel_args(), *yl.kernel_args(),
    )
    return out


def _backward(ext, x, y, bias, alpha: float, activation: str, grad: torch.Tensor, sm_count: int):
    """(grad_x, grad_y, grad_bias partial sums: fp64, one row per row group)."""
    grad_x = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    grad_y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    n = x.shape[-1]
    if grad_x.numel() == 0:
        return grad_x, grad_y, torch.zeros((1, n), dtype=torch.float64, device=x.device)
    xl, yl, gl = _rows.row_layout(x), _rows.row_layout(y), _rows.row_layout(grad)
    per_group = rows_per_group(xl.rows, n, sm_count)
    groups = -(-xl.rows // per_group)
    partials = torch.empty((groups, n), dtype=torch.float64, device=x.device)
    ext.add_mul_act_backward(
        xl.tensor, yl.tensor, bias.contiguous(), gl.tensor, grad_x, grad_y, partials, xl.rows, n, float(alpha),
        ACTIVATION_CODES[activation], per_group, *xl.kernel_args(), *yl.kernel_args(), *gl.kernel_args(),
    )
    return grad_x, grad_y, partials


def _sm_count(t: torch.Tensor) -> int:
    """The device's SM count (1 for a CPU stand-in, so that small tests still form several groups)."""
    from kernels._runtime import sm_count

    if t.device.type != "cuda":
        return 1
    return sm_count(t.device)


class _AddMulActCuda(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ext, x, y, bias, alpha: float, activation: str):
        ctx.save_for_backward(x, y, bias)
        ctx.ext, ctx.alpha, ctx.activation = ext, alpha, activation
        return _forward(ext, x, y, bias, alpha, activation)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, y, bias = ctx.saved_tensors
        if grad.dtype != x.dtype:
            grad = grad.to(x.dtype)
        grad_x, grad_y, partials = _backward(ctx.ext, x, y, bias, ctx.alpha, ctx.activation, grad, _sm_count(x))
        need_x, need_y, need_bias = ctx.needs_input_grad[1:4]
        return (None, grad_x if need_x else None, grad_y if need_y else None,
                partials.sum(dim=0).to(bias.dtype) if need_bias else None, None, None)


# The built extension as custom ops (kernels/_ops.py), for torch.compile and CUDA graphs: the
# bodies call the process's one build (load()); a stand-in extension (tests) keeps the Function.


@_ops.op("add_mul_act_cuda", "(Tensor x, Tensor y, Tensor bias, float alpha, str activation) -> Tensor")
def add_mul_act_cuda_op(x, y, bias, alpha, activation):
    return _forward(_extension(), x, y, bias, alpha, activation)


@add_mul_act_cuda_op.register_fake
def _(x, y, bias, alpha, activation):
    return _ops.empty_like(x)


@_ops.op("add_mul_act_cuda_backward",
         "(Tensor x, Tensor y, Tensor bias, Tensor grad, float alpha, str activation) -> Tensor[]")
def add_mul_act_cuda_backward_op(x, y, bias, grad, alpha, activation):
    """[grad_x, grad_y, grad_bias]: the partial rows summed here (their count is the device's)."""
    grad_x, grad_y, partials = _backward(_extension(), x, y, bias, alpha, activation, grad, _sm_count(x))
    return [grad_x, grad_y, partials.sum(dim=0).to(bias.dtype)]


@add_mul_act_cuda_backward_op.register_fake
def _(x, y, bias, grad, alpha, activation):
    return [_ops.empty_like(x), _ops.empty_like(x), _ops.empty_like(bias)]


_triton.register_autograd(add_mul_act_cuda_op, add_mul_act_cuda_backward_op)  # the same formula as the Triton op's


def make(ext, require_cuda: bool = True, custom_op: bool = False):
    """The op backed by ``ext`` (the built extension, or a stand-in with its two functions; tests
    pass ``require_cuda=False`` with a stand-in that runs on the CPU). ``custom_op``: ``ext`` is
    the process's build, whose custom ops the call takes inside torch.compile."""

    def add_mul_act(x: torch.Tensor, y: torch.Tensor, bias: torch.Tensor, alpha: float = 1.0,
                    activation: str = "relu") -> torch.Tensor:
        """``act(x + alpha * y + bias)``: the contract of :func:`kernels.add_mul_act.add_mul_act`,
        on CUDA tensors."""
        alpha = _triton._validate(x, y, bias, alpha, activation)
        if require_cuda and x.device.type != "cuda":
            raise ValueError(f"add_mul_act (cuda): argument 'x' must be on a CUDA device, got {x.device}")
        if custom_op and _ops.route():
            return add_mul_act_cuda_op(x, y, bias, alpha, activation)
        if torch.is_grad_enabled() and (x.requires_grad or y.requires_grad or bias.requires_grad):
            return _AddMulActCuda.apply(ext, x, y, bias, alpha, activation)
        return _forward(ext, x, y, bias, alpha, activation)

    return add_mul_act


@functools.lru_cache(maxsize=1)
def load():
    """Build (or load the cached build of) the extension and return ``add_mul_act``; raises
    :class:`kernels.cuda._build.CudaUnavailable` on a machine without CUDA."""
    return make(_extension(), custom_op=True)
