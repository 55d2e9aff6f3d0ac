"""Malformed specs fail at construction with the field named; discovery finds external specs."""

import dataclasses
import sys
import textwrap

import pytest
import torch

from harness import (Batch, BenchShape, Dim, KernelSpec, KnownFailure, Numerics, PerfModel, SpecError, TensorArg,
                     TilingCase)
from harness.registry import RegistryError, load_specs, select


def _ref(x):
    return x


def _spec(**overrides):
    fields = dict(
        name="ok",
        reference=_ref,
        implementations={"triton": _ref},
        tensors=(TensorArg("x", dims=("*batch", "n")),),
        dims={"*batch": Batch(), "n": Dim()},
    )
    fields.update(overrides)
    return KernelSpec(**fields)


def test_a_well_formed_spec_builds():
    spec = _spec()
    assert spec.checks()[0] == "forward"
    assert spec.implementations["triton"].load() is _ref


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"name": "not an identifier"}, "identifier"),
        ({"reference": 3}, "reference"),
        ({"implementations": {}}, "implementations"),
        ({"implementations": {"eager": _ref}}, "reserved"),
        ({"implementations": {"triton": 5}}, "implementations['triton']"),
        ({"tensors": ()}, "tensors"),
        ({"tensors": (TensorArg("x", dims=("m",)),)}, "tensors['x'].dims"),
        ({"tensors": (TensorArg("x", dims=("n",), values=("gaussian",)),)}, "tensors['x'].values"),
        ({"tensors": (TensorArg("x", dims=("n",), layouts=("diagonal",)),)}, "tensors['x'].layouts"),
        ({"tensors": (TensorArg("x", dims=("n",)), TensorArg("x", dims=("n",)))}, "unique"),
        ({"tensors": (TensorArg("x", dims=("n", "*batch")),)}, "'*batch' may appear once, first"),
        ({"tensors": (TensorArg("ids", dims=("n",), dtype="int64", grad=True),)}, "cannot take gradients"),
        ({"dims": {"*batch": Batch(), "n": Dim(min=0)}}, "dims['n']"),
        ({"dims": {"*batch": Batch(), "n": 4}}, "dims['n']"),
        ({"dims": {"*batch": Batch(), "n": Dim(choices=(0, 4))}}, "dims['n'].choices"),
        ({"dims": {"*batch": Batch(), "n": Dim(cpu_max=8, choices=(16, 32))}}, "dims['n'].choices"),
        ({"scalars": {"alpha": 0.5}}, "scalars['alpha']"),
        ({"dtypes": ("float8",)}, "dtypes"),
        ({"dtypes": ("float64",)}, "float64 alone"),
        ({"numerics": Numerics(error_multiple=0.5)}, "numerics.error_multiple"),
        ({"numerics": Numerics(error_multiple={"float16": float("nan")})}, "numerics.error_multiple"),
        ({"numerics": Numerics(gradient_error_multiple=0.9)}, "numerics.error_multiple"),
        ({"numerics": Numerics(term_precision="float8")}, "numerics.term_precision"),
        ({"numerics": {"error_multiple": 2.0}}, "numerics: must be a Numerics"),
        ({"bad_scalars": {"beta": [1]}}, "bad_scalars"),
        ({"known_failures": (KnownFailure("speed", "slow"),)}, "known_failures"),
        ({"numerics": Numerics(term_magnitudes=3)}, "numerics.term_magnitudes"),
        ({"numerics": Numerics(gradient_rounded_terms="rss")}, "numerics.gradient_rounded_terms"),
        ({"known_failures": (KnownFailure("forward", " "),)}, "needs a reason"),
        ({"perf": PerfModel(bytes_moved=lambda d, t: 0, shapes=(BenchShape({}, "float32"),))}, "perf.shapes"),
        ({"perf": PerfModel(bytes_moved=lambda d, t: 0, shapes=(BenchShape({"n": 4}, "float64"),))}, "perf.shapes"),
        ({"tiling_cases": (TilingCase(" ", dims={"n": 3}),)}, "tiling_cases[0].path"),
        ({"tiling_cases": (TilingCase("two blocks", dims={"m": 3}),)}, "names dim 'm'"),
        ({"tiling_cases": (TilingCase("two blocks", dims={"n": 17}),)}, "tiling_cases[0].dims['n']: must be a size the CPU draws (1..16)"),
        ({"tiling_cases": (TilingCase("two blocks", dims={"*batch": [2, 2, 2]}),)}, "tiling_cases[0].dims['*batch']"),
        ({"tiling_cases": (TilingCase("two blocks", dims={"n": 3}, scalars={"p": 0.5}),)}, "tiling_cases[0].scalars"),
        ({"tiling_cases": ({"n": 3},)}, "entries must be TilingCase"),
        ({"unreached_on_cpu": {"if EVEN:": "full tiles"}}, "keys are '<function>: <branch line>'"),
        ({"unreached_on_cpu": {"kernel: if EVEN:": ""}}, "unreached_on_cpu['kernel: if EVEN:']"),
    ],
)
def test_malformed_specs_name_the_field(overrides, field):
    with pytest.raises(SpecError) as info:
        _spec(**overrides)
    assert field in str(info.value)


