"""LayerNorm's, RMSNorm's and dropout-add-norm's launches: their argument checks, the dropout
parameters, and per call signature a plan that launches the shared kernels.

The three ops differ only in where a row comes from and in which statistics they take, so one
forward kernel and one backward kernel serve all of them, specialised by ``tl.constexpr`` flags
(each op compiles only its own variant). The modules:

* ``kernels/_norm_stats.py``: the Triton helpers (a row's source, statistics, dropout's mask);
* ``kernels/_norm_kernels.py``: the forward, backward, row-sums and partial-sums kernels;
* ``kernels/_norm_tiling.py``: tiles and arithmetic dtypes, by measurement;
* this one: checks and plans (``kernels/_norm_native.py`` records them for the native path).
"""

from __future__ import annotations

import struct
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from kernels import _launch, _norm_kernels, _partials, _rows
from kernels._norm_tiling import (_bwd_prefetch, _bwd_programs_per_sm, _numerics, _stats_dtype,
                                  _tile, _tiles_per_group)
from kernels._validate import FLOAT_DTYPES, check_finite_scalar, check_same_device, check_same_dtype, check_shape, check_tensor

DTYPES = FLOAT_DTYPES + (torch.float64,)

# ----------------------------------------------------------------------------------------------
# Dropout parameters
# ----------------------------------------------------------------------------------------------

SEED_LIMIT = 2**63  # seeds are non-negative 64-bit integers


class Dropout(NamedTuple):
    """Host-side dropout parameters: Philox key, integer keep threshold and the 1/(1-p) scale.

    An element is kept when its 31 random bits ``r`` satisfy ``r > threshold``, threshold =
    ``round(p * 2^31) - 1``: kept with probability ``1 - round(p * 2^31) / 2^31`` (within 2^-32 of
    1 - p), every element at p = 0 and none at p = 1.

    The scale 1/(1-p) (0 when p = 1) travels as ``scale`` + ``scale_lo``: its fp32 rounding and
    the rest. A float scalar is fp32 inside a kernel (a compiled kernel's argument, and under the
    interpreter too once ``tl.where`` takes it), and the fp32 1/(1-p) is up to 2^-24 off: where
    ``x * scale`` nearly cancels the residual, that puts an fp32 prenorm sum many ulps off (15 at one
    element) where CUDA eager is within one (CPU eager rounds its scale to fp32 too, so CPU runs do
    not show it). fp64 arithmetic (fp32 inputs) adds ``x * scale_lo`` (:func:`_dropped`); 16-bit
    inputs need only ``scale``.
    """

    seed: int
    threshold: int
    scale: float
    scale_lo: float = 0.0

    @classmethod
    def of(cls, p: float, seed: int) -> Dropout:
        exact = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
        hi = struct.unpack("f", struct.pack("f", exact))[0]  # rounded to fp32 (nearest even), no tensor made
        return cls(seed=seed, threshold=round(p * 2**31) - 1, scale=hi, scale_lo=exact - hi)


_NO_DROPOUT = Dropout(seed=0, threshold=-1, scale=1.0)


# ----------------------------------------------------------------------------------------------
# Validation shared by the wrappers
# ----------------------------------------------------------------------------------------------


def check_input(op: str, name: str, x: object) -> torch.Tensor:
    return check_tensor(op, name, x, dtypes=DTYPES, min_ndim=1)


def check_row_tensor(op: str, name: str, value: object, x: torch.Tensor, what: str) -> torch.Tensor:
    """An optional per-column tensor (weight, bias): None, or shape ``(N,)``, x's device and dtype."""
    if value is None or (
        type(value) is torch.Tensor and value.dtype is x.dtype and value.device == x.device and value.ndim == 1
        and value.shape[0] == x.shape[-1]
    ):
        return value  # None, or every check below passes (one test, on every call)
    check_tensor(op, name, value, dtypes=DTYPES)
    check_same_device(op, x=x, **{name: value})
    check_same_dtype(op, x=x, **{name: value})
    check_shape(op, name, value, x.shape[-1:], what)
    return value


def check_eps(op: str, eps: object) -> float:
    eps = check_finite_scalar(op, "eps", eps)
    if eps < 0:
        raise ValueError(f"{op}: argument 'eps' must be >= 0 (it is added to the variance), got {eps}")
    return eps


