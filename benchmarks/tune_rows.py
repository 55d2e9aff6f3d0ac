"""Sweep the GPU tiling of the row kernels at the peer shapes: softmax (forward and backward),
LayerNorm and RMSNorm (forward; and their shared backward, ``norm_backward``, with its grid size
``norm_backward_groups``; for rows cut into column blocks, ``norm_backward_columns``, and which
rows take them, ``norm_backward_columns_from``; and with the next tile loaded ahead,
``norm_backward_prefetch``), dropout-add-LayerNorm (``dropout_norm_forward``,
``dropout_norm_backward``), and the elementwise family (add_mul_act, bias_gelu, glu share one
forward tiling, ``elementwise``, one for fp32 results, ``elementwise_fp32``, and one for fp32
results computed in fp32 arithmetic, ``elementwise_fp32_math``; their backward's grid with
grad_bias is ``elementwise_backward``); and time what softmax's fp32 numerics cost.

Each candidate ``TileLimits`` is timed interleaved with eager and torch.compile of the reference
and with a plain device copy of the first input (what the memory system gives at that size: a
small tensor cannot reach the large-copy bandwidth the roofline is measured at). Candidates that
give the same launch are timed once. A candidate is passed into the kernels through their
module's tuning (``kernels/_tuning.py``: ``TUNING.replaced(...)`` around each timed call), never by
rebinding module globals. A target may also vary other tuning entries beside the limits
(``Target.knobs``: backward programs per SM, the norms' prefetch). For fp32 softmax shapes the production
forward (fp32 row sums, the fast exp) is also timed against fp64 row sums and against those with
the accurate exp and reciprocal (its numerics before ``436cd23``), and fp32 dropout-add-LayerNorm's forward against
fp32 arithmetic, at the production tiling, to show what accuracy would cost; those variants are
diagnostics, never choices (the harness's error budget decides the numerics). Writes every median as JSON and prints the best
candidate per shape; the chosen limits go into the kernel modules by hand.

    python benchmarks/tune_rows.py OUT.json [softmax] [layer_norm] [layer_norm_wide] [rms_norm]
        [norm_forward_short] [norm_backward] [norm_backward_groups] [norm_backward_columns]
        [norm_backward_columns_from]
        [norm_backward_prefetch] [dropout_norm_backward] [dropout_norm_forward] [elementwise]
        [elementwise_fp32] [elementwise_fp32_math] [elementwise_backward] [elementwise_backward_tile]
"""

from __future__ import annotations

import itertools
import json
import sys
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import NamedTuple

import torch
import torch.nn.functional as F
import triton
import triton.language as tl

import kernels._norm as norm
import kernels._norm_tiling as tiling
from harness.bench.timing import TimingPlan, median, time_interleaved
from kernels import _rows, _tuning, add_mul_act, bias_gelu, glu, linear_act, softmax
from kernels.layer_norm import layer_norm
from kernels.rms_norm import rms_norm

_ROWS_GRID = {"target_elems": (256, 512, 1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64), "max_rows": (16, 64)}


class Op(NamedTuple):
    """One op at one shape: its inputs, its kernel passes and its reference."""

    label: str
    rows: int
    cols: int
    dtype: torch.dtype
    inputs: Callable[[torch.Tensor], tuple]  # from x: the reference's arguments
    passes: dict[str, Callable[..., object]]  # pass name -> kernel call on those arguments
    reference: Callable[..., torch.Tensor]
    streams: int = 2  # full-size tensors the forward moves (inputs read + the output written)


class Target(NamedTuple):
    """One kernel family: the tuning it varies (``kernels/_tuning.py``) and which grid of it to
    sweep. A candidate is passed in with ``tuning.replaced(...)`` around each timed call: its
    ``TileLimits`` into the entries ``sets`` (from the grid's limit fields over the production
    ``limits`` entry), its knobs into their own entries, with ``fixed`` entries beside them."""

    tuning: _tuning.Tuning
    limits: str  # the entry whose production TileLimits the grid's limit fields vary
    grid: dict[str, tuple]
    ops: tuple[Op, ...]
    sets: tuple[str, ...] = ()  # the entries a candidate's limits go to (none: a sweep of knobs alone)
    # grid names that are tuning entries of their own rather than TileLimits fields: name -> entry
    knobs: Mapping[str, str] = MappingProxyType({})
    # entries held while sweeping: the norms' per-shape overrides off, so each candidate is timed as given
    fixed: Mapping[str, object] = MappingProxyType({})

    def get(self) -> _rows.TileLimits:
        """The production limits the grid varies."""
        return self.tuning.defaults[self.limits]

    def replaced(self, candidate: Candidate):
        """The candidate in place, for the length of a with-block."""
        entries = {**self.fixed, **{self.knobs[name]: value for name, value in candidate.knobs.items()}}
        entries.update({entry: candidate.limits for entry in self.sets})
        return self.tuning.replaced(**entries)


