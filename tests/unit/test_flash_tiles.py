"""flash_attention's backward tiles: the large tiles on a full grid, smaller key blocks where they
would leave SMs idle (``kernels/flash_attention._GPU_BWD``). The choice is host arithmetic, so it
is tested here on any machine; the GPU runs check each tile's gradients."""

import math

import pytest
import torch

from harness.case import Case, TensorRecipe, canonical_layout
from harness.dispatch import run_check
from harness.registry import load_specs
from harness.validate import interpreting
from kernels import _rows
from kernels import flash_attention as fa
from kernels._runtime import kernel_device_type

SMS = 132  # an H100 SXM or H200: the GPU the steps were measured on


def _key_block(head_dim, causal, seq, batch_heads, sms=SMS):
    return fa._gpu_bwd_config(head_dim, causal, seq, batch_heads, sms).block_n1


@pytest.mark.parametrize("head_dim", fa.HEAD_DIMS)
def test_each_head_dim_s_steps_are_valid_launches_from_largest_to_any_grid(head_dim):
    steps = fa._GPU_BWD[head_dim]
    for config, causal_share, share in steps:
        assert config.block_n1 == config.block_m2, config  # program i: key block i and query block i
        assert config.block_n1 % config.block_m1 == 0 and config.block_m2 % config.block_n2 == 0, config
        assert causal_share >= 0 and share >= 0
    assert [s.config.block_n1 for s in steps] == sorted({s.config.block_n1 for s in steps}, reverse=True)
    assert (steps[-1].causal, steps[-1].not_causal) == (0.0, 0.0), "the last step must take any grid"
    for causal in (False, True):  # a one-program grid gets the last step, a huge one the first it may take
        assert fa._gpu_bwd_config(head_dim, causal, 1, 1, SMS) == steps[-1].config
        first = next(s for s in steps if math.isfinite(s.causal if causal else s.not_causal))
        assert fa._gpu_bwd_config(head_dim, causal, 1 << 20, 64, SMS) == first.config


@pytest.mark.parametrize("causal", [False, True])
def test_a_full_grid_keeps_the_large_tiles_at_every_benchmark_shape(causal):
    # (seq, batch x q heads) of specs/flash_attention.py's benchmark shapes
    for seq, batch_heads in ((1024, 64), (4096, 16), (16384, 2), (4096, 32)):
        assert _key_block(64, causal, seq, batch_heads) == (64 if causal else 128)
        assert _key_block(128, causal, seq, batch_heads) == 64


def test_smaller_key_blocks_where_the_grid_would_leave_sms_idle():
    # head_dim 64: 128-key blocks (not causal only) where they have a program per SM, 64-key blocks
    # where they have 0.95 per SM (causal) or one per two SMs (not causal); head_dim 128: 64-key
    # blocks per two SMs either way; else 32-key blocks
    assert _key_block(64, True, 4096, 64) == 64  # 4096 programs of 64 keys: causal never takes 128
    assert _key_block(64, True, 4096, 4) == 64  # 256 programs of 64 keys
    assert _key_block(64, True, 4096, 2) == 64  # 128 >= 0.95 x 132
    assert _key_block(64, True, 4096, 1) == 32  # 64
    assert _key_block(64, False, 4096, 5) == 128  # 160 programs of 128 keys
    assert _key_block(64, False, 4096, 4) == 64  # 128 of 128 keys (fewer than 132), 256 of 64
    assert _key_block(64, False, 4096, 2) == 64  # 128 of 64 keys >= 66
    assert _key_block(64, False, 4096, 1) == 32  # 64 < 66
    assert _key_block(128, True, 4096, 2) == 64  # 128 programs
    assert _key_block(128, False, 4096, 1) == 32  # 64 programs
    # a grid of exactly the share takes the step, one program fewer does not
    assert _key_block(64, True, 64 * 133, 1, sms=140) == 64 and _key_block(64, True, 64 * 132, 1, sms=140) == 32
    assert _key_block(64, False, 128 * 33, 4) == 128  # 132 programs of 128 keys
    assert _key_block(64, False, 64 * 33, 2) == 64  # 66 programs of 64 keys
    assert _key_block(128, True, 64 * 33, 2) == 64  # 66 programs
    assert _key_block(128, True, 64 * 32 + 1, 2) == 64 and _key_block(128, True, 64 * 32, 2) == 32
    # the thresholds scale with the SMs
    assert _key_block(64, True, 4096, 4, sms=269) == 64 and _key_block(64, True, 4096, 4, sms=270) == 32
    assert _key_block(64, False, 4096, 5, sms=160) == 128 and _key_block(64, False, 4096, 5, sms=161) == 64


