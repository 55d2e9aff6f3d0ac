"""Flash attention (FlashAttention-2 scheme): forward and backward in Triton.

``q``: (batch, heads, seq, head_dim); ``k, v``: (batch, kv_heads, seq, head_dim) with kv_heads a
divisor of heads (grouped-query attention: q head h reads k/v head h // (heads // kv_heads);
kv_heads == heads is multi-head, kv_heads == 1 multi-query attention); fp16 or bf16, head_dim 16,
32, 64 or 128, any strides.
Returns ``softmax(q k^T * scale) v`` (optionally causal: query i sees keys j <= i) and the
log-sum-exp of each row of scaled scores (fp32, (batch, heads, seq)). The log-sum-exp is a
differentiable output: callers that merge attention computed in pieces (split keys, ring attention)
combine partial outputs through it and need its gradient; it costs the backward one subtraction.

Forward: one program per (block of BLOCK_M queries, batch x q head). It streams the keys and values
in blocks of BLOCK_N with an online softmax: a running row maximum m (in raw-score units), a running
denominator l, and the fp32 accumulator rescaled by ``exp2(m_old * c - m_new * c)`` whenever the
maximum grows, ``c = scale * log2(e)``. The exponent is ``qk * c - m * c``, one fused multiply-add
per score (``m * c`` once per row), then ``exp2``. P is rounded to the input dtype for the
tensor-core PV product; l is summed from the unrounded fp32 values, and the output is ``acc / l``,
as in FlashAttention-2. The key loop has two stages so that the common blocks carry no masks: blocks
known to be fully visible run without any ``where``; only the last partial block (non-causal) or the
diagonal blocks (causal) are masked. A causal program stops at its diagonal (blocks above it are
never loaded), and causal programs start with the heaviest query blocks so the last wave is short.

Backward (deterministic, no atomics), FlashAttention-2's scheme:
 1. a preprocessing kernel computes ``D = rowsum(dO * O) - dlse`` per query row (fp32) from the
    stored output;
 2. one launch whose program ``(i, batch x head)`` (grouped k and v: below) does two independent
    jobs: it accumulates dK and dV for key block i by looping over the query blocks that see it
    (recomputing ``P = exp2(qk * c - (m * c + log2 l))`` from each row's saved maximum m and
    denominator l, 8 bytes per row), ``dV += P^T dO``, ``dS = P * (dP - D)``, ``dK += dS^T Q``; with
    queries or keys as rows of the scores, and dP's product issued beside QK^T's or after dV's, as
    ``_dkdv_loop`` chooses: the same sums either way), and it accumulates dQ for query block i by
    looping over the key blocks it sees (``dQ += dS K``). Each output element is written by exactly
    one program, so repeated calls are bitwise identical.
    Grouped k and v: a program takes a chunk of the q heads that share a k/v head (the whole
    group where that leaves at least 2 programs per SM, else the largest divisor of the group that
    does: ``_bwd_chunk``; one q head causal at head_dim 128 in groups of up to 32:
    ``_bwd_chunk_of``) and loops over them, dK and dV summing every head of the chunk in one fp32
    accumulator, the dQ loop running once per head. With the whole group in one program dK and dV
    are stored as they are; with several chunks each stores its fp32 partial sum and a third
    launch adds them in chunk order (``_group_sum_kernel``: no atomics), rounding once. The split keeps
    multi-query attention's parallelism: with 32 q heads on one k/v head, forward+backward with the
    whole group in one program takes nearly three times as long as in chunks of 4, which are as
    fast as k and v repeated to 32 heads (docs/performance.md).
Query rows past the end of the sequence are loaded as zeros with maximum +inf, which makes
their P exactly 0, so the dK/dV loop needs no masks except the causal ones; the dQ loop masks the
keys past the end in its last block (as the forward does).

Numerics: fp32 accumulation everywhere, and FlashAttention-2's three roundings to the input dtype
(P before PV and in dV, dS before dQ/dK, D from the stored output), which the reference
(``references/flash_attention.py``) states so that the harness's budget covers them.
``tests/unit/test_attention_weights.py`` checks that budget against the scheme emulated in torch
on cases of the kinds where D's roundings were once found beyond it.

Loads: q, k, v and dO through host tensor descriptors (TMA: the copy engine fills shared memory,
no per-element addresses in registers) on the native host path, on Hopper and newer, where the
layout allows (``_tma``); through pointers elsewhere (``_PYTHON_PATH_TMA`` says why the Python path
does so on a GPU). The tiles and the arithmetic are the same, and so are the bits
(``tests/unit/test_flash_descriptors.py``); the descriptors made the backward 1.05-1.14x and the
forward up to 1.15x faster on an H200 at seq 4k and 16k (benchmarks/results/2026-11-29-h200-37).

Tiling: on a GPU, forward blocks of 64 queries x 64 keys, 4 warps, 3 pipeline stages; the
backward's tiles per head_dim, smaller where the large ones would leave SMs idle (``_GPU_BWD``).
Under the interpreter, 32 x 16, so that CPU-sized sequences span several blocks and the forward's
causal diagonal spans two key blocks (the causal forward needs block_n to divide block_m).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import torch
import triton
import triton.language as tl

from kernels import _launch, _native, _ops, _rows
from kernels._matmul import dot
from kernels._runtime import interpreting, sm_count
from kernels._validate import check_same_device, check_same_dtype, check_shape, check_tensor

try:
    from triton.tools.tensor_descriptor import TensorDescriptor
except ImportError:  # a Triton without host tensor descriptors: pointer loads everywhere
    TensorDescriptor = None

OP = "flash_attention"
DTYPES = (torch.float16, torch.bfloat16)
HEAD_DIMS = (16, 32, 64, 128)

_LOG2E = 1.4426950408889634


# ----------------------------------------------------------------------------------------------
# Launch configurations
# ----------------------------------------------------------------------------------------------


class FwdConfig(NamedTuple):
    block_m: int
    block_n: int
    num_warps: int
    num_stages: int


class BwdConfig(NamedTuple):
    """dK/dV phase: key blocks of ``block_n1`` against query blocks of ``block_m1``; dQ phase:
    query blocks of ``block_m2`` against key blocks of ``block_n2``. Program i does key block i
    and query block i, so block_n1 == block_m2; the causal diagonals need block_n1 % block_m1 == 0
    and block_m2 % block_n2 == 0."""

    block_m1: int
    block_n1: int
    block_m2: int
    block_n2: int
    num_warps: int
    num_stages: int


class BwdStep(NamedTuple):
    """A backward tile taken where its grid has at least ``causal`` (causal attention) or
    ``not_causal`` programs per SM."""

    config: BwdConfig
    causal: float
    not_causal: float


# GPU choices by head_dim. Forward: blocks of 64 queries x 64 keys, 4 warps, 3 stages at every
# head_dim (the fp32 accumulator, 64 x 128 at head_dim 128, is 64 registers per thread), chosen on
# an H200 over every benchmark shape (benchmarks/results/2026-11-28-h200-26, call 6, device time
# against the 128-query blocks of 2026-11-28-h100-20): 7-17% faster causal at seq 1k and 4k
# (head_dim 64 and 128, grouped-query included), 2-5% at head_dim 64 not causal, level (within
# 1%) at head_dim 128 not causal and at seq 16k; the forward that saves the backward's statistics
# 1-27% faster. 128 x 128 tiles (8 warps) were slower or level at every shape but one: head_dim 64,
# causal, seq 16k (202 against 251 us), where at seq 4k they were 10% slower. The
# SMs of the H100 and the H200 are the same and attention is bound by them, where the two GPUs'
# device times agree within 1-4% (2026-11-28-h200-25); the choice was not timed on an H100.
_GPU_FWD = {16: FwdConfig(64, 64, 4, 3), 32: FwdConfig(64, 64, 4, 3), 64: FwdConfig(64, 64, 4, 3),
            128: FwdConfig(64, 64, 4, 3)}
# Backward: the dK/dV accumulators are two block_n1 x head_dim fp32 tiles held across the loop,
# so block_n1 is 64 at head_dim 128 (128 would need 256 registers per thread with 4 warps). The
# tiles and the loop's form (queries or keys as rows, ``_dkdv_loop``) were chosen together on an
# H200, the whole backward's device time at every benchmark shape (2026-11-29-h200-29, calls
# 1-2): causal, 64 x 64 blocks with queries as rows are 1.23-1.54x faster than the best before
# (keys as rows on 32 x 128 at head_dim 64, 64 x 64 at 128); not causal at head_dim 64, 32 x 128
# with keys as rows stays (64 x 64 with queries as rows: 0.92-0.94x its speed; 3 stages level
# with 4). head_dim 128 takes 2 stages (10-21% faster than 32 x 64 with 3 on an H100,
# 2026-11-28-h100-20). head_dim 16 and 32 take head_dim 64's tiles, not measured on their own.
# The large tiles need a grid that fills the GPU: one program per key block and q head. Where
# they leave too few programs, smaller key blocks win by more than they lose per block, so each
# head_dim has steps, largest first, each taken where its grid has at least the given share of
# programs per SM (causal, not causal; inf: never), the last taken on any grid. Measured with keys
# as rows on an H200 (132 SMs, 2026-11-28-h200-27, calls 1-3, the backward alone, batch x heads
# 1-64, seq 1k-32k): at head_dim 64, 64-key blocks were 1.24-1.35x faster than 128-key blocks
# where those have 128 programs (1.39-1.49x not causal at 64); 32-key blocks 1.84-2.95x faster
# than 64-key blocks where those have fewer programs than SMs (causal) or than half of them (not
# causal); at head_dim 128, 32-key blocks 1.15-1.52x faster where the 64-key grid has 64 programs
# or fewer (0.72-0.98 at 128). Those thresholds sit just above measured grids; grids between the
# measured points (65-127 programs at head_dim 128) were not timed. With queries as rows
# (2026-11-29-h200-29, call 4), causal 64-key blocks on 128 programs were 1.26x faster than 32-key
# blocks at head_dim 64, where the causal share drops to 0.95, and level at head_dim 128 on 64
# programs; smaller grids were not timed again. The tiles, and so the gradients' bits,
# depend on the GPU's SM count: repeated calls on one GPU stay bitwise identical.
_GPU_BWD_SMALL_GRID = BwdStep(BwdConfig(32, 32, 32, 32, 4, 3), 0.0, 0.0)
_GPU_BWD_D64 = (
    BwdStep(BwdConfig(32, 128, 128, 32, 4, 3), math.inf, 1.0),
    BwdStep(BwdConfig(64, 64, 64, 64, 4, 3), 0.95, 0.5),
    _GPU_BWD_SMALL_GRID,
)
_GPU_BWD = {16: _GPU_BWD_D64, 32: _GPU_BWD_D64, 64: _GPU_BWD_D64,
            128: (BwdStep(BwdConfig(64, 64, 64, 64, 4, 2), 0.5, 0.5), _GPU_BWD_SMALL_GRID)}
if any(steps[-1].causal or steps[-1].not_causal for steps in _GPU_BWD.values()):
    raise AssertionError(f"{OP}: each head_dim's last backward step must take any grid (shares 0)")
_INTERPRETER_FWD = FwdConfig(32, 16, 4, 1)
_INTERPRETER_BWD = BwdConfig(16, 32, 32, 16, 4, 1)



def _fwd_config(head_dim: int) -> FwdConfig:
    return _INTERPRETER_FWD if _rows._SMALL_TILES else _GPU_FWD[head_dim]


def _bwd_config(q_shape, causal: bool, device: torch.device) -> BwdConfig:
    """The backward's tiles for q of ``q_shape`` (``_GPU_BWD``; the interpreter's small tiles)."""
    batch, heads, seq, head_dim = q_shape
    if _rows._SMALL_TILES:
        return _INTERPRETER_BWD
    return _gpu_bwd_config(head_dim, causal, seq, batch * heads, sm_count(device))


def _gpu_bwd_config(head_dim: int, causal: bool, seq: int, batch_heads: int, sms: int) -> BwdConfig:
    """The first of head_dim's steps whose grid (key blocks x batch x q heads, the grid of a
    grouped-query backward split into single heads) has its share of programs per SM."""
    steps = _GPU_BWD[head_dim]
    for step in steps[:-1]:
        share = step.causal if causal else step.not_causal
        if triton.cdiv(seq, step.config.block_n1) * batch_heads >= share * sms:
            return step.config
    return steps[-1].config  # any grid (checked where _GPU_BWD is defined)


def _dkdv_loop(head_dim: int, causal: bool, chunk: int, block_n1: int) -> tuple[bool, bool]:
    """(QUERY_ROWS, DP_FIRST) of the dK/dV loop (``_bwd_dkdv_blocks``) for a program of ``chunk``
    q heads on ``block_n1``-key blocks. Neither changes a bit; the speeds differ by up to 1.7x and
    no one form wins everywhere, so the form is chosen by measurement: the whole backward's device
    time on an H200 with each of the four forms forced, at 21 shapes (2026-11-29-h200-29, calls
    2-4; the best form of each orientation compared):

    - 64-key blocks take queries as rows: 1.23-1.45x faster causal, 1.25-1.70x in a chunk of q
      heads, 1.14-1.16x at head_dim 64 not causal; except one q head not causal at head_dim 128
      (0.81-0.93x there);
    - 128-key blocks (head_dim 64, not causal) take keys as rows (queries as rows: 0.76-0.83x);
    - 32-key blocks (small grids) take keys as rows (queries as rows: 0.82-0.95x);
    - dP is issued first except on 32-key blocks causal (10-13% slower; level at seq 128) and with
      queries as rows in a causal chunk of q heads at head_dim 128 (6-23% slower); elsewhere it
      was level or 4-10% faster.

    Head_dim 16 and 32 follow 64, not measured on their own."""
    query_rows = block_n1 == 64 and (causal or chunk > 1 or head_dim < 128)
    dp_first = not (block_n1 == 32 and causal) and not (query_rows and causal and chunk > 1 and head_dim >= 128)
    return query_rows, dp_first


# Grouped-query backward: a program sums dK/dV over the q heads of a whole group unless that leaves
# fewer programs than this many per SM (the interpreter: fewer than _INTERPRETER_MIN_BWD_PROGRAMS,
# so that CPU-sized cases take both paths); then the group is split into chunks whose fp32 partial
# sums are added afterwards.
_GPU_MIN_BWD_PROGRAMS_PER_SM = 2
_INTERPRETER_MIN_BWD_PROGRAMS = 4


def _bwd_chunk(group: int, programs_per_chunk: int, device: torch.device) -> int:
    """The q heads one backward program takes of a group of ``group`` (a divisor of it): the
    whole group where ``programs_per_chunk`` programs (key blocks x batch x k/v heads) fill the
    device, else the largest chunk that gives enough programs (one q head at the least)."""
    target = (_INTERPRETER_MIN_BWD_PROGRAMS if _rows._SMALL_TILES
              else _GPU_MIN_BWD_PROGRAMS_PER_SM * sm_count(device))
    for split in range(1, group + 1):
        if group % split == 0 and (programs_per_chunk * split >= target or split == group):
            return group // split
    return 1


def block_boundaries() -> tuple[int, ...]:
    """Sequence lengths where the tiling changes on the current backend (for test shapes)."""
    if _rows._SMALL_TILES:
        fwd, bwds = _INTERPRETER_FWD, (_INTERPRETER_BWD,)
    else:
        fwd, bwds = _GPU_FWD[64], tuple(step.config for step in _GPU_BWD[64])
    return tuple(sorted({fwd.block_m, fwd.block_n} | {b for bwd in bwds for b in (bwd.block_m1, bwd.block_n1)}))


# ----------------------------------------------------------------------------------------------
# Forward
# ----------------------------------------------------------------------------------------------


@triton.jit
def _exp2_shifted(qk, m, qk_scale, log2_l):
    """``exp2(qk * c - (m * c + log2 l))``: softmax numerators (log2_l = 0) or probabilities.

    ``m`` and ``log2_l`` are per row (or per column), so the per-score work is one fused
    multiply-add and the exp2. Rounding ``m * c`` moves every exponent by up to eps * |m * c|:
    at the spec's logits (a few hundred) that is 2e-5 of p, far below half an ulp of fp16 or
    bf16; logits of 1e4, where it would reach bf16's half ulp, are outside the contract for any
    recomputing backward (specs/flash_attention.py).
    """
    return tl.math.exp2(qk * qk_scale - (m * qk_scale + log2_l))


@triton.jit
def _load_rows(desc, b, h, base, stride_s, stride_d, start, offs_d, seq, ROWS: tl.constexpr,
               MASKED: tl.constexpr, TMA: tl.constexpr):
    """Rows [start, start + ROWS) of one (batch, head)'s (seq, head_dim) matrix, rows >= seq as
    zeros: through the tensor descriptor ``desc`` (TMA: the copy engine writes the tile to shared
    memory, no per-element addresses in registers; out-of-range rows are zero-filled) or through
    pointers from ``base`` (masked only where ``MASKED``: a block that may pass the end)."""
    if TMA:
        return desc.load([b, h, start, 0]).reshape(ROWS, offs_d.shape[0])
    offs = start + tl.arange(0, ROWS)
    ptrs = base + offs[:, None] * stride_s + offs_d[None, :] * stride_d
    if MASKED:
        return tl.load(ptrs, mask=(offs < seq)[:, None], other=0.0)
    return tl.load(ptrs)


@triton.jit
def _fwd_blocks(acc, l_i, m_i, q, kd, vd, b, kvh, k_base, v_base, stride_kn, stride_kd, stride_vn, stride_vd,
                offs_m, offs_d, lo, hi, seq, qk_scale, BLOCK_N: tl.constexpr, MASK: tl.constexpr,
                TMA: tl.constexpr):
    """Fold key blocks [lo, hi) into the running (acc, l, m): l sums the unrounded probabilities.
    MASK: 0 none (every key of every block visible to every row), 1 causal (key j visible to row
    i iff j <= i), 2 keys < seq. k and v through descriptors kd, vd (TMA) or pointers."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(kd, b, kvh, k_base, stride_kn, stride_kd, start_n, offs_d, seq, BLOCK_N, MASK != 0, TMA)
        v = _load_rows(vd, b, kvh, v_base, stride_vn, stride_vd, start_n, offs_d, seq, BLOCK_N, MASK != 0, TMA)
        qk = dot(q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], tl.float32))
        if MASK == 1:
            qk = tl.where(offs_m[:, None] >= offs_n[None, :], qk, -float("inf"))
        elif MASK == 2:
            qk = tl.where((offs_n < seq)[None, :], qk, -float("inf"))
        # Every row has a visible key in the first block it folds (key 0, or a full block), so
        # m_new is finite and alpha = exp2(-inf) = 0 on the first step, never NaN.
        m_new = tl.maximum(m_i, tl.max(qk, 1))
        p = _exp2_shifted(qk, m_new[:, None], qk_scale, 0.0)
        alpha = _exp2_shifted(m_i, m_new, qk_scale, 0.0)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = dot(_rows.cast_for_store(p, v_base), v, acc * alpha[:, None])
        m_i = m_new
    return acc, l_i, m_i


