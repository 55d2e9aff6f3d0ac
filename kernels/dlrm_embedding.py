"""DLRM's hashed embedding lookup, fused across tables, forward and backward, in Triton.

``dlrm_embedding(ids, weights, cardinalities)``: ids (batch, features) int64 (or int32) categorical
ids, one column per table; ``weights`` (rows, dim) holds the tables one after another (table f is
rows ``offset_f .. offset_f + cardinality_f - 1``, ``offset_f`` the sum of the cardinalities before
it; rows past the last table are allowed and unused). The lookup of id x in table f is row
``offset_f + ((x + 1) mod cardinality_f)``: ``x + 1`` in int64 two's-complement arithmetic (it wraps
at 2^63 - 1, as a tensor addition does) and the non-negative remainder (``torch.remainder``), so
every int64 id, negative ones included, names a row. The result is (batch, features, dim).

Forward: one launch for all tables. Each program takes BLOCK_N lookups of the flattened
(batch x features) grid, hashes them with the table's cardinality and offset (a small device
table of both, cached per cardinality list and device), and copies the rows. When gradients are
needed it also writes each lookup's row index for the backward.

Backward (deterministic, no atomics): the lookups' row indices are sorted with a stable sort
(``torch.sort(stable=True)``, deterministic on CUDA) and, for each position, the end of its run of
equal rows is found with ``torch.searchsorted``. One program per sorted position; the program at
the start of a run sums the gradient rows of the run's lookups (see Numerics), in the order of the
lookups (batch-major), and writes the table row once. Rows no lookup names get zero. Each row is
written by one program in a fixed order, so repeated calls are bitwise identical. (A run is summed
by one program: a row looked up by most of the batch is a long serial sum. Atomic adds would spread
it over programs but make the fp32 sum's order, and so its bits, vary from call to call.)

Numerics: the forward copies bits; the backward accumulates in fp64 for fp32 tables (fp32 for
16-bit ones) and rounds once to the weights' dtype. The long serial sums of a popular
row need it: 251 lookups of one row with a broadcast grad_output, summed serially in fp32, are 28
ulp off (0.0017 at -579.9), 8.8x eager's error; fp32 sums are ~500x finer than a 16-bit table's
ulp and stay.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import torch
import triton
import triton.language as tl

from kernels import _launch, _ops, _rows
from kernels._validate import FLOAT_DTYPES, check_same_device, check_tensor

OP = "dlrm_embedding"
ID_DTYPES = (torch.int64, torch.int32)

# Lookups per forward program: enough bytes per program on a GPU; 4 under the interpreter so that
# CPU-sized grids span several programs and end in a partial one.
_GPU_ROW_ELEMS = 4096
_INTERPRETER_BLOCK_N = 4


def _block_n(block_d: int) -> int:
    return _INTERPRETER_BLOCK_N if _rows._SMALL_TILES else max(1, min(128, _GPU_ROW_ELEMS // block_d))


def block_boundaries() -> tuple[int, ...]:
    """Lookup counts (batch x features) where the forward's tiling changes, for test shapes."""
    return (_INTERPRETER_BLOCK_N,) if _rows._SMALL_TILES else (32,)


