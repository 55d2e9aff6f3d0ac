"""A FlashAttention-2 backward is within flash_attention's budget; a D far off is not.

Every FlashAttention-2 kernel (this project's among them) takes the backward's row term
D = rowsum(dO * O) from the stored output, which carries the forward's roundings: P rounded to
the input dtype before PV against a running maximum, and O rounded when stored. The reference
states those roundings and the budget's floors size them (``references.flash_attention``), so
such a kernel must pass, and a D wrong by far more than they account for must still fail (on
one case here; the budget is looser on others, below). An
emulation of the scheme in torch (64-key blocks with a running maximum, as the GPU forward
tiles them) is checked here on the CPU at the GPU's budget, on cases of the kinds where D's
roundings were once found to exceed the budget on an H100.

Near-uniform rows whose value rows are equal: the forward rounds each probability to the input dtype
for the tensor-core PV product and divides by the sum of the unrounded probabilities, as every
FlashAttention-2 kernel does; the backward takes D = rowsum(dO * O) from the stored output. In a
near-uniform row (small keys: every probability just under 1) all the probabilities round the same
way, so the weights behind O sum to ``1 + e`` with e up to 2^-9 in bf16, and where every value row
is equal D is off by ``e rowsum(dO * v)``, which no longer cancels against dP in dS = P (dP - D).
The H100 nightly once found dQ at 4.73 times its envelope there (bf16, seq 509, head_dim 16, small
keys, v broadcast along the sequence; results/2026-11-25-h100-13, call 4). The case is replayed here
on GPUs with the kernel, and on every device with the emulation; neither can fail for that error
(below), so whether the H100 still finds it is open until an H100 runs the kernel.
"""

import math

import pytest
import torch

from harness.case import Case, TensorRecipe, canonical_layout
from harness.dispatch import run_check
from harness.registry import load_specs
from harness.validate import interpreting
from kernels._runtime import kernel_device_type
import references.flash_attention as reference


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
# 35-90 s of the CPU suite. It does not tell the schemes apart on an H200 either: with D planted
# back on the unrounded sum, before `62cc1de` made that the scheme, it passed there too
# (benchmarks/results/2026-11-28-h200-27, call 5). Only an H100 run can say whether that GPU
# still finds the case.
@pytest.mark.skipif(interpreting(),
                    reason="a GPU replay: the interpreter does not reproduce this case's roundings (see above)")
def test_the_h100_case_of_near_uniform_rows_and_equal_values_is_well_within_the_gpu_budget():
    spec = load_specs()["flash_attention"]
    result = run_check(spec, spec.implementations["triton"].load(), "backward", Case.from_json(_CASE),
                       kernel_device_type())
    # Half the GPU's budget: the H100 found dQ at 4.73 envelopes on this case (budget 4).
    budget = spec.numerics.multiple_for("bfloat16", interpreter=False, gradients=True)
    assert result.score is not None and result.score <= budget / 2, result.details()


class _FlashAttention2(torch.autograd.Function):
    """FlashAttention-2's arithmetic in torch, fp32 with its roundings to the input dtype (k and v
    spread over grouped q heads, and their gradients summed back, by the reference's helpers): the
    forward folds 64-key blocks into a running maximum m, sum l and accumulator, P rounded before
    PV, and stores O = acc / l rounded; the backward recomputes P from the log-sum-exp, rounds it
    for dV and dS for dQ and dK, and takes D from the stored O, times ``1 + d_error`` (0: the
    scheme as it is)."""

    @staticmethod
    def forward(ctx, q, k, v, causal, scale, d_error):
        s = _scores(q, k, causal, scale)
        v32 = reference._group(v.float(), q.shape[1])
        m = torch.full(s.shape[:-1], -torch.inf)
        l = torch.zeros(s.shape[:-1])
        acc = torch.zeros(q.shape)
        for start in range(0, s.shape[-1], 64):
            block = s[..., start:start + 64]
            m_new = torch.maximum(m, block.amax(-1))
            p = torch.exp(block - m_new[..., None])
            alpha = torch.exp(m - m_new)
            l = l * alpha + p.sum(-1)
            acc = acc * alpha[..., None] + p.to(q.dtype).float() @ v32[..., start:start + 64, :]
            m = m_new
        out, lse = (acc / l[..., None]).to(q.dtype), m + torch.log(l)
        ctx.save_for_backward(q, k, v, out, lse)
        ctx.causal, ctx.scale, ctx.d_error = causal, scale, d_error
        return out, lse

    @staticmethod
    def backward(ctx, dout, dlse):
        q, k, v, out, lse = ctx.saved_tensors
        heads, kv_heads = q.shape[1], k.shape[1]
        k32, v32 = (reference._group(t.float(), heads) for t in (k, v))
        p = torch.exp(_scores(q, k, ctx.causal, ctx.scale) - lse[..., None])
        dout = torch.zeros(out.shape) if dout is None else dout.float()
        d = (dout * out.float()).sum(-1) * (1 + ctx.d_error)
        if dlse is not None:
            d = d - dlse.float()
        ds = (p * (dout @ v32.transpose(-2, -1) - d[..., None])).to(q.dtype).float()
        dq = ds @ k32 * ctx.scale
        dk = reference._group_sum(ds.transpose(-2, -1) @ q.float() * ctx.scale, kv_heads)
        dv = reference._group_sum(p.to(q.dtype).float().transpose(-2, -1) @ dout, kv_heads)
        return dq.to(q.dtype), dk.to(k.dtype), dv.to(v.dtype), None, None, None