def _with_vectors(count):
    """Inputs: x and ``count`` random row vectors (weights, biases) of its width."""
    def inputs(x):
        return (x, *(torch.randn(x.shape[-1], device=x.device, dtype=x.dtype) for _ in range(count)))
    return inputs


def _softmax_op(rows, cols, dtype):
    def inputs(x):
        return (x, torch.softmax(x.float(), -1).to(x.dtype), torch.randn_like(x))
    return Op(f"softmax {rows}x{cols}", rows, cols, dtype, inputs,
              {"fwd": lambda x, y, dy: softmax._forward(x), "bwd": lambda x, y, dy: softmax._backward(y, dy)},
              lambda x, y, dy: torch.softmax(x, dim=-1))


def _norm_op(kind, rows, cols, dtype):
    if kind == "layer_norm":
        return Op(f"layer_norm {rows}x{cols}", rows, cols, dtype, _with_vectors(2), {"fwd": layer_norm},
                  lambda x, w, b: F.layer_norm(x, x.shape[-1:], w, b))
    return Op(f"rms_norm {rows}x{cols}", rows, cols, dtype, _with_vectors(1), {"fwd": rms_norm},
              lambda x, w: F.rms_norm(x, x.shape[-1:], w))


def _norm_backward_op(kind, rows, cols, dtype):
    """The backward kernel alone, from a forward run once per input set (its statistics do not
    depend on the tiling); eager and compile time the forward reference, as for the other ops."""
    rms = kind == "rms_norm"

    def inputs(x):
        w = torch.randn(cols, device=x.device, dtype=dtype)
        b = None if rms else torch.randn(cols, device=x.device, dtype=dtype)
        stats = norm.forward(x, w, b, eps=1e-5, rms=rms).stats
        return x, w, b, stats, torch.randn_like(x)

    def backward(x, w, b, stats, dy):
        return norm.backward(x, dy, w, stats, rms=rms, need_dweight=True, need_dbias=b is not None)

    def reference(x, w, b, stats, dy):
        return F.rms_norm(x, x.shape[-1:], w) if rms else F.layer_norm(x, x.shape[-1:], w, b)

    return Op(f"{kind} backward {rows}x{cols}", rows, cols, dtype, inputs, {"bwd": backward}, reference, streams=3)


def _dropout_add_ln_inputs(x):
    """x, and the residual, dropped input's bias, weight and bias of dropout-add-LayerNorm."""
    return x, torch.randn_like(x), *(torch.randn(x.shape[-1], device=x.device, dtype=x.dtype) for _ in range(3))


def _dropout_add_ln_reference(x, res, bias, w, b, *_):
    return F.layer_norm(F.dropout(x + bias, 0.1) + res, x.shape[-1:], w, b)


def _dropout_norm_backward_op(rows, cols, dtype):
    """dropout-add-LayerNorm's backward alone (p = 0.1, every gradient asked for), from one forward
    per input set; eager and compile time the forward composite."""
    dropout = norm.Dropout.of(0.1, 1234)

    def inputs(x):
        x, res, bias, w, b = _dropout_add_ln_inputs(x)
        fwd = norm.forward(x, w, b, eps=1e-5, rms=False, residual=res, xbias=bias, dropout=dropout, store_sum=True)
        return x, res, bias, w, b, fwd.s, fwd.stats, torch.randn_like(x)

    def backward(x, res, bias, w, b, s, stats, dy):
        return norm.backward(s, dy, w, stats, rms=False, dropout=dropout, need_dweight=True, need_dbias=True,
                             need_dxbias=True)

    return Op(f"dropout_add_layer_norm backward {rows}x{cols}", rows, cols, dtype, inputs, {"bwd": backward},
              _dropout_add_ln_reference, streams=4)


