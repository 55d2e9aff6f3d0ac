"""The benchmarks' compile warm-up (harness.bench.warm): which shapes it warms, in which order."""

import torch

from harness.bench.warm import warm_tasks
from harness.registry import load_specs


def test_warm_tasks_follow_the_benchmark_order_and_the_quick_subset():
    specs = load_specs()
    device = torch.device("cuda", 1)  # only named, never touched: tasks are plain records
    every = warm_tasks(specs, quick=False, device=device)
    quick = warm_tasks(specs, quick=True, device=device)
    expected = [(name, i) for name, spec in specs.items() if spec.perf for i in range(len(spec.perf.shapes))]
    assert [(t.spec, t.shape_index) for t in every] == expected
    assert [(t.spec, t.shape_index) for t in quick] == [
        (t.spec, t.shape_index) for t in every if specs[t.spec].perf.shapes[t.shape_index].quick]
    assert 0 < len(quick) < len(every)
    assert {t.device_index for t in every} == {1}, "warm on the GPU the timing will use"