@_launch.jit
def _attn_fwd_kernel(
    QD, KD, VD, Q, K, V, O, LSE, M, L,
    sq_b, sq_h, sq_s, sq_d, sk_b, sk_h, sk_s, sk_d, sv_b, sv_h, sv_s, sv_d,
    H, GROUP, SEQ, scale, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CAUSAL: tl.constexpr,
    SAVE_STATS: tl.constexpr, TMA: tl.constexpr,
):
    """QD, KD, VD: q, k and v's tensor descriptors (blocks [1, 1, rows, HEAD_DIM]) where TMA, else
    the tensors again (unused); Q, K, V: the tensors (pointers where not TMA)."""
    pid_m = tl.program_id(0)
    if CAUSAL:  # the last query blocks see the most keys: start them first
        pid_m = tl.num_programs(0) - 1 - pid_m
    bh = tl.program_id(1)
    b32 = bh // H  # int32 coordinates for the descriptors, int64 offsets for the pointers
    h32 = bh % H
    kvh32 = h32 // GROUP  # grouped-query attention: GROUP consecutive q heads share one k/v head
    b = b32.to(tl.int64)
    h = h32.to(tl.int64)
    kvh = kvh32.to(tl.int64)
    q_base = Q + b * sq_b + h * sq_h
    k_base = K + b * sk_b + kvh * sk_h
    v_base = V + b * sv_b + kvh * sv_h
    start_m = pid_m * BLOCK_M
    offs_m = start_m + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < SEQ
    q = _load_rows(QD, b32, h32, q_base, sq_s, sq_d, start_m, offs_d, SEQ, BLOCK_M, True, TMA)

    m_i = tl.full([BLOCK_M], -float("inf"), tl.float32)
    l_i = tl.zeros([BLOCK_M], tl.float32)
    acc = tl.zeros([BLOCK_M, HEAD_DIM], tl.float32)
    if CAUSAL:
        # Keys [0, start_m) are visible to every row of the block; the diagonal blocks are masked.
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, KD, VD, b32, kvh32, k_base, v_base, sk_s, sk_d, sv_s, sv_d,
                                    offs_m, offs_d, 0, start_m, SEQ, qk_scale, BLOCK_N, 0, TMA)
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, KD, VD, b32, kvh32, k_base, v_base, sk_s, sk_d, sv_s, sv_d,
                                    offs_m, offs_d, start_m, tl.minimum(start_m + BLOCK_M, SEQ),
                                    SEQ, qk_scale, BLOCK_N, 1, TMA)
    else:
        full = (SEQ // BLOCK_N) * BLOCK_N
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, KD, VD, b32, kvh32, k_base, v_base, sk_s, sk_d, sv_s, sv_d,
                                    offs_m, offs_d, 0, full, SEQ, qk_scale, BLOCK_N, 0, TMA)
        acc, l_i, m_i = _fwd_blocks(acc, l_i, m_i, q, KD, VD, b32, kvh32, k_base, v_base, sk_s, sk_d, sv_s, sv_d,
                                    offs_m, offs_d, full, SEQ, SEQ, qk_scale, BLOCK_N, 2, TMA)

    out = acc / l_i[:, None]
    lse = m_i * scale + tl.log(l_i)
    row = bh.to(tl.int64) * SEQ + offs_m
    o_offs = row[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(O + o_offs, _rows.cast_for_store(out, O), mask=row_ok[:, None])
    tl.store(LSE + row, lse, mask=row_ok)
    if SAVE_STATS:  # the backward's P needs the raw maximum and the denominator, not only lse
        tl.store(M + row, m_i, mask=row_ok)
        tl.store(L + row, l_i, mask=row_ok)


# ----------------------------------------------------------------------------------------------
# Backward
# ----------------------------------------------------------------------------------------------


@_launch.jit
def _bwd_delta_kernel(
    O, DO, DLSE, DELTA, sdo_b, sdo_h, sdo_s, sdo_d, sdl_b, sdl_h, sdl_s,
    H, SEQ, HEAD_DIM: tl.constexpr, BLOCK_M: tl.constexpr, HAS_DLSE: tl.constexpr,
):
    """D = rowsum(dO * O) - dlse for one block of query rows, O the stored output (contiguous)."""
    bh = tl.program_id(1)
    b = (bh // H).to(tl.int64)
    h = (bh % H).to(tl.int64)
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_d = tl.arange(0, HEAD_DIM)
    row_ok = offs_m < SEQ
    row = bh.to(tl.int64) * SEQ + offs_m
    o_offs = row[:, None] * HEAD_DIM + offs_d[None, :]
    o = tl.load(O + o_offs, mask=row_ok[:, None], other=0.0).to(tl.float32)
    do = tl.load(DO + b * sdo_b + h * sdo_h + offs_m[:, None] * sdo_s + offs_d[None, :] * sdo_d,
                 mask=row_ok[:, None], other=0.0).to(tl.float32)
    delta = tl.sum(o * do, 1)
    if HAS_DLSE:
        delta -= tl.load(DLSE + b * sdl_b + h * sdl_h + offs_m * sdl_s, mask=row_ok, other=0.0).to(tl.float32)
    tl.store(DELTA + row, delta, mask=row_ok)


@triton.jit
def _load_query_rows(qd, dod, b, h, q_base, do_base, m_base, l_base, delta_base, sq_s, sq_d, sdo_s, sdo_d,
                     start_m, offs_m, offs_d, seq, TMA: tl.constexpr):
    """What the backward needs of query rows ``offs_m`` (from ``start_m``): q, dO (through
    descriptors qd, dod where TMA, else pointers), the row maximum, log2 of the row sum and delta.
    Rows >= seq load as zeros with maximum +inf, so their P is exactly 0."""
    row_ok = offs_m < seq
    q = _load_rows(qd, b, h, q_base, sq_s, sq_d, start_m, offs_d, seq, offs_m.shape[0], True, TMA)
    do = _load_rows(dod, b, h, do_base, sdo_s, sdo_d, start_m, offs_d, seq, offs_m.shape[0], True, TMA)
    m = tl.load(m_base + offs_m, mask=row_ok, other=float("inf"))
    log2_l = tl.math.log2(tl.load(l_base + offs_m, mask=row_ok, other=1.0))
    delta = tl.load(delta_base + offs_m, mask=row_ok, other=0.0)
    return q, do, m, log2_l, delta


@triton.jit
def _bwd_dkdv_blocks(dk, dv, k, v, qd, dod, b, h, q_base, do_base, m_base, l_base, delta_base,
                     sq_s, sq_d, sdo_s, sdo_d, offs_n, offs_d, lo, hi, seq, qk_scale,
                     BLOCK_M: tl.constexpr, CAUSAL_MASK: tl.constexpr, QUERY_ROWS: tl.constexpr,
                     DP_FIRST: tl.constexpr, TMA: tl.constexpr):
    """Accumulate dK, dV of one key block over query blocks [lo, hi). Query rows >= seq load as
    zeros with maximum +inf, so their P is exactly 0.

    QUERY_ROWS: the scores are ``q k^T`` (queries as rows) and dK, dV take the transposed
    ``dS^T q`` and ``P^T dO``; else ``k q^T`` (keys as rows, as in Triton's tutorial), whose P and
    dS are dK's and dV's left operands as they are. DP_FIRST: dP's product is issued beside
    QK^T's, before P's exponentials, and dK's before dV's. Neither option changes a product or
    the order of a sum, so neither changes a bit; they change the speed (``_dkdv_loop``)."""
    for start_m in range(lo, hi, BLOCK_M):
        offs_m = start_m + tl.arange(0, BLOCK_M)
        q, do, m, log2_l, delta = _load_query_rows(qd, dod, b, h, q_base, do_base, m_base, l_base, delta_base,
                                                   sq_s, sq_d, sdo_s, sdo_d, start_m, offs_m, offs_d, seq, TMA)
        if QUERY_ROWS:
            qk = dot(q, tl.trans(k), tl.zeros([BLOCK_M, k.shape[0]], tl.float32))
            if DP_FIRST:
                dp = dot(do, tl.trans(v), tl.zeros([BLOCK_M, k.shape[0]], tl.float32))
            p = _exp2_shifted(qk, m[:, None], qk_scale, log2_l[:, None])
            if CAUSAL_MASK:
                p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
            p_left = tl.trans(_rows.cast_for_store(p, q_base))  # P^T, dV's left operand
        else:
            qk = dot(k, tl.trans(q), tl.zeros([k.shape[0], BLOCK_M], tl.float32))
            if DP_FIRST:
                dp = dot(v, tl.trans(do), tl.zeros([k.shape[0], BLOCK_M], tl.float32))
            p = _exp2_shifted(qk, m[None, :], qk_scale, log2_l[None, :])
            if CAUSAL_MASK:
                p = tl.where(offs_m[None, :] >= offs_n[:, None], p, 0.0)
            p_left = _rows.cast_for_store(p, q_base)
        if not DP_FIRST:
            dv = dot(p_left, do, dv)
            if QUERY_ROWS:
                dp = dot(do, tl.trans(v), tl.zeros([BLOCK_M, k.shape[0]], tl.float32))
            else:
                dp = dot(v, tl.trans(do), tl.zeros([k.shape[0], BLOCK_M], tl.float32))
        if QUERY_ROWS:
            ds_left = tl.trans(_rows.cast_for_store(p * (dp - delta[:, None]), q_base))
        else:
            ds_left = _rows.cast_for_store(p * (dp - delta[None, :]), q_base)
        dk = dot(ds_left, q, dk)
        if DP_FIRST:
            dv = dot(p_left, do, dv)
    return dk, dv


@triton.jit
def _bwd_dq_blocks(dq, q, do, m, log2_l, delta, kd, vd, b, kvh, k_base, v_base, sk_s, sk_d, sv_s, sv_d,
                   offs_m, offs_d, lo, hi, seq, qk_scale,
                   BLOCK_N: tl.constexpr, MASK: tl.constexpr, TMA: tl.constexpr):
    """Accumulate dQ of one query block over key blocks [lo, hi). MASK as in ``_fwd_blocks``.
    Keys >= seq load as zeros; the bounds mask still zeroes their P, because exp2(-m * c) of a
    row whose scores are very negative overflows, and inf * 0 would poison dQ."""
    for start_n in range(lo, hi, BLOCK_N):
        offs_n = start_n + tl.arange(0, BLOCK_N)
        k = _load_rows(kd, b, kvh, k_base, sk_s, sk_d, start_n, offs_d, seq, BLOCK_N, True, TMA)
        v = _load_rows(vd, b, kvh, v_base, sv_s, sv_d, start_n, offs_d, seq, BLOCK_N, True, TMA)
        qk = dot(q, tl.trans(k), tl.zeros([q.shape[0], BLOCK_N], tl.float32))
        p = _exp2_shifted(qk, m[:, None], qk_scale, log2_l[:, None])
        if MASK == 1:
            p = tl.where(offs_m[:, None] >= offs_n[None, :], p, 0.0)
        elif MASK == 2:
            p = tl.where((offs_n < seq)[None, :], p, 0.0)
        dp = dot(do, tl.trans(v), tl.zeros([q.shape[0], BLOCK_N], tl.float32))
        ds = p * (dp - delta[:, None])
        dq = dot(_rows.cast_for_store(ds, k_base), k, dq)
    return dq


@_launch.jit
def _attn_bwd_kernel(
    QD1, DOD1, KD1, VD1, QD2, DOD2, KD2, VD2,
    Q, K, V, DO, M, L, DELTA, DQ, DK, DV,
    sq_b, sq_h, sq_s, sq_d, sk_b, sk_h, sk_s, sk_d, sv_b, sv_h, sv_s, sv_d,
    sdo_b, sdo_h, sdo_s, sdo_d,
    H, GROUP, SEQ, scale, qk_scale,
    HEAD_DIM: tl.constexpr, BLOCK_M1: tl.constexpr, BLOCK_N1: tl.constexpr,
    BLOCK_M2: tl.constexpr, BLOCK_N2: tl.constexpr, CAUSAL: tl.constexpr, CHUNK: tl.constexpr,
    QUERY_ROWS: tl.constexpr, DP_FIRST: tl.constexpr, TMA: tl.constexpr,
):
    """Program ``(i, batch x chunk)``, a chunk being CHUNK consecutive q heads that read one k/v
    head (GROUP of them do; CHUNK divides GROUP): dK and dV of key block i summed over the chunk's
    q heads (one fp32 accumulator, the heads in order: no atomics, bitwise reproducible), then dQ
    of query block i for each of those q heads. dK and dV go to row ``(batch x chunk) * SEQ`` of
    DK and DV: the gradients themselves when CHUNK == GROUP, else fp32 partial sums, one per
    chunk, that ``_group_sum_kernel`` adds up. Where TMA, q, k, v and dO are read through the
    descriptors (QD1/DOD1 and KD1/VD1 of the dK/dV phase's blocks, QD2/DOD2 and KD2/VD2 of the dQ
    phase's), else through pointers (the descriptor arguments are then the tensors again, unused)."""
    pid = tl.program_id(1)
    b32 = pid // (H // CHUNK)  # int32 coordinates for the descriptors, int64 offsets for the pointers
    h0_32 = (pid % (H // CHUNK)) * CHUNK  # the chunk's first q head
    kvh32 = h0_32 // GROUP
    b = b32.to(tl.int64)
    h0 = h0_32.to(tl.int64)
    kvh = kvh32.to(tl.int64)
    k_base = K + b * sk_b + kvh * sk_h
    v_base = V + b * sv_b + kvh * sv_h
    offs_d = tl.arange(0, HEAD_DIM)

    # ---- dK, dV for keys [start_n, start_n + BLOCK_N1) -----------------------------------------
    start_n = tl.program_id(0) * BLOCK_N1
    offs_n = start_n + tl.arange(0, BLOCK_N1)
    key_ok = (offs_n < SEQ)[:, None]
    k = _load_rows(KD1, b32, kvh32, k_base, sk_s, sk_d, start_n, offs_d, SEQ, BLOCK_N1, True, TMA)
    v = _load_rows(VD1, b32, kvh32, v_base, sv_s, sv_d, start_n, offs_d, SEQ, BLOCK_N1, True, TMA)
    dk = tl.zeros([BLOCK_N1, HEAD_DIM], tl.float32)
    dv = tl.zeros([BLOCK_N1, HEAD_DIM], tl.float32)
    for g in range(CHUNK):  # CHUNK == 1 (plain multi-head attention): a single pass, no loop
        h32 = h0_32 + g
        h = h0 + g
        bh = b * H + h
        q_base = Q + b * sq_b + h * sq_h
        do_base = DO + b * sdo_b + h * sdo_h
        m_base = M + bh * SEQ
        l_base = L + bh * SEQ
        delta_base = DELTA + bh * SEQ
        if CAUSAL:
            # Queries before start_n never see these keys; those in the block's own span are masked.
            dk, dv = _bwd_dkdv_blocks(dk, dv, k, v, QD1, DOD1, b32, h32, q_base, do_base, m_base, l_base, delta_base,
                                      sq_s, sq_d, sdo_s, sdo_d, offs_n, offs_d,
                                      start_n, start_n + BLOCK_N1, SEQ, qk_scale, BLOCK_M1, True, QUERY_ROWS,
                                      DP_FIRST, TMA)
            dk, dv = _bwd_dkdv_blocks(dk, dv, k, v, QD1, DOD1, b32, h32, q_base, do_base, m_base, l_base, delta_base,
                                      sq_s, sq_d, sdo_s, sdo_d, offs_n, offs_d,
                                      start_n + BLOCK_N1, SEQ, SEQ, qk_scale, BLOCK_M1, False, QUERY_ROWS,
                                      DP_FIRST, TMA)
        else:
            dk, dv = _bwd_dkdv_blocks(dk, dv, k, v, QD1, DOD1, b32, h32, q_base, do_base, m_base, l_base, delta_base,
                                      sq_s, sq_d, sdo_s, sdo_d, offs_n, offs_d,
                                      0, SEQ, SEQ, qk_scale, BLOCK_M1, False, QUERY_ROWS,
                                      DP_FIRST, TMA)
    dkv_offs = (pid.to(tl.int64) * SEQ + offs_n)[:, None] * HEAD_DIM + offs_d[None, :]
    tl.store(DK + dkv_offs, _rows.cast_for_store(dk * scale, DK), mask=key_ok)
    tl.store(DV + dkv_offs, _rows.cast_for_store(dv, DV), mask=key_ok)

    # ---- dQ for queries [start_m, start_m + BLOCK_M2), each q head of the group ---------------
    start_m = tl.program_id(0) * BLOCK_M2
    offs_m = start_m + tl.arange(0, BLOCK_M2)
    for g in range(CHUNK):
        h32 = h0_32 + g
        h = h0 + g
        bh = b * H + h
        q_base = Q + b * sq_b + h * sq_h
        do_base = DO + b * sdo_b + h * sdo_h
        q, do, m, log2_l, delta = _load_query_rows(QD2, DOD2, b32, h32, q_base, do_base, M + bh * SEQ,
                                                   L + bh * SEQ, DELTA + bh * SEQ, sq_s, sq_d, sdo_s, sdo_d,
                                                   start_m, offs_m, offs_d, SEQ, TMA)
        dq = tl.zeros([BLOCK_M2, HEAD_DIM], tl.float32)
        if CAUSAL:  # keys past the end are above the diagonal of every valid row: the causal mask
            dq = _bwd_dq_blocks(dq, q, do, m, log2_l, delta, KD2, VD2, b32, kvh32, k_base, v_base,
                                sk_s, sk_d, sv_s, sv_d, offs_m, offs_d, 0, start_m, SEQ, qk_scale, BLOCK_N2, 0, TMA)
            dq = _bwd_dq_blocks(dq, q, do, m, log2_l, delta, KD2, VD2, b32, kvh32, k_base, v_base,
                                sk_s, sk_d, sv_s, sv_d, offs_m, offs_d, start_m, tl.minimum(start_m + BLOCK_M2, SEQ),
                                SEQ, qk_scale, BLOCK_N2, 1, TMA)
        else:
            full = (SEQ // BLOCK_N2) * BLOCK_N2
            dq = _bwd_dq_blocks(dq, q, do, m, log2_l, delta, KD2, VD2, b32, kvh32, k_base, v_base,
                                sk_s, sk_d, sv_s, sv_d, offs_m, offs_d, 0, full, SEQ, qk_scale, BLOCK_N2, 0, TMA)
            dq = _bwd_dq_blocks(dq, q, do, m, log2_l, delta, KD2, VD2, b32, kvh32, k_base, v_base,
                                sk_s, sk_d, sv_s, sv_d, offs_m, offs_d, full, SEQ, SEQ, qk_scale, BLOCK_N2, 2, TMA)
        dq_offs = (bh * SEQ + offs_m)[:, None] * HEAD_DIM + offs_d[None, :]
        tl.store(DQ + dq_offs, _rows.cast_for_store(dq * scale, DQ), mask=(offs_m < SEQ)[:, None])


# ----------------------------------------------------------------------------------------------
# Launchers
# ----------------------------------------------------------------------------------------------


@_launch.jit
def _group_sum_kernel(DK_PART, DV_PART, DK, DV, N, CHUNKS: tl.constexpr, BLOCK: tl.constexpr):
    """dK and dV of a grouped-query backward split in chunks: for one k/v head (program axis 1)
    and BLOCK of its N = seq x head_dim elements, the CHUNKS fp32 partial sums added in chunk
    order and rounded once to the gradients' dtype. One launch for both, recorded by the native
    path as the backward's kernels are; the fixed order keeps the gradients bitwise repeatable.
    Bytes: 2 x CHUNKS x 4 read and 2 x 2 written per element."""
    head = tl.program_id(1).to(tl.int64)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < N
    part = head * CHUNKS * N + offs  # int64, stepped by N: chunk x N in int32 would wrap past 2^31
    dk = tl.load(DK_PART + part, mask=ok)
    dv = tl.load(DV_PART + part, mask=ok)
    for _ in tl.static_range(1, CHUNKS):
        part += N
        dk += tl.load(DK_PART + part, mask=ok)
        dv += tl.load(DV_PART + part, mask=ok)
    tl.store(DK + head * N + offs, _rows.cast_for_store(dk, DK), mask=ok)
    tl.store(DV + head * N + offs, _rows.cast_for_store(dv, DV), mask=ok)


_GROUP_SUM_BLOCK = 1024


def _partials_shape(q, k, chunk: int) -> tuple[int, ...]:
    """(batch, kv_heads, chunks, seq, head_dim): dK's or dV's fp32 partial sums, one per chunk."""
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    return batch, kv_heads, heads // kv_heads // chunk, seq, head_dim


def _group_sum_launch(dk_part, dv_part, dk, dv):
    """The group sum's (grid, arguments, options): partial sums (batch, kv_heads, chunks, seq,
    head_dim) into dk and dv (batch, kv_heads, seq, head_dim), all contiguous."""
    batch, kv_heads, chunks, seq, head_dim = dk_part.shape
    n = seq * head_dim
    return ((triton.cdiv(n, _GROUP_SUM_BLOCK), batch * kv_heads), (dk_part, dv_part, dk, dv, n),
            dict(CHUNKS=chunks, BLOCK=_GROUP_SUM_BLOCK, num_warps=4))


def _launch_strides(*tensors: torch.Tensor) -> tuple[int, ...]:
    """The tensors' strides, one after another, as launches take them (``_rows.launch_strides``:
    size-1 dimensions get their contiguous stride, which Triton 3.6 needed here)."""
    return tuple(s for t in tensors for s in _rows.launch_strides(t))


def _unit_inner(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself when its head_dim stride is 1, else a contiguous copy (as sdpa makes). The
    kernels would take any stride, but Triton 3.6 compiles the backward for head_dim strides of 0
    (a broadcast q, k and grad) into an out-of-bounds shared-memory read: an illegal access, which
    compute-sanitizer's memcheck shows on that case with the operands as given and not with them
    copied. A unit inner stride is also what vectorised loads need."""
    return t if t.stride(-1) == 1 else t.contiguous()


@functools.lru_cache(maxsize=None)
def _tma_device(index: int | None) -> bool:
    """Whether the kernels may read through host tensor descriptors on this device: a Triton
    that has them, and Hopper or newer (the interpreter emulates them: the CPU tests take the path)."""
    if TensorDescriptor is None:
        return False
    return index is None or torch.cuda.get_device_capability(index)[0] >= 9


def _tma(*tensors: torch.Tensor) -> bool:
    """Whether the kernels read ``tensors`` (q, k, v; dO) through tensor descriptors: on a device
    that has them (``_tma_device``), each 16-byte aligned, with a unit head_dim stride and every
    other stride (as launched: ``_rows.launch_strides``) positive and a multiple of 16 bytes, as
    the copy engine requires. Other layouts take the pointer loads, which change no bit."""
    device = tensors[0].device
    if not _tma_device(device.index if device.type == "cuda" else None):
        return False
    for t in tensors:
        strides = _rows.launch_strides(t)
        if t.data_ptr() & 15 or strides[-1] != 1 or any(s <= 0 or s * t.element_size() & 15 for s in strides[:-1]):
            return False
    return True


def _descriptor(t: torch.Tensor, rows: int) -> object:
    """t's (batch, heads, seq, head_dim) tensor descriptor, blocks of ``rows`` x head_dim."""
    return TensorDescriptor(t, list(t.shape), list(_rows.launch_strides(t)), [1, 1, rows, t.shape[-1]])


def _fwd_launch(q, k, v, out, lse, m, l, causal: bool, scale, qk_scale, save_stats: bool, tma: bool):
    """The forward kernel's (grid, arguments, options) for q, k and v as laid out, read through
    tensor descriptors where ``tma`` (``_tma``): the one list that both the Python path and the
    native recording launch (the scales may be the recording's per-call floats)."""
    batch, heads, seq, head_dim = q.shape
    config = _fwd_config(head_dim)
    descriptors = ((_descriptor(q, config.block_m), _descriptor(k, config.block_n), _descriptor(v, config.block_n))
                   if tma else (q, k, v))
    args = (*descriptors, q, k, v, out, lse, m, l, *_launch_strides(q, k, v), heads, heads // k.shape[1], seq, scale,
            qk_scale)
    meta = dict(HEAD_DIM=head_dim, BLOCK_M=config.block_m, BLOCK_N=config.block_n, CAUSAL=causal,
                SAVE_STATS=save_stats, TMA=tma, num_warps=config.num_warps, num_stages=config.num_stages)
    return (triton.cdiv(seq, config.block_m), batch * heads), args, meta


_ONE_HEAD_MAX_GROUP = 32  # the largest group measured (``_bwd_chunk_of``)


def _bwd_chunk_of(q, k, config: BwdConfig, causal: bool) -> int:
    """The q heads one backward program takes: 1 without GQA and, causal at head_dim 128 in groups
    of up to ``_ONE_HEAD_MAX_GROUP``, 1; elsewhere ``_bwd_chunk``'s. Causal at head_dim 128 a
    chunk of heads must issue dP's product after dV's (``_dkdv_loop``: dP first is slower there),
    which is slower than one head's dP-first loop: the backward with one q head a program, its
    partial sums added after, was 1.11-1.20x faster than with the chunks of 4 that ``_bwd_chunk``
    gives, at groups of 4 and 8, seq 1k-4k, batch 1-2, on an H200 (2026-11-29-h200-30, call 1);
    at groups of 16 and 32 (multi-query attention among them) 1.20x faster than chunks of 4 at
    seq 4k and 1.09x than chunks of 2 at seq 1k, batch 2 (2026-11-29-h200-31, call 6);
    not causal at head_dim 128, or causal at 64, chunks of 2 or 4 were 1.14-1.19x faster than one
    head a program (groups of 4 and 8). The cost is memory: fp32 partial sums of dK and dV for
    every q head, ``2 x batch x heads x seq x head_dim x 4`` bytes during the backward (four
    times q's size; at a group of 32 over one k/v head, 128 times k's), where a whole group in one
    program needs none. Groups between those measured (9-15, 17-31) take the rule unmeasured;
    groups above 32 were not measured and keep ``_bwd_chunk``'s chunks."""
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    group = heads // kv_heads
    if group == 1 or (causal and head_dim == 128 and group <= _ONE_HEAD_MAX_GROUP):
        return 1
    return _bwd_chunk(group, triton.cdiv(seq, config.block_n1) * batch * kv_heads, q.device)


def _delta_launch(out, dout, dlse, delta, config: BwdConfig):
    """The preprocessing kernel's (grid, arguments, options); ``dlse`` None: no log-sum-exp gradient
    (``delta`` stands in for its pointer, never read)."""
    batch, heads, seq, head_dim = out.shape
    dlse_strides = _rows.launch_strides(dlse) if dlse is not None else (0, 0, 0)
    args = (out, dout, dlse if dlse is not None else delta, delta, *_rows.launch_strides(dout), *dlse_strides,
            heads, seq)
    meta = dict(HEAD_DIM=head_dim, BLOCK_M=config.block_m2, HAS_DLSE=dlse is not None, num_warps=config.num_warps)
    return (triton.cdiv(seq, config.block_m2), batch * heads), args, meta


def _bwd_launch(q, k, v, dout, m, l, delta, dq, dk_out, dv_out, causal: bool, scale, qk_scale, config: BwdConfig,
                chunk: int, tma: bool):
    """The backward kernel's (grid, arguments, options), ``chunk`` q heads a program, q, k, v and
    dO read through tensor descriptors where ``tma``: the dK/dV phase's (q and dO in blocks of
    block_m1 rows, k and v of block_n1), then the dQ phase's (block_m2, block_n2)."""
    batch, heads, seq, head_dim = q.shape
    query_rows, dp_first = _dkdv_loop(head_dim, causal, chunk, config.block_n1)
    c = config
    operands = ((q, c.block_m1), (dout, c.block_m1), (k, c.block_n1), (v, c.block_n1),
                (q, c.block_m2), (dout, c.block_m2), (k, c.block_n2), (v, c.block_n2))
    descriptors = tuple(_descriptor(t, rows) if tma else t for t, rows in operands)
    args = (*descriptors, q, k, v, dout, m, l, delta, dq, dk_out, dv_out, *_launch_strides(q, k, v, dout),
            heads, heads // k.shape[1], seq, scale, qk_scale)
    meta = dict(HEAD_DIM=head_dim, BLOCK_M1=config.block_m1, BLOCK_N1=config.block_n1, BLOCK_M2=config.block_m2,
                BLOCK_N2=config.block_n2, CAUSAL=causal, CHUNK=chunk, QUERY_ROWS=query_rows,
                DP_FIRST=dp_first, TMA=tma, num_warps=config.num_warps, num_stages=config.num_stages)
    return (triton.cdiv(seq, config.block_n1), batch * heads // chunk), args, meta


# The Python path (torch.compile's custom op, HARNESS_NATIVE=0, layouts the native path does not
# serve) reads through pointers on a GPU: Triton 3.6's launcher expands every descriptor argument
# in Python at every launch, which cost that path up to 90 us a forward (seq 1k and below) and
# 160-710 us a forward+backward (seq 1k to 4k) on an H200 (benchmarks/results/2026-11-29-h200-37,
# call 3), more than the descriptors save. The native path encodes them in C++ (kernels/_native.py). Under the
# interpreter the Python path takes them, so that the CPU's tests run the descriptor loads.
_PYTHON_PATH_TMA = interpreting()


def _forward(q, k, v, causal: bool, scale: float, save_stats: bool = False, tma: bool | None = None):
    """(out, lse), plus (m, l) when ``save_stats``: each row's raw-score maximum and softmax
    denominator, from which the backward recomputes P (``_exp2_shifted``). ``tma``: read q, k and
    v through tensor descriptors (None: where the Python path does, ``_PYTHON_PATH_TMA``)."""
    q, k, v = (_unit_inner(t) for t in (q, k, v))
    batch, heads, seq, _ = q.shape
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty((batch, heads, seq), dtype=torch.float32, device=q.device)
    m, l = (torch.empty_like(lse) for _ in range(2)) if save_stats else (lse, lse)  # unused if not saved
    if out.numel() > 0:
        if tma is None:
            tma = _PYTHON_PATH_TMA and _tma(q, k, v)
        grid, args, meta = _fwd_launch(q, k, v, out, lse, m, l, causal, scale, scale * _LOG2E, save_stats, tma)
        with _rows.launch_guard(q):
            _attn_fwd_kernel[grid](*args, **meta)
    return (out, lse, m, l) if save_stats else (out, lse)


def _backward(q, k, v, out, m, l, dout, dlse, causal: bool, scale: float, tma: bool | None = None):
    """dq, dk, dv; ``tma`` as ``_forward``'s (dO copied where descriptors cannot read it)."""
    q, k, v, dout = (_unit_inner(t) for t in (q, k, v, dout))  # q, k, v: as the forward left them
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    dq = torch.empty_like(q, memory_format=torch.contiguous_format)
    dk, dv = (torch.empty_like(k, memory_format=torch.contiguous_format) for _ in range(2))
    if dq.numel() == 0:  # validation: no q heads means no k/v heads, so dk and dv are empty too
        return dq, dk, dv
    config = _bwd_config(q.shape, causal, q.device)
    group = heads // kv_heads
    chunk = _bwd_chunk_of(q, k, config, causal)
    if tma is None:
        tma = _PYTHON_PATH_TMA and _tma(q, k, v)
    if tma and not _tma(dout):  # a gradient laid out otherwise (broadcast, misaligned): copied, to keep the descriptors
        dout = dout.clone(memory_format=torch.contiguous_format)
    if chunk == group:  # each program sums a whole group: it writes the gradients themselves
        dk_out, dv_out = dk, dv
    else:  # fp32 partial sums, one per chunk of the group, added up below (_group_sum_kernel)
        dk_out, dv_out = (torch.empty(_partials_shape(q, k, chunk), dtype=torch.float32, device=q.device)
                          for _ in range(2))
    delta = torch.empty((batch, heads, seq), dtype=torch.float32, device=q.device)
    with _rows.launch_guard(q):
        grid, args, meta = _delta_launch(out, dout, dlse, delta, config)
        _bwd_delta_kernel[grid](*args, **meta)
        grid, args, meta = _bwd_launch(q, k, v, dout, m, l, delta, dq, dk_out, dv_out, causal, scale, scale * _LOG2E,
                                       config, chunk, tma)
        _attn_bwd_kernel[grid](*args, **meta)
        if chunk != group:  # a fixed-order fp32 sum over the chunks, one rounding: deterministic
            grid, args, meta = _group_sum_launch(dk_out, dv_out, dk, dv)
            _group_sum_kernel[grid](*args, **meta)
    return dq, dk, dv


class _FlashAttention(torch.autograd.Function):
    @staticmethod
    def forward(ctx, q, k, v, causal: bool, scale: float):
        q, k, v = (_unit_inner(t) for t in (q, k, v))  # saved so, for the backward not to copy again
        out, lse, m, l = _forward(q, k, v, causal, scale, save_stats=True)
        ctx.save_for_backward(q, k, v, out, m, l)
        ctx.causal, ctx.scale = causal, scale
        ctx.set_materialize_grads(False)  # an unused output's gradient arrives as None, not zeros
        return out, lse

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, dout, dlse):
        q, k, v, out, m, l = ctx.saved_tensors
        if dout is None and dlse is None:
            return None, None, None, None, None
        # Autograd may hand gradients of another dtype; convert, never mutate them.
        dout = torch.zeros_like(out) if dout is None else dout.to(out.dtype)
        if dlse is not None:
            dlse = dlse.to(torch.float32)
        dq, dk, dv = _backward(q, k, v, out, m, l, dout, dlse, ctx.causal, ctx.scale)
        need_q, need_k, need_v = ctx.needs_input_grad[:3]
        return dq if need_q else None, dk if need_k else None, dv if need_v else None, None, None


# The custom op (kernels/_ops.py): out and lse, then what the backward reads (the row maxima m, the
# denominators l) where ``save`` is set, else empty tensors in their place (the forward
# without them fills none: an op may not return lse or out twice). The backward reads q, k and v as
# given and makes the forward's copies of those whose head_dim stride is not 1 again (_unit_inner).
_NOTHING_SAVED = (0,)


@_ops.op(
    "flash_attention",
    "(Tensor q, Tensor k, Tensor v, bool causal, float scale, bool save) -> (Tensor, Tensor, Tensor, Tensor)",
)
def flash_attention_op(q, k, v, causal, scale, save):
    """out, lse, m, l (the last two empty unless ``save``)."""
    if save:
        return _forward(q, k, v, causal, scale, save_stats=True)
    out, lse = _forward(q, k, v, causal, scale)
    return out, lse, lse.new_empty(_NOTHING_SAVED), lse.new_empty(_NOTHING_SAVED)


@flash_attention_op.register_fake
def _(q, k, v, causal, scale, save):
    out = q.new_empty(q.shape)
    lse = q.new_empty(q.shape[:-1], dtype=torch.float32)
    if save:
        return out, lse, torch.empty_like(lse), torch.empty_like(lse)
    return out, lse, lse.new_empty(_NOTHING_SAVED), lse.new_empty(_NOTHING_SAVED)


@_ops.op(
    "flash_attention_backward",
    "(Tensor q, Tensor k, Tensor v, Tensor out, Tensor m, Tensor l, Tensor dout, Tensor? dlse, "
    "bool causal, float scale) -> Tensor[]",
)
def flash_attention_backward(q, k, v, out, m, l, dout, dlse, causal, scale):
    """``_backward`` as an op: [dq, dk, dv] (one launch computes all three)."""
    return list(_backward(q, k, v, out, m, l, dout, dlse, causal, scale))


@flash_attention_backward.register_fake
def _(q, k, v, out, m, l, dout, dlse, causal, scale):
    return [q.new_empty(q.shape), k.new_empty(k.shape), v.new_empty(v.shape)]


def _setup(ctx, inputs, output):
    q, k, v, causal, scale, save = inputs
    out, _, m, l = output
    ctx.save_for_backward(q, k, v, out, m, l)
    ctx.causal, ctx.scale, ctx.saved = causal, scale, save
    ctx.set_materialize_grads(False)  # as _FlashAttention: an unused output's gradient stays None


def _op_backward(ctx, dout, dlse, _dm, _dl):
    if dout is None and dlse is None:
        return None, None, None, None, None, None
    if not ctx.saved:  # the entry point passes save=True whenever a gradient may be asked for
        raise RuntimeError(f"{OP}: flash_attention_op(..., save=False) saved nothing for its backward")
    q, k, v, out, m, l = ctx.saved_tensors
    dout = torch.zeros_like(out) if dout is None else dout.to(out.dtype)
    dlse = None if dlse is None else dlse.to(torch.float32)
    dq, dk, dv = flash_attention_backward(q, k, v, out, m, l, dout, dlse, ctx.causal, ctx.scale)
    need_q, need_k, need_v = ctx.needs_input_grad[:3]
    return dq if need_q else None, dk if need_k else None, dv if need_v else None, None, None, None


flash_attention_op.register_autograd(_op_backward, setup_context=_setup)


# ----------------------------------------------------------------------------------------------
# The native path (kernels/_native.py): a call's allocations and launches run from C++, with a
# C++ backward node, for each call signature: q's, k's and v's shapes, strides and 16-byte
# alignment, the dtype, the device, causal, and which inputs need gradients. The same kernels,
# tiles and arguments as _forward and _backward, with two differences that change no bit: the
# backward always takes the log-sum-exp's gradient (zeros where it went unused, as the node makes
# them: D - 0 is D), and the scale is a per-call float. Signatures it does not serve take the
# Python path: an operand whose head_dim stride is not 1 (copied there), one not 16-byte aligned,
# a broadcast operand that the backward would save (``_native.program``), an empty call, and a
# launch the native path does not model (``_native.Unsupported``).
# ----------------------------------------------------------------------------------------------

_NATIVE_PLANS = _launch.plan_table()


def _native_call(q, k, v, causal: bool, scale: float, grad: bool):
    """(out, lse) through the native path, or None where it does not serve the call."""
    needs = (q.requires_grad, k.requires_grad, v.requires_grad) if grad else None
    key = (q.shape, q.stride(), k.shape, k.stride(), v.stride(), q.dtype, q.device,
           (q.data_ptr() | k.data_ptr() | v.data_ptr()) & 15 == 0, causal, needs)
    outputs = _native.serve(_NATIVE_PLANS, key, lambda: _native_program(q, k, v, causal, needs), None, (q, k, v),
                            [scale, scale * _LOG2E], graph=needs is not None)
    return None if outputs is None else tuple(outputs)


def _native_program(q, k, v, causal: bool, needs: tuple[bool, bool, bool] | None) -> object:
    if q.numel() == 0 or any(t.stride(-1) != 1 or t.data_ptr() & 15 for t in (q, k, v)):
        return _native.NOT_SERVED
    batch, heads, seq, _ = q.shape
    stats_shape = (batch, heads, seq)
    save = needs is not None
    # example tensors for binding the launches: what the program allocates has these layouts
    out = torch.empty_like(q, memory_format=torch.contiguous_format)
    lse = torch.empty(stats_shape, dtype=torch.float32, device=q.device)
    forward = _native.Builder(3, like=(q, k, v))
    qs, ks, vs = forward.given
    outs = forward.empty(q.shape, q.dtype)
    lses = forward.empty(stats_shape, torch.float32)
    ms, ls = ((forward.empty(stats_shape, torch.float32), forward.empty(stats_shape, torch.float32)) if save
              else (lses, lses))
    scale, qk_scale = forward.float_arg(0), forward.float_arg(1)
    tma = _tma(q, k, v)
    try:
        grid, args, meta = _fwd_launch(q, k, v, out, lse, lse, lse, causal, 1.0, 1.0, save, tma)
        mapped = [_native.TensorMap(slot, desc) if tma else slot for slot, desc in zip((qs, ks, vs), args[:3])]
        forward.launch(_attn_fwd_kernel.bind(grid, args, meta, runtime=len(args)),
                       *mapped, qs, ks, vs, outs, lses, ms, ls, *args[10:-2], scale, qk_scale)
        if not save:
            return _native.program(forward, [outs, lses])
        record, (dqs, dks, dvs) = _native_backward(q, k, v, out, lse, causal, tma)
    except _native.Unsupported:
        return _native.NOT_SERVED
    gradients = [slot if need else None for slot, need in zip((dqs, dks, dvs), needs)]
    return _native.program(forward, [outs, lses], saved=[qs, ks, vs, outs, ms, ls], backward=record,
                           gradients=gradients, grad_layouts=[forward.layout(outs), forward.layout(lses)])


def _native_backward(q, k, v, out, lse, causal: bool, tma: bool):
    """The backward's recording, given (q, k, v, out, m, l, dout, dlse), and the slots of
    dq, dk and dv. dout arrives in out's layout (contiguous: the node copies another into it),
    which descriptors can read wherever q, k and v can (``tma``)."""
    config = _bwd_config(q.shape, causal, q.device)
    chunk = _bwd_chunk_of(q, k, config, causal)
    chunks = q.shape[1] // k.shape[1] // chunk
    dout, dq = torch.empty_like(out), torch.empty_like(out)
    dk = torch.empty_like(k, memory_format=torch.contiguous_format)
    dlse, delta = torch.empty_like(lse), torch.empty_like(lse)
    record = _native.Builder(8)
    q_s, k_s, v_s, out_s, m_s, l_s, dout_s, dlse_s = record.given
    dqs = record.empty(q.shape, q.dtype)
    dks, dvs = (record.empty(k.shape, k.dtype) for _ in range(2))
    delta_s = record.empty(lse.shape, torch.float32)
    grid, args, meta = _delta_launch(out, dout, dlse, delta, config)
    record.launch(_bwd_delta_kernel.bind(grid, args, meta, runtime=len(args)),
                  out_s, dout_s, dlse_s, delta_s, *args[4:])
    if chunks == 1:  # each program sums a whole group: it writes the gradients themselves
        dk_part, dk_parts, dv_parts = dk, dks, dvs
    else:  # fp32 partial sums, one per chunk, added by _group_sum_kernel
        dk_part = torch.empty(_partials_shape(q, k, chunk), dtype=torch.float32, device=q.device)
        dk_parts, dv_parts = (record.empty(dk_part.shape, torch.float32) for _ in range(2))
    grid, args, meta = _bwd_launch(q, k, v, dout, lse, lse, delta, dq, dk_part, dk_part, causal, 1.0, 1.0, config,
                                   chunk, tma)
    operands = (q_s, dout_s, k_s, v_s, q_s, dout_s, k_s, v_s)  # the order of _bwd_launch's descriptors
    mapped = [_native.TensorMap(slot, desc) if tma else slot for slot, desc in zip(operands, args[:8])]
    record.launch(_attn_bwd_kernel.bind(grid, args, meta, runtime=len(args)),
                  *mapped, q_s, k_s, v_s, dout_s, m_s, l_s, delta_s, dqs, dk_parts, dv_parts, *args[18:-2],
                  record.float_arg(0), record.float_arg(1))
    if chunks > 1:
        grid, args, meta = _group_sum_launch(dk_part, dk_part, dk, dk)
        record.launch(_group_sum_kernel.bind(grid, args, meta, runtime=len(args)), dk_parts, dv_parts, dks, dvs,
                      *args[4:])
    return record, (dqs, dks, dvs)


def _validate(q, k, v, causal, scale) -> float:
    check_tensor(OP, "q", q, dtypes=DTYPES, ndim=4)
    check_tensor(OP, "k", k, dtypes=DTYPES, ndim=4)
    check_tensor(OP, "v", v, dtypes=DTYPES, ndim=4)
    check_same_device(OP, q=q, k=k, v=v)
    check_same_dtype(OP, q=q, k=k, v=v)
    batch, heads, seq, head_dim = q.shape
    kv_heads = k.shape[1]
    # Grouped-query attention: q head h reads k/v head h // (heads // kv_heads). One comparison
    # on the common path (kv_heads == heads), and guards that hold for every valid size under
    # torch.compile (no branch on how the two head counts relate).
    if kv_heads != heads and (kv_heads < 1 or heads % kv_heads != 0 or heads < kv_heads):
        raise ValueError(
            f"{OP}: argument 'k' has {kv_heads} heads, which must divide q's {heads} (grouped-query "
            f"attention: q head h reads k and v head h // (heads // kv_heads))")
    check_shape(OP, "k", k, (batch, kv_heads, seq, head_dim), "(batch, kv_heads, seq, head_dim): q's batch, seq and head_dim")
    check_shape(OP, "v", v, k.shape, "(batch, kv_heads, seq, head_dim) of k")
    if head_dim not in HEAD_DIMS:
        raise ValueError(f"{OP}: argument 'q' has head_dim {head_dim}; supported: {', '.join(map(str, HEAD_DIMS))}")
    if not isinstance(causal, bool):
        raise TypeError(f"{OP}: argument 'causal' must be a bool, got {type(causal).__name__}")
    if scale is None:
        return head_dim ** -0.5
    if isinstance(scale, bool) or not isinstance(scale, (int, float)):
        raise TypeError(f"{OP}: argument 'scale' must be a float or None, got {type(scale).__name__}")
    if not 0 < scale < math.inf:  # NaN fails too; comparisons (not math.isfinite) trace under torch.compile
        raise ValueError(f"{OP}: argument 'scale' must be a positive finite float, got {scale}")
    return float(scale)


def flash_attention(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, causal: bool = False, scale: float | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """Scaled dot-product attention and the log-sum-exp of its scores, FlashAttention-2 style.

    q: (batch, heads, seq, head_dim); k, v: (batch, kv_heads, seq, head_dim), kv_heads a divisor of
    heads (grouped-query attention: q head h attends with k/v head h // (heads // kv_heads); 1 is
    multi-query attention). One dtype (float16 or bfloat16), one device, any
    strides (an operand whose head_dim stride is not 1 is copied first); head_dim one of 16, 32,
    64, 128. ``causal``: query i attends to keys j <= i.
    ``scale``: the factor on q k^T (default 1/sqrt(head_dim)); positive and finite.

    Returns ``(out, lse)``: out ``softmax(q k^T * scale) v`` (contiguous, q's dtype) and lse
    ``logsumexp(q k^T * scale, -1)`` (contiguous, float32, (batch, heads, seq)). Both are
    differentiable in q, k and v.

    Raises TypeError for a non-tensor, an unsupported or mismatched dtype, a non-bool causal or a
    non-numeric scale; ValueError for a wrong rank, shape, head_dim, device or scale, or k and v
    heads that do not divide q's.
    """
    scale = _validate(q, k, v, causal, scale)
    grad = torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        out, lse, *_ = flash_attention_op(q, k, v, causal, scale, grad)
        return out, lse
    if _native.enabled():  # C++ host path (above)
        outputs = _native_call(q, k, v, causal, scale, grad)
        if outputs is not None:
            return outputs
    if grad:
        return _FlashAttention.apply(q, k, v, causal, scale)
    return _forward(q, k, v, causal, scale)  # no graph to record: skip autograd's overhead