def test_numerics_fields_given_to_kernel_spec_itself_still_work_with_a_warning_naming_numerics():
    """Specs written before Numerics passed its fields to KernelSpec: they land in ``numerics``
    (over the one given, so ``dataclasses.replace`` changes that field alone), and a
    DeprecationWarning says where they belong."""
    with pytest.warns(DeprecationWarning, match=r"numerics=Numerics\(error_multiple=\.\.\., term_precision=\.\.\.\)"):
        spec = _spec(error_multiple=3.0, term_precision="float32")
    assert spec.numerics == Numerics(error_multiple=3.0, term_precision="float32")
    with pytest.warns(DeprecationWarning):
        changed = dataclasses.replace(spec, gradient_error_multiple=4.0)
    assert changed.numerics == Numerics(error_multiple=3.0, gradient_error_multiple=4.0, term_precision="float32")
    with pytest.warns(DeprecationWarning), pytest.raises(SpecError, match="numerics.error_multiple"):
        _spec(error_multiple=0.5)


def test_a_numerics_budget_is_per_dtype_and_per_direction():
    numerics = Numerics(error_multiple={"float32": 4.0, "float16": 2.0}, gradient_error_multiple=3.0)
    assert numerics.multiple_for("float32") == 4.0
    assert numerics.multiple_for("bfloat16") == 4.0  # not named: the largest declared
    assert numerics.multiple_for("float16", gradients=True) == 3.0
    assert numerics.multiple_for("bfloat16", interpreter=True, gradients=True) == 6.0
    assert Numerics().multiple_for("float16", gradients=True) == 2.0
    assert Numerics(term_precision="float32").term_dtype() is torch.float32 and Numerics().term_dtype() is None


def test_repository_specs_are_discovered():
    specs = load_specs()
    assert {"softmax", "add_mul_act"} <= set(specs)
    with pytest.raises(RegistryError, match="unknown kernel"):
        select(specs, ["sofmax"])


def test_external_module_registers_through_environment(tmp_path, monkeypatch):
    (tmp_path / "my_external_specs.py").write_text(textwrap.dedent('''
        from harness import Dim, KernelSpec, TensorArg
        EXTERNAL = KernelSpec(name="external_identity", reference=lambda x: x,
                              implementations={"mine": lambda x: x.clone()},
                              tensors=(TensorArg("x", dims=("n",)),), dims={"n": Dim()})
    '''))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_SPECS", "my_external_specs")
    assert "external_identity" in load_specs()


def test_duplicate_spec_names_and_broken_modules_are_reported(tmp_path, monkeypatch):
    (tmp_path / "dup_specs.py").write_text(
        "from specs.softmax import SPEC as _S\nimport dataclasses\nCOPY = dataclasses.replace(_S)\n"
    )
    (tmp_path / "broken_specs.py").write_text("raise ImportError('no such kernel')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("HARNESS_SPECS", "dup_specs")
    with pytest.raises(RegistryError, match="defined in both"):
        load_specs()
    monkeypatch.setenv("HARNESS_SPECS", "broken_specs")
    sys.modules.pop("broken_specs", None)
    with pytest.raises(RegistryError, match="broken_specs.*no such kernel"):
        load_specs()
