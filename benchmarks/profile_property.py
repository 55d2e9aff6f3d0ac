"""Where a verification property spends its time: one property under cProfile, on this machine.

    python benchmarks/profile_property.py OUT.txt SPEC DTYPE CHECK [EXAMPLES]

Runs SPEC's triton implementation's CHECK property for DTYPE with EXAMPLES examples (default 20)
in this process, counting Triton compilations, and writes the examples' rate, the compile count and
the 40 costliest functions (cumulative and own time) to OUT.txt. Written when nightly properties
took seconds per example on the H100 while their kernels run in microseconds.
"""

from __future__ import annotations

import cProfile
import io
import pstats
import sys
import time

from harness import profiles
from harness.compiles import count_compilations
from harness.device import configure_backend, select_device
from harness.registry import load_specs
from harness.runner import CheckFailure, property_runs


def main(out: str, spec_name: str, dtype: str, check: str, examples: int = 20) -> int:
    configure_backend()
    profiles.load("nightly")
    device = select_device()
    spec = load_specs()[spec_name]
    (run,) = property_runs(spec, device, implementations=["triton"], dtypes=[dtype], checks=[check],
                           max_examples=examples)
    profiler = cProfile.Profile()
    start = time.perf_counter()
    outcome = "passed"
    with count_compilations() as compiled:
        profiler.enable()
        try:
            run.run()
        except CheckFailure as failure:
            outcome = f"failed: {str(failure).splitlines()[0]}"
        finally:
            profiler.disable()
    seconds = time.perf_counter() - start
    text = io.StringIO()
    text.write(f"{run.label}: {outcome}; {run.examples} examples in {seconds:.1f} s "
               f"({seconds / max(run.examples, 1):.2f} s each); {sum(compiled.values())} compilations "
               f"{dict(compiled)}\n\n")
    for key in ("cumulative", "tottime"):
        pstats.Stats(profiler, stream=text).sort_stats(key).print_stats(40)
    with open(out, "w") as f:
        f.write(text.getvalue())
    print(text.getvalue()[:3000])
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    if len(args) not in (4, 5):
        sys.exit(__doc__)
    sys.exit(main(*args[:4], *(int(a) for a in args[4:])))
