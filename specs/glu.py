"""Gated linear units, ``act(a) * b`` (SwiGLU: silu; GEGLU: gelu exact or tanh): the Triton kernels
against eager, as two specs.

Two specs rather than one with a ``gated`` choice, because the two forms take different tensors:
``glu`` takes a and b, ``glu_packed`` one x of width 2N. A spec's tensors are fixed, and
everything the harness does per tensor follows from them: layouts and guard bands for each input
(for the packed form: x's own strides, which its two halves share), the automatic contract (b of
another shape than a must be rejected naming 'b'; x of odd width naming 'x'), gradients per input.
A variant choice would have to pass tensors the chosen form ignores. The kernels are the same two
for both (``kernels/glu.py``); the activation is a choice scalar of each spec.
"""

import functools

from hypothesis import strategies as st

from harness import BadInput, Batch, BenchShape, Dim, KernelSpec, Numerics, PerfModel, TensorArg

import kernels.glu as kernel
import references.glu as reference
from specs import _elementwise, _peers, _unreached

_ACTIVATION = st.sampled_from(kernel.ACTIVATIONS)
_BAD_ACTIVATIONS = ["swish", "GELU", "relu", None]
_ROWS = Dim(cpu_max=9, gpu_max=512)
_BATCH = Batch(max_rank=1, cpu_max=2, gpu_max=3)
_HALF_CPU_MAX, _HALF_GPU_MAX = 80, 9000


def _bytes(call, streams):
    return streams * call["a"].numel() * call.dtype.itemsize


SPEC = KernelSpec(
    name="glu",
    description="act(a) * b: SwiGLU (silu), GEGLU (gelu, gelu_tanh) on two inputs",
    reference=reference.glu,
    implementations={"triton": kernel.glu},
    tensors=(
        TensorArg("a", dims=("*batch", "rows", "cols"), grad=True, values=("normal", "large", "small", "mixed_scales")),
        TensorArg("b", dims=("*batch", "rows", "cols"), grad=True, values=("normal", "large", "small")),
    ),
    dims={
        "*batch": _BATCH,
        "rows": _ROWS,
        "cols": Dim(cpu_max=160, gpu_max=_HALF_GPU_MAX, boundaries=kernel.block_boundaries),
    },
    scalars={"activation": _ACTIVATION},
    bad_scalars={"activation": _BAD_ACTIVATIONS},
    tiling_cases=_elementwise.TILING_CASES,
    unreached_on_cpu=_unreached.ACTIVATIONS,
    numerics=Numerics(
        error_multiple=2.0,
    ),
    perf=PerfModel(
        peers=_peers.GLU,
        bytes_moved=lambda call: _bytes(call, 3),  # read a, b; write the output
        backward_bytes=lambda call: _bytes(call, 5),  # read a, b, grad; write 2 grads
        flops=lambda call: 20.0 * call["a"].numel(),
        shapes=(
            # the peers' point: torch.compile 99%, Liger 98% of copy bandwidth on the H100
            BenchShape({"rows": 8192, "cols": 11008}, "bfloat16", {"activation": "silu"}, quick=True),
            BenchShape({"rows": 8192, "cols": 14336}, "bfloat16", {"activation": "silu"}),  # Llama-3 8B MLP
            BenchShape({"rows": 8192, "cols": 16384}, "bfloat16", {"activation": "gelu_tanh"}),
            BenchShape({"rows": 16384, "cols": 5120}, "float16", {"activation": "gelu"}),
            BenchShape({"rows": 4096, "cols": 11008}, "float32", {"activation": "silu"}),
        ),
    ),
)


@functools.cache
def _even_widths() -> tuple[int, ...]:
    """The widths x may have: 2N for every half N on the CPU (all of 1..80), and on the GPU the
    half widths the generators favour (the tiling's boundaries and their neighbours, powers of two
    and a geometric grid), doubled. ``Dim.choices`` is how a spec says "only these sizes"."""
    halves = set(range(1, _HALF_CPU_MAX + 1))
    for b in kernel.block_boundaries():
        halves |= {b - 1, b, b + 1}
    power = 1
    while power <= _HALF_GPU_MAX:
        halves |= {power - 1, power, power + 1}
        power *= 2
    value = 2.0
    while value <= _HALF_GPU_MAX:
        halves.add(int(value) | 1)
        value *= 1.3
    return tuple(sorted(2 * h for h in halves if 1 <= h <= _HALF_GPU_MAX))


def _packed_bytes(call, x_reads, half_streams):
    """x_reads full-width streams plus half_streams half-width ones."""
    half = call["x"].numel() // 2
    return (2 * x_reads + half_streams) * half * call.dtype.itemsize


def _packed(rows, half, dtype, activation, quick=False):
    return BenchShape({"rows": rows, "width": 2 * half}, dtype, {"activation": activation}, quick=quick)


PACKED_SPEC = KernelSpec(
    name="glu_packed",
    description="act(x[..., :N]) * x[..., N:]: SwiGLU/GEGLU on one fused up-projection of width 2N",
    reference=reference.glu_packed,
    implementations={"triton": kernel.glu_packed},
    tensors=(
        TensorArg("x", dims=("*batch", "rows", "width"), grad=True, values=("normal", "large", "small", "mixed_scales")),
    ),
    dims={
        "*batch": _BATCH,
        "rows": _ROWS,
        "width": Dim(cpu_max=2 * _HALF_CPU_MAX, gpu_max=2 * _HALF_GPU_MAX, min=2, choices=_even_widths()),
    },
    scalars={"activation": _ACTIVATION},
    bad_scalars={"activation": _BAD_ACTIVATIONS},
    bad_inputs=(
        BadInput("x of odd width", "x", lambda kw: {**kw, "x": kw["x"][..., :-1]}),
    ),
    unreached_on_cpu=_unreached.ACTIVATIONS,
    numerics=Numerics(
        error_multiple=2.0,
    ),
    perf=PerfModel(
        bytes_moved=lambda call: _packed_bytes(call, 1, 1),  # read x; write the output
        # read x and grad (half width); write grad_x
        backward_bytes=lambda call: _packed_bytes(call, 2, 1),
        flops=lambda call: 10.0 * call["x"].numel(),
        shapes=(
            _packed(8192, 11008, "bfloat16", "silu", quick=True),
            _packed(8192, 14336, "bfloat16", "silu"),
            _packed(8192, 16384, "bfloat16", "gelu_tanh"),
            _packed(16384, 5120, "float16", "gelu"),
        ),
    ),
)