@functools.lru_cache(maxsize=64)
def _table_info(cardinalities: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """(2, features) int64 on ``device``: row 0 the cardinalities, row 1 the offsets."""
    offsets = [0]
    for c in cardinalities[:-1]:
        offsets.append(offsets[-1] + c)
    return torch.tensor([list(cardinalities), offsets], dtype=torch.int64, device=device)


def _info(cardinalities: tuple[int, ...], device: torch.device) -> torch.Tensor:
    """The table info of validated cardinalities (an empty one for no tables)."""
    if not cardinalities:
        return torch.zeros((2, 0), dtype=torch.int64, device=device)
    return _table_info(cardinalities, device)


@_launch.jit
def _embedding_fwd_kernel(
    IDS, W, INFO, OUT, ROWS, n_lookups, F, D, si_b, si_f, sw_r, sw_d,
    BLOCK_N: tl.constexpr, BLOCK_D: tl.constexpr, SAVE_ROWS: tl.constexpr,
):
    n = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    ok = n < n_lookups
    b = n // F
    f = n % F
    x = tl.load(IDS + b * si_b + f * si_f, mask=ok, other=0).to(tl.int64)
    card = tl.load(INFO + f, mask=ok, other=1)
    offset = tl.load(INFO + F + f, mask=ok, other=0)
    # (x + 1) wraps in int64 like torch's addition; the remainder is made non-negative whatever
    # sign convention the backend's integer remainder has.
    r = (x + 1) % card
    r = tl.where(r < 0, r + card, r)
    row = offset + r
    if SAVE_ROWS:
        tl.store(ROWS + n, row, mask=ok)
    d = tl.arange(0, BLOCK_D)[None, :]
    m = ok[:, None] & (d < D)
    w = tl.load(W + row[:, None] * sw_r + d * sw_d, mask=m)
    tl.store(OUT + n[:, None] * D + d, w, mask=m)


@_launch.jit
def _embedding_bwd_kernel(
    SORTED, PERM, ENDS, GRAD, GW, F, D, sg_b, sg_f, sg_d,
    BLOCK_D: tl.constexpr, ACC: tl.constexpr,
):
    p = tl.program_id(0).to(tl.int64)
    row = tl.load(SORTED + p)
    prev = tl.load(SORTED + tl.maximum(p - 1, 0))
    if (p == 0) | (row != prev):  # the first position of a run of equal rows owns the row
        d = tl.arange(0, BLOCK_D)
        d_ok = d < D
        acc = tl.zeros([BLOCK_D], ACC)
        end = tl.load(ENDS + p)
        for q in range(p, end):
            src = tl.load(PERM + q)
            g = tl.load(GRAD + (src // F) * sg_b + (src % F) * sg_f + d * sg_d, mask=d_ok, other=0.0)
            acc += g.to(ACC)
        tl.store(GW + row * D + d, _rows.cast_for_store(acc, GW), mask=d_ok)


def _forward(ids, weights, info, save_rows: bool):
    batch, features = ids.shape
    dim = weights.shape[1]
    out = torch.empty((batch, features, dim), dtype=weights.dtype, device=weights.device)
    rows = torch.empty((batch * features,), dtype=torch.int64, device=weights.device) if save_rows else None
    n = batch * features
    if n == 0 or dim == 0:
        return out, rows
    block_d = triton.next_power_of_2(dim)
    block_n = _block_n(block_d)
    with _rows.launch_guard(weights):
        _embedding_fwd_kernel[(triton.cdiv(n, block_n),)](
            ids, weights, info, out, rows if save_rows else out, n, features, dim,
            *ids.stride(), *weights.stride(),
            BLOCK_N=block_n, BLOCK_D=block_d, SAVE_ROWS=save_rows, num_warps=4,
        )
    return out, rows


def _accumulator(dtype: torch.dtype):
    """fp64 sums for fp32 tables, fp32 for 16-bit ones (module docstring)."""
    return tl.float64 if dtype == torch.float32 else tl.float32


def _backward(rows, grad, weight_shape, dtype, features):
    grad_w = torch.zeros(weight_shape, dtype=dtype, device=grad.device)
    n = rows.numel()
    if n == 0 or weight_shape[1] == 0:
        return grad_w
    sorted_rows, perm = torch.sort(rows, stable=True)
    ends = torch.searchsorted(sorted_rows, sorted_rows, right=True)
    with _rows.launch_guard(grad):
        _embedding_bwd_kernel[(n,)](
            sorted_rows, perm, ends, grad, grad_w, features, weight_shape[1], *grad.stride(),
            BLOCK_D=triton.next_power_of_2(weight_shape[1]), ACC=_accumulator(dtype), num_warps=1,
        )
    return grad_w


class _Embedding(torch.autograd.Function):
    @staticmethod
    def forward(ctx, ids, weights, info):
        out, rows = _forward(ids, weights, info, save_rows=True)
        ctx.save_for_backward(rows)
        ctx.weight_shape, ctx.features = tuple(weights.shape), ids.shape[1]
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        (rows,) = ctx.saved_tensors
        if not ctx.needs_input_grad[1]:
            return None, None, None
        return None, _backward(rows, grad, ctx.weight_shape, grad.dtype, ctx.features), None


# The custom ops (kernels/_ops.py): the same launchers as the eager path, so bitwise the same. The
# cardinalities travel as a SymInt[] (a compiled call serves other cardinalities of the same length
# without recompiling) and become the device table inside the op, from _table_info's cache: the op
# reads no tensor on the host. A cache miss (the first call with a cardinality list on a device)
# copies the table from the host, as the eager path does, which a CUDA graph capture cannot hold:
# capture after a warm-up call, as usual.


@_ops.op("dlrm_embedding",
          "(Tensor ids, Tensor weights, SymInt[] cardinalities, bool save_rows) -> (Tensor, Tensor)")
def dlrm_embedding_op(ids, weights, cardinalities, save_rows):
    """:func:`dlrm_embedding` as a custom op: the lookups and, with ``save_rows``, each lookup's
    row, which the backward reads. Without ``save_rows`` the rows come back empty and the lookups
    are not differentiable (the eager path's call when no gradient is needed)."""
    out, rows = _forward(ids, weights, _info(tuple(cardinalities), weights.device), save_rows)
    return out, (rows if save_rows else torch.empty((0,), dtype=torch.int64, device=weights.device))


@dlrm_embedding_op.register_fake
def _(ids, weights, cardinalities, save_rows):
    batch, features = ids.shape
    out = weights.new_empty((batch, features, weights.shape[1]))
    return out, weights.new_empty((batch * features if save_rows else 0,), dtype=torch.int64)


@_ops.op("dlrm_embedding_backward", "(Tensor rows, Tensor grad, SymInt[] weight_shape) -> Tensor")
def dlrm_embedding_backward(rows, grad, weight_shape):
    """The weights' gradient, of grad's dtype, from the forward's rows (one per lookup)."""
    return _backward(rows, grad, tuple(weight_shape), grad.dtype, grad.shape[1])


@dlrm_embedding_backward.register_fake
def _(rows, grad, weight_shape):
    return grad.new_empty(weight_shape)


def _setup(ctx, inputs, output):
    _, weights, _, save_rows = inputs
    out, rows = output
    if not save_rows:
        ctx.mark_non_differentiable(out)
    ctx.save_for_backward(rows)
    ctx.weight_shape = weights.shape


def _backward_formula(ctx, grad, _grad_rows):
    (rows,) = ctx.saved_tensors
    if not ctx.needs_input_grad[1]:
        return None, None, None, None
    return None, dlrm_embedding_backward(rows, grad, list(ctx.weight_shape)), None, None


dlrm_embedding_op.register_autograd(_backward_formula, setup_context=_setup)


def _check_cardinalities(cardinalities, features: int, rows: int) -> tuple[int, ...]:
    if isinstance(cardinalities, (str, bytes)) or not isinstance(cardinalities, Sequence):
        raise TypeError(f"{OP}: argument 'cardinalities' must be a sequence of ints, got {type(cardinalities).__name__}")
    cards = tuple(cardinalities)
    if any(isinstance(c, bool) or not isinstance(c, int) for c in cards):
        raise TypeError(f"{OP}: argument 'cardinalities' must hold ints, got {cards!r}")
    if len(cards) != features:
        raise ValueError(f"{OP}: argument 'cardinalities' has {len(cards)} entries; ids has {features} features")
    if any(c < 1 for c in cards):
        raise ValueError(f"{OP}: argument 'cardinalities' must be positive, got {cards!r}")
    if sum(cards) > rows:
        raise ValueError(f"{OP}: argument 'cardinalities' sums to {sum(cards)} rows; weights has {rows}")
    return cards


def dlrm_embedding(ids: torch.Tensor, weights: torch.Tensor, cardinalities: Sequence[int]) -> torch.Tensor:
    """Hashed lookups in concatenated tables: ``out[b, f] = weights[offset_f + (ids[b, f] + 1) mod card_f]``.

    ids: (batch, features) int64 or int32, any values; weights: (rows, dim) float32, float16 or
    bfloat16, any strides; cardinalities: one positive int per feature, summing to at most rows.
    Returns a contiguous (batch, features, dim) tensor of weights' dtype, differentiable in weights
    (deterministically, see the module docstring).

    Raises TypeError for a non-tensor, an unsupported dtype or non-int cardinalities; ValueError for
    a wrong rank or device, or cardinalities of the wrong length, not positive, or too many rows.
    """
    check_tensor(OP, "ids", ids, dtypes=ID_DTYPES, ndim=2)
    check_tensor(OP, "weights", weights, dtypes=FLOAT_DTYPES, ndim=2)
    check_same_device(OP, ids=ids, weights=weights)
    cards = _check_cardinalities(cardinalities, ids.shape[1], weights.shape[0])
    need_grad = torch.is_grad_enabled() and weights.requires_grad
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return dlrm_embedding_op(ids, weights, list(cards), need_grad)[0]
    info = _info(cards, weights.device)
    if need_grad:
        return _Embedding.apply(ids, weights, info)
    return _forward(ids, weights, info, save_rows=False)[0]