def test_the_grid_counts_batches_and_q_heads_alike(monkeypatch):
    monkeypatch.setattr(_rows, "_SMALL_TILES", False)
    monkeypatch.setattr(fa, "sm_count", lambda device: SMS)
    device = torch.device("cuda", 0)  # never touched: sm_count is the stand-in above
    assert fa._bwd_config((1, 4, 4096, 64), True, device).block_n1 == 64
    assert fa._bwd_config((2, 2, 4096, 64), True, device).block_n1 == 64
    assert fa._bwd_config((1, 2, 2048, 64), True, device).block_n1 == 32
    assert fa._bwd_config((2, 1, 2048, 64), True, device).block_n1 == 32
    assert fa._bwd_config((4, 16, 1024, 64), False, device).block_n1 == 128
    assert fa._bwd_config((1, 4, 4096, 64), False, device).block_n1 == 64


# (head_dim, causal, q heads a program, block_n1) -> the form measured fastest (or within 0.2% of
# it) on an H200, as (queries as rows, dP first): benchmarks/results/2026-11-29-h200-29, the table
# "Which form where"
_MEASURED_FASTEST_LOOPS = {
    (64, True, 1, 64): (True, True), (64, True, 4, 64): (True, True), (128, True, 4, 64): (True, False),
    (128, False, 4, 64): (True, True), (64, False, 1, 64): (True, True), (128, False, 1, 64): (False, True),
    (64, False, 2, 128): (False, True), (64, False, 1, 128): (False, True), (64, True, 1, 32): (False, False),
    (128, True, 1, 32): (False, False), (64, False, 1, 32): (False, True), (128, False, 1, 32): (False, True),
}


@pytest.mark.parametrize("key", _MEASURED_FASTEST_LOOPS, ids=str)
def test_the_dkdv_loop_takes_the_form_measured_fastest(key):
    assert fa._dkdv_loop(*key) == _MEASURED_FASTEST_LOOPS[key]


def test_the_interpreter_takes_its_own_small_tiles_and_test_shapes_cross_every_gpu_block(monkeypatch):
    if _rows._SMALL_TILES:
        assert fa._bwd_config((1, 1, 4096, 64), True, torch.device("cpu")) == fa._INTERPRETER_BWD
    monkeypatch.setattr(_rows, "_SMALL_TILES", False)
    boundaries = set(fa.block_boundaries())
    for step in fa._GPU_BWD[64]:
        assert {step.config.block_m1, step.config.block_n1} <= boundaries


def _case(batch_heads, seq, head_dim, causal, dtype):
    shape = (1, batch_heads, seq, head_dim)
    layout = canonical_layout("contiguous", len(shape), shape)
    return Case(spec="flash_attention", dtype=dtype,
                dims={"batch": 1, "kv_heads": batch_heads, "group": 1, "seq": seq, "head_dim": head_dim},
                tensors={name: TensorRecipe(shape, dtype, layout, "normal", seed) for seed, name in enumerate("qkv")},
                scalars={"causal": causal, "scale": None}, grad_seed=3)


# The GPU property cases are small, so most take the last (small-grid) step: here every step of
# head_dim 64 and 128 gets a case sized to take it on this GPU, its gradients judged by the
# harness's own backward check against the reference. Sequences end inside a block of each tile.
@pytest.mark.skipif(_rows._SMALL_TILES, reason="the GPU's tiles: small tiles (the interpreter, or "
                                                 "HARNESS_SMALL_TILES=1) have one backward tile, which "
                                                 "every kernel check takes")
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("head_dim", [64, 128])
def test_every_backward_step_passes_the_backward_check_on_a_grid_that_takes_it(head_dim, causal):
    device = torch.device(kernel_device_type())
    spec = load_specs()["flash_attention"]
    kernel = spec.implementations["triton"].load()
    sizes = sorted(((bh, seq) for bh in (1, 2, 4, 8, 16, 32) for seq in (300, 700, 1100, 2100)),
                   key=lambda size: size[0] * size[1])
    steps = [step.config for step in fa._GPU_BWD[head_dim] if math.isfinite(step.causal if causal else step.not_causal)]
    for step, config in enumerate(steps):
        size = next(((bh, seq) for bh, seq in sizes if fa._bwd_config((1, bh, seq, head_dim), causal, device) == config),
                    None)
        assert size is not None, f"no test size takes step {step} ({config}) on this GPU"
        for dtype in ("float16", "bfloat16"):
            result = run_check(spec, kernel, "backward", _case(*size, head_dim, causal, dtype), device)
            assert result.passed, f"step {step} {config}, batch x heads, seq = {size}, {dtype}:\n{result.details()}"


