"""A deliberately simple Triton softmax whose bugs can be switched on, for the softmax faults.

One row per program; each row is walked in blocks three times (max, sum, write), with the same
block width the production kernel uses for that row length, so that the faults and the real kernel
change tiling at the same lengths. With every switch off it computes softmax at least as accurately
as the production kernel (the accurate exp and fp64 sums, where production's forward takes the fast
exp and fp32 sums), so a fault fails only through its planted bug. The
switches are compile-time constants, so each fault is its own specialised kernel.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _rows
from kernels import softmax as production
from kernels._validate import check_tensor


@triton.jit
def _add_rounded(a, b):
    """a + b rounded to a's (16-bit) dtype; the sum runs in fp32 since the interpreter cannot add bf16."""
    return (a.to(tl.float32) + b.to(tl.float32)).to(a.dtype)


@triton.jit
def _narrow(v, ptr):
    """fp64 v in ptr's element type; via fp32, since the interpreter cannot cast fp64 to bf16."""
    if ptr.dtype.element_ty == tl.float64:
        return v
    else:
        return v.to(tl.float32).to(ptr.dtype.element_ty)


@triton.jit
def _load_block(row_ptr, start, cols, n_cols, BLOCK: tl.constexpr, DROP_LAST_LANE: tl.constexpr):
    mask = start + cols < n_cols
    if DROP_LAST_LANE:  # planted: off-by-one, the last lane of every block is never loaded
        mask = mask & (cols < BLOCK - 1)
    return tl.load(row_ptr + start + cols, mask=mask, other=-float("inf")).to(tl.float32)


@triton.jit
def _exp(x, PRECISE: tl.constexpr, SUBTRACT_MAX: tl.constexpr):
    """Production's exp, whose accurate fp32 form takes x <= 0 only; the planted fault's unshifted
    logits take tl.exp, which overflows to inf past ~88 as the fault means to show."""
    if SUBTRACT_MAX:
        return _rows.exp(x, PRECISE)
    else:
        return tl.exp(x)


@triton.jit
def _fwd_kernel(
    x_ptr, y_ptr, n_cols, x_inner, x_so, x_si,
    BLOCK: tl.constexpr, SUBTRACT_MAX: tl.constexpr, DROP_LAST_LANE: tl.constexpr,
    SUM_DTYPE: tl.constexpr, PRECISE: tl.constexpr,
):
    row = tl.program_id(0)
    x_row = x_ptr + _rows.row_offset(row, x_inner, x_so, x_si)
    y_row = y_ptr + row.to(tl.int64) * n_cols
    cols = tl.arange(0, BLOCK)
    m = tl.full([], -float("inf"), tl.float32)
    for start in range(0, n_cols, BLOCK):
        m = tl.maximum(m, tl.max(_load_block(x_row, start, cols, n_cols, BLOCK, DROP_LAST_LANE)))
    if not SUBTRACT_MAX:  # planted: exp(x) directly, which overflows for logits above ~88
        m = 0.0
    if SUM_DTYPE != tl.float64:  # planted: a 16-bit accumulator, one lane per column of the block
        acc = tl.zeros([BLOCK], SUM_DTYPE)
        for start in range(0, n_cols, BLOCK):
            e = _exp(_load_block(x_row, start, cols, n_cols, BLOCK, DROP_LAST_LANE) - m, PRECISE, SUBTRACT_MAX)
            acc = _add_rounded(acc, e.to(SUM_DTYPE))
        s16 = tl.reduce(acc, 0, _add_rounded, keep_dims=True)
        s = tl.sum(s16.to(tl.float32).to(tl.float64))  # via fp32, as in _narrow
    else:
        s = tl.zeros([], tl.float64)
        for start in range(0, n_cols, BLOCK):
            e = _exp(_load_block(x_row, start, cols, n_cols, BLOCK, DROP_LAST_LANE) - m, PRECISE, SUBTRACT_MAX)
            s += tl.sum(e.to(tl.float64))
    for start in range(0, n_cols, BLOCK):
        e = _exp(_load_block(x_row, start, cols, n_cols, BLOCK, DROP_LAST_LANE) - m, PRECISE, SUBTRACT_MAX)
        y = e.to(tl.float64) / s
        tl.store(y_row + start + cols, _narrow(y, y_ptr), mask=start + cols < n_cols)