def check_seed(op: str, seed: object) -> int:
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"{op}: argument 'seed' must be an int, got {type(seed).__name__}")
    if not 0 <= seed < SEED_LIMIT:
        raise ValueError(f"{op}: argument 'seed' must be in [0, 2**63), got {seed}")
    return seed


def check_probability(op: str, p: object) -> float:
    p = check_finite_scalar(op, "p", p)
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"{op}: argument 'p' is a drop probability and must be in [0, 1], got {p}")
    return p


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


class Forward(NamedTuple):
    """What :func:`forward` produced. ``s``: the normalised rows (dropout-add-norm only, else None);
    ``mask``: the keep-mask (when asked); ``stats``: (3, rows) K, m, rstd for the backward (None
    when not stored)."""

    y: torch.Tensor
    s: torch.Tensor | None
    mask: torch.Tensor | None
    stats: torch.Tensor | None


# A call's host work is a dictionary lookup and its allocations: each direction keeps a plan per
# call signature (every input's layout, dtype, device and 16-byte alignment, the options): the
# tiles, grids and fixed kernel arguments worked out once, and launchers bound to them
# (``_launch.Kernel.bind``). A sweep that changes the knobs above calls ``_launch.forget_plans()``.
_FORWARD_PLANS = _launch.plan_table()
_BACKWARD_PLANS = _launch.plan_table()
_INT32_MAX = 2**31 - 1


def _vector_key(v: torch.Tensor | None) -> tuple[bool, bool] | None:
    """What decides how a per-column vector is passed: contiguous (else copied), 16-byte aligned."""
    return None if v is None else (v.is_contiguous(), v.data_ptr() & 15 == 0)


def _rows_key(t: torch.Tensor | None) -> tuple | None:
    """What decides how a (..., N) tensor is read as rows (beside a shape the caller checked)."""
    return None if t is None else (t.stride(), t.data_ptr() & 15 == 0)


def _dropout_key(dropout: Dropout | None) -> tuple[bool, bool] | None:
    """What dropout's parameters decide: whether it draws, and the seed's integer width."""
    return None if dropout is None else (dropout.threshold >= 0, dropout.seed > _INT32_MAX)


def forward(
    x: torch.Tensor, weight: torch.Tensor | None, bias: torch.Tensor | None, *, eps: float, rms: bool,
    w_offset: float = 0.0, residual: torch.Tensor | None = None, xbias: torch.Tensor | None = None,
    dropout: Dropout | None = None, store_sum: bool = False, store_mask: bool = False, store_stats: bool = True,
) -> Forward:
    """Normalise the rows of ``x`` (or of ``dropout(x + xbias) + residual`` when ``dropout`` is given).

    Inputs are validated by the caller (residual: x's shape, dtype and device). ``store_sum`` asks
    for s (dropout-add-norm; always stored when a row spans several blocks, since the second pass
    reads it back). ``store_stats=False`` (no backward to come) leaves the statistics unwritten and
    ``stats`` None: faster for dropout-add-norm; the plain norms store them (docs/design-notes.md).
    """
    key = (x.shape, x.stride(), x.dtype, x.device, x.data_ptr() & 15 == 0, _vector_key(weight), _vector_key(bias),
           _vector_key(xbias), _rows_key(residual), _dropout_key(dropout), rms, store_sum, store_mask, store_stats)
    plan = _FORWARD_PLANS.get(key)
    if plan is None:
        plan = _launch.remember(_FORWARD_PLANS, key, _ForwardPlan(
            x, weight, bias, residual, xbias, dropout, rms=rms, store_sum=store_sum, store_mask=store_mask,
            store_stats=store_stats))
    return plan(x, weight, bias, residual, xbias, eps, w_offset, dropout or _NO_DROPOUT)