def _bias_gelu_op(approximate, rows, cols, dtype):
    return Op(f"bias_gelu {approximate} {rows}x{cols}", rows, cols, dtype, _with_vectors(1),
              {"fwd": lambda x, b: bias_gelu._forward(x, b, approximate)},
              lambda x, b: F.gelu(x + b, approximate=approximate))


_GLU_REFERENCES = {"silu": F.silu, "gelu": F.gelu}


def _glu_op(activation, rows, cols, dtype):
    """glu's forward, ``act(a) * b`` (SwiGLU: silu, GEGLU: gelu)."""
    act = _GLU_REFERENCES[activation]
    return Op(f"glu {activation} {rows}x{cols}", rows, cols, dtype, lambda x: (x, torch.randn_like(x)),
              {"fwd": lambda a, b: glu._forward(a, b, activation)}, lambda a, b: act(a) * b, streams=3)


def _add_mul_relu_op(rows, cols, dtype):
    return Op(f"add_mul_act relu {rows}x{cols}", rows, cols, dtype,
              lambda x: (x, torch.randn_like(x), torch.randn(x.shape[-1], device=x.device, dtype=x.dtype)),
              {"fwd": lambda x, y, b: add_mul_act._forward(x, y, b, 0.5, "relu")},
              lambda x, y, b: torch.relu(x + 0.5 * y + b), streams=3)


def _bias_gelu_backward_op(approximate, rows, cols, dtype):
    """bias_gelu's backward alone (grad_x, grad_bias's partial rows and their sum); eager and
    compile time the forward reference, as for the other backward ops."""
    return Op(f"bias_gelu {approximate} backward {rows}x{cols}", rows, cols, dtype,
              lambda x: (x, torch.randn(cols, device=x.device, dtype=dtype), torch.randn_like(x)),
              {"bwd": lambda x, b, g: bias_gelu._backward(x, b, approximate, g)},
              lambda x, b, g: F.gelu(x + b, approximate=approximate), streams=3)


def _add_mul_act_backward_op(activation, rows, cols, dtype):
    """add_mul_act's backward from the saved inputs (recomputing z): every activation's inside
    torch.compile, and all but relu's in eager calls."""
    return Op(f"add_mul_act {activation} backward {rows}x{cols}", rows, cols, dtype,
              lambda x: (x, torch.randn_like(x), torch.randn(cols, device=x.device, dtype=dtype), torch.randn_like(x)),
              {"bwd": lambda x, y, b, g: add_mul_act._backward(x, y, b, 0.5, activation, g)},
              lambda x, y, b, g: x + 0.5 * y + b, streams=5)


def _add_mul_relu_bits_backward_op(rows, cols, dtype):
    """add_mul_act's relu backward in eager calls: from the slope's bits the forward stored."""
    def inputs(x):
        y, b = torch.randn_like(x), torch.randn(cols, device=x.device, dtype=dtype)
        return x, add_mul_act._forward(x, y, b, 0.5, "relu", bits=True)[1], torch.randn_like(x)
    return Op(f"add_mul_act relu bits backward {rows}x{cols}", rows, cols, dtype, inputs,
              {"bwd": lambda x, bits, g: add_mul_act._bits_backward(bits, x, 0.5, g, True)},
              lambda x, bits, g: torch.relu(x), streams=3)


def _act_grad_op(activation, rows, cols, dtype):
    """linear_act's grad_z pass (the saved z and the gradient in, grad_z and grad_bias's partial rows out)."""
    return Op(f"linear_act {activation} grad_z {rows}x{cols}", rows, cols, dtype, lambda z: (z, torch.randn_like(z)),
              {"bwd": lambda z, g: linear_act._act_grad(z, g, activation)}, lambda z, g: z * g, streams=3)


def _dropout_norm_forward_op(rows, cols, dtype):
    """dropout-add-LayerNorm's forward (p = 0.1, the prenorm sum not stored: the benchmark's
    forward; training stores it, which the harness's forward+backward benchmark times); eager and
    compile time the composite. fp32 also times the production tile with fp32 arithmetic
    (``diag_fp32``: what the fp64 arithmetic of fp32 rows costs there; a diagnostic)."""
    dropout = norm.Dropout.of(0.1, 1234)

    def forward(x, res, bias, w, b):
        return norm.forward(x, w, b, eps=1e-5, rms=False, residual=res, xbias=bias, dropout=dropout)

    return Op(f"dropout_add_layer_norm forward {rows}x{cols}", rows, cols, dtype, _dropout_add_ln_inputs,
              {"fwd": forward}, _dropout_add_ln_reference, streams=3)


