"""flash_attention's saved fp32 output is an average of v under the weights it was summed with.

The forward rounds each probability to the input dtype for the tensor-core PV product. Dividing
that sum by the sum of the unrounded probabilities (as the usual flash forward does) leaves the
weights summing to ``1 + e``, where e is the sum of the roundings: a random walk in most rows, but
in a near-uniform row (small keys: every probability just under 1) all of them round the same
way and e reaches 2^-9 in bf16. The backward's D = rowsum(dO * O), taken from the fp32 output, is
then off by e rowsum(dO * v) where every value row is equal, which no longer cancels against dP
in dS = P (dP - D): the H100 nightly run found dQ at 4.73 times its envelope (bf16, seq 509,
head_dim 16, small keys, v broadcast along the sequence; results/2026-11-25-h100-13, call 4).
A forward that records a graph now divides the fp32 output it saves for D by the sum of the
rounded probabilities, so equal value rows come back from it exactly, and that case is replayed
here on GPUs.
"""

import math

import pytest
import torch

from harness.case import Case
from harness.dispatch import run_check
from harness.registry import load_specs
from harness.validate import interpreting
from kernels._runtime import kernel_device_type
import kernels.flash_attention as attention


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
@pytest.mark.parametrize("causal", [False, True])
def test_equal_value_rows_come_back_from_the_weights_they_were_summed_with(dtype, causal):
    """Every key but the first scores 0 and the first scores d, so every probability but the row
    maximum's is exp(-d * scale), with d chosen to put it halfway between two values of the dtype:
    all of them round alike, by half an ulp. The forward's fp32 output (what the backward's D is
    taken from: the stored output plus its rounding residual) must still be the value row, to
    that pair's precision; divided by the unrounded sum it was off by the roundings' 2^-9 (bf16)
    or 2^-12 (fp16)."""
    device = torch.device(kernel_device_type())
    seq, head_dim, heads = 200, 16, 4
    ulp = 2.0 ** (-8 if dtype == torch.bfloat16 else -11)  # of values in [1/2, 1)
    d = -math.log(1 - 1.5 * ulp) * head_dim**0.5  # exp(-d * scale) = 1 - 1.5 ulp
    q = torch.zeros(1, heads, seq, head_dim)
    q[..., 0] = 1.0
    k = torch.zeros(1, heads, seq, head_dim)
    k[:, :, 0, 0] = d
    v_row = torch.randn(1, heads, 1, head_dim, generator=torch.Generator().manual_seed(7)) * 3
    q, k, v_row = (t.to(dtype).to(device) for t in (q, k, v_row))
    v = v_row.expand(1, heads, seq, head_dim)
    out, _, _, _, out_lo = attention._forward(q, k, v, causal, head_dim**-0.5, save_stats=True)
    full = out.double() + out_lo.double()
    relative = ((full - v.double()).abs() / v.double().abs()).max().item()
    # two fp32 sums of 200 terms, and a residual rounded to the dtype (the pair holds about twice
    # its precision): a few 1e-7 at most, where the roundings' common part was 2^-12 or 2^-9
    assert relative <= 2.0**-17, f"fp32 output {relative:.3g} relative off the value row"


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
# to eager's, and with D planted back on the unrounded sum (``acc / l``) its score stays 0.107, as
# the kernel's does: there it cannot fail for the bug it was kept for, and it took 35-90 s of the
# CPU suite. That plant passes it on an H200 too (benchmarks/results/2026-11-28-h200-27, call 5);
# the equal-value tests above fail on it on both.
@pytest.mark.skipif(interpreting(),
                    reason="a GPU replay: the interpreter does not reproduce this case's roundings (see above)")
def test_the_h100_case_of_near_uniform_rows_and_equal_values_is_well_within_the_gpu_budget():
    spec = load_specs()["flash_attention"]
    result = run_check(spec, spec.implementations["triton"].load(), "backward", Case.from_json(_CASE),
                       kernel_device_type())
    # Half the GPU's budget: the H100 found dQ at 4.73 envelopes on this case (budget 4).
    budget = spec.numerics.multiple_for("bfloat16", interpreter=False, gradients=True)
    assert result.score is not None and result.score <= budget / 2, result.details()