class _ForwardPlan:
    """A forward call signature's tiles, outputs and bound launcher (see ``_FORWARD_PLANS``)."""

    def __init__(self, x, weight, bias, residual, xbias, dropout, *, rms, store_sum, store_mask, store_stats):
        dropout_add = dropout is not None
        n = x.shape[-1]
        tile = _tile(n, x.dtype, backward=False, dropout=dropout_add)
        split = tile.col_blocks > 1
        self.store_sum = dropout_add and (store_sum or split)
        self.store_mask, self.store_stats = store_mask, store_stats
        # Per-column vectors are read as dense rows: a strided one is copied (N elements); a row
        # layout that does not fold into (row, stride) groups is copied whole (_rows.row_layout).
        self.copy_vectors = any(v is not None and not v.is_contiguous() for v in (weight, bias, xbias))
        src = _rows.row_layout(x)
        res = _rows.row_layout(residual) if dropout_add else src
        self.copy_x, self.copy_residual = src.copied, dropout_add and res.copied
        self.stats_shape = (3, src.rows)
        self.stats_dtype = _stats_dtype(x.dtype)
        self.launch = None
        if x.numel() == 0:
            return
        weight, bias, xbias = self._vectors(weight, bias, xbias)
        outputs = self._outputs(src.tensor)
        drop = dropout or _NO_DROPOUT
        head = self._head(src.tensor, res.tensor, weight, bias, xbias, *outputs, 1e-5, 0.0, drop)
        fixed = (src.rows, n, float(n), *src.kernel_args(), *res.kernel_args())
        self.launch = _norm_kernels._norm_fwd_kernel.bind(
            (triton.cdiv(src.rows, tile.rows),), head + fixed, dict(
                BLOCK=tile.block, ROWS=tile.rows, SPLIT=split, RMS=rms, HAS_W=weight is not None,
                HAS_B=bias is not None, DROPOUT_ADD=dropout_add, HAS_XBIAS=xbias is not None,
                DRAW=drop.threshold >= 0, STORE_SUM=self.store_sum, STORE_MASK=store_mask, STORE_STATS=store_stats,
                EVEN=even_tiles(src.rows, n, tile), num_warps=tile.num_warps, **_numerics(x.dtype),
            ), runtime=len(head))

    def _vectors(self, *vectors):
        if self.copy_vectors:
            return tuple(v.contiguous() if v is not None else None for v in vectors)
        return vectors

    def _outputs(self, x: torch.Tensor) -> tuple:
        """y, s, mask, stats for a call on x (s, mask, stats None where not stored)."""
        y = torch.empty_like(x, memory_format=torch.contiguous_format)
        stats = torch.empty(self.stats_shape, dtype=self.stats_dtype, device=x.device) if self.store_stats else None
        s = torch.empty_like(x, memory_format=torch.contiguous_format) if self.store_sum else None
        mask = torch.empty(x.shape, dtype=torch.bool, device=x.device) if self.store_mask else None
        return y, s, mask, stats

    @staticmethod
    def _head(x, residual, weight, bias, xbias, y, s, mask, stats, eps, w_offset, drop: Dropout) -> tuple:
        """The kernel's per-call arguments; an absent tensor stands in as another one, never read."""
        return (x, residual, x if xbias is None else xbias, x if weight is None else weight,
                x if bias is None else bias, y, y if s is None else s, y if mask is None else mask,
                y if stats is None else stats, eps, w_offset, *drop)

    def __call__(self, x, weight, bias, residual, xbias, eps: float, w_offset: float, drop: Dropout) -> Forward:
        if self.copy_x:
            x = x.contiguous()
        if self.copy_residual:
            residual = residual.contiguous()
        y, s, mask, stats = outputs = self._outputs(x)
        if self.launch is not None:
            if self.copy_vectors:
                weight, bias, xbias = self._vectors(weight, bias, xbias)
            self.launch(*self._head(x, x if residual is None else residual, weight, bias, xbias, *outputs, eps,
                                    w_offset, drop))
        return Forward(y, s, mask, stats)


# The forward masks nothing where every tile is full, for rows of up to this many columns: that
# makes short rows faster, and wider even rows slower, so they keep their masks (docs/performance.md).
EVEN_MAX_BLOCK = 1024


def even_tiles(n_rows: int, n: int, tile: _rows.RowTile) -> bool:
    """Whether the forward runs unmasked (:func:`_rows.even_tiles`, rows up to EVEN_MAX_BLOCK)."""
    return _rows.even_tiles(n_rows, n, tile, EVEN_MAX_BLOCK)


class Backward(NamedTuple):
    """Gradients from :func:`backward`; None where not asked for."""

    ds: torch.Tensor
    dx: torch.Tensor | None
    dweight: torch.Tensor | None
    dbias: torch.Tensor | None
    dxbias: torch.Tensor | None
    sums: torch.Tensor  # (parts, N): dweight, dbias, dxbias are its rows, in that order, where asked for