@triton.jit
def _bwd_kernel(
    y_ptr, dy_ptr, dx_ptr, n_cols, dy_inner, dy_so, dy_si,
    BLOCK: tl.constexpr, DROP_SUM_TERM: tl.constexpr, WIDE: tl.constexpr,
):
    row = tl.program_id(0)
    dense = row.to(tl.int64) * n_cols
    dy_row = dy_ptr + _rows.row_offset(row, dy_inner, dy_so, dy_si)
    cols = tl.arange(0, BLOCK)
    # dx = y * (dy - c), c = sum(y * dy) [/ sum(y) for fp32/fp64], in fp64: the production form.
    dot = tl.zeros([], tl.float64)
    total = tl.zeros([], tl.float64)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        y = tl.load(y_ptr + dense + start + cols, mask=mask, other=0.0).to(tl.float64)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(tl.float64)
        dot += tl.sum(y * dy)
        total += tl.sum(y)
    c = dot / total if WIDE else dot
    if DROP_SUM_TERM:  # planted: dx = y * dy, the softmax Jacobian without its rank-one term
        c = tl.zeros([], tl.float64)
    for start in range(0, n_cols, BLOCK):
        mask = start + cols < n_cols
        y = tl.load(y_ptr + dense + start + cols, mask=mask, other=0.0).to(tl.float64)
        dy = tl.load(dy_row + start + cols, mask=mask, other=0.0).to(tl.float64)
        tl.store(dx_ptr + dense + start + cols, _narrow(y * (dy - c), dx_ptr), mask=mask)


_SUM_DTYPES = {torch.float16: tl.float16, torch.bfloat16: tl.bfloat16,
               torch.float32: tl.float64, torch.float64: tl.float64}


# The 16-bit-accumulator fault loops over the row in narrow blocks, as a looped kernel written for
# long rows would: each lane then adds many terms in sequence, each add rounded to 16 bits. Its
# test runs it in bf16 (8 significant bits), where 16-wide blocks on rows of 256 and more give
# 10-30x eager's error (interpreter, normal logits: 0.039 relative at 256 columns, 0.12 at 1024,
# eager 0.0037). In fp16 (11 bits) the same bug stays within ~2x eager's error unless each lane
# adds a thousand terms or more (2-wide blocks on 2048 columns: 0.0068 against 0.003), which is
# caught only in some seeds' examples and costs ~4 s per row in the interpreter.
_NARROW_BLOCK = 16


def _block(n: int, x: torch.Tensor, backward: bool, narrow: bool = False) -> int:
    """The production kernel's block width for this row length and pass (its private tiling), so
    the faults change tiling where the real kernel does; or the narrow looping block (above)."""
    if narrow:
        return min(triton.next_power_of_2(n), _NARROW_BLOCK)
    return production._config(n, x.dtype, backward)[1]["BLOCK"]


def _forward(x: torch.Tensor, knobs: dict) -> torch.Tensor:
    y = torch.empty(x.shape, dtype=x.dtype, device=x.device)
    if y.numel() == 0:
        return y
    src = _rows.row_layout(x)
    layout = src.kernel_args()
    if knobs["assume_dense_rows"]:  # planted: row r read at r * N, whatever the real row stride
        layout = (src.rows, 0, src.n)
    with _rows.launch_guard(x):
        _fwd_kernel[(src.rows,)](
            src.tensor, y, src.n, *layout, BLOCK=_block(src.n, x, False, narrow=knobs["half_precision_sum"]),
            SUBTRACT_MAX=knobs["subtract_max"], DROP_LAST_LANE=knobs["drop_last_lane"],
            SUM_DTYPE=_SUM_DTYPES[x.dtype] if knobs["half_precision_sum"] else tl.float64,
            PRECISE=x.dtype == torch.float32,
        )
    return y


def _backward(y: torch.Tensor, dy: torch.Tensor, knobs: dict) -> torch.Tensor:
    dx = torch.empty(y.shape, dtype=y.dtype, device=y.device)
    if dx.numel() == 0:
        return dx
    grad = _rows.row_layout(dy)
    with _rows.launch_guard(y):
        _bwd_kernel[(grad.rows,)](
            y, grad.tensor, dx, grad.n, *grad.kernel_args(), BLOCK=_block(grad.n, y, True),
            DROP_SUM_TERM=knobs["drop_sum_term"], WIDE=y.dtype in (torch.float32, torch.float64),
        )
    return dx


class _FaultySoftmax(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, knobs):
        y = _forward(x, knobs)
        ctx.save_for_backward(y)
        ctx.knobs = knobs
        return y

    @staticmethod
    def backward(ctx, dy):
        (y,) = ctx.saved_tensors
        return _backward(y, dy.to(y.dtype), ctx.knobs), None


def softmax(
    x: torch.Tensor, *, assume_dense_rows: bool = False, subtract_max: bool = True,
    drop_last_lane: bool = False, half_precision_sum: bool = False, drop_sum_term: bool = False,
) -> torch.Tensor:
    """Softmax over the last dim, with the named bugs planted (all off: correct)."""
    check_tensor("softmax", "x", x, dtypes=production.DTYPES, min_ndim=1)
    knobs = dict(assume_dense_rows=assume_dense_rows, subtract_max=subtract_max,
                 drop_last_lane=drop_last_lane, half_precision_sum=half_precision_sum,
                 drop_sum_term=drop_sum_term)
    return _FaultySoftmax.apply(x, knobs)
