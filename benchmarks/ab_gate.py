"""A/B check of the regression gate on a real GPU: does it flag a planted slowdown, and stay quiet
on an unchanged rerun? Both figures: device time and per-call wall time.

Device time: one process times the softmax kernel three times in sequence, as separate benchmark
runs would: A (as is), A again (A/A), and B (the same kernel followed by a deliberate extra pass
over its output, ``y.mul_(1.0)``: one more read and write of the output). The gate compares A
with A and A with B under its device rule.

Per-call wall time: the same at the launch-overhead shape and at the first benchmark shape, with
B the same kernel after 50 us of host work (a busy wait: the cost of a slow Python check on the
hot path), judged under the wall rule after dividing out the drift that eager, timed beside each
run, shows against the first run (as the gate does with its references). Writes the samples, the verdicts and the measured noise as
JSON.

    python benchmarks/ab_gate.py OUT.json
"""

import json
import statistics
import sys
import time

import torch

from harness.bench.runner import bench_case, launch_shape, timed_calls
from harness.bench.timing import TimingPlan, iqr, time_interleaved, time_wall, wall_batch
from harness.registry import load_specs
from harness.regression import WALL_RULE, decide, reference_drift

HOST_PLANT_S = 50e-6


def main(path: str) -> None:
    device = torch.device("cuda", 0)
    spec = load_specs()["softmax"]
    kernel = spec.implementations["triton"].load()

    def slowed(x):
        y = kernel(x)
        return y.mul_(1.0)

    report = {"device": torch.cuda.get_device_name(device), "shapes": []}
    for shape in spec.perf.shapes[:2]:
        plan = TimingPlan(repetitions=60)
        cases = [bench_case(spec, shape, seed) for seed in range(plan.input_sets)]
        runs = {}
        for label, fn in (("A", kernel), ("A_again", kernel), ("B_extra_pass", slowed)):
            runs[label] = time_interleaved(timed_calls(spec, {label: fn}, cases, device, "forward"), device, plan)[label]
        aa, ab = decide(runs["A"], runs["A_again"]), decide(runs["A"], runs["B_extra_pass"])
        report["shapes"].append({
            "shape": dict(shape.dims), "dtype": shape.dtype,
            "median_ms": {k: statistics.median(v) for k, v in runs.items()},
            "relative_iqr": {k: iqr(v) / statistics.median(v) for k, v in runs.items()},
            "A_vs_A": {"verdict": aa.verdict, "ratio": aa.ratio, "reason": aa.reason},
            "A_vs_B": {"verdict": ab.verdict, "ratio": ab.ratio, "reason": ab.reason},
            "samples_ms": runs,
        })
        print(f"{dict(shape.dims)} {shape.dtype}: A/A {aa.verdict} ({aa.reason}); A/B {ab.verdict} ({ab.reason})")
    report["wall"] = []

    def host_slowed(x):
        end = time.perf_counter() + HOST_PLANT_S
        while time.perf_counter() < end:
            pass
        return kernel(x)

    for shape in (launch_shape(spec), spec.perf.shapes[0]):
        plan = TimingPlan(wall_repetitions=40)
        cases = [bench_case(spec, shape, seed) for seed in range(plan.input_sets)]
        runs, eager = {}, {}
        for label, fn in (("A", kernel), ("A_again", kernel), ("B_host_50us", host_slowed)):
            # eager beside each run, interleaved, as in a benchmark: the gate divides out the
            # machine's drift that its reference shows (a shared host's speed moves between runs)
            calls = timed_calls(spec, {label: fn, "eager": spec.reference}, cases, device, "forward")
            per_call = max(statistics.median(t) for t in time_interleaved(calls, device, plan).values())
            timed = time_wall(calls, device, wall_batch(per_call, plan), plan)
            runs[label], eager[label] = timed[label], timed["eager"]

        def verdict(label):
            drift, about = reference_drift({"eager": statistics.median(eager[label]) / statistics.median(eager["A"])})
            samples = runs[label] if drift is None else [t / drift for t in runs[label]]
            v = decide(runs["A"], samples, WALL_RULE)
            return {"verdict": v.verdict, "ratio": v.ratio, "reason": f"{v.reason}; {about}", "drift": drift}

        aa, ab = verdict("A_again"), verdict("B_host_50us")
        report["wall"].append({
            "shape": dict(shape.dims), "dtype": shape.dtype,
            "median_ms": {k: statistics.median(v) for k, v in runs.items()},
            "eager_median_ms": {k: statistics.median(v) for k, v in eager.items()},
            "relative_iqr": {k: iqr(v) / statistics.median(v) for k, v in runs.items()},
            "A_vs_A": aa, "A_vs_B": ab, "samples_ms": runs, "eager_samples_ms": eager,
        })
        print(f"wall {dict(shape.dims)} {shape.dtype}: A/A {aa['verdict']} ({aa['reason']}); "
              f"A/B {ab['verdict']} ({ab['reason']})")
    with open(path, "w") as handle:
        json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main(sys.argv[1])