def backward(
    src: torch.Tensor, dy: torch.Tensor, weight: torch.Tensor | None, stats: torch.Tensor, *, rms: bool,
    w_offset: float = 0.0, dsum: torch.Tensor | None = None, dropout: Dropout | None = None,
    need_dweight: bool = False, need_dbias: bool = False, need_dxbias: bool = False,
) -> Backward:
    """Gradients of a :func:`forward` call.

    ``src`` is what was normalised (x, or the stored s of dropout-add-norm); ``dy`` the gradient of
    the output; ``dsum`` that of the returned prenorm sum, if any (both of src's shape, dtype and
    device); ``stats`` the forward's. ``ds`` is the gradient of the normalised rows; with
    ``dropout``, ``dx = ds * keep * scale`` is the gradient of the dropped input. dweight, dbias
    (of the norm) and dxbias (of the bias added before dropout) are column sums, reduced without
    atomics (module docstring).
    """
    # A zero-stride gradient (a sum's, expanded) is made dense, as a compiled call's tangents are:
    # on the GPU its rows gave other bits than their dense copy, and compiled must equal direct.
    dy, dsum = (g.contiguous() if g is not None and 0 in g.stride() and g.numel() > 1 else g for g in (dy, dsum))
    key = (src.shape, src.stride(), src.dtype, src.device, src.data_ptr() & 15 == 0, _rows_key(dy), _rows_key(dsum),
           _vector_key(weight), _dropout_key(dropout), rms, need_dweight, need_dbias, need_dxbias)
    plan = _BACKWARD_PLANS.get(key)
    if plan is None:
        plan = _launch.remember(_BACKWARD_PLANS, key, _BackwardPlan(
            src, dy, weight, stats, dsum, dropout, rms=rms, need_dweight=need_dweight, need_dbias=need_dbias,
            need_dxbias=need_dxbias))
    return plan(src, dy, weight, stats, dsum, w_offset, dropout or _NO_DROPOUT)