def _fp32_arithmetic(kernel: Callable[[], object]) -> object:
    """Run ``kernel`` with the norms' fp32 rows computed in fp32 (a diagnostic variant)."""
    with tiling.TUNING.replaced(wide_fp32=False):
        return kernel()


_NORM_SHAPES = ((8192, 4096, torch.bfloat16), (16384, 1024, torch.float16), (65536, 256, torch.bfloat16),
                (2048, 8192, torch.bfloat16), (1024, 16384, torch.bfloat16))

# The norms' shared limits are timed as given: their measured per-shape exceptions off.
_NORM_FORWARD = {"sets": ("forward",), "fixed": {"overrides": False}}
_NORM_BACKWARD = {"sets": ("backward",), "fixed": {"overrides": False}}

TARGETS = {
    "softmax": Target(
        softmax.TUNING, "forward",
        # max_block 32768: a 32K-element row held in registers instead of two passes
        {**_ROWS_GRID, "max_block": (16384, 32768)},
        tuple(_softmax_op(*s) for s in ((8192, 1024, torch.float16), (4096, 8192, torch.bfloat16),
                                         (32768, 128, torch.float32), (4096, 32768, torch.float32),
                                         (16384, 4096, torch.float16))),
        sets=("forward", "backward")),
    "layer_norm": Target(tiling.TUNING, "forward", _ROWS_GRID, tuple(_norm_op("layer_norm", *s) for s in _NORM_SHAPES),
                         **_NORM_FORWARD),
    "rms_norm": Target(tiling.TUNING, "forward", _ROWS_GRID, tuple(_norm_op("rms_norm", *s) for s in _NORM_SHAPES),
                       **_NORM_FORWARD),
    # both norms' forward on the short rows where compile stays ahead, once the row offsets stopped
    # dividing (results/2026-11-24-h100-5): how many rows a program takes, and in how many threads
    "norm_forward_short": Target(
        tiling.TUNING, "forward",
        {"target_elems": (512, 1024, 2048, 4096), "thread_bytes": (16, 32, 64)},
        tuple(_norm_op(kind, *s) for kind in ("layer_norm", "rms_norm")
              for s in ((65536, 256, torch.bfloat16), (32768, 512, torch.bfloat16), (16384, 1024, torch.bfloat16))),
        **_NORM_FORWARD),
    # LayerNorm's forward on rows of 16384: one block in registers, or streamed twice in blocks
    "layer_norm_wide": Target(
        tiling.TUNING, "forward",
        {"max_block": (8192, 16384), "split_block": (2048, 4096, 8192), "thread_bytes": (16, 32, 64)},
        tuple(_norm_op("layer_norm", *s) for s in ((1024, 16384, torch.bfloat16), (2048, 16384, torch.float16))),
        **_NORM_FORWARD),
    # the backward of both norms for rows within one block (wider rows: norm_backward_columns); the
    # norm shapes and the short-row ones that trail compile
    "norm_backward": Target(
        tiling.TUNING, "backward",
        {"target_elems": (1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64), "max_rows": (4, 16)},
        tuple(_norm_backward_op(kind, *s) for kind in ("layer_norm", "rms_norm")
              for s in (*_NORM_SHAPES, (32768, 512, torch.bfloat16)) if s[1] <= tiling._GPU_BWD.max_block),
        **_NORM_BACKWARD),
    # dropout-add-LayerNorm's backward (the same kernel with DROPOUT): issue 4's fp32 case and bf16
    "dropout_norm_backward": Target(
        tiling.TUNING, "backward",
        {"target_elems": (1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64, 128), "max_rows": (4, 16)},
        tuple(_dropout_norm_backward_op(*s) for s in ((8192, 1024, torch.float32), (16384, 1024, torch.bfloat16),
                                                      (8192, 4096, torch.bfloat16), (65536, 256, torch.bfloat16))),
        **_NORM_BACKWARD),
    # the norms' backward grid for rows within one block: programs per SM (each walks its group of
    # row tiles and writes one partial row) and whether it loads its next tile ahead, both forced,
    # at the production tiles (the tile overrides stay on; the recorded tile is the shared limits')
    "norm_backward_groups": Target(
        tiling.TUNING, "backward",
        {"programs_per_sm": (2, 4), "prefetch": (False, True)},
        (*(_dropout_norm_backward_op(*s) for s in ((8192, 1024, torch.float32), (16384, 1024, torch.bfloat16))),
         *(_norm_backward_op("layer_norm", *s) for s in ((16384, 1024, torch.float16), (65536, 256, torch.bfloat16),
                                                         (32768, 512, torch.bfloat16), (8192, 4096, torch.bfloat16))),
         *(_norm_backward_op("rms_norm", *s) for s in ((16384, 1024, torch.float16), (65536, 256, torch.bfloat16),
                                                       (32768, 512, torch.bfloat16)))),
        knobs={"programs_per_sm": "backward_programs_per_sm", "prefetch": "prefetch"}),
    # rows wider than one block (the row-sums kernel, then the column kernel), for the three ops:
    # the column block, the rows a tile and the threads, and programs per SM
    "norm_backward_columns": Target(
        tiling.TUNING, "backward_columns",
        {"split_block": (1024, 2048), "target_elems": (1024, 2048), "thread_bytes": (32, 64),
         "programs_per_sm": (4, 8, 16)},
        (_norm_backward_op("layer_norm", 1024, 16384, torch.bfloat16),
         _norm_backward_op("rms_norm", 1024, 16384, torch.bfloat16),
         _dropout_norm_backward_op(1024, 16384, torch.bfloat16)),
        sets=("backward_columns",), knobs={"programs_per_sm": "backward_programs_per_sm"}),
    # rows of 2048 to 8192, within one block, in column blocks instead (the column kernels' tile).
    # The JSON records each candidate's tile from _GPU_BWD_COLUMNS as given, a single block at these
    # widths: a columns_from 2048 candidate launches that limits' split_block columns instead.
    "norm_backward_columns_from": Target(
        tiling.TUNING, "backward_columns",
        {"columns_from": (None, 2048), "programs_per_sm": (None, 4)},
        tuple(_norm_backward_op(kind, *s) for kind in ("layer_norm", "rms_norm")
              for s in ((2048, 8192, torch.bfloat16), (4096, 4096, torch.bfloat16), (8192, 2048, torch.bfloat16))),
        knobs={"columns_from": "columns_from", "programs_per_sm": "backward_programs_per_sm"}),
    # smaller backward tiles with the next tile loaded ahead (it holds two tiles' inputs), at the shapes
    # where the backward trails compile and issue 4's fp32 dropout case
    "norm_backward_prefetch": Target(
        tiling.TUNING, "backward",
        {"target_elems": (512, 1024, 2048, 4096), "thread_bytes": (16, 32, 64), "prefetch": (True,)},
        (_dropout_norm_backward_op(8192, 1024, torch.float32),
         *(_norm_backward_op("layer_norm", *s) for s in ((16384, 1024, torch.float16), (65536, 256, torch.bfloat16))),
         *(_norm_backward_op("rms_norm", *s) for s in ((16384, 1024, torch.float16), (32768, 512, torch.bfloat16)))),
        **_NORM_BACKWARD, knobs={"prefetch": "prefetch"}),
    # dropout-add-LayerNorm's forward: issue 4's fp32 case and the bf16 shapes of the backward sweep
    "dropout_norm_forward": Target(
        tiling.TUNING, "dropout_forward",
        {"target_elems": (1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64, 128), "max_rows": (4, 16)},
        tuple(_dropout_norm_forward_op(*s) for s in ((8192, 1024, torch.float32), (16384, 1024, torch.bfloat16),
                                                     (8192, 4096, torch.bfloat16), (65536, 256, torch.bfloat16),
                                                     (32768, 512, torch.bfloat16))),
        sets=("dropout_forward",)),
    # the activation kernels' backward with grad_bias (bias_gelu, add_mul_act, linear_act's grad_z
    # pass): programs per SM, each walking its group of row tiles and writing one partial row
    "elementwise_backward": Target(
        _rows.ELEMENTWISE, "backward",
        {"programs_per_sm": (None, 2, 3, 4, 8, 16)},  # None: as many as an SM holds (production)
        (_bias_gelu_backward_op("tanh", 8192, 16384, torch.bfloat16),
         _bias_gelu_backward_op("tanh", 16384, 4096, torch.float16),
         _bias_gelu_backward_op("none", 16384, 3072, torch.float16),
         _bias_gelu_backward_op("none", 4096, 16384, torch.float32),
         _add_mul_act_backward_op("gelu_tanh", 8192, 16384, torch.bfloat16),
         _add_mul_act_backward_op("relu", 65536, 512, torch.float32),
         _add_mul_relu_bits_backward_op(65536, 512, torch.float32),
         _act_grad_op("gelu", 16384, 3072, torch.float16)),
        knobs={"programs_per_sm": "backward_programs_per_sm"}),
    # the backward's tile itself (shared by every dtype): exact bias-GELU's fp32 backward, whose
    # arithmetic is fp32 (eager's form), and a 16-bit shape beside it
    "elementwise_backward_tile": Target(
        _rows.ELEMENTWISE, "backward",
        {"target_elems": (1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64)},
        (_bias_gelu_backward_op("none", 4096, 16384, torch.float32),
         _bias_gelu_backward_op("none", 16384, 3072, torch.float16)),
        sets=("backward",)),
    # the 16-bit forward tiling: bias-GELU both forms and SwiGLU
    "elementwise": Target(
        _rows.ELEMENTWISE, "forward",
        {"max_block": (1024, 2048, 4096), "target_elems": (1024, 2048, 4096, 8192), "thread_bytes": (16, 32, 64)},
        (_bias_gelu_op("tanh", 8192, 16384, torch.bfloat16), _bias_gelu_op("none", 8192, 16384, torch.bfloat16),
         _bias_gelu_op("none", 16384, 3072, torch.float16), _glu_op("silu", 8192, 11008, torch.bfloat16)),
        sets=("forward",)),
    # the fp32 forward tiling (activations in fp64), and the add_mul_act fp32 peer shapes (relu,
    # only the sum in fp64: 96-101% of copy bandwidth, must not regress)
    "elementwise_fp32": Target(
        _rows.ELEMENTWISE, "fp32_forward",
        {"target_elems": (512, 1024, 2048, 4096), "thread_bytes": (8, 16, 32, 64), "max_warps": (8, 16)},
        (_bias_gelu_op("tanh", 4096, 16384, torch.float32),
         _glu_op("gelu", 4096, 11008, torch.float32),
         _add_mul_relu_op(65536, 512, torch.float32), _add_mul_relu_op(262144, 1024, torch.float32)),
        sets=("fp32_forward",)),
    # the fp32 forwards whose arithmetic is fp32: exact bias-GELU and SwiGLU (eager's own fp32 values)
    "elementwise_fp32_math": Target(
        _rows.ELEMENTWISE, "fp32_math_forward",
        {"max_block": (1024, 2048), "target_elems": (1024, 2048, 4096), "thread_bytes": (16, 32, 64)},
        (_bias_gelu_op("none", 4096, 16384, torch.float32), _bias_gelu_op("none", 16384, 3072, torch.float32),
         _glu_op("silu", 4096, 11008, torch.float32)),
        sets=("fp32_math_forward",)),
}


