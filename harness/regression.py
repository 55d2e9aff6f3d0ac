"""The decision rule that turns two sets of timings into "regression", "improvement" or neither.

GPU timings are noisy in two ways that a plain significance test handles badly:

* within a run, samples scatter by 1-2% around the median and a few percent of them are outliers
  10-50% slower (a context switch, a clock dip, another process on the device): a heavy right tail
  that ruins the mean but barely moves the median;
* between runs, the whole distribution shifts by 0.5-1% (clocks, temperature, driver state). No
  number of samples averages this away, so with 100 samples a test would call a 0.7% drift highly
  significant. A minimum effect size is what keeps it quiet.

The rule compares the baseline and the current samples of one benchmark through the ratio of
medians ``ratio = median(current) / median(baseline)`` (above 1 means slower). With ``δ =
rule.min_effect``, ``α = rule.alpha`` and ``[ci_low, ci_high]`` the bootstrap interval of the
ratio at ``rule.confidence``, the verdict is:

* ``insufficient-data`` when either side has fewer than ``rule.min_samples`` samples: below
  that the bootstrap median takes only a handful of distinct values and its interval cannot be
  trusted (at 10 a side it still held its bound in simulation: 17/1000 false alarms at a true
  shift of exactly ``δ``, against the nominal 25/1000);
* ``regression`` when all three hold:
  (a) the two-sided Mann-Whitney U p-value is below ``α`` (a rank test: outliers count as no more
  than any other slow sample);
  (b) ``ci_low > 1 + δ``: the whole interval lies above the minimum effect, not merely above 1;
  (c) ``ratio > 1 + δ``;
* ``improvement`` is the mirror image in log space, so that swapping the two runs swaps the
  verdict: p below ``α``, ``ci_high < 1 / (1 + δ)`` and ``ratio < 1 / (1 + δ)``;
* ``unchanged`` otherwise; ``reason`` says which condition failed.

Why (b) asks for the interval to clear ``1 + δ`` and not just 1: with "above 1" the rule would
flag whenever the point estimate crossed ``1 + δ`` and the noise happened to be small, so the
false-alarm rate would depend on how close the run-to-run drift comes to ``δ`` and could not be
stated. Asking the interval to clear ``1 + δ`` is a one-sided test of "the slowdown is at most δ"
at level ``(1 - confidence) / 2``: whenever the true shift (drift included) is at most ``δ``, a
false alarm has probability at most 2.5% per direction, whatever the sample counts, and in
practice far less because drift stays well under ``δ``. The price is power: the point estimate
must clear ``1 + δ`` by about two standard errors, so ``δ`` sits at 1.5%, above the drift of up
to 1% and far enough below the 5% slowdown that must be caught for 30 samples a side to catch it
even when the drift works against it (4% true slowdown, σ 2%: 93% caught; ``δ`` = 2% would catch
77%, ``δ`` = 2.5% only 52%). Condition (c)
is then implied for any interval that contains its estimate; it is kept so that the verdict never
contradicts the headline number. Condition (a) is the familiar significance test, checked on
ranks so that it cannot be fooled by the bootstrap's behaviour on small, tied samples.

**Drift measured in the same run is divided out first** (``reference_drift``): eager and
torch.compile of the reference run the same code on the same inputs as when the baseline was
recorded (baselines are kept per device and software versions), so the ratio of their medians to
their own baselines measures the machine, not a change. The H100 showed drift beyond the model
above: a later machine of the same kind ran eager and compile 1.0-2.1% slower than the baseline's,
and the unchanged lora_linear kernel was flagged 1.9-2.3% slower (results/2026-11-24-h100-4,
call 11). The kernel's samples are therefore divided by the geometric mean of its references'
ratios before the rule above is applied, and the reason says by how much. References that moved
more than ``MAX_DRIFT`` are not taken for drift (something else changed), nor references that
disagree by more than ``MAX_DRIFT_DISAGREEMENT`` (the default rule's δ): a machine moves all of
them alike, and one moving alone moved itself. On the H100, torch.compile's dropout-add-LayerNorm
ran 4.6% faster than its baseline while eager was level (+0.1%), and dividing by their mean
flagged the unchanged kernel (+0.5% as measured) as 2.8% slower (results/2026-11-24-h100-8, call
7). The kernel is then judged as measured, and the reason says that too.

The interval is a percentile bootstrap (``rule.resamples`` resamples of each side, independently)
drawn from ``numpy.random.default_rng(rule.seed)``, so the same inputs always give the same
verdict.

Measured on synthetic noise (the model of tests/unit/test_regression.py: 30-100 samples a side,
lognormal σ 1-2%, 0-5% of outliers 10-50% slower, a run-to-run shift of 0.5-1% either way):
false alarms 0/300 on A/A pairs, detection 300/300 of a 5% slowdown and 300/300 of a 5% speed-up
(0/3000, 3000/3000 and 3000/3000 over 3000 pairs each). With ``min_effect=0`` the same A/A pairs
give 152/300 false alarms: the drift, not the noise, is what the minimum effect is for. At the
model's worst corner (30 samples a side, σ 2%, 5% outliers): a 1% drift alone is flagged 0/300
times, a drift equal to ``δ`` 3/300 (the 2.5% bound of the interval test), and a 5% slowdown
that a 1% drift shrinks to 4% is caught 279/300 times (297/300 with 50 samples a side).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

ALPHA = 0.01  # Mann-Whitney significance level
CONFIDENCE = 0.95  # two-sided level of the interval of the ratio (the gate's bootstrap, speedup's)
MIN_EFFECT = 0.015  # δ: the smallest slowdown (ratio 1 + δ) worth flagging
MIN_SAMPLES = 10  # per side; fewer gives insufficient-data
BOOTSTRAP_RESAMPLES = 2000
BOOTSTRAP_SEED = 0

VERDICTS = ("regression", "improvement", "unchanged", "insufficient-data")
# what a results file's regression entries may say: the gate's verdicts, and the baseline's own
# states where no comparison ran (harness.nightly writes them)
RECORDED_VERDICTS = VERDICTS + ("no-baseline", "baseline-unreadable")
MAX_DRIFT = 0.05  # references that moved more than this (either way) are not taken for machine drift
MAX_DRIFT_DISAGREEMENT = MIN_EFFECT  # nor references whose ratios lie further apart than this


@dataclass(frozen=True)
class Rule:
    """The constants of the decision rule; the module docstring says what each one does."""

    alpha: float = ALPHA
    confidence: float = CONFIDENCE
    min_effect: float = MIN_EFFECT
    min_samples: int = MIN_SAMPLES
    resamples: int = BOOTSTRAP_RESAMPLES
    seed: int = BOOTSTRAP_SEED

    def __post_init__(self) -> None:
        if not 0.0 < self.alpha < 1.0:
            raise ValueError(f"Rule.alpha must lie in (0, 1), got {self.alpha!r}")
        if not 0.0 < self.confidence < 1.0:
            raise ValueError(f"Rule.confidence must lie in (0, 1), got {self.confidence!r}")
        if not (math.isfinite(self.min_effect) and self.min_effect >= 0.0):
            raise ValueError(f"Rule.min_effect must be a finite number >= 0, got {self.min_effect!r}")
        if int(self.min_samples) != self.min_samples or self.min_samples < 2:
            raise ValueError(f"Rule.min_samples must be an integer >= 2, got {self.min_samples!r}")
        if int(self.resamples) != self.resamples or self.resamples < 100:
            raise ValueError(f"Rule.resamples must be an integer >= 100, got {self.resamples!r}")


DEFAULT_RULE = Rule()
# Per-call wall time (harness.bench.timing.time_wall) includes the host: Python, the allocator and
# the driver, on CPUs that other processes share. Its run-to-run drift is that of a host, not of
# a GPU's clocks, and the references do not always share it: on the H200 host of
# benchmarks/results/2026-11-27-h200-14 the unchanged softmax kernel's host-bound wall time moved
# 15.5% between two runs in one process while eager, device-bound there, moved 0.1%. The minimum
# effect sits above that; a host-side regression that matters is far larger (50 us of planted
# host work: +104% and +119% in the same runs). benchmarks/ab_gate.py checks both on a GPU.
WALL_MIN_EFFECT = 0.25
WALL_RULE = Rule(min_effect=WALL_MIN_EFFECT)


def rule_for(record: Mapping[str, Any]) -> Rule:
    """The rule a benchmark record is judged by: by its figure (device time or per-call wall time)."""
    return WALL_RULE if record.get("figure") == "wall" else DEFAULT_RULE


@dataclass(frozen=True)
class Verdict:
    """The outcome for one benchmark; ``reason`` is the sentence a report shows next to it.

    ``ratio`` is median(current) / median(baseline); ``ci_low``/``ci_high`` bound it and
    ``p_value`` is the two-sided Mann-Whitney U p-value. They are NaN where they could not be
    computed (an empty side).
    """

    verdict: str
    ratio: float
    ci_low: float
    ci_high: float
    p_value: float
    n_baseline: int
    n_current: int
    reason: str

    @property
    def flagged(self) -> bool:
        return self.verdict in ("regression", "improvement")


def _as_samples(values: Iterable[float], name: str) -> np.ndarray:
    """A 1-D float array of positive finite timings, or a ValueError naming ``name``."""
    if isinstance(values, (str, bytes)):
        raise ValueError(f"{name} must be a sequence of timings in ms, got a string")
    try:
        array = np.asarray(list(values), dtype=float)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{name} must be a sequence of numbers (timings in ms): {exc}") from None
    if array.ndim != 1:
        raise ValueError(f"{name} must be a flat sequence of timings, got shape {array.shape}")
    bad = np.flatnonzero(~np.isfinite(array) | (array <= 0.0))
    if bad.size:
        i = int(bad[0])
        raise ValueError(
            f"{name}[{i}] = {array[i]!r}: timings must be positive and finite "
            f"({bad.size} bad value(s) of {array.size})"
        )
    return array


def _row_medians(values: np.ndarray) -> np.ndarray:
    """Median of each row; a partial sort, several times faster than ``np.median`` on 2-D input."""
    n = values.shape[1]
    half = n // 2
    if n % 2:
        return np.partition(values, half, axis=1)[:, half]
    part = np.partition(values, (half - 1, half), axis=1)
    return 0.5 * (part[:, half - 1] + part[:, half])


def _bootstrap_ratio_interval(base: np.ndarray, cur: np.ndarray, rule: Rule) -> tuple[float, float]:
    """Percentile interval of median(cur*) / median(base*) over independent resamples."""
    rng = np.random.default_rng(rule.seed)
    resamples = int(rule.resamples)
    base_medians = _row_medians(base[rng.integers(0, base.size, (resamples, base.size))])
    cur_medians = _row_medians(cur[rng.integers(0, cur.size, (resamples, cur.size))])
    tail = (1.0 - rule.confidence) / 2.0
    low, high = np.quantile(cur_medians / base_medians, [tail, 1.0 - tail])
    return float(low), float(high)


def _mann_whitney_p(base: np.ndarray, cur: np.ndarray) -> float:
    from scipy.stats import mannwhitneyu  # a declared dependency; imported on first use

    p = float(mannwhitneyu(cur, base, alternative="two-sided").pvalue)
    return 1.0 if math.isnan(p) else p  # all values tied: no evidence of a difference


def _pct(ratio: float) -> str:
    """A ratio as a signed percentage change of time: 1.052 -> '+5.2%'."""
    return f"{(ratio - 1.0) * 100.0:+.1f}%"


def _describe(ratio: float, low: float, high: float, rule: Rule) -> str:
    if ratio > 1.0:
        change = f"median {(ratio - 1.0) * 100.0:.1f}% slower"
    elif ratio < 1.0:
        change = f"median {(1.0 - ratio) * 100.0:.1f}% faster"
    else:
        change = "median unchanged"
    return f"{change} ({rule.confidence * 100:g}% CI {_pct(low)}..{_pct(high)})"


def decide(
    baseline_samples: Sequence[float],
    current_samples: Sequence[float],
    rule: Rule = DEFAULT_RULE,
) -> Verdict:
    """Compare the timings of one benchmark (ms) against its baseline under ``rule``.

    Raises ValueError naming the argument when a sample is not a positive finite number; too few
    samples is not an error but an ``insufficient-data`` verdict, so a new benchmark without a
    baseline reports rather than crashes.
    """
    base = _as_samples(baseline_samples, "baseline_samples")
    cur = _as_samples(current_samples, "current_samples")
    nb, nc = int(base.size), int(cur.size)
    nan = float("nan")
    ratio = float(np.median(cur) / np.median(base)) if nb and nc else nan

    short = [f"{n} {side} sample(s)" for n, side in ((nb, "baseline"), (nc, "current")) if n < rule.min_samples]
    if short:
        return Verdict(
            "insufficient-data", ratio, nan, nan, nan, nb, nc,
            f"{' and '.join(short)}; the rule needs at least {rule.min_samples} on each side",
        )

    low, high = _bootstrap_ratio_interval(base, cur, rule)
    p = _mann_whitney_p(base, cur)
    upper, lower = 1.0 + rule.min_effect, 1.0 / (1.0 + rule.min_effect)
    effect = f"the {rule.min_effect * 100:g}% minimum effect"
    test = f"Mann-Whitney p={p:.2g}"
    head = _describe(ratio, low, high, rule)

    if ratio > upper and low > upper and p < rule.alpha:
        return Verdict("regression", ratio, low, high, p, nb, nc,
                       f"{head}, {test} < {rule.alpha:g}, whole CI above {effect}")
    if ratio < lower and high < lower and p < rule.alpha:
        return Verdict("improvement", ratio, low, high, p, nb, nc,
                       f"{head}, {test} < {rule.alpha:g}, whole CI beyond {effect}")

    if lower <= ratio <= upper:
        why = f"within {effect}"
    elif p >= rule.alpha:
        why = f"{test} not below {rule.alpha:g}"
    else:
        why = f"{test} but the CI reaches inside {effect}"
    return Verdict("unchanged", ratio, low, high, p, nb, nc, f"{head}: {why}")


def speedup(ours: Sequence[float], peer: Sequence[float], rule: Rule = DEFAULT_RULE, *,
            paired: bool = False) -> tuple[float, float, float, str]:
    """How much faster ``ours`` is than ``peer`` (timings of one benchmark, taken side by side):
    (the ratio, its interval at ``rule.confidence``, and "faster" where the whole interval lies
    above 1, "slower" where it lies below, else "tie"). A tie is stated as a tie, never claimed as
    a win; fewer than ``rule.min_samples`` samples a side (or pairs) read as a tie with no interval.

    ``paired=False``: the ratio of medians ``median(peer) / median(ours)`` and its bootstrap
    interval, the two sides resampled independently.

    ``paired=True``: sample i of each side was timed in the same repetition (``harness.bench.timing``
    times every implementation once per repetition, in a rotated order), so the ratio is the median
    of the per-repetition ratios ``peer[i] / ours[i]`` and the interval is the sign test's:
    order statistics of those ratios whose coverage the binomial(n, 1/2) law gives exactly, at
    least ``rule.confidence`` for any continuous distribution of the ratios (``_sign_interval``).
    A repetition's two timings share the host's and the GPU's state of that moment (a slow
    stretch of the host, a clock step), which the per-repetition ratio divides out; resampling the
    sides independently leaves that shared noise in both and can make a steady 7% lead read as a
    tie. The interval assumes the repetitions' ratios independent of one another; noise that does
    not scale both timings alike (a stall of fixed length in one side's batch) stays in the
    ratios and widens the interval. Each side must have the same number of samples, in
    repetition order."""
    a, b = _as_samples(ours, "ours"), _as_samples(peer, "peer")
    if paired:
        if a.size != b.size:
            raise ValueError(f"paired timings need one sample of each side per repetition: ours has {a.size}, "
                             f"peer {b.size}")
        ratios = b / a
        ratio = float(np.median(ratios))
        if a.size < rule.min_samples:
            return ratio, float("nan"), float("nan"), "tie"
        low, high = _sign_interval(ratios, rule.confidence)
    else:
        ratio = float(np.median(b) / np.median(a))
        if min(a.size, b.size) < rule.min_samples:
            return ratio, float("nan"), float("nan"), "tie"
        low, high = _bootstrap_ratio_interval(a, b, rule)
    return ratio, low, high, "faster" if low > 1.0 else "slower" if high < 1.0 else "tie"


def _sign_interval(values: np.ndarray, confidence: float) -> tuple[float, float]:
    """The distribution-free interval of the median of ``values`` (the sign test's): the j-th
    smallest and the j-th largest value, j the largest with ``2 P(X <= j - 1) <= 1 - confidence``
    for X ~ binomial(n, 1/2), which is the probability that the median lies outside them. At n = 30
    and 95%: the 10th and 21st of 30 (coverage 95.7%). (nan, nan) where no j qualifies (n < 6 at
    95%)."""
    from scipy.stats import binom  # a declared dependency; imported on first use

    n = values.size
    tail = (1.0 - confidence) / 2.0
    j = int(binom.ppf(tail, n, 0.5))  # the least j with P(X <= j) >= tail
    j += bool(binom.cdf(j, n, 0.5) <= tail)  # P(X <= j - 1) <= tail < P(X <= j)
    if j == 0:
        return float("nan"), float("nan")
    ordered = np.sort(values)
    return float(ordered[j - 1]), float(ordered[n - j])


# A host is not a GPU: two machines of one kind ran the same host-bound calls up to 44% faster
# (benchmarks/results/2026-11-27-h200-14, call 8: eager -32%, torch.compile -44% against the
# baselines of call 3). For the wall figure the references' drift is divided out however far the
# host moved, as long as they move together, within the wall rule's minimum effect. Where they do
# not, the host still changed, and by how much depends on the call: on the slow host of
# benchmarks/results/2026-11-29-h200-32 (call 3) dropout-add-LayerNorm's forward at 32768 x 512
# moved +1.3% in eager (GPU-bound) and +83.8% in torch.compile (host-bound), and the unchanged
# kernel (host-bound) +62.8%, which a judgement as measured called a regression (25 such lines in
# that run). A wall line whose references moved apart is judged between their moves instead
# (``decide_between_moves``).
WALL_MAX_DRIFT = 1.0
WALL_MAX_DRIFT_DISAGREEMENT = WALL_MIN_EFFECT


def decide_between_moves(baseline_samples: Sequence[float], current_samples: Sequence[float], rule: Rule,
                         ratios: Mapping[str, float]) -> tuple[Verdict, float | None, str]:
    """The verdict of a wall line whose references moved too far or apart to give one drift
    (``reference_drift`` says None): on a changed host each call's host cost moves by its own
    amount, from not at all (a call the GPU bounds) to as far as the reference that moved most.
    The line is a regression only if it slowed beyond the larger of 1 and the references' largest
    ratio (its samples divided by it), an improvement only if it sped up beyond the smaller of 1
    and their smallest ratio, and otherwise unchanged: a move within that span is the host's. So
    a slower host never makes an unchanged line an improvement, nor a faster one a regression.
    Returns (the verdict, the divisor it was judged after or None, the sentence its reason adds)."""
    moves = ", ".join(f"{name} {_pct(r)}" for name, r in sorted(ratios.items()))
    low, high = min(1.0, *ratios.values()), max(1.0, *ratios.values())
    slower = decide(baseline_samples, [t / high for t in current_samples], rule)
    if slower.verdict == "insufficient-data":
        return slower, None, ""
    if slower.verdict == "regression":
        return slower, high, f"slower beyond the span of the references' moves (x{high:.3f}: {moves} against their baselines)"
    faster = decide(baseline_samples, [t / low for t in current_samples], rule)
    if faster.verdict == "improvement":
        return faster, low, f"faster beyond the span of the references' moves (x{low:.3f}: {moves} against their baselines)"
    measured = decide(baseline_samples, current_samples, rule)
    about = (f"as measured, within the references' moves ({moves} against their baselines), which the host's "
             "change explains")
    if measured.verdict in ("regression", "improvement"):
        measured = replace(measured, verdict="unchanged",
                           reason=_describe(measured.ratio, measured.ci_low, measured.ci_high, rule))
    return measured, None, about


def drift_limits(record: Mapping[str, Any]) -> tuple[float, float]:
    """(max drift, max disagreement) for ``reference_drift`` in a record's figure."""
    if record.get("figure") == "wall":
        return WALL_MAX_DRIFT, WALL_MAX_DRIFT_DISAGREEMENT
    return MAX_DRIFT, MAX_DRIFT_DISAGREEMENT


def reference_drift(ratios: Mapping[str, float], max_drift: float = MAX_DRIFT,
                    max_disagreement: float = MAX_DRIFT_DISAGREEMENT) -> tuple[float | None, str]:
    """The machine's drift in this run from the references' median ratios (implementation ->
    median(current) / median(baseline)): their geometric mean, or None when there are none, one
    moved more than ``max_drift`` or two disagree by more than ``max_disagreement`` (by default
    the device figure's ``MAX_DRIFT`` and ``MAX_DRIFT_DISAGREEMENT``; ``drift_limits``); and the
    sentence a verdict's reason adds about it."""
    if not ratios:
        return None, ""
    moves = ", ".join(f"{name} {_pct(r)}" for name, r in sorted(ratios.items()))
    if any(abs(math.log(r)) > math.log1p(max_drift) for r in ratios.values()):
        return None, f"references moved too far to be drift ({moves} against their baselines): judged as measured"
    if max(ratios.values()) / min(ratios.values()) > 1.0 + max_disagreement:
        return None, f"references disagree, not a machine's drift ({moves} against their baselines): judged as measured"
    drift = math.exp(sum(math.log(r) for r in ratios.values()) / len(ratios))
    return drift, f"the references' drift divided out (x{drift:.3f}: {moves} against their baselines)"


def compare_records(
    baseline: Mapping[str, Mapping[str, Any]],
    current: Mapping[str, Mapping[str, Any]],
    rule: Rule = DEFAULT_RULE,
) -> dict[str, Verdict]:
    """Decide every benchmark of ``current`` against ``baseline`` (records with ``samples_ms``).

    Both are mappings from benchmark key to a record as ``harness.baseline`` stores it. A key
    without a baseline gets ``insufficient-data`` (zero baseline samples); baseline keys absent
    from ``current`` are not reported.
    """
    verdicts = {}
    for key, record in current.items():
        base = baseline.get(key, {}).get("samples_ms", [])
        verdicts[key] = decide(base, record["samples_ms"], rule)
    return verdicts
