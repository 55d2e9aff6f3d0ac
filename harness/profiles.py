"""Hypothesis profiles: ``ci`` (deterministic and fast), ``nightly`` (deep), ``dev`` (in between).

The active profile comes from ``--hypothesis-profile`` or the ``HARNESS_PROFILE`` environment
variable, ``ci`` by default. ``ci`` is derandomized: the same code gives the same cases on every run,
so a red CI is never a coin toss, and each property draws from a seed of its own (its test id:
``harness.runner``), so that a spec's checks see different cases; ``HARNESS_SEED`` (or
``--harness-seed``) draws other cases.
``HARNESS_MAX_EXAMPLES`` overrides the profile's example count: with it, one property's examples
can be split over processes that each draw from their own seed (``gpu_run.sh verify-shards``: on a
GPU a property's time goes into compiling new kernel variants, one process at a time, while the
other cores idle).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, Phase, settings

PROFILES = ("ci", "dev", "nightly")
_SLOW_OK = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example]
# Every phase but ``explain``: it traces each executed line (sys.settrace) to explain a failure,
# which under Triton's interpreter, where a kernel runs as Python, turns seconds into tens of
# minutes; the harness's own report (case, error statistics, repro) says what went wrong.
_PHASES = [Phase.explicit, Phase.reuse, Phase.generate, Phase.target, Phase.shrink]

settings.register_profile(
    "ci", max_examples=8, derandomize=True, deadline=None, database=None, print_blob=True,
    suppress_health_check=_SLOW_OK, phases=_PHASES,
)
settings.register_profile(
    "dev", max_examples=30, deadline=None, print_blob=True, suppress_health_check=_SLOW_OK, phases=_PHASES,
)
settings.register_profile(
    "nightly", max_examples=150, deadline=None, print_blob=True, database=None,
    suppress_health_check=_SLOW_OK, phases=_PHASES,
)


def load(name: str | None = None) -> str:
    """Activate a profile by name (default: $HARNESS_PROFILE or ``ci``), with
    $HARNESS_MAX_EXAMPLES examples when that is set; returns the profile's name."""
    chosen = name or os.environ.get("HARNESS_PROFILE") or "ci"
    if chosen not in PROFILES:
        raise ValueError(f"unknown harness profile {chosen!r}; expected one of {PROFILES}")
    examples = max_examples_from_env()
    if examples is None:
        settings.load_profile(chosen)
    else:
        settings.register_profile(f"{chosen}-{examples}", settings.get_profile(chosen), max_examples=examples)
        settings.load_profile(f"{chosen}-{examples}")
    return chosen


def max_examples_from_env() -> int | None:
    raw = os.environ.get("HARNESS_MAX_EXAMPLES")
    if raw in (None, ""):
        return None
    try:
        value = int(raw)
    except ValueError:
        raise ValueError(f"HARNESS_MAX_EXAMPLES must be a positive integer, got {raw!r}") from None
    if value < 1:
        raise ValueError(f"HARNESS_MAX_EXAMPLES must be a positive integer, got {raw!r}")
    return value


def seed_from_env() -> int | None:
    raw = os.environ.get("HARNESS_SEED")
    if raw in (None, ""):
        return None
    try:
        return int(raw)
    except ValueError:
        raise ValueError(f"HARNESS_SEED must be an integer, got {raw!r}") from None