def _scores(q, k, causal, scale):
    s = (q.float() @ reference._group(k.float(), q.shape[1]).transpose(-2, -1)) * scale
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2:], dtype=torch.bool).triu(1), -torch.inf)
    return s


def _flash_attention_2(d_error: float):
    def call(q, k, v, causal=False, scale=None):
        return _FlashAttention2.apply(q, k, v, causal, q.shape[-1] ** -0.5 if scale is None else scale, d_error)
    return call


def _case(dtype, seq, head_dim, causal, scale, seed, values) -> Case:
    """A one-head case, contiguous: q and k normal, v of ``values``."""
    shape = (1, 1, seq, head_dim)
    layout = canonical_layout("contiguous", len(shape), shape)
    kinds = {"q": "normal", "k": "normal", "v": values}
    return Case(spec="flash_attention", dtype=dtype,
                dims={"batch": 1, "group": 1, "head_dim": head_dim, "kv_heads": 1, "seq": seq},
                tensors={name: TensorRecipe(shape, dtype, layout, kind, seed + offset)
                         for offset, (name, kind) in enumerate(kinds.items(), start=1)},
                scalars={"causal": causal, "scale": scale}, grad_seed=seed)


# The shapes of the H100 nightly's failures of D from the stored output (2026-11-23-h100-3: fp16,
# seq 251, head_dim 128, and bf16, seq 381, head_dim 16, v of mixed row scales; their tensors were
# not kept, so these draw new ones of the same kinds); a causal case of mixed scales; and the
# near-uniform case above, as it was found (where, on the CPU, no D error of the sizes here moves
# the score: it cannot tell a right D from a wrong one, only an H100 run of the kernel can).
_FA2_CASES = {
    "fp16 seq 251 head_dim 128 mixed": _case("float16", 251, 128, False, None, 4, "mixed_scales"),
    "bf16 seq 381 head_dim 16 mixed": _case("bfloat16", 381, 16, False, None, 7, "mixed_scales"),
    "fp16 causal mixed": _case("float16", 127, 64, True, None, 3, "mixed_scales"),
    "bf16 near-uniform, equal values": Case.from_json(_CASE),
}


def _backward_score(case: Case, d_error: float) -> tuple[float, float, str]:
    spec = load_specs()["flash_attention"]
    result = run_check(spec, _flash_attention_2(d_error), "backward", case, "cpu")
    return result.score, spec.numerics.multiple_for(case.dtype, interpreter=False, gradients=True), result.details()


@pytest.mark.parametrize("name", list(_FA2_CASES))
def test_a_flash_attention_2_backward_is_within_the_gpu_budget(name):
    score, budget, details = _backward_score(_FA2_CASES[name], 0.0)
    assert score <= budget, details


def test_a_d_off_by_2_to_the_minus_6_fails():
    # 2^-6 of D is 32 unit roundoffs of fp16: no rounding of the scheme comes near it. It fails on
    # its numbers (6.5 against 4, where the scheme scores 0.54), not on a NaN or an overflow. The
    # budget is not that tight on every case: on the other three the same D scores 0.27-0.84, the
    # reference's own cancellation (the seq-251 case) or eager's error setting the envelope.
    score, budget, details = _backward_score(_FA2_CASES["fp16 causal mixed"], 2.0**-6)
    assert math.isfinite(score) and "NaN/inf" not in details, details
    assert score > budget, details
