"""flash_attention's backward on near-uniform rows whose value rows are equal.

The forward rounds each probability to the input dtype for the tensor-core PV product and divides
by the sum of the unrounded probabilities, as every FlashAttention-2 kernel does; the backward
takes D = rowsum(dO * O) from the stored output. In a near-uniform row (small keys: every
probability just under 1) all the probabilities round the same way, so the weights behind O sum
to ``1 + e`` with e up to 2^-9 in bf16, and where every value row is equal D is off by
``e rowsum(dO * v)``, which no longer cancels against dP in dS = P (dP - D). The H100 nightly
found dQ at 4.73 times its envelope there (bf16, seq 509, head_dim 16, small keys, v broadcast
along the sequence; results/2026-11-25-h100-13, call 4), under a budget whose floor for D's
P rounding (``references.flash_attention.gradient_rounded_terms``) was then new. The case is
replayed here on GPUs.
"""

import pytest

from harness.case import Case
from harness.dispatch import run_check
from harness.registry import load_specs
from harness.validate import interpreting
from kernels._runtime import kernel_device_type


# The H100 nightly's failing case (call 4): dQ scored 4.73 against a budget of 4 there.
_CASE = {
    "dims": {"batch": 1, "head_dim": 16, "heads": 1, "seq": 509}, "dtype": "bfloat16",
    "grad_layout": "contiguous", "grad_seed": 0, "scalars": {"causal": False, "scale": None}, "schema": 1,
    "spec": "flash_attention",
    "tensors": {
        "k": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 0,
              "shape": [1, 1, 509, 16], "values": "small"},
        "q": {"dtype": "bfloat16", "layout": {"expanded": [], "offset": 0, "perm": [], "steps": []}, "seed": 1,
              "shape": [1, 1, 509, 16], "values": "normal"},
        "v": {"dtype": "bfloat16", "layout": {"expanded": [2], "offset": 0, "perm": [], "steps": []}, "seed": 0,
              "shape": [1, 1, 509, 16], "values": "normal"},
    },
}


# A replay of the H100 nightly's case, on GPUs only. Under Triton's interpreter its gradients round
# to eager's (score 0.107): there it cannot fail for the roundings it was kept for, and it took
# 35-90 s of the CPU suite.
@pytest.mark.skipif(interpreting(),
                    reason="a GPU replay: the interpreter does not reproduce this case's roundings (see above)")
def test_the_h100_case_of_near_uniform_rows_and_equal_values_is_well_within_the_gpu_budget():
    spec = load_specs()["flash_attention"]
    result = run_check(spec, spec.implementations["triton"].load(), "backward", Case.from_json(_CASE),
                       kernel_device_type())
    # Half the GPU's budget: the H100 found dQ at 4.73 envelopes on this case (budget 4).
    budget = spec.numerics.multiple_for("bfloat16", interpreter=False, gradients=True)
    assert result.score is not None and result.score <= budget / 2, result.details()
