"""``act(x @ weight^T + bias)``: a Triton matmul with the bias and the activation in its epilogue.

x has shape ``(..., K)``, weight ``(N, K)`` (torch.nn.Linear's layout, any strides), bias ``(N,)``;
fp16 or bf16, accumulated in fp32. The hidden pre-activation ``z`` never round-trips through
memory on its way to the activation: each program multiplies one ``BLOCK_M x BLOCK_N`` tile of
``x @ weight^T`` in an fp32 accumulator (``tl.dot`` on the tensor cores), adds the bias, applies
the activation (``kernels/_activations.py``) and stores the tile once.

**Precision.** Only fp16 and bf16: on a GPU ``tl.dot`` on fp32 tiles defaults to TF32 (10-bit
mantissas) where eager fp32 matmuls keep 23 bits, and forcing IEEE fp32 dots would leave the
tensor cores; the harness's error budget is eager's own error in the same dtype, so a TF32 kernel
would have to be excused rather than verified. For 16-bit inputs the tensor cores multiply exactly
and accumulate in fp32, the same arithmetic as cuBLAS (other summation order; the envelope's
calibration covers that). The epilogue works on the fp32 accumulator, so the output is rounded
once, where eager rounds z to 16 bits and then the activation's result again.

**Backward: saving z, not recomputing it.** The activation's gradient needs z. Recomputing it is
a second full matmul (2MNK flops: for K = 4096 about 15x the cost of moving z through memory
twice), so the forward stores z in the input dtype when a gradient will be needed (never under
``torch.no_grad``, so inference pays nothing). Rounded z is exactly what eager's autograd uses
(it differentiates the activation at its 16-bit z), so the gradient's error matches eager's kind.
For relu the output itself is saved instead: relu'(z) = [z > 0] = [relu(z) > 0], so nothing extra
is written at all. The backward then runs one Triton pass, ``grad_z = grad * act'(z)`` (fused,
in fp32, rounded once), which also reduces ``grad_bias`` in fp64 partial sums per row group (as
add_mul_act; bitwise reproducible), and two cuBLAS matmuls for ``grad_x = grad_z @ weight`` and
``grad_weight = grad_z^T @ x``.

**Tiles.** Fixed configurations, no autotuning (reproducible, no tuning runs inside
benchmarks), measured on an H100 (``benchmarks/tune_matmul.py``). Where x and weight are
K-contiguous with 16-byte aligned rows (the usual layouts) the tiles are loaded through TMA
descriptors, which zero-fill past the edges and drop stores past them: for products of at least
1024 x 1024, 128 x 256 x 64 tiles, 3 pipeline stages, the epilogue run on the tile's two column
halves in turn (fewer live registers: the whole-tile epilogue of exact gelu spilled), one program
per SM walking the tiles (its next tile's loads overlap this one's epilogue); products too small
for three waves of those tiles take 128 x 128 tiles (the epilogue split), and 64 x 128 where even
those fill at most one wave. Other layouts
(strided x, K or N not a multiple of 8) take the pointer kernel, whose epilogue holds the whole tile:
128 x 128 x 64 tiles at 4 stages for large products, which spill for no activation. Both:
grouped launch order (GROUP_M = 8, for L2 reuse of weight tiles), 8 warps, and smaller tiles at
4 warps for small M or N. Under the interpreter 16 x 16 x 16 tiles, the TMA epilogue split, and groups of 2, so
that CPU-sized cases (a few dozen rows and features) still cross tile boundaries in every
dimension and exercise the grouped order; K values that are not multiples of 8 take the pointer
kernel there too.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import triton
import triton.language as tl

from kernels import _activations, _launch, _matmul, _ops, _rows
from kernels._runtime import sm_count
from kernels._validate import check_choice, check_same_device, check_same_dtype, check_shape, check_tensor

OP = "linear_act"
ACTIVATIONS = ("relu", "gelu", "gelu_tanh", "silu")
DTYPES = (torch.float16, torch.bfloat16)


class MatmulConfig(NamedTuple):
    block_m: int
    block_n: int
    block_k: int
    group_m: int
    num_warps: int
    num_stages: int
    split_n: bool = False  # the TMA epilogue in two column halves (fewer live registers)
    persistent: bool = False  # the TMA forward with one program per SM walking the tiles


# (min M, min N) -> config, first match wins: LoRA's base matmul (kernels/lora_linear.py).
_GPU_CONFIGS = (
    ((1024, 1024), MatmulConfig(128, 256, 64, 8, 8, 3)),
    ((128, 128), MatmulConfig(128, 128, 64, 8, 8, 4)),
    ((0, 0), MatmulConfig(64, 64, 64, 8, 4, 4)),
)
# linear_act's forward, by the way its tiles are loaded, chosen by benchmarks/tune_matmul.py on an
# H100 (benchmarks/results/2026-11-24-h100-4). Through TMA descriptors (x and weight K-contiguous
# with 16-byte aligned rows, the usual case) large products take 128 x 256 tiles, the epilogue
# split in column halves, in a persistent launch (a program per SM walks the tiles, the next
# tile's loads overlapping this one's epilogue): the fastest tiles at four of the five benchmark
# shapes, and faster than torch.compile's cuBLAS plus fused activation at all five (at the fifth,
# K = 768, a little behind 128 x 128 persistent). The same tiles launched one program per tile are
# only level with compile, and the pointer kernel's best is slower than it. With pointers, the
# epilogue holds the whole fp32 tile in registers: a 128 x 256 tile of exact gelu spills when z is
# saved for the backward (a training step's forward runs over twice as long), and 256 x 128
# spills too, so the pointer path takes 128 x 128 tiles at 4 stages, which spill for no activation.
_TMA_CONFIGS = (
    ((1024, 1024), MatmulConfig(128, 256, 64, 8, 8, 3, split_n=True, persistent=True)),
    ((128, 128), MatmulConfig(128, 128, 64, 8, 8, 4)),
    ((0, 0), MatmulConfig(64, 64, 64, 8, 4, 4)),
)
_POINTER_CONFIGS = (
    ((1024, 1024), MatmulConfig(128, 128, 64, 8, 8, 4)),
    ((128, 128), MatmulConfig(128, 128, 64, 8, 8, 4)),
    ((0, 0), MatmulConfig(64, 64, 64, 8, 4, 4)),
)
# Under the interpreter 16 x 16 x 16 tiles, the TMA epilogue split (so CPU runs cover it).
_INTERPRETER_CONFIG = MatmulConfig(16, 16, 16, 2, 1, 1, split_n=True)

# The elementwise grad_z pass: rows x columns tiles as the other activation kernels.
_GPU_LIMITS = _rows.TileLimits(
    max_block=1024, split_block=1024, target_elems=4096, max_rows=64, thread_bytes=64, max_warps=8
)
_INTERPRETER_LIMITS = _rows.TileLimits(
    max_block=32, split_block=32, target_elems=64, max_rows=8, thread_bytes=64, max_warps=4
)


def _first_match(table, m: int, n: int) -> MatmulConfig:
    if _rows._SMALL_TILES:
        return _INTERPRETER_CONFIG
    return next(config for (min_m, min_n), config in table if m >= min_m and n >= min_n)


def matmul_config(m: int, n: int) -> MatmulConfig:
    """LoRA's tile configuration for an (m x K) @ (K x n) product on the current backend."""
    return _first_match(_GPU_CONFIGS, m, n)


