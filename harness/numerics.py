"""The equivalence rule: an error budget calibrated on eager PyTorch, not a fixed tolerance.

For one output we have three tensors: the kernel's, eager's (the reference run in the kernel's
dtype) and the oracle's (the reference on the same inputs upcast to float64). Eager's own error
against the oracle defines an envelope per element::

    envelope_i = atol_row(i) + eps * |oracle_i|   (+ a conditioning term, below)
    atol_row   = max(tiny, max over the row and over the calibration samples of
                           (|eager_j - oracle_j| - eps * |oracle_j|))

``eps`` is the output dtype's machine epsilon (one ulp at 1.0) and ``tiny`` its smallest normal
number, so the envelope never drops below about one ulp of the output: the floor that lets a kernel
round differently from eager (fused multiply-adds, another summation order, the interpreter's
truncating bf16 stores). ``atol_row`` holds whatever error eager makes beyond one relative ulp
(cancellation, long sums). Two things keep it from being an accident of one input:

* it is the maximum over the element's row (the last dimension), because rounding errors of a
  reduction scale with the row's magnitudes, not with the one result that happened to be small;
* it is the maximum over a few calibration samples: eager and the oracle run again on inputs moved
  by an ulp or two, so an element where eager rounded luckily to the exact answer does not shrink
  the budget to nothing (a sum of four numbers can be exact in eager and off by an ulp of its
  terms in a kernel that adds them in another order).

A third term covers ill-conditioned elements, where the function amplifies the last-ulp rounding
of an intermediate (gelu's and sigmoid's tails: the result depends on exp of a rounded argument).
There eager's error is a random draw per element, and three draws (the case and two samples) are
too few for the envelope of one element; nor does the row's absolute maximum help, because such
a row's magnitudes span many decades. So eager's error is also measured in units of each element's
*sensitivity*, the oracle's change between the case and a calibration sample (inputs moved by up
to two ulps), pooled over the row and capped at 1::

    envelope_i += min(1, max over the row of excess_j / sensitivity_j) * sensitivity_i

It is zero in a row where eager is exact (a kernel with an imprecise exp on shifted logits still
fails), and at most the effect of a two-ulp input move where eager itself makes errors of that
kind. (Found on the H100: fp32 gelu_tanh gradients in the tail, kernel 1.8e-9 worst absolute error
against eager's 3.6e-9, yet scored 9 at one element where eager happened to round well.)

A spec may also give each output's *term magnitudes*, the sum of |terms| an element is summed
from (attention's output: ``softmax(qk) @ |v|``). Where the sum cancels, the result is far smaller
than its terms, and two correct summation orders (or roundings of the terms, such as a flash
kernel's probabilities rounded against a running maximum instead of the final one) differ by
ulps of the terms, not of the result; eager's error in such a row can be small by its own order's
luck. There the envelope is at least one ulp of the term magnitude::

    envelope_i = max(envelope_i, eps_terms * terms_i)

``eps_terms`` is the output dtype's eps, or the spec's ``term_precision`` where that is finer: a
16-bit LayerNorm forms ``w * (x - mean) * rstd + b`` in fp32 from exact inputs, so its terms carry
fp32 ulps, and an envelope of bf16 ulps of the terms would pass a kernel that rounds the mean to
bf16. Attention's ``P @ V`` takes P rounded to the 16-bit dtype, so its terms carry that dtype's.

A spec that gives no term magnitudes gets them derived (``harness.bounds``): the reference runs
once more on values that carry a first-order running error analysis through eager's dtypes, and
the error a cancelling sum amplified is the floor (``Compared.derived``)::

    envelope_i = max(envelope_i, derived_i)

It is 0 where nothing cancels, and about an ulp of the terms where a sum does, forward and through
autograd: the hooks' rule, with no formula to write.

A gradient may also give its *rounded terms*: the root-sum-square of the terms each element sums
after rounding each of them to the dtype (attention's dS, rounded before dS K). Those roundings are
independent and add up like a random walk, so the error they make is about a unit roundoff of the
root-sum-square (sqrt(n) smaller than an ulp of the sum of |terms|, which would be a loose worst
case), and eager makes it too, at other elements::

    envelope_i = max(envelope_i, (eps / 2) * rss_i)

It matters where eager's own roundings happened to cancel along a whole row: the H100 nightly
found flash attention's bf16 dQ at 4.59 times an envelope of one eps (head_dim 16, so a row is 16
elements; eager within an eps on all of them, the kernel 9 bf16 ulps off one). The spec's multiple
then allows about 4 sqrt(3) standard deviations of that rounding noise.

Two more sources of legitimate difference are measured or declared, never granted as a multiple:

* **Flushed subnormals.** GPU kernels flush fp32 subnormals to zero (Triton's fast exp and
  division are the ``.ftz`` forms); eager does not. A GLU whose activation underflows to a
  subnormal gives 0 in the kernel where eager gives 2e-37 (an H200 nightly case). The checks run
  the reference once more in fp32 with subnormals flushed at every op
  (``harness.eager.subnormals_flushed``), and each element's envelope is at least that run's
  error there: a flush is judged by the reference itself, element by element (a flush in a row
  does not loosen the row's other elements).
* **Approximate functions.** A spec may declare that its kernel uses the GPU's fast ``exp`` or
  ``sigmoid`` (``Numerics.approximate_math``, with the function's argument for each forward
  output element). ``harness.approximate`` turns the argument into the function's documented error bound
  (CUDA's math API: ``__expf`` errs by at most ``2 + floor(|1.173 x|)`` ulps), and an element
  within that bound passes whatever the budget; elsewhere the budget holds as before. A kernel
  that declares nothing is held to eager's error, so a fast exp fails in the tails. A gradient
  gets the same bounds carried from the forward through autograd of the reference
  (``harness.bounds.approximate_allowances``): softmax's backward reads the y its forward made.

The kernel's **numerics score** is ``max_i |kernel_i - oracle_i| / envelope_i``: its worst error in
units of eager's. It passes when the score is at most the spec's declared multiple. NaN and +-inf
must sit exactly where eager has them, with three exceptions, all where the oracle is finite:

* eager is not finite (an intermediate overflowed) but the oracle's value rounds to a finite value
  of the dtype: a finite kernel value is judged against the oracle instead;
* the oracle's value itself overflows the dtype: a kernel's infinity of the oracle's sign is the
  right answer (a seeded CPU run: fp16 LayerNorm backward on a zero-variance row, oracle 1.14e6,
  kernel +inf, eager NaN);
* eager is not finite, nor the rounding of the oracle's value, and neither is the kernel, of
  whatever kind: eager's error there is unbounded, so the budget (a multiple of it) holds no
  kernel to a particular NaN or infinity.
  The H100 nightly found why this must be so: fp16 dropout-add-LayerNorm, eps 1e-12, a row whose
  sum ``s`` rounds to a constant in fp16 (its spread is below an ulp), so the op as defined in
  fp16 has rstd 1e6 and gradients past fp16's range, while the exact oracle, which never rounds
  ``s``, has -17532 and 1.69e6. Eager gave NaN (inf - inf), the kernel -inf; neither can be
  right in fp16, and which non-finite value comes out depends only on the order of the sums.

A kernel that is non-finite where eager is finite still fails. Integer and bool outputs must be
equal.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch


@dataclass
class Comparison:
    """The outcome of comparing one output (or one gradient) against eager and the oracle."""

    name: str
    passed: bool
    score: float
    multiple: float
    max_abs_error: float = 0.0
    max_rel_error: float = 0.0
    eager_max_abs_error: float = 0.0
    atol: float = 0.0
    worst_index: tuple[int, ...] | None = None
    kernel_value: float | None = None
    eager_value: float | None = None
    oracle_value: float | None = None
    problem: str = ""
    # the envelope at the worst element, and which of its parts set it (harness.numerics' module
    # docstring: eager's error, the spec's terms, the flushed reference, a derived floor, ...)
    envelope: float | None = None
    envelope_source: str = ""

    def summary(self) -> str:
        if self.problem:
            return f"{self.name}: {self.problem}"
        at = ""
        if self.worst_index is not None:
            at = (
                f"; worst at index {self.worst_index}: kernel={self.kernel_value:.6g} "
                f"eager={self.eager_value:.6g} oracle={self.oracle_value:.6g}"
            )
            if self.envelope is not None:
                at += f", envelope there {self.envelope:.3g} (set by {self.envelope_source})"
        verdict = "within" if self.passed else "OVER"
        return (
            f"{self.name}: numerics score {self.score:.3g} ({verdict} budget {self.multiple:g}); "
            f"max abs error {self.max_abs_error:.3g} (eager {self.eager_max_abs_error:.3g}), "
            f"max rel error {self.max_rel_error:.3g}, envelope atol of that row {self.atol:.3g}{at}"
        )

    def to_json(self) -> dict:
        return {
            "name": self.name,
            "passed": self.passed,
            "score": finite_or_none(self.score),
            "multiple": self.multiple,
            "max_abs_error": finite_or_none(self.max_abs_error),
            "max_rel_error": finite_or_none(self.max_rel_error),
            "eager_max_abs_error": finite_or_none(self.eager_max_abs_error),
            "worst_index": list(self.worst_index) if self.worst_index is not None else None,
            "envelope": finite_or_none(self.envelope),
            "envelope_source": self.envelope_source or None,
            "problem": self.problem,
        }


def finite_or_none(x: float | None) -> float | None:
    """JSON has no NaN or infinity: those become null."""
    return x if x is not None and math.isfinite(x) else None


def _index(flat: int, shape: torch.Size) -> tuple[int, ...]:
    out = []
    for size in reversed(shape):
        out.append(flat % size if size else 0)
        flat //= size if size else 1
    return tuple(reversed(out))


def _first_true(mask: torch.Tensor) -> tuple[int, ...]:
    return _index(int(torch.nonzero(mask.flatten())[0]), mask.shape)


def _structure_problem(kernel: torch.Tensor, eager: torch.Tensor) -> str:
    if not isinstance(kernel, torch.Tensor):
        return f"kernel returned {type(kernel).__name__}, expected a tensor"
    if kernel.shape != eager.shape:
        return f"kernel output has shape {tuple(kernel.shape)}, eager's has {tuple(eager.shape)}"
    if kernel.dtype != eager.dtype:
        return f"kernel output has dtype {kernel.dtype}, eager's has {eager.dtype}"
    if kernel.device != eager.device:
        return f"kernel output is on {kernel.device}, eager's on {eager.device}"
    return ""


def _row_max(values: torch.Tensor) -> torch.Tensor:
    """Each element replaced by the maximum of its row (last dimension)."""
    if values.ndim == 0:
        return values
    rows = values.reshape(-1, values.shape[-1]) if values.shape[-1] else values.reshape(-1, 1)
    return rows.amax(dim=1, keepdim=True).expand_as(rows).reshape(values.shape)


def eager_excess(eager: torch.Tensor, oracle: torch.Tensor, eps: float) -> torch.Tensor:
    """Eager's error beyond one relative ulp, per element (0 where anything is not finite)."""
    e = eager.detach().to(torch.float64)
    o = oracle.detach().to(device=e.device, dtype=torch.float64)
    finite = e.isfinite() & o.isfinite()
    excess = ((e - o).abs() - eps * o.abs()).clamp_min(0)
    return torch.where(finite, excess, torch.zeros_like(excess))