# (q heads, k/v heads, seq, head_dim): one q head a program, and a grouped-query program looping
# over a chunk of 2 q heads (CHUNK > 1); on a GPU sized to take the large tiles (at head_dim 64
# not causal, 32 x 128: the loop's blocks are not square).
_ORDER_SIZES = (((2, 2, 77, 32), (4, 2, 77, 32)) if interpreting()
                else ((16, 16, 1100, 64), (16, 16, 1100, 128), (32, 16, 1100, 128)))


@pytest.mark.parametrize("size", _ORDER_SIZES, ids=str)
@pytest.mark.parametrize("causal", [False, True])
def test_the_dkdv_loop_s_orientations_and_orders_give_the_same_bits(monkeypatch, causal, size):
    # QUERY_ROWS transposes the loop's products and DP_FIRST reorders them (the docstring of
    # _bwd_dkdv_blocks): every sum is the same, so on a GPU the gradients must be bitwise equal
    # whichever of the four loops _dkdv_loop gives a shape. The interpreter computes a product with
    # np.matmul, whose order of summation follows the operands' memory layout and the BLAS kernel
    # chosen for the CPU (an AMD EPYC's OpenBLAS gives other bits for a transposed product than
    # for the same product laid out plainly; an earlier machine's did not). There the scores of
    # the two orientations may differ in their last fp32 bit, which moves a rounded P or dS by an
    # ulp where it straddles a rounding boundary: a few gradient elements then differ, by far less
    # than an ulp of the gradient's largest element (seen: 6e-5 against 5.3). Only the orders
    # within one orientation must give the same bits there.
    heads, kv_heads, seq, head_dim = size
    device = torch.device(kernel_device_type())
    gen = torch.Generator().manual_seed(5)
    q, dout = (torch.randn(1, heads, seq, head_dim, generator=gen).to(torch.float16).to(device) for _ in range(2))
    k, v = (torch.randn(1, kv_heads, seq, head_dim, generator=gen).to(torch.float16).to(device) for _ in range(2))
    out, _, m, l = fa._forward(q, k, v, causal, 0.2, save_stats=True)
    grads = {}
    for loop in ((False, False), (False, True), (True, False), (True, True)):
        monkeypatch.setattr(fa, "_dkdv_loop", lambda *args, loop=loop: loop)
        grads[loop] = fa._backward(q, k, v, out, m, l, dout, None, causal, 0.2)
    for loop, got in grads.items():
        same_orientation = grads[loop[0], False]
        for name, a, b, c in zip(("dq", "dk", "dv"), got, same_orientation, grads[False, False]):
            assert torch.equal(a, b), f"{name}, (query_rows, dp_first) = {loop}"
            if interpreting():  # within an ulp of the largest element: a wrong product is far off
                torch.testing.assert_close(a, c, rtol=0, atol=2**-10 * c.abs().max().item(), msg=f"{name}, {loop}")
            else:
                assert torch.equal(a, c), f"{name}, (query_rows, dp_first) = {loop}"


@pytest.mark.parametrize("chunks", [2, 3, 4])
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_the_group_sum_adds_the_chunks_in_order_and_rounds_once(chunks, dtype):
    # A grouped-query backward split in chunks stores one fp32 partial dK and dV per chunk;
    # _group_sum_kernel adds them in chunk order, in fp32, and rounds once: the bits of that left
    # fold, on sizes that leave a ragged last block.
    device = torch.device(kernel_device_type())
    gen = torch.Generator().manual_seed(chunks)
    batch, kv_heads, seq, head_dim = 2, 3, 37, 32  # 1184 elements a head: a block and a ragged one
    parts = [torch.randn(batch, kv_heads, chunks, seq, head_dim, generator=gen).to(device) for _ in range(2)]
    dk, dv = (torch.full((batch, kv_heads, seq, head_dim), float("nan"), dtype=dtype, device=device) for _ in range(2))
    grid, args, meta = fa._group_sum_launch(*parts, dk, dv)
    with _rows.launch_guard(dk):
        fa._group_sum_kernel[grid](*args, **meta)
    for name, got, part in (("dk", dk, parts[0]), ("dv", dv, parts[1])):
        folded = part[:, :, 0].clone()
        for c in range(1, chunks):
            folded += part[:, :, c]
        assert torch.equal(got, folded.to(dtype)), name