# Through TMA, products too small to give the 128 x 256 tiles three waves over the SMs take smaller
# tiles, chosen by benchmarks/tune_matmul.py --mid on an H200 (benchmarks/results/2026-11-27-h100-17):
# 128 x 128 tiles, the epilogue split, 3 stages, take 15-25% less time than 128 x 256 at three of
# the four mid-size shapes and 5% more at the fourth (1024 x 4096 x 4096; tied when z is saved).
# Where even 128 x 128 tiles fill at most one wave, 64 x 128 at 4 warps: under half the time of
# 128 x 256, and faster than cuBLAS plus Inductor's gelu.
_MID_TMA = MatmulConfig(128, 128, 64, 8, 8, 3, split_n=True)
_SMALL_TMA = MatmulConfig(64, 128, 64, 8, 4, 4)
_MID_WAVES = 3


def linear_act_config(m: int, n: int, tma: bool, sms: int | None = None) -> MatmulConfig:
    """linear_act's forward tiles for an (m x K) @ (K x n) product, loaded through TMA descriptors
    or with pointers, on a GPU of ``sms`` SMs (None: the tables alone)."""
    if tma and sms and not _rows._SMALL_TILES and m >= 128 and n >= 128:
        if triton.cdiv(m, 128) * triton.cdiv(n, 128) <= sms:
            return _SMALL_TMA
        if triton.cdiv(m, 128) * triton.cdiv(n, 256) < _MID_WAVES * sms:
            return _MID_TMA
    return _first_match(_TMA_CONFIGS if tma else _POINTER_CONFIGS, m, n)


