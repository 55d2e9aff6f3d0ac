"""The backward check from the first output alone: the path of a caller who ignores an output."""

import torch

from harness import Batch, Dim, KernelSpec, TensorArg, TilingCase
from harness.checks import check_backward
from harness.device import current_device
from harness.strategies import tiling_examples


class _TwoOutputs(torch.autograd.Function):
    """(2x, sum of x over the last dim), with a backward that is wrong only when the second
    output is unused (its gradient arrives as None): the path a caller who ignores attention's
    lse takes."""

    @staticmethod
    def forward(ctx, x):
        ctx.set_materialize_grads(False)
        return x * 2, x.sum(-1)

    @staticmethod
    def backward(ctx, g_out, g_sum):
        if g_sum is None:
            return g_out  # forgets the factor 2
        return g_out * 2 + g_sum[..., None]


def _two_reference(x):
    return x * 2, x.sum(-1)


def test_a_backward_wrong_only_when_an_output_is_unused_fails_on_the_first_output_alone():
    spec = KernelSpec(
        name="two_outputs", reference=_two_reference, implementations={"triton": lambda x: _TwoOutputs.apply(x)},
        tensors=(TensorArg("x", dims=("*batch", "rows", "cols"), grad=True),),
        dims={"*batch": Batch(max_rank=1, cpu_max=2), "rows": Dim(cpu_max=6), "cols": Dim(cpu_max=16)},
        outputs=("out", "total"), dtypes=("float32",),
        tiling_cases=(TilingCase("a case", dims={"cols": 7}),),
    )
    case = tiling_examples(spec, "float32", on_gpu=False, salt=1)[0]
    result = check_backward(spec, spec.implementations["triton"].load(), case, current_device())
    assert not result.passed
    failed = [c for c in result.comparisons if not c.passed]
    assert failed and all("the first output alone" in c.name for c in failed)
    assert any(c.passed and "first output" not in c.name for c in result.comparisons)