class _BackwardPlan:
    """A backward call signature's tiles, buffers and bound launchers (see ``_BACKWARD_PLANS``)."""

    def __init__(self, src, dy, weight, stats, dsum, dropout, *, rms, need_dweight, need_dbias, need_dxbias):
        n = src.shape[-1]
        dtype = src.dtype
        self.dropout = dropout is not None
        self.need_dweight = need_dweight and weight is not None
        self.need_dbias = need_dbias
        self.need_dxbias = need_dxbias and dropout is not None
        self.parts = int(self.need_dweight) + int(self.need_dbias) + int(self.need_dxbias)
        self.n = n
        self.copy_weight = weight is not None and not weight.is_contiguous()
        s_rows, g_rows = _rows.row_layout(src), _rows.row_layout(dy)
        h_rows = _rows.row_layout(dsum) if dsum is not None else g_rows
        self.copy_src, self.copy_dy, self.copy_dsum = s_rows.copied, g_rows.copied, dsum is not None and h_rows.copied
        self.launches = ()
        if src.numel() == 0:
            return
        tile = _tile(n, dtype, backward=True, dropout=self.dropout)
        row_tiles = triton.cdiv(s_rows.rows, tile.rows)
        tiles_per_group = _tiles_per_group(src, row_tiles, tile.col_blocks, _bwd_programs_per_sm(tile.col_blocks > 1))
        groups = triton.cdiv(row_tiles, tiles_per_group)
        numerics = _numerics(dtype)
        acc_dtype = torch.float64 if numerics["ACC"] == tl.float64 else torch.float32
        self.partials_shape = ((self.parts, groups, n) if self.parts else (1,), acc_dtype)
        # The row sums of rows wider than a block; stats stands in where the one-block kernel never reads them.
        self.sums_given = tile.col_blocks > 1
        self.row_sums_shape = ((1 if rms else 2, tile.col_blocks, s_rows.rows), _stats_dtype(dtype))
        weight = weight.contiguous() if self.copy_weight else weight
        ds, dx, partials, row_sums, sums = self._buffers(s_rows.tensor, stats)
        drop = dropout or _NO_DROPOUT
        launches = []
        if self.sums_given:
            launches.append(_norm_kernels._norm_bwd_row_sums_kernel.bind(
                (row_tiles, tile.col_blocks),
                (s_rows.tensor, g_rows.tensor, s_rows.tensor if weight is None else weight, stats, row_sums, 0.0,
                 s_rows.rows, n, *s_rows.kernel_args(), *g_rows.kernel_args()),
                dict(BLOCK=tile.block, ROWS=tile.rows, RMS=rms, HAS_W=weight is not None, COMPUTE=numerics["COMPUTE"],
                     num_warps=tile.num_warps),
                runtime=6))
        head = self._head(s_rows.tensor, g_rows.tensor, h_rows.tensor, weight, stats, row_sums, ds, dx, partials,
                          0.0, drop)
        launches.append(_norm_kernels._norm_bwd_kernel.bind(
            (groups, tile.col_blocks),
            head + (s_rows.rows, n, float(n), tiles_per_group, *s_rows.kernel_args(), *g_rows.kernel_args(),
                    *h_rows.kernel_args()),
            dict(BLOCK=tile.block, ROWS=tile.rows, SUMS_GIVEN=self.sums_given, RMS=rms, HAS_W=weight is not None,
                 DW=self.need_dweight, DB=need_dbias, DXB=self.need_dxbias, DROPOUT=self.dropout,
                 DRAW=drop.threshold >= 0, HAS_DSUM=dsum is not None,
                 PREFETCH=_bwd_prefetch(n, dtype, rms, self.dropout), num_warps=tile.num_warps, **numerics),
            runtime=len(head)))
        if self.parts:
            launches.append(_partials.bind(partials, sums, self.parts, groups, n, numerics["ACC"]))
        self.launches = tuple(launches)

    def _buffers(self, src: torch.Tensor, stats: torch.Tensor) -> tuple:
        """ds, dx (None without dropout), the partial sums, the row sums (stats where the kernel
        never reads them) and the column sums, for a call on src."""
        ds = torch.empty_like(src, memory_format=torch.contiguous_format)
        dx = torch.empty_like(src, memory_format=torch.contiguous_format) if self.dropout else None
        sums = torch.empty((self.parts, self.n), dtype=src.dtype, device=src.device)
        if src.numel() == 0:
            return ds, dx, None, None, sums.zero_()
        shape, dtype = self.partials_shape
        partials = torch.empty(shape, dtype=dtype, device=src.device)
        shape, dtype = self.row_sums_shape
        row_sums = torch.empty(shape, dtype=dtype, device=src.device) if self.sums_given else stats
        return ds, dx, partials, row_sums, sums

    @staticmethod
    def _head(src, dy, dsum, weight, stats, row_sums, ds, dx, partials, w_offset, drop: Dropout) -> tuple:
        """The backward kernel's per-call arguments; an absent tensor stands in as another, never read."""
        return (src, dy, dsum, src if weight is None else weight, stats, row_sums, ds, ds if dx is None else dx,
                partials, w_offset, *drop)

    def __call__(self, src, dy, weight, stats, dsum, w_offset: float, drop: Dropout) -> Backward:
        if self.copy_src:
            src = src.contiguous()
        if self.copy_dy:
            dy = dy.contiguous()
        if self.copy_dsum:
            dsum = dsum.contiguous()
        if self.copy_weight:
            weight = weight.contiguous()
        ds, dx, partials, row_sums, sums = self._buffers(src, stats)
        launches = self.launches
        if launches:
            if self.sums_given:
                launches[0](src, dy, src if weight is None else weight, stats, row_sums, w_offset)
            launches[1 if self.sums_given else 0](*self._head(
                src, dy, dy if dsum is None else dsum, weight, stats, row_sums, ds, dx, partials, w_offset, drop))
            if self.parts:
                launches[-1](partials, sums)
        return _assemble(ds, dx, sums, self.need_dweight, self.need_dbias, self.need_dxbias)


def _assemble(ds, dx, sums, need_dweight, need_dbias, need_dxbias) -> Backward:
    rows = iter(sums.unbind(0))
    return Backward(
        ds, dx,
        next(rows) if need_dweight else None,
        next(rows) if need_dbias else None,
        next(rows) if need_dxbias else None,
        sums,
    )
