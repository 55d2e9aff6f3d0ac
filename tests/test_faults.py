"""Deliberately broken kernels (tests/faults) must each be reported failing by the harness, with a
message that names the kernel, the shrunk case and the error.

Each fault runs through the same property machinery as the real kernels, with more examples than
the CI profile so that the planted bug is found whatever cases the seed draws.
"""

import dataclasses

import pytest

from harness.device import current_device
from harness.registry import load_specs
from harness.runner import CheckFailure, PropertyRun, skip_reason
from harness.spec import Dim
from tests.faults import add_mul_act_faults, graph_faults, mutants, softmax_faults

FAULTS = [
    # (spec, fault, check, dtype, text the report must contain)
    ("softmax", softmax_faults.softmax_ignores_row_stride, "forward", "float32", "out: "),
    ("softmax", softmax_faults.softmax_no_max_subtraction, "forward", "float32", "NaN/inf pattern"),
    ("softmax", softmax_faults.softmax_drops_last_lane, "forward", "float32", "index ("),
    ("softmax", softmax_faults.softmax_wrong_backward, "backward", "float32", "grad x"),
    ("softmax", softmax_faults.softmax_half_precision_sum, "forward", "bfloat16", "OVER budget"),
    ("add_mul_act", add_mul_act_faults.add_mul_act_grad_y_without_alpha, "backward", "float32", "grad y"),
    ("add_mul_act", add_mul_act_faults.add_mul_act_grad_bias_first_group, "backward", "float32", "grad bias"),
    ("softmax", graph_faults.softmax_reads_a_scalar, "compile", "float32", "reads tensor values on the host"),
    ("softmax", graph_faults.softmax_reads_a_scalar, "cudagraph", "float32", "capture failed"),
    ("softmax", graph_faults.softmax_data_dependent_size, "cudagraph", "float32", "capture failed"),
    ("softmax", graph_faults.softmax_without_fake, "opcheck", "float32", "no fake"),
    ("softmax", graph_faults.softmax_without_fake, "compile", "float32", "no fake"),
]


# A precision fault shows only in its regime: the 16-bit accumulator's error grows with the number
# of adds per lane, so its test draws rows of 2048 elements and more (1024 adds per lane and up),
# where it is a plain bug; on short rows it stays within eager's budget. Under the interpreter each
# of those adds is a numpy step, so the CPU draws one or two such rows per case.
REGIMES = {
    "softmax_half_precision_sum": {"cols": Dim(min=256, cpu_max=1024, gpu_max=20500), "rows": Dim(min=1, cpu_max=2, gpu_max=256)},
}

# Reading rows N apart runs past the storage of an expanded (broadcast) input: on the GPU that is an
# illegal access (an H100 ci-profile run drew 133 rows expanded from one), which poisons the xdist
# worker's context and fails every later test it runs. Row and column slices, offsets and permuted
# dims expose the same bug within the storage, as a wrong output.
LAYOUTS = {
    "softmax_ignores_row_stride": ("contiguous", "permuted", "stepped", "offset"),
}


def _fault_name(param) -> str:
    values = param.values if hasattr(param, "values") else param
    return f"{values[1].__name__}-{values[2]}"


@pytest.mark.parametrize("spec_name, fault, check, dtype, expected", FAULTS, ids=[_fault_name(f) for f in FAULTS])
def test_planted_bug_is_caught_with_a_readable_report(spec_name, fault, check, dtype, expected):
    reason = skip_reason(load_specs()[spec_name], "triton", current_device(), check)
    if reason:
        pytest.skip(reason)
    spec = load_specs()[spec_name]
    dims = {**spec.dims, **REGIMES.get(fault.__name__, {})}
    tensors = spec.tensors
    if fault.__name__ in LAYOUTS:
        tensors = tuple(dataclasses.replace(t, layouts=LAYOUTS[fault.__name__]) for t in tensors)
    # a fault's own size regime replaces the spec's sizes, and with them its tiling cases
    tiling = () if fault.__name__ in REGIMES else spec.tiling_cases
    spec = dataclasses.replace(spec, implementations={"fault": fault}, dims=dims, tensors=tensors, tiling_cases=tiling)
    run = PropertyRun(spec, "fault", dtype, check, current_device(), max_examples=150)
    with pytest.raises(CheckFailure) as info:
        run.run()
    report = str(info.value)
    assert f"{spec_name}[fault] {check}" in report and "FAILED" in report
    assert "case:" in report and "shape (" in report and "seed" in report
    assert expected in report, report
    assert "harness repro" in report and info.value.repro_path