# The judgement allocates about fifteen float64 temporaries the size of its output, so a large output
# is judged a block of whole rows (the envelope's unit: _row_max) at a time. At once, dlrm_embedding's
# 26 M x 16 fp32 weight gradient (416 M elements) ran an 80 GB H100 out of memory in its backward
# re-check (benchmarks/results/2026-11-24-h100-12, call 6).
_BLOCK_ELEMENTS = 1 << 24


@dataclass(frozen=True)
class Budget:
    """A spec's numerics policy as it applies to one comparison (``harness.Numerics.budget``): the
    error multiple the score may reach, and ``term_precision``, the dtype whose ulp the terms carry
    where finer than the output's (sums a kernel forms in fp32 from exact inputs)."""

    multiple: float
    term_precision: torch.dtype | None = None


@dataclass(frozen=True)
class Compared:
    """The tensors one output (or gradient) ``name`` is judged on.

    ``kernel``, ``eager`` and ``oracle`` are the kernel's result, the reference's in the kernel's
    dtype and in fp64. ``calibration`` holds extra (eager, oracle) pairs computed on ulp-perturbed
    inputs. What sizes the envelope beyond eager's error, each optional: ``terms``, the sum of
    |terms| of each element (the envelope is at least an ulp of it: of the output's dtype, or of
    the budget's ``term_precision`` where that is finer); ``rounded_terms``, the root-sum-square of
    the terms of each element that are rounded to the output's dtype before they are summed (at
    least a unit roundoff of it); ``flushed``, the reference run in fp32 with subnormals flushed
    (its error counts as eager's, per row); ``allowance``, what the spec's approximate functions
    may err by, per element (an element within it passes whatever the budget); ``derived``, the
    error the reference's own evaluation inherits beyond its last rounding (``harness.bounds``; the
    envelope is at least that).
    """

    name: str
    kernel: torch.Tensor
    eager: torch.Tensor
    oracle: torch.Tensor
    calibration: Sequence[tuple[torch.Tensor, torch.Tensor]] = ()
    terms: torch.Tensor | None = None
    rounded_terms: torch.Tensor | None = None
    flushed: torch.Tensor | None = None
    allowance: torch.Tensor | None = None
    derived: torch.Tensor | None = None

    def as_rows(self) -> Compared:
        """Every tensor as a matrix of the kernel's rows (the last dimension), broadcast to its
        shape: made once (a copy where the layout needs one), then judged block by block."""
        n_cols = self.kernel.shape[-1]

        def rows(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t.expand_as(self.kernel).reshape(-1, n_cols)

        return Compared(self.name, *(rows(t) for t in (self.kernel, self.eager, self.oracle)),
                        [(rows(a), rows(b)) for a, b in self.calibration],
                        *(rows(t) for t in (self.terms, self.rounded_terms, self.flushed, self.allowance, self.derived)))

    def block(self, rows: slice) -> Compared:
        """These rows of every tensor (of a ``as_rows`` view)."""
        def part(t: torch.Tensor | None) -> torch.Tensor | None:
            return None if t is None else t[rows]

        return Compared(self.name, *(part(t) for t in (self.kernel, self.eager, self.oracle)),
                        [(a[rows], b[rows]) for a, b in self.calibration],
                        *(part(t) for t in (self.terms, self.rounded_terms, self.flushed, self.allowance, self.derived)))


def compare(budget: Budget, tensors: Compared) -> Comparison:
    """Judge ``tensors.kernel`` against the oracle under the envelope of eager's error (module
    docstring), within ``budget``.

    Outputs of two or more dimensions and more than ``_BLOCK_ELEMENTS`` elements are judged in
    blocks of whole rows, with the verdict, score and errors of judging at once (indices are the
    whole output's; of elements that tie for the worst, another may be named, and a NaN/inf
    pattern that differs from eager's is reported from the first block that has one).
    """
    name, kernel, eager, multiple = tensors.name, tensors.kernel, tensors.eager, budget.multiple
    problem = _structure_problem(kernel, eager)
    if problem:
        return Comparison(name, False, math.inf, multiple, problem=problem)
    if not (kernel.is_floating_point() or kernel.is_complex()):
        unequal = kernel != eager
        if bool(unequal.any()):
            i = _first_true(unequal)
            return Comparison(
                name, False, math.inf, multiple,
                problem=f"{int(unequal.sum())} element(s) differ from eager (exact match required); "
                f"first at index {i}: kernel={kernel[i].item()} eager={eager[i].item()}",
            )
        return Comparison(name, True, 0.0, multiple)
    # A calibration sample of another shape (an input that could not be perturbed alike) is ignored.
    tensors = dataclasses.replace(tensors, calibration=[(a, b) for a, b in tensors.calibration if a.shape == kernel.shape])
    n_cols = kernel.shape[-1] if kernel.ndim else 1
    rows_per_block = max(1, _BLOCK_ELEMENTS // max(n_cols, 1))
    n_rows = kernel.numel() // n_cols if n_cols else 0
    if kernel.ndim < 2 or n_rows <= rows_per_block:
        return _judge(budget, tensors)
    matrices = tensors.as_rows()
    parts = []
    for start in range(0, n_rows, rows_per_block):
        part = _judge(budget, matrices.block(slice(start, start + rows_per_block)),
                      functools.partial(_locate, shape=kernel.shape, first_row=start),
                      f" of rows {start} to {min(start + rows_per_block, n_rows) - 1}")
        if part.problem:  # the first block with a NaN/inf pattern that differs
            return part
        parts.append(part)
    # The first block with the worst score (a block with no finite element scores 0 with no index).
    worst = max(parts, key=lambda p: (p.score, p.worst_index is not None))
    return dataclasses.replace(
        worst,
        max_abs_error=max(p.max_abs_error for p in parts),
        max_rel_error=max(p.max_rel_error for p in parts),
        eager_max_abs_error=max(p.eager_max_abs_error for p in parts),
    )


def _locate(i: tuple[int, ...], shape: torch.Size, first_row: int) -> tuple[int, ...]:
    """The index in a tensor of ``shape`` of element ``i`` of its block of rows from ``first_row``."""
    return _index((first_row + i[0]) * shape[-1] + i[1], shape)


def _judge(budget: Budget, tensors: Compared, locate: Callable[[tuple[int, ...]], tuple[int, ...]] = lambda i: i,
           scope: str = "") -> Comparison:
    """``compare`` of floating-point outputs, all at once; ``locate`` maps an index of these tensors
    to the whole output's, and ``scope`` says which part of it they are."""
    name, kernel, eager, oracle, calibration = tensors.name, tensors.kernel, tensors.eager, tensors.oracle, tensors.calibration
    terms, rounded_terms, flushed, allowance = tensors.terms, tensors.rounded_terms, tensors.flushed, tensors.allowance
    derived = tensors.derived
    multiple, term_precision = budget.multiple, budget.term_precision
    k = kernel.detach().to(torch.float64)
    e = eager.detach().to(torch.float64)
    o = oracle.detach().to(device=k.device, dtype=torch.float64)
    pattern_mismatch = (k.isnan() != e.isnan()) | (k.isposinf() != e.isposinf()) | (k.isneginf() != e.isneginf())
    # Where eager overflowed in an intermediate but the true value fits the dtype, a finite kernel
    # is right and eager is not: judge those elements against the oracle instead.
    info = torch.finfo(kernel.dtype)
    # "Fits": rounds to a finite value of the dtype (up to max + half an ulp: fp16's -65513.8
    # rounds to -65504, found by the H100 nightly run on a DLRM gradient).
    fits = o.isfinite() & o.to(kernel.dtype).isfinite()
    # eager failed: not finite where the oracle is, and not the oracle's own rounding (an infinity
    # of the right sign, where the true value overflows the dtype, is eager being right)
    eager_failed = ~e.isfinite() & o.isfinite() & (e != o.to(kernel.dtype).to(torch.float64))
    eager_overflowed = eager_failed & fits & k.isfinite()
    # Where the true value itself overflows the dtype, the kernel's +-inf of the right sign is the
    # correctly rounded answer, whatever eager made of it (eager's NaN from inf - inf included).
    true_overflow = o.isfinite() & ~fits & k.isinf() & (k == o.to(kernel.dtype).to(torch.float64))
    # Where eager failed and the kernel is not finite either, eager's error is unbounded: no
    # particular NaN or infinity is owed (module docstring).
    both_failed = eager_failed & ~k.isfinite()
    pattern_mismatch &= ~(eager_overflowed | true_overflow | both_failed)
    if bool(pattern_mismatch.any()):
        i = _first_true(pattern_mismatch)
        return Comparison(
            name, False, math.inf, multiple, worst_index=locate(i),
            kernel_value=k[i].item(), eager_value=e[i].item(), oracle_value=o[i].item(),
            problem=f"NaN/inf pattern differs from eager at {int(pattern_mismatch.sum())} element(s){scope}; "
            f"first at index {locate(i)}: kernel={k[i].item()} eager={e[i].item()} oracle={o[i].item()}",
        )
    finite = k.isfinite() & o.isfinite() & (e.isfinite() | eager_overflowed)
    if not bool(finite.any()):
        return Comparison(name, True, 0.0, multiple)
    e = torch.where(eager_overflowed, o, e)  # no eager error to calibrate on there
    k, e, o = (torch.where(finite, t, torch.zeros_like(t)) for t in (k, e, o))
    magnitude = o.abs()
    eager_err = (e - o).abs()
    kernel_err = (k - o).abs()
    excess = eager_excess(e, o, info.eps)
    sensitivity = torch.zeros_like(excess)
    for sample_eager, sample_oracle in calibration:  # of the output's shape (compare)
        excess = torch.maximum(excess, eager_excess(sample_eager, sample_oracle, info.eps))
        moved = (sample_oracle.detach().to(device=o.device, dtype=torch.float64) - o).abs()
        sensitivity = torch.maximum(sensitivity, torch.where(moved.isfinite() & finite, moved, 0.0))
    atol_row = _row_max(excess).clamp_min(info.tiny)
    # Eager's error in units of the oracle's sensitivity to a last-ulp move of the inputs, pooled
    # over the row and capped at 1 (module docstring): nonzero only where eager itself shows
    # condition-sized errors, so a row where eager is exact gains nothing from it.
    conditioned = torch.where(sensitivity > 0, excess / sensitivity.clamp_min(info.tiny), 0.0)
    # The envelope's parts, each a floor it may not drop below, named for the report.
    parts = {"eager's error": atol_row + info.eps * magnitude + _row_max(conditioned).clamp_max(1.0) * sensitivity}

    def floor(t: torch.Tensor) -> torch.Tensor:
        t = t.detach().to(device=o.device, dtype=torch.float64).abs()
        return torch.where(finite & t.isfinite(), t, 0.0)

    if terms is not None:  # a sum that cancels: an ulp of its terms is what reordering it costs
        term_eps = min(info.eps, torch.finfo(term_precision).eps) if term_precision is not None else info.eps
        parts["the spec's term magnitudes"] = term_eps * floor(terms)
    if rounded_terms is not None:  # independent roundings of many terms: a random walk's size
        parts["the spec's rounded terms"] = (info.eps / 2) * floor(rounded_terms)
    if flushed is not None:  # what flushing subnormal intermediates does to this element
        parts["the flushed reference's error"] = floor(flushed.detach().to(device=o.device, dtype=torch.float64) - o)
    if derived is not None:  # what the reference's own evaluation loses to cancellation
        parts["the floor derived from the reference"] = floor(derived)
    if allowance is not None:  # within a declared approximate function's documented error
        parts["the approximate functions' allowance"] = floor(allowance) / multiple
    envelope = functools.reduce(torch.maximum, parts.values())
    ratio = kernel_err / envelope
    worst = int(ratio.flatten().argmax())
    i = _index(worst, ratio.shape)
    score = float(ratio.flatten()[worst])
    source = max(parts, key=lambda part: float(parts[part][i]))
    atol = float(atol_row[i]) if atol_row.ndim else float(atol_row)
    rel = torch.where(magnitude > 0, kernel_err / magnitude.clamp_min(info.tiny), torch.zeros_like(kernel_err))
    return Comparison(
        name=name,
        passed=score <= multiple,
        score=score,
        multiple=multiple,
        max_abs_error=float(kernel_err.max()),
        max_rel_error=float(rel.max()),
        eager_max_abs_error=float(eager_err.max()),
        atol=atol,
        worst_index=locate(i),
        kernel_value=float(k[i]),
        eager_value=float(e[i]),
        oracle_value=float(o[i]),
        envelope=float(envelope[i]),
        envelope_source=source,
    )