class Candidate(NamedTuple):
    limits: _rows.TileLimits
    knobs: dict[str, object]  # the values of the target's knobs (Target.knobs) for this candidate


def _candidates(target: Target, cols: int, itemsize: int) -> dict[str, Candidate]:
    """Distinct launches of the target's grid for this row length, labelled by their values.

    ``max_block`` also sets ``split_block``: a split row is cut into blocks of the same width.
    """
    base = target.get()
    seen, out = set(), {}
    for values in itertools.product(*target.grid.values()):
        fields = dict(zip(target.grid, values))
        knobs = {name: fields.pop(name) for name in target.knobs}
        if "max_block" in fields and base.split_block == base.max_block:
            fields["split_block"] = fields["max_block"]
        limits = base._replace(**fields)
        launch = (_rows.row_tile(cols, itemsize, limits), *knobs.values())
        if launch in seen:
            continue
        seen.add(launch)
        out["_".join(f"{k}{v}" for k, v in zip(target.grid, values))] = Candidate(limits, knobs)
    return out


def _softmax_numerics(x: torch.Tensor) -> dict[str, Callable[[], torch.Tensor]]:
    """fp32 softmax only: the production launch with dearer numerics (diagnostics, not choices):
    fp64 row sums, and fp64 row sums with the accurate exp and reciprocal."""
    if x.dtype != torch.float32:
        return {}
    layout = _rows.row_layout(x)
    grid, production = softmax._forward_launch(layout, x.dtype)
    variants = {"fp64sums": {**production, "ACC": tl.float64},
                "fp64sums_accurate_exp": {**production, "ACC": tl.float64, "PRECISE": True}}

    def launch(config):
        y = torch.empty_like(x)
        softmax._softmax_fwd_kernel[grid](
            layout.tensor, y, layout.rows, layout.n, *layout.kernel_args(), **config)
        return y

    return {name: (lambda config=config: launch(config)) for name, config in variants.items()}