def test_a_kernel_that_validates_nothing_fails_its_contract():
    spec = load_specs()["add_mul_act"]
    lax = dataclasses.replace(spec, implementations={"lax": spec.reference})
    run = PropertyRun(lax, "lax", "float32", "contract", current_device())
    with pytest.raises(CheckFailure) as info:
        run.run()
    assert "was accepted; expected an error naming 'bias'" in str(info.value) or "naming 'y'" in str(info.value)


class _PoisonsTheContext:
    """A kernel that, from its fifth call on a case of 3 or more rows, raises what PyTorch raises
    after an illegal memory access, and raises it on every call after that (as a poisoned CUDA
    context does), whatever the case."""

    def __init__(self, spec):
        self.spec = spec
        self.calls = 0
        self.first_bad: tuple | None = None

    def __call__(self, **kwargs):
        self.calls += 1
        x = next(iter(kwargs.values()))
        if self.first_bad is None and self.calls >= 5 and x.shape[0] >= 3:
            self.first_bad = tuple(x.shape)
        if self.first_bad is not None:
            raise RuntimeError("CUDA error: an illegal memory access was encountered")
        return self.spec.reference(**kwargs)


def test_a_poisoned_cuda_context_reports_the_first_case_that_raised_it_not_a_shrunk_one():
    spec = load_specs()["softmax"]
    kernel = _PoisonsTheContext(spec)
    spec = dataclasses.replace(spec, implementations={"poison": kernel})
    def probe(device):  # the device: lost from the poisoning call on (what a synchronize then raises)
        return "AcceleratorError: CUDA error: an illegal memory access" if kernel.first_bad else None

    run = PropertyRun(spec, "poison", "float32", "forward", current_device(), max_examples=60, context_probe=probe)
    with pytest.raises(CheckFailure) as info:
        run.run()
    assert kernel.first_bad is not None
    report = str(info.value)
    assert "illegal memory access" in report and "the first that raised it" in report
    # the reported case is the one that first raised, not Hypothesis's simplest failing case
    assert kernel.first_bad[0] >= 3 and f"x: shape {kernel.first_bad}" in report, report


@pytest.mark.parametrize("mutant", mutants.MUTANTS, ids=lambda m: m.name)
def test_a_fault_on_a_small_tile_path_is_caught_by_the_profile_in_force(mutant, monkeypatch):
    """A fault planted in the production kernel (tests/faults/mutants.py) on a path that CPU-sized
    cases reach only through the small tiles and the spec's tiling cases: the property fails at
    the profile's own number of examples (the ci profile's 8 on a CI run), not a hunt of 150."""
    from kernels import _rows

    if not _rows._SMALL_TILES:
        pytest.skip("the tiling cases are sized for the small tiles: on a GPU, run with HARNESS_SMALL_TILES=1")
    spec = load_specs()[mutant.spec]
    with mutants.planted(mutant, monkeypatch):
        run = PropertyRun(spec, "triton", mutant.dtype, mutant.check, current_device())
        with pytest.raises(CheckFailure) as info:
            run.run()
    report = str(info.value)
    assert f"{mutant.spec}[triton] {mutant.check}" in report and "FAILED" in report
    assert mutant.expected in report, report


def test_a_mutant_whose_snippet_is_gone_fails_by_name():
    stale = dataclasses.replace(mutants.MUTANTS[0], name="stale", original="this text is in no kernel")
    with pytest.raises(mutants.StaleMutant, match="mutant stale: its snippet occurs 0 times"):
        mutants.mutated_source(stale)