def block_boundaries() -> tuple[int, ...]:
    """Sizes where the tiling changes on the current backend (tile edges, for test shapes)."""
    if _rows._SMALL_TILES:
        c = _INTERPRETER_CONFIG
        return (c.block_m, 2 * c.block_m)
    configs = [c for table in (_GPU_CONFIGS, _TMA_CONFIGS, _POINTER_CONFIGS) for _, c in table]
    return tuple(sorted({c.block_m for c in configs} | {c.block_n for c in configs}))


# ----------------------------------------------------------------------------------------------
# Kernels
# ----------------------------------------------------------------------------------------------


@triton.jit
def grouped_tile(pid, m, n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(pid_m, pid_n) of program ``pid`` in grouped order: GROUP_M row tiles sweep the columns
    together, so the weight tiles they share stay in L2."""
    num_m = tl.cdiv(m, BLOCK_M)
    num_n = tl.cdiv(n, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_size = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_size
    pid_n = (pid % per_group) // group_size
    return pid_m, pid_n


@_launch.jit
def _linear_act_fwd_kernel(
    x_ptr, w_ptr, b_ptr, out_ptr, save_ptr, M, N, K,
    x_inner, x_so, x_si, stride_wn, stride_wk,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    EVEN_K: tl.constexpr, ACT: tl.constexpr, SAVE_Z: tl.constexpr,
):
    pid_m, pid_n = grouped_tile(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    rk = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge are wrapped onto valid ones (their results are never stored),
    # so the loads need no M/N masks; only a ragged last K block is masked.
    x_rows = _rows.row_offset(rm % M, x_inner, x_so, x_si)
    w_cols = (rn % N).to(tl.int64) * stride_wn
    x_ptrs = x_ptr + x_rows[:, None] + rk[None, :]
    w_ptrs = w_ptr + w_cols[None, :] + rk[:, None].to(tl.int64) * stride_wk
    acc = _matmul.k_loop(tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32), x_ptrs, w_ptrs, K, stride_wk, rk,
                         BLOCK_K, EVEN_K)
    z = acc + tl.load(b_ptr + rn % N).to(tl.float32)[None, :]
    mask = (rm < M)[:, None] & (rn < N)[None, :]
    dense = rm.to(tl.int64)[:, None] * N + rn[None, :]
    if SAVE_Z:
        tl.store(save_ptr + dense, _rows.cast_for_store(z, save_ptr), mask=mask)
    out = _activations.activate(z, ACT, False)
    tl.store(out_ptr + dense, _rows.cast_for_store(out, out_ptr), mask=mask)


@triton.jit
def _epilogue_tma(acc, b_ptr, out_desc, save_desc, off_m, off_n, N, ACT: tl.constexpr, SAVE_Z: tl.constexpr):
    """z = acc + bias for the (BLOCK_M, W) tile at (off_m, off_n); stores z (SAVE_Z) and act(z)
    through the descriptors (which clip rows and columns past the edges)."""
    rn = off_n + tl.arange(0, acc.shape[1])
    z = acc + tl.load(b_ptr + rn, mask=rn < N, other=0.0).to(tl.float32)[None, :]
    if SAVE_Z:
        save_desc.store([off_m, off_n], _rows.cast_to(z, save_desc.dtype))
    out_desc.store([off_m, off_n], _rows.cast_to(_activations.activate(z, ACT, False), out_desc.dtype))


@triton.jit
def _tma_tile(
    tile, x_desc, w_desc, b_ptr, out_desc, save_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ACT: tl.constexpr, SAVE_Z: tl.constexpr, SPLIT_N: tl.constexpr,
):
    """One output tile (number ``tile`` in grouped order) of the TMA forward."""
    pid_m, pid_n = grouped_tile(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    off_m = pid_m * BLOCK_M
    off_n = pid_n * BLOCK_N
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BLOCK_K)):
        a = x_desc.load([off_m, k * BLOCK_K])
        b = w_desc.load([off_n, k * BLOCK_K])
        acc = _matmul.dot(a, b.T, acc)
    if SPLIT_N:
        left, right = tl.split(tl.permute(tl.reshape(acc, (BLOCK_M, 2, BLOCK_N // 2)), (0, 2, 1)))
        _epilogue_tma(left, b_ptr, out_desc, save_desc, off_m, off_n, N, ACT, SAVE_Z)
        _epilogue_tma(right, b_ptr, out_desc, save_desc, off_m, off_n + BLOCK_N // 2, N, ACT, SAVE_Z)
    else:
        _epilogue_tma(acc, b_ptr, out_desc, save_desc, off_m, off_n, N, ACT, SAVE_Z)


@_launch.jit
def _linear_act_fwd_tma_kernel(
    x_desc, w_desc, b_ptr, out_desc, save_desc, M, N, K,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    ACT: tl.constexpr, SAVE_Z: tl.constexpr, SPLIT_N: tl.constexpr, PERSISTENT: tl.constexpr,
):
    # The forward with its tiles moved by the tensor memory accelerator (TMA descriptors: x and
    # weight K-contiguous, 16-byte aligned rows). Loads past K are zero-filled by the hardware,
    # stores past M and N dropped, so the kernel needs no masks. SPLIT_N runs the epilogue on the
    # tile's two column halves one after the other (fewer live registers; out_desc's block is half
    # as wide then). PERSISTENT: one program per SM walks the tiles, its loop flattened with the
    # K loop so that the next tile's loads overlap this tile's epilogue.
    if PERSISTENT:
        num_tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        for tile in tl.range(tl.program_id(0), num_tiles, tl.num_programs(0), flatten=True):
            _tma_tile(tile, x_desc, w_desc, b_ptr, out_desc, save_desc, M, N, K,
                      BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, ACT, SAVE_Z, SPLIT_N)
    else:
        _tma_tile(tl.program_id(0), x_desc, w_desc, b_ptr, out_desc, save_desc, M, N, K,
                  BLOCK_M, BLOCK_N, BLOCK_K, GROUP_M, ACT, SAVE_Z, SPLIT_N)


@_launch.jit(do_not_specialize=["tiles_per_group"])
def _act_grad_kernel(
    z_ptr, g_ptr, gz_ptr, partial_ptr, n_rows, n_cols, tiles_per_group, g_inner, g_so, g_si,
    BLOCK: tl.constexpr, ROWS: tl.constexpr, ACT: tl.constexpr,
):
    # grad_z = grad * act'(z) over (column block, row group) programs; grad_bias's partial sum for
    # the group in fp64 registers (as kernels/add_mul_act.py). z (for relu: the output) is dense.
    cols = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    group = tl.program_id(1)
    acc = tl.zeros([ROWS, BLOCK], tl.float64)
    for t in range(0, tiles_per_group):
        rows = (group * tiles_per_group + t) * ROWS + tl.arange(0, ROWS)
        mask = (rows < n_rows)[:, None] & (cols < n_cols)[None, :]
        dense = _rows.dense_offsets(rows, cols, n_cols)
        z = tl.load(z_ptr + dense, mask=mask, other=0.0).to(tl.float32)
        g = _rows.load_tile(g_ptr, rows, cols, mask, g_inner, g_so, g_si, False)
        dz = tl.where(mask, g * _activations.activation_slope(z, ACT, False), 0.0)
        tl.store(gz_ptr + dense, _rows.cast_for_store(dz, gz_ptr), mask=mask)
        acc += dz.to(tl.float64)
    tl.store(partial_ptr + group.to(tl.int64) * n_cols + cols, tl.sum(acc, axis=0), mask=cols < n_cols)


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


def _saves_output(activation: str) -> bool:
    """relu's gradient needs only the sign of z, which its output carries (see the docstring)."""
    return activation == "relu"


# (config, TMA or not) that every forward takes while set: tests of each launch path through the
# autograd function (tests/unit/test_linear_act_launch.py).
FORCED_LAUNCH: tuple[MatmulConfig, bool] | None = None


def tma_ready(t: torch.Tensor) -> bool:
    """Whether TMA descriptors can move a 2-D tensor: unit inner stride, 16-byte aligned start and
    row stride, rows that do not overlap (a broadcast row, stride 0, takes the pointer kernel)."""
    return (t.dim() == 2 and t.stride(1) == 1 and t.data_ptr() % 16 == 0
            and (t.stride(0) * t.element_size()) % 16 == 0 and t.stride(0) >= t.shape[1])


def _tma_operand(x: torch.Tensor, k: int) -> torch.Tensor | None:
    """x as a 2-D (rows, K) view that TMA descriptors can move, or None (no copy is ever made)."""
    try:
        x2 = x.view(-1, k)
    except RuntimeError:  # leading dims that do not collapse into one stride
        return None
    return x2 if tma_ready(x2) else None


def _forward(x, weight, bias, activation: str, save: bool, config: MatmulConfig | None = None,
             tma: bool | None = None):
    """(out, saved): out of shape x.shape[:-1] + (N,); saved is z (or, for relu, out) when
    ``save``, else None. The tiles are loaded through TMA descriptors where the layouts allow it,
    else with pointers; ``config`` and ``tma`` override both choices (for sweeps and tests)."""
    n, k = weight.shape
    out = torch.empty((*x.shape[:-1], n), dtype=x.dtype, device=x.device)
    save_z = save and not _saves_output(activation)
    z = torch.empty(out.shape, dtype=x.dtype, device=x.device) if save_z else None
    saved = z if save_z else (out if save else None)
    if out.numel() == 0:
        return out, saved
    if FORCED_LAUNCH is not None and config is None:
        config, tma = FORCED_LAUNCH
    x2 = _tma_operand(x, k) if k > 0 else None
    can_tma = x2 is not None and tma_ready(weight) and tma_ready(out.view(-1, n))
    if tma and not can_tma:
        raise ValueError(f"{OP}: TMA needs K-contiguous, 16-byte aligned rows of x, weight and the output")
    use_tma = can_tma if tma is None else tma
    m = out.numel() // n
    cfg = config or linear_act_config(m, n, use_tma, sm_count(x.device) if x.is_cuda else None)
    with _rows.launch_guard(x):
        if use_tma:
            _launch_tma(x2, weight, bias, out.view(-1, n), z.view(-1, n) if z is not None else None, activation, cfg)
        else:
            _launch_pointers(x, weight, bias, out, z, activation, cfg)
    return out, saved


def _launch_pointers(x, weight, bias, out, z, activation: str, cfg: MatmulConfig) -> None:
    n, k = weight.shape
    xl = _rows.row_layout(x)
    grid = (triton.cdiv(xl.rows, cfg.block_m) * triton.cdiv(n, cfg.block_n),)
    _linear_act_fwd_kernel[grid](
        xl.tensor, weight, bias.contiguous(), out, z if z is not None else out, xl.rows, n, k,
        *xl.kernel_args(), weight.stride(0), weight.stride(1),
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        EVEN_K=k % cfg.block_k == 0, ACT=activation, SAVE_Z=z is not None,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )


def _launch_tma(x2, weight, bias, out2, z2, activation: str, cfg: MatmulConfig) -> None:
    from triton.tools.tensor_descriptor import TensorDescriptor

    (m, k), n = x2.shape, weight.shape[0]
    store_block = [cfg.block_m, cfg.block_n // 2 if cfg.split_n else cfg.block_n]
    out_desc = TensorDescriptor.from_tensor(out2, store_block)
    tiles = triton.cdiv(m, cfg.block_m) * triton.cdiv(n, cfg.block_n)
    # persistent: a program per SM (3 under the interpreter, so that each walks several tiles)
    grid = (min(tiles, sm_count(x2.device) if x2.is_cuda else 3) if cfg.persistent else tiles,)
    _linear_act_fwd_tma_kernel[grid](
        TensorDescriptor.from_tensor(x2, [cfg.block_m, cfg.block_k]),
        TensorDescriptor.from_tensor(weight, [cfg.block_n, cfg.block_k]), bias.contiguous(), out_desc,
        TensorDescriptor.from_tensor(z2, store_block) if z2 is not None else out_desc, m, n, k,
        BLOCK_M=cfg.block_m, BLOCK_N=cfg.block_n, BLOCK_K=cfg.block_k, GROUP_M=cfg.group_m,
        ACT=activation, SAVE_Z=z2 is not None, SPLIT_N=cfg.split_n, PERSISTENT=cfg.persistent,
        num_warps=cfg.num_warps, num_stages=cfg.num_stages,
    )


def _act_grad(saved: torch.Tensor, grad: torch.Tensor, activation: str):
    """(grad_z as a dense (M, N) tensor, grad_bias partial sums: fp64, one row per row group)."""
    n = saved.shape[-1]
    z2 = saved.reshape(-1, n)
    grad_z = torch.empty(z2.shape, dtype=saved.dtype, device=saved.device)
    if grad_z.numel() == 0:
        return grad_z, torch.zeros((1, n), dtype=torch.float64, device=saved.device)
    gl = _rows.row_layout(grad)
    limits = _rows.limits_for_backend(_GPU_LIMITS, _INTERPRETER_LIMITS)
    tile = _rows.row_tile(n, saved.element_size(), limits)
    row_tiles = triton.cdiv(z2.shape[0], tile.rows)
    partials = _activations.launch_bias_grad(
        _act_grad_kernel, saved, row_tiles, tile.col_blocks,
        lambda partials, tiles_per_group: (z2, gl.tensor, grad_z, partials, z2.shape[0], n, tiles_per_group,
                                           *gl.kernel_args()),
        dict(BLOCK=tile.block, ROWS=tile.rows, ACT=activation, num_warps=tile.num_warps),
    )
    return grad_z, partials


def _grads(x, weight, saved, grad, activation: str, need_x: bool, need_w: bool, need_b: bool):
    """(grad_x, grad_weight, grad_bias), None for those not asked for: the fused act' pass, then
    cuBLAS (module docstring). grad has x's dtype, as bias has (``_validate``)."""
    grad_z, partials = _act_grad(saved, grad, activation)
    grad_x = (grad_z @ weight).reshape(x.shape) if need_x else None
    grad_w = grad_z.t() @ x.reshape(-1, x.shape[-1]) if need_w else None
    grad_b = partials.sum(dim=0).to(x.dtype) if need_b else None
    return grad_x, grad_w, grad_b


class _LinearAct(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, weight, bias, activation: str):
        out, saved = _forward(x, weight, bias, activation, save=True)
        ctx.save_for_backward(x, weight, saved)
        ctx.activation = activation
        return out

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight, saved = ctx.saved_tensors
        if grad.dtype != x.dtype:
            grad = grad.to(x.dtype)
        return (*_grads(x, weight, saved, grad, ctx.activation, *ctx.needs_input_grad[:3]), None)


# The custom op (kernels/_ops.py). It returns out and what the backward reads: z, or, where nothing
# is saved (``save`` false, or relu, whose backward reads out itself), an empty tensor, since an op
# may not return out twice.
_NOTHING_SAVED = (0,)


@_ops.op("linear_act", "(Tensor x, Tensor weight, Tensor bias, str activation, bool save) -> (Tensor, Tensor)")
def linear_act_op(x, weight, bias, activation, save):
    """out and z (an empty tensor unless ``save`` and activation is not relu)."""
    out, saved = _forward(x, weight, bias, activation, save=save)
    return out, (saved if saved is not None and saved is not out else out.new_empty(_NOTHING_SAVED))


@linear_act_op.register_fake
def _(x, weight, bias, activation, save):
    out = x.new_empty((*x.shape[:-1], weight.shape[0]))
    return out, (x.new_empty(out.shape) if save and not _saves_output(activation) else x.new_empty(_NOTHING_SAVED))


@_ops.op(
    "linear_act_backward",
    "(Tensor x, Tensor weight, Tensor saved, Tensor grad, str activation, bool need_x, bool need_weight, "
    "bool need_bias) -> Tensor[]",
)
def linear_act_backward(x, weight, saved, grad, activation, need_x, need_weight, need_bias):
    """The backward as an op: [grad_x, grad_weight, grad_bias], those asked for."""
    grads = _grads(x, weight, saved, grad, activation, need_x, need_weight, need_bias)
    return [g for g in grads if g is not None]


@linear_act_backward.register_fake
def _(x, weight, saved, grad, activation, need_x, need_weight, need_bias):
    return (([_ops.empty_like(x)] if need_x else []) + ([_ops.empty_like(weight)] if need_weight else [])
            + ([x.new_empty(weight.shape[:1])] if need_bias else []))


def _setup(ctx, inputs, output):
    x, weight, _, activation, save = inputs
    ctx.save_for_backward(x, weight, output[0] if _saves_output(activation) else output[1])
    ctx.activation, ctx.saved = activation, save


def _backward(ctx, grad, _dsaved):
    if not ctx.saved:  # the entry point passes save=True whenever a gradient may be asked for
        raise RuntimeError(f"{OP}: linear_act_op(..., save=False) saved nothing for its backward")
    x, weight, saved = ctx.saved_tensors
    present = ctx.needs_input_grad[:3]
    grads = linear_act_backward(x, weight, saved, grad.to(x.dtype), ctx.activation, *present)
    return (*_ops.unpack(grads, present), None, None)


linear_act_op.register_autograd(_backward, setup_context=_setup)


def _validate(x, weight, bias, activation) -> None:
    check_tensor(OP, "x", x, dtypes=DTYPES, min_ndim=1)
    check_tensor(OP, "weight", weight, dtypes=DTYPES, ndim=2)
    check_tensor(OP, "bias", bias, dtypes=DTYPES)
    check_same_device(OP, x=x, weight=weight, bias=bias)
    check_same_dtype(OP, x=x, weight=weight, bias=bias)
    if weight.shape[1] != x.shape[-1]:
        raise ValueError(
            f"{OP}: argument 'weight' has shape {tuple(weight.shape)}; expected (out_features, "
            f"{x.shape[-1]}) (its second dimension is x's last, in_features)"
        )
    check_shape(OP, "bias", bias, weight.shape[:1], "one value per output feature, weight's first dimension")
    check_choice(OP, "activation", activation, ACTIVATIONS)


def linear_act(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, activation: str = "gelu") -> torch.Tensor:
    """``act(x @ weight^T + bias)`` with act one of relu, gelu (exact), gelu_tanh, silu.

    x: ``(..., K)`` (``ndim >= 1``, any strides); weight: ``(N, K)`` (any strides); bias: ``(N,)``;
    all float16 or all bfloat16, on one device. Returns a new contiguous ``(..., N)`` tensor;
    differentiable in x, weight and bias.

    Raises TypeError for a non-tensor or an unsupported (fp32 included, see the module docstring)
    or mismatched dtype; ValueError for a wrong shape, rank or device or an unknown activation.
    """
    _validate(x, weight, bias, activation)
    grad = torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return linear_act_op(x, weight, bias, activation, grad)[0]
    if grad:
        return _LinearAct.apply(x, weight, bias, activation)
    return _forward(x, weight, bias, activation, save=False)[0]
