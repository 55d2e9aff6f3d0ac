"""Checks for kernels that draw random numbers from a seed (dropout), declared by ``KernelSpec.random``.

A random kernel cannot be compared with its reference directly: the two draw different masks. So
the harness verifies it in two halves.

**Mask replay** (the ``forward``, ``backward`` and ``unwritten`` checks of a random spec). The
kernel is called once more with the spec's ``mask_scalars`` to obtain its keep-mask, and the
reference is then run with that mask (its ``reference_mask`` argument) in every role the check
gives it: eager, fp64 oracle, calibration. Outputs and gradients must then agree under the
harness's usual error budget. This pins down everything but the mask itself: which elements the
kernel keeps, the ``1/(1-p)`` scale of each kept element (exact per element, not statistical),
that dropped elements are zero, and that the backward regenerates the forward's mask (a
gradient through another mask misses the reference's at every differing element). It also ties
the returned mask to the one the kernel applied: a call without ``mask_scalars`` must match the
reference run with the mask of a call with them.

**The dropout check** (this module's ``check_dropout``) verifies the mask itself:

* *p = 0 is the deterministic op*: the mask keeps everything, the outputs do not depend on the
  seed (bitwise), and they match the reference called with p = 0 and no mask (the reference's own
  deterministic path) under the error budget;
* *a fixed seed reproduces*: two calls with the same seed give bitwise the same outputs and mask,
  and so does a call on contiguous copies of the inputs (the mask depends on the seed and each
  element's logical position, not on memory layout);
* *different seeds differ, and the mask has the right law*: masks drawn with ``SEEDS`` seeds are
  tested against the null hypothesis that every element is kept independently with probability
  1 - p (:func:`mask_statistics`).

**The statistical tests and their false-alarm rate.** Every test counts successes over trials that
are independent Bernoulli draws of a known probability under the null hypothesis, so each count
is exactly binomial and is judged by an exact two-sided binomial test (``scipy.stats.binomtest``):

* kept fraction: kept elements over all masks, probability 1 - p (this is also the statistical
  test of the scaling: with each kept element scaled by exactly 1/(1-p), as mask replay shows,
  the mean of ``keep / (1-p)`` is 1 exactly when the kept fraction is 1 - p);
* seeds: positions where the masks of two consecutive seeds differ, probability 2p(1-p) (a seed
  that is ignored gives 0 differences; one that only shifts the stream gives correlated masks);
* positions: for each shift d (1, 2, 4, ... and one step along each dimension), the pairs of
  elements (i, i + d) taken in disjoint pairs, and the pairs that agree, probability
  p^2 + (1-p)^2 (a stream reused across rows, blocks or programs gives too many agreements).

With m tests in a call, each runs at level ``alpha / m``; by the union bound (which needs no
independence between the tests) a correct kernel fails a dropout check example with probability
at most ``ALPHA`` = 1e-6. A CI run (8 examples per dtype) thus raises a false alarm with
probability below 3e-5, a nightly run (150 examples per dtype) below 5e-4. The power grows with
the number of elements n (over the SEEDS masks): with some ten to twenty tests per call the level
is 5e-8 to 1e-7, so a kept fraction is flagged once it is about 5.4 standard errors
sqrt(p(1-p)/n) off. At p = 0.3 that is 0.064 for CPU-sized cases (500 elements x 3 seeds: a
kernel keeping 76% instead of 70% can pass one such example, and is caught only on larger ones)
and 0.0014 at GPU sizes (1e6 elements x 3 seeds). A mask that ignores the seed or repeats itself
across rows is found once there are about a hundred elements (at p >= 0.1: no differences between
two seeds' masks has probability 0.82^n at p = 0.1).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from harness.case import Case
from harness.checks import CHECK_FUNCTIONS, CheckResult, Fn, _same_bits, as_outputs, check_forward, prepare
from harness.spec import TERM_HOOKS, KernelSpec

ALPHA = 1e-6  # false-alarm probability of one dropout-check example (union bound over its tests)
SEEDS = 3  # masks drawn per example: the case's seed and two more
REPLAYED = ("forward", "backward", "unwritten")  # checks that run the reference with the kernel's mask
_SEED_SPAN = 2**31  # other seeds are taken within [0, 2^31), valid for any kernel's seed range


# ---- the statistics ---------------------------------------------------------------------------


@dataclass(frozen=True)
class BinomialTest:
    """One count judged against Binomial(trials, probability) by an exact two-sided test."""

    name: str
    successes: int
    trials: int
    probability: float
    p_value: float

    def describe(self) -> str:
        expected = self.trials * self.probability
        return (
            f"{self.name}: {self.successes} of {self.trials} (expected {expected:.1f} at probability "
            f"{self.probability:.4g}), two-sided binomial p-value {self.p_value:.3g}"
        )


def binomial_p_value(successes: int, trials: int, probability: float) -> float:
    """Exact two-sided p-value of ``successes`` under Binomial(trials, probability)."""
    if probability <= 0.0:
        return 1.0 if successes == 0 else 0.0
    if probability >= 1.0:
        return 1.0 if successes == trials else 0.0
    from scipy.stats import binomtest  # a declared dependency; imported here, on first use

    return float(binomtest(successes, trials, probability).pvalue)


def _test(name: str, successes: torch.Tensor | int, trials: int, probability: float) -> BinomialTest:
    k = int(successes)
    return BinomialTest(name, k, trials, probability, binomial_p_value(k, trials, probability))


def shifts(shape: Sequence[int]) -> list[int]:
    """Offsets d (in the flattened, row-major mask) at which element pairs (i, i + d) are compared:
    powers of two (catch block- and warp-periodic streams) and one step along each dimension
    (catch streams repeated over rows, batches, ...)."""
    numel = math.prod(shape)
    found = set()
    d = 1
    while d < numel:
        found.add(d)
        d *= 2
    step = 1
    for size in reversed(tuple(shape)):
        if 0 < step < numel:
            found.add(step)
        step *= size
    return sorted(found)


def _disjoint_pairs(numel: int, d: int) -> torch.Tensor:
    """First indices i of pairs (i, i + d): i in the even blocks of length d, so no element is used
    twice and the pairs are independent under the null hypothesis."""
    i = torch.arange(numel)
    return i[((i // d) % 2 == 0) & (i + d < numel)]


def mask_statistics(masks: Sequence[torch.Tensor], p: float, alpha: float = ALPHA) -> tuple[list[BinomialTest], float]:
    """Run the tests of the module docstring on keep-masks drawn with different seeds.

    ``masks``: same-shape masks (True/1 = kept), one per seed. Returns every test and the level
    each is judged at (``alpha`` divided by the number of tests); a correct kernel fails any of
    them with probability at most ``alpha``.
    """
    flat = [m.detach().reshape(-1).to(device="cpu", dtype=torch.bool) for m in masks]
    shape = tuple(masks[0].shape)
    numel = flat[0].numel()
    keep = 1.0 - p
    tests = [_test("kept fraction", sum(int(f.sum()) for f in flat), numel * len(flat), keep)]
    for a in range(len(flat) - 1):
        tests.append(_test(f"seeds {a} and {a + 1}: elements whose masks differ", (flat[a] != flat[a + 1]).sum(),
                           numel, 2 * keep * (1 - keep)))
    agree = keep * keep + (1 - keep) * (1 - keep)
    for d in shifts(shape):
        first = _disjoint_pairs(numel, d)
        if first.numel():
            same = sum(int((f[first] == f[first + d]).sum()) for f in flat)
            tests.append(_test(f"element pairs {d} apart that agree", same, first.numel() * len(flat), agree))
    level = alpha / len(tests)
    return tests, level


def failed(tests: list[BinomialTest], level: float) -> list[BinomialTest]:
    return [t for t in tests if t.p_value < level]


# ---- running a random kernel ------------------------------------------------------------------


def _call(spec: KernelSpec, fn: Fn, kwargs: dict[str, Any], **overrides) -> tuple[torch.Tensor, ...]:
    """One call with the mask requested; outputs detached."""
    with torch.no_grad():
        outs = as_outputs(fn(**{**kwargs, **spec.random.mask_scalars, **overrides}))
    return tuple(o.detach() for o in outs)


def kernel_mask(spec: KernelSpec, fn: Fn, case: Case, device) -> torch.Tensor:
    """The keep-mask the kernel draws for ``case`` (the last output of a call with mask_scalars)."""
    return _call(spec, fn, prepare(case, device).kwargs())[-1]


def replaying(spec: KernelSpec, fn: Fn, case: Case, device) -> KernelSpec:
    """``spec`` whose reference applies the kernel's own keep-mask for ``case`` (its
    ``reference_mask`` keyword), and whose numerics hooks see it as ``call.mask`` (the terms
    depend on what was kept)."""
    mask = kernel_mask(spec, fn, case, device)
    numerics = spec.numerics

    def with_mask(hook):
        return lambda call, *rest: hook(replace(call, mask=mask), *rest)

    hooks = {name: with_mask(getattr(numerics, name)) for name in TERM_HOOKS if getattr(numerics, name) is not None}
    if numerics.approximate_math:
        hooks["approximate_math"] = {f: with_mask(h) for f, h in numerics.approximate_math.items()}
    return replace(spec, reference=functools.partial(spec.reference, **{spec.random.reference_mask: mask}),
                   numerics=replace(numerics, **hooks))


def _mask_problems(mask: torch.Tensor, label: str) -> list[str]:
    if mask.dtype == torch.bool:
        return []
    if mask.is_floating_point() or mask.is_complex():
        return [f"{label}: the mask has dtype {mask.dtype}; expected bool or an integer dtype holding 0/1"]
    bad = (mask != 0) & (mask != 1)
    if bool(bad.any()):
        return [f"{label}: the mask holds {int(bad.sum())} value(s) other than 0 and 1"]
    return []


def _other_seeds(seed: int) -> list[int]:
    return [(seed + k) % _SEED_SPAN for k in range(1, SEEDS)]


def check_dropout(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """p = 0, reproducibility, seeds and the mask's law (module docstring)."""
    rnd = spec.random
    p = float(case.scalars[rnd.p])
    seed = int(case.scalars[rnd.seed])
    problems: list[str] = []
    prepared = prepare(case, device)
    kwargs = prepared.kwargs()

    # A fixed seed reproduces, also from contiguous copies of the inputs.
    first = _call(spec, fn, kwargs)
    again = _call(spec, fn, kwargs)
    problems += [f"output {k}: a second call with the same seed ({seed}) gave different bits"
                 for k, (a, b) in enumerate(zip(first, again)) if not _same_bits(a, b)]
    dense = {n: (v.contiguous().clone() if isinstance(v, torch.Tensor) else v) for n, v in kwargs.items()}
    placed_otherwise = any(isinstance(v, torch.Tensor) and (not v.is_contiguous() or v.storage_offset())
                           for v in kwargs.values())  # else the dense call repeats the first one
    if placed_otherwise and not _same_bits(first[-1], _call(spec, fn, dense)[-1]):
        problems.append(f"the mask for seed {seed} changes when the inputs are made contiguous: it depends "
                        "on memory layout, not only on the seed and each element's position")
    masks = [first[-1]] + [_call(spec, fn, kwargs, **{rnd.seed: s})[-1] for s in _other_seeds(seed)]
    for k, m in enumerate(masks):
        problems += _mask_problems(m, f"seed {k}")
        if m.shape != masks[0].shape:
            problems.append(f"seed {k}: mask shape {tuple(m.shape)} differs from {tuple(masks[0].shape)}")
    if not problems and masks[0].numel():
        tests, level = mask_statistics(masks, p)
        problems += [f"{t.describe()} < {level:.2g}: not a fair mask at p = {p}" for t in failed(tests, level)]

    # p = 0: keep everything, ignore the seed, equal the deterministic reference.
    zero = _call(spec, fn, kwargs, **{rnd.p: 0.0})
    zero_other = _call(spec, fn, kwargs, **{rnd.p: 0.0, rnd.seed: _other_seeds(seed)[0]})
    if not bool(zero[-1].bool().all()):
        problems.append(f"p = 0 dropped {int((~zero[-1].bool()).sum())} element(s)")
    problems += [f"p = 0: output {k} changes with the seed" for k, (a, b) in enumerate(zip(zero, zero_other))
                 if not _same_bits(a, b)]
    deterministic = check_forward(spec, fn, replace(case, scalars={**case.scalars, rnd.p: 0.0}), device)
    comparisons = [replace(c, name=f"p = 0: {c.name}") for c in deterministic.comparisons]
    problems += [f"p = 0: {q}" for q in deterministic.problems]
    return CheckResult("dropout", not problems and all(c.passed for c in comparisons), comparisons, problems)


def _float_outputs(fn: Fn, **kwargs) -> tuple[torch.Tensor, ...]:
    """``fn``'s outputs without the integer or bool ones (the returned keep-mask)."""
    return tuple(o for o in as_outputs(fn(**kwargs)) if o.is_floating_point())


def run_random_check(spec: KernelSpec, fn: Fn, check: str, case: Case, device) -> CheckResult:
    """``run_check`` for a spec with ``random``: the dropout check, or a standard check run against
    the reference with the kernel's mask replayed where the check compares with the reference.
    gradcheck sees only the floating outputs (a returned bool mask has no gradient to check)."""
    if check == "dropout":
        return check_dropout(spec, fn, case, device)
    if check == "gradcheck":  # gradcheck cannot take the bool mask output: give it the others
        return CHECK_FUNCTIONS[check](spec, functools.partial(_float_outputs, fn), case, device)
    if check in REPLAYED:
        return CHECK_FUNCTIONS[check](replaying(spec, fn, case, device), fn, case, device)
    return CHECK_FUNCTIONS[check](spec, fn, case, device)


__all__ = ["ALPHA", "BinomialTest", "binomial_p_value", "check_dropout", "mask_statistics", "replaying", "run_random_check"]