def _kernel_call(target: Target, candidate: Candidate, kernel: Callable, args: list[tuple]):
    def call(i):
        with target.replaced(candidate):
            return kernel(*args[i])
    return call


def _fp32_diagnostic(target: Target, op: Op, base: _rows.TileLimits, args: list[tuple]) -> Callable[[int], object]:
    """The op's first pass with fp32 arithmetic, at the production launch (``base`` and the knobs'
    measured values): every timed call passes its own launch in, so the diagnostic passes its own too."""
    production = Candidate(base, {name: target.tuning.defaults[entry] for name, entry in target.knobs.items()})
    first = next(iter(op.passes.values()))
    return _kernel_call(target, production, lambda *a: _fp32_arithmetic(lambda: first(*a)), args)


def tune_op(target: Target, op: Op, plan: TimingPlan) -> dict:
    """Time every distinct candidate of ``target``'s grid on ``op``, with the peers beside them."""
    device = torch.device("cuda", 0)
    torch._dynamo.reset()
    base = target.get()
    args = [op.inputs(torch.randn(op.rows, op.cols, device=device, dtype=op.dtype)) for _ in range(plan.input_sets)]
    outs = [torch.empty_like(a[0]) for a in args]
    compiled = torch.compile(op.reference, dynamic=False)
    calls = {"copy_fwd": lambda i: outs[i].copy_(args[i][0]),
             "eager_fwd": lambda i: op.reference(*args[i]),
             "compile_fwd": lambda i: compiled(*args[i])}
    candidates = _candidates(target, op.cols, op.dtype.itemsize)
    for label, candidate in candidates.items():
        for pass_name, kernel in op.passes.items():
            calls[f"{pass_name}_{label}"] = _kernel_call(target, candidate, kernel, args)
    diagnostics = [_softmax_numerics(a[0]) for a in args] if op.label.startswith("softmax") else []
    for name in diagnostics[0] if diagnostics else ():
        calls[f"diag_{name}"] = lambda i, name=name: diagnostics[i][name]()
    if op.label.startswith("dropout_add_layer_norm forward") and op.dtype == torch.float32:
        calls["diag_fp32"] = _fp32_diagnostic(target, op, base, args)
    samples = time_interleaved(calls, device, plan)
    medians = {k: median(v) for k, v in samples.items()}
    entry = {"op": op.label, "dtype": str(op.dtype), "bytes_fwd": op.streams * op.rows * op.cols * op.dtype.itemsize,
             "production": list(_rows.row_tile(op.cols, op.dtype.itemsize, base)),
             "candidates": {k: [*_rows.row_tile(op.cols, op.dtype.itemsize, v.limits), *v.knobs.values()]
                            for k, v in candidates.items()},
             "median_ms": medians}
    first = next(iter(op.passes))  # the pass the GB/s figure is for (its bytes: op.streams rows)
    best = min((k for k in medians if k.startswith(f"{first}_")), key=medians.get)
    print(f"{op.label} {op.dtype}: copy {medians['copy_fwd']:.4f} eager forward {medians['eager_fwd']:.4f} "
          f"compile forward {medians['compile_fwd']:.4f} best {first} {best} {medians[best]:.4f} ms "
          f"({entry['bytes_fwd'] / medians[best] / 1e6:.0f} GB/s), the target's limits' tile {entry['production']}")
    for k, v in sorted(medians.items()):
        print(f"   {k:44s} {v:.4f} {entry['candidates'].get(k.split('_', 1)[1], '')}")
    return entry


def main(path: str, names: list[str]) -> None:
    plan = TimingPlan(repetitions=30)
    results = []
    for name in names or list(TARGETS):
        for op in TARGETS[name].ops:
            results.append(tune_op(TARGETS[name], op, plan))
            with open(path, "w") as handle:  # after every op: a run cut off keeps what it measured
                json.dump({"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
                           "triton": triton.__version__, "results": results}, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])
