"""The value kinds and the dims-dependent scalars added for n-gram blocking and DLRM."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from harness.spec import Dim, KernelSpec, TensorArg
from harness.strategies import cases
from harness.values import generate_values


def test_spread_tokens_repeat_and_reach_past_both_ends():
    seen_negative = seen_large = False
    for seed in range(40):
        values = generate_values("spread_tokens", (3, 50), seed)
        assert values.dtype == torch.int64
        assert len(set(values.flatten().tolist())) <= 6, "a small alphabet, so n-grams repeat"
        assert torch.equal(values, generate_values("spread_tokens", (3, 50), seed)), "must be seeded"
        seen_negative |= bool((values < 0).any())
        seen_large |= bool((values >= 4096).any())
    assert seen_negative and seen_large


def test_int64_ids_hit_the_wrapping_edges():
    values = generate_values("int64_ids", (64, 32), seed=5)
    assert values.dtype == torch.int64
    flat = set(values.flatten().tolist())
    assert {2**63 - 1, -(2**63)} <= flat and {-1, 0} <= flat
    assert len(flat) > 100, "most ids are spread over int64"


def test_a_scalar_may_depend_on_the_drawn_dims():
    spec = KernelSpec(
        name="dims_scalar_probe",
        reference=lambda x, parts: x,
        implementations={"copy": lambda x, parts: x},
        tensors=(TensorArg("x", dims=("n", "m")),),
        dims={"n": Dim(cpu_max=5), "m": Dim(cpu_max=9)},
        scalars={"parts": lambda dims: st.lists(st.integers(1, dims["m"]), min_size=dims["n"], max_size=dims["n"])},
    )

    @settings(max_examples=60, derandomize=True, database=None)
    @given(cases(spec, "float32", on_gpu=False))
    def consistent(case):
        parts = case.scalars["parts"]
        assert len(parts) == case.dims["n"] and all(1 <= p <= case.dims["m"] for p in parts)

    consistent()
