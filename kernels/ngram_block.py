"""No-repeat-n-gram blocking for generation, in one Triton kernel.

``ngram_block(tokens, logits, n)`` returns a copy of ``logits`` (batch, vocab) in which every token
that would complete an n-gram already present in its row of ``tokens`` (batch, length) is -inf. The
prefix is the row's last ``n - 1`` tokens; every earlier position i whose ``n - 1`` tokens equal the
prefix bans ``tokens[i + n - 1]``. n = 1 bans every generated token; n > length bans nothing; ids
outside ``[0, vocab)`` name no logit and ban nothing (checking them would need a device sync).

The result is a new tensor (the caller's logits are left alone), written by one launch over
(row, vocabulary slice) programs. Each program

1. copies its slice of the row's logits to the output (the memory traffic: one read, one write);
2. waits at a barrier for all its threads' copies, then scans the row's n-gram positions in blocks:
   a position matches when its ``n - 1`` tokens equal the prefix (``n - 1`` vector compares, the
   tokens of a row come from L1/L2 after the first), and the token after a match is overwritten
   with -inf when it falls in this program's slice. Several matches banning one token write the
   same value, so the order of those stores does not matter.

The barrier is what makes a single kernel correct: the -inf store and the copy of the same element
may come from different threads of the program, and ``tl.debug_barrier`` (``__syncthreads``) orders
all global writes of the block before it ahead of those after it. No two programs write the same
element, so nothing needs ordering across programs. The slices are sized so that there are a few
programs per SM: each program repeats the position scan (cheap: ``n`` loads of the token row) and
the copy dominates.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from kernels import _launch, _ops, _rows
from kernels._runtime import sm_count
from kernels._validate import FLOAT_DTYPES, check_same_device, check_shape, check_tensor

OP = "ngram_block"
TOKEN_DTYPES = (torch.int64, torch.int32)

# GPU: BLOCK_V logits per copy step, BLOCK_L positions per scan step, and about PROGRAMS_PER_SM
# programs per SM. Interpreter: small blocks so that CPU-sized rows span several of each.
_GPU = dict(BLOCK_V=2048, BLOCK_L=1024, num_warps=4)
_GPU_PROGRAMS_PER_SM = 4
_INTERPRETER = dict(BLOCK_V=32, BLOCK_L=16, num_warps=1)
_INTERPRETER_SLICE = 64


def block_boundaries() -> tuple[int, ...]:
    """Vocabulary and length sizes where the tiling changes (for test shapes)."""
    config = _INTERPRETER if _rows._SMALL_TILES else _GPU
    return (config["BLOCK_L"], config["BLOCK_V"]) + ((_INTERPRETER_SLICE,) if _rows._SMALL_TILES else ())


def _slice_width(batch: int, vocab: int, device: torch.device) -> int:
    """Logits per program: a multiple of BLOCK_V giving about PROGRAMS_PER_SM programs per SM."""
    if _rows._SMALL_TILES:
        return _INTERPRETER_SLICE
    block = _GPU["BLOCK_V"]
    slices = max(1, min(triton.cdiv(vocab, block), triton.cdiv(_GPU_PROGRAMS_PER_SM * sm_count(device), batch)))
    return triton.cdiv(triton.cdiv(vocab, slices), block) * block


@_launch.jit
def _ngram_block_kernel(
    tok_ptr, logit_ptr, out_ptr, length, vocab, n, slice_width,
    st_b, st_l, sl_b, sl_v,
    BLOCK_V: tl.constexpr, BLOCK_L: tl.constexpr,
):
    row = tl.program_id(0).to(tl.int64)
    lo = tl.program_id(1) * slice_width
    hi = tl.minimum(lo + slice_width, vocab)
    src = logit_ptr + row * sl_b
    dst = out_ptr + row * vocab
    for start in range(lo, hi, BLOCK_V):
        cols = start + tl.arange(0, BLOCK_V)
        keep = cols < hi
        tl.store(dst + cols, tl.load(src + cols * sl_v, mask=keep), mask=keep)
    tl.debug_barrier()  # every copy of this slice lands before any -inf below (module docstring)

    toks = tok_ptr + row * st_b
    prefix = toks + (length - n + 1) * st_l
    positions = length - n + 1  # starts of complete n-grams; <= 0 when n > length
    for start in range(0, positions, BLOCK_L):
        pos = start + tl.arange(0, BLOCK_L)
        match = pos < positions
        for j in range(0, n - 1):
            t = tl.load(toks + (pos + j) * st_l, mask=match, other=0)
            match = match & (t == tl.load(prefix + j * st_l))
        banned = tl.load(toks + (pos + n - 1) * st_l, mask=match, other=-1)
        hit = match & (banned >= lo) & (banned < hi)
        tl.store(dst + banned, tl.full([BLOCK_L], float("-inf"), tl.float32).to(out_ptr.dtype.element_ty), mask=hit)


def _validate(tokens, logits, n) -> None:
    check_tensor(OP, "tokens", tokens, dtypes=TOKEN_DTYPES, ndim=2)
    check_tensor(OP, "logits", logits, dtypes=FLOAT_DTYPES, ndim=2)
    check_same_device(OP, tokens=tokens, logits=logits)
    check_shape(OP, "logits", logits, (tokens.shape[0], logits.shape[1]), "one row of logits per row of tokens")
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"{OP}: argument 'n' must be an int, got {type(n).__name__}")
    if n < 1:
        raise ValueError(f"{OP}: argument 'n' must be >= 1, got {n}")


def _forward(tokens: torch.Tensor, logits: torch.Tensor, n: int) -> torch.Tensor:
    """The blocked logits of validated inputs: one launch (module docstring)."""
    batch, vocab = logits.shape
    out = torch.empty((batch, vocab), dtype=logits.dtype, device=logits.device)
    if out.numel() == 0:
        return out
    width = _slice_width(batch, vocab, logits.device)
    config = _INTERPRETER if _rows._SMALL_TILES else _GPU
    with _rows.launch_guard(logits):
        _ngram_block_kernel[(batch, triton.cdiv(vocab, width))](
            tokens, logits, out, tokens.shape[1], vocab, n, width, *tokens.stride(), *logits.stride(),
            **config,
        )
    return out


# The custom op (kernels/_ops.py). n is a SymInt so that a compiled call serves every n without
# recompiling.
@_ops.op("ngram_block", "(Tensor tokens, Tensor logits, SymInt n) -> Tensor")
def ngram_block_op(tokens, logits, n):
    """:func:`ngram_block` as a custom op."""
    return _forward(tokens, logits, n)


@ngram_block_op.register_fake
def _(tokens, logits, n):
    return _ops.empty_like(logits)


def _setup(ctx, inputs, output):
    # Not differentiable, as the eager path, whose result is a new tensor outside autograd's graph
    # even for logits that require grad: the result is marked so, and never requires grad.
    ctx.mark_non_differentiable(output)


def _no_backward(ctx, grad):
    return None, None, None  # never called: the output is non-differentiable


ngram_block_op.register_autograd(_no_backward, setup_context=_setup)


def ngram_block(tokens: torch.Tensor, logits: torch.Tensor, n: int) -> torch.Tensor:
    """``logits`` with -inf at every token that would repeat an n-gram of its row of ``tokens``.

    tokens: (batch, length) int64 or int32 token ids; logits: (batch, vocab) float32, float16 or
    bfloat16; any strides, one device; n >= 1. Returns a new contiguous tensor of logits' shape
    and dtype; the other entries are copied bitwise (NaN included). Not differentiable.

    Raises TypeError for a non-tensor, an unsupported dtype or a non-int n; ValueError for a wrong
    rank, batch size or device, or n < 1.
    """
    _validate(tokens, logits, n)
    if _ops.route():  # inside torch.compile (kernels/_ops.py)
        return ngram_block_op(tokens, logits, n)
    return _forward(tokens, logits, n)
