"""No-repeat-n-gram blocking: the Triton kernel against a plain per-row Python loop.

The output is the logits with -inf at banned tokens: the harness requires -inf exactly where the
reference has it and every other value equal (a bitwise copy scores 0). Token rows come from three
kinds: ``repeated_tokens`` (a period of 1 to 3: every n-gram repeats, the most bans),
``tokens`` (ids 0..7: frequent repeats) and ``spread_tokens`` (a small alphabet of ids anywhere up
to 2^17, some negative: bans land in every vocabulary slice, and out-of-range ids must ban nothing).
n runs from 1 (ban everything generated) past the row length (ban nothing).
"""

from hypothesis import strategies as st

from harness import BadInput, BenchShape, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.ngram_block as kernel
import references.ngram_block as reference


def _bytes(call):
    """Read the logits and write them, read the token ids."""
    return 2 * call["logits"].numel() * call.dtype.itemsize + call["tokens"].numel() * call["tokens"].element_size()


def _shape(length, vocab, dtype, quick=False):
    return BenchShape({"batch": 256, "length": length, "vocab": vocab}, dtype, {"n": 3}, quick=quick)


SPEC = KernelSpec(
    name="ngram_block",
    description="no-repeat-n-gram blocking: -inf at every token completing an n-gram already in the row",
    reference=reference.ngram_block,
    implementations={"triton": kernel.ngram_block},
    tensors=(
        TensorArg("tokens", dims=("batch", "length"), dtype="int64",
                  values=("tokens", "repeated_tokens", "spread_tokens")),
        TensorArg("logits", dims=("batch", "vocab"), values=("normal", "large", "neg_inf_mask")),
    ),
    dims={
        "batch": Dim(cpu_max=4, gpu_max=64),
        "length": Dim(cpu_max=40, gpu_max=1100, boundaries=lambda: kernel.block_boundaries()[:1]),
        "vocab": Dim(cpu_max=200, gpu_max=9000, boundaries=lambda: kernel.block_boundaries()[1:]),
    },
    # n around the row length as often as small n: n = length is the first n with a single
    # complete n-gram (its prefix overlaps it), n = length + 1 the first that bans nothing.
    scalars={"n": lambda dims: st.sampled_from(sorted({1, 2, 3, max(1, dims["length"] - 1), dims["length"],
                                                       dims["length"] + 1}))
             | st.integers(1, dims["length"] + 2)},
    dtypes=("float32", "float16", "bfloat16"),
    numerics=Numerics(
        error_multiple=1.0,  # a copy and -inf: nothing to round
    ),
    bad_scalars={"n": [0, -2, 2.5, True, "3"]},
    bad_inputs=(
        BadInput("float tokens", "tokens", lambda kw: {**kw, "tokens": kw["tokens"].to(kw["logits"].dtype)}),
        BadInput("1-d logits", "logits", lambda kw: {**kw, "logits": kw["logits"][0]}),
    ),
    perf=PerfModel(
        bytes_moved=_bytes,
        shapes=(
            _shape(128, 32000, "float32", quick=True),
            _shape(1024, 32000, "float32"),
            _shape(128, 50257, "float16"),
            _shape(1024, 50257, "bfloat16"),
        ),
    ),
)
