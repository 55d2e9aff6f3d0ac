"""The norms' GPU launch choices (``kernels._norm_tiling._tile``) and dropout's scale, checked on the CPU.

The GPU launches apply per-shape exceptions measured on the H100 after the shared limits; these
tests pin which shapes they reach, that they stay off under the interpreter and while a sweep
times candidates as given, and that every tile they give is a valid one.
"""

from types import SimpleNamespace

import pytest
import torch

import kernels._norm as norm
import kernels._norm_tiling as tiling
from kernels import _rows
from kernels._runtime import kernel_device_type


@pytest.fixture
def on_gpu(monkeypatch):
    """_tile as it chooses on a GPU."""
    monkeypatch.setattr(_rows, "_SMALL_TILES", False)
    monkeypatch.setattr(tiling, "_fwd_limits", lambda: tiling._GPU_FWD)
    tiling._tile.cache_clear()
    yield
    tiling._tile.cache_clear()


def _plain(n, dtype):
    return _rows.row_tile(n, dtype.itemsize, tiling._GPU_BWD)


def test_overrides_reach_only_their_shapes(on_gpu):
    bf16, fp32 = torch.bfloat16, torch.float32
    # 16-bit rows of 512-1024: fewer warps, both norms; 256-wide rows keep the shared tile
    assert tiling._tile(1024, bf16, True, False).num_warps < _plain(1024, bf16).num_warps
    assert tiling._tile(512, bf16, True, False).num_warps < _plain(512, bf16).num_warps
    assert tiling._tile(256, bf16, True, False) == _plain(256, bf16)
    assert tiling._tile(1024, fp32, True, False) == _plain(1024, fp32)
    # rows wider than a block: the column kernel's blocks, for every op and dtype
    for dtype in (bf16, fp32, torch.float64):
        for dropout in (False, True):
            wide = tiling._tile(16384, dtype, True, dropout)
            assert wide == _rows.row_tile(16384, dtype.itemsize, tiling._GPU_BWD_COLUMNS)
            assert wide.col_blocks == 16384 // tiling._GPU_BWD_COLUMNS.split_block
    # dropout-add-norm: 8 KB of input a tile whatever the dtype, but fp32 rows of 1024: one row, 4 warps
    for n, dtype in ((1024, bf16), (512, fp32), (2048, fp32)):
        tile = tiling._tile(n, dtype, True, True)
        assert tile.rows * tile.block * dtype.itemsize == tiling._DROPOUT_BWD_TILE_BYTES
    assert tiling._tile(1024, fp32, True, True)[:3] == (1024, 1, 4)
    # the plain forward keeps the shared tile; dropout-add-norm's forward takes 1024 elements a program
    assert tiling._tile(1024, bf16, False, False) == _rows.row_tile(1024, 2, tiling._GPU_FWD)
    for n, dtype in ((1024, fp32), (1024, bf16), (256, bf16)):
        dropout, plain = tiling._tile(n, dtype, False, True), tiling._tile(n, dtype, False, False)
        assert (dropout.rows, plain.rows) == (1024 // n, 4096 // n)
        assert dropout.num_warps == plain.num_warps * dropout.rows // plain.rows  # the same bytes a thread
    # rows of 4096 or more: one row a program either way, the same launch
    assert tiling._tile(4096, bf16, False, True) == tiling._tile(4096, bf16, False, False)


def test_a_sweep_times_its_candidates_as_given(on_gpu):
    with tiling.TUNING.replaced(overrides=False):
        for n, dtype, dropout in ((1024, torch.bfloat16, False), (8192, torch.bfloat16, False), (1024, torch.float32, True)):
            assert tiling._tile(n, dtype, True, dropout) == _plain(n, dtype)
            assert tiling._tile(n, dtype, False, dropout) == _rows.row_tile(n, dtype.itemsize, tiling._GPU_FWD)
    # rows wider than a block take the column kernel's own limits (the column sweep varies them)
    columns = tiling._GPU_BWD_COLUMNS._replace(split_block=512)
    with tiling.TUNING.replaced(backward_columns=columns):
        assert tiling._tile(16384, torch.bfloat16, True, False) == _rows.row_tile(16384, 2, columns)
    assert tiling._tile(16384, torch.bfloat16, True, False) == _rows.row_tile(16384, 2, tiling._GPU_BWD_COLUMNS)


def test_a_sweep_can_send_narrower_rows_to_the_column_kernels(on_gpu):
    assert tiling._tile(8192, torch.bfloat16, True, False).col_blocks == 1
    with tiling.TUNING.replaced(columns_from=2048):  # the cached tiles are forgotten
        for n in (2048, 8192):
            tile = tiling._tile(n, torch.bfloat16, True, False)
            block = tiling._GPU_BWD_COLUMNS.split_block
            assert (tile.block, tile.col_blocks) == (block, n // block)
            assert not tiling._bwd_prefetch(n, torch.bfloat16, True, False)
        assert tiling._tile(1024, torch.bfloat16, True, False).col_blocks == 1
    assert tiling._tile(8192, torch.bfloat16, True, False).col_blocks == 1


def test_overrides_are_off_under_the_interpreter():
    tiling._tile.cache_clear()
    if not _rows._SMALL_TILES:
        pytest.skip("this process runs kernels on a GPU's own tiles; the small tiles are the CPU's")
    interpreter = _rows.row_tile(1024, 2, tiling._INTERPRETER_BWD)
    assert tiling._tile(1024, torch.bfloat16, True, False) == interpreter
    assert tiling._tile(1024, torch.bfloat16, False, True) == _rows.row_tile(1024, 2, tiling._INTERPRETER_FWD)


@pytest.mark.parametrize("p", [0.0, 2**-7, 0.1, 0.3, 0.5, 0.9, 1.0])
def test_dropout_scale_travels_as_its_fp32_part_and_the_rest(p):
    drop = norm.Dropout.of(p, seed=0)
    exact = 0.0 if p == 1.0 else 1.0 / (1.0 - p)
    assert float(torch.tensor(drop.scale, dtype=torch.float32)) == drop.scale  # what a compiled kernel gets
    assert drop.scale + drop.scale_lo == exact
    assert abs(float(torch.tensor(drop.scale_lo, dtype=torch.float32)) - drop.scale_lo) <= 2**-24 * abs(drop.scale_lo)


def test_fp32_prenorm_sum_is_correctly_rounded_where_it_cancels():
    """x / (1 - p) nearly cancelling the residual: the sum the kernel stores must be the exact sum
    rounded once (the H100 found it 15 ulp off with the scale rounded to fp32)."""
    from kernels.dropout_add_norm import dropout_add_norm

    p = 2**-7
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(4, 100, dtype=torch.float64, generator=gen) * 1e-3).float()
    near = -(x.double() / (1 - p)) * (1 + 1e-5 * torch.randn(4, 100, dtype=torch.float64, generator=gen))
    residual = near.float()
    device = kernel_device_type()  # the kernel's own device: the H100 is where the error was found
    _, s, keep = dropout_add_norm(x.to(device), residual.to(device), p=p, seed=3, prenorm=True, return_mask=True)
    s, keep = s.cpu(), keep.cpu()
    exact = (x.double() * keep.double() / (1 - p) + residual.double()).float()
    assert keep.float().mean() > 0.9  # most elements take the cancelling path
    assert torch.equal(s, exact)


@pytest.mark.parametrize("n, dtype, rms, dropout, expected", [
    (1024, torch.float32, False, True, True),  # fp32 dropout-add-norm, rows of 1024 only
    (512, torch.float32, False, True, False),
    (2048, torch.float32, False, True, False),
    (1024, torch.bfloat16, False, True, False),
    (256, torch.bfloat16, True, False, True),  # 16-bit RMSNorm, rows of 256-1024
    (1024, torch.float16, True, False, True),
    (128, torch.bfloat16, True, False, False),
    (2048, torch.bfloat16, True, False, False),
    (1024, torch.bfloat16, False, False, False),  # not LayerNorm
    (512, torch.float16, False, False, False),
    (1024, torch.float32, True, False, False),
    (16384, torch.bfloat16, True, False, False),  # rows in column blocks: not measured with it
])
def test_prefetch_reaches_only_its_shapes(on_gpu, n, dtype, rms, dropout, expected):
    assert tiling._bwd_prefetch(n, dtype, rms, dropout) is expected


def test_prefetch_is_off_in_a_sweep_unless_forced(on_gpu):
    with tiling.TUNING.replaced(overrides=False):
        assert not tiling._bwd_prefetch(1024, torch.float32, False, True)
        with tiling.TUNING.replaced(prefetch=True):
            assert tiling._bwd_prefetch(4096, torch.float64, False, False)


def test_the_interpreter_runs_both_forms_of_the_backward_loop():
    if not _rows._SMALL_TILES:
        pytest.skip("this process runs kernels on a GPU's own tiles; the small tiles' rule is the CPU's")
    forms = {tiling._bwd_prefetch(48, dtype, rms, dropout) for dtype in (torch.float32, torch.bfloat16)
             for rms in (False, True) for dropout in (False, True)}
    assert forms == {False, True}


def test_backward_programs_fill_the_gpu_across_column_blocks(monkeypatch):
    """Groups x column blocks is about programs-per-SM x SMs: rows wider than a block divide the
    count among their column blocks, so that their groups (one partial row each) stay few."""
    monkeypatch.setattr(tiling, "sm_count", lambda device: 132)
    monkeypatch.setattr(_rows, "_SMALL_TILES", False)
    on_cuda = SimpleNamespace(device=SimpleNamespace(type="cuda"))
    assert tiling._GPU_BWD_PROGRAMS_PER_SM == 2
    assert tiling._tiles_per_group(on_cuda, 256, 1, 2) == 1  # 256 tiles, up to 264 programs
    assert tiling._tiles_per_group(on_cuda, 256, 16, 2) == 16  # 16 groups x 16 column blocks = 256
    assert tiling._tiles_per_group(on_cuda, 256, 512, 2) == 256  # more blocks than programs: one group
    assert tiling._bwd_programs_per_sm(False) == tiling._GPU_BWD_PROGRAMS_PER_SM
    assert tiling._bwd_programs_per_sm(True) == tiling._GPU_BWD_COLUMN_PROGRAMS_PER_SM
    with tiling.TUNING.replaced(backward_programs_per_sm=8):  # a sweep's forced count
        assert tiling._bwd_programs_per_sm(False) == tiling._bwd_programs_per_sm(True) == 8


@pytest.mark.parametrize("rms, dropout, dtype, wide", [
    (True, False, torch.bfloat16, False), (False, False, torch.float16, False), (False, True, torch.float32, False),
    (True, False, torch.float32, False), (False, False, torch.bfloat16, True), (False, True, torch.float32, True),
])
def test_prefetch_changes_no_bit_of_the_backward(monkeypatch, rms, dropout, dtype, wide):
    """Prefetch moves loads, not arithmetic: with it forced on and off the gradients must agree
    bitwise, over groups of several row tiles (on a GPU: one program per SM, so each walks many),
    in rows of one block and in rows cut into column blocks (``wide``)."""
    device = kernel_device_type()
    if device == "cuda":
        rows, n = (512, 16384 + 3) if wide else (4096, 1024)
    else:
        rows, n = (37, 150) if wide else (37, 48)
    gen = torch.Generator(device="cpu").manual_seed(7)
    x, dy = (torch.randn(rows, n, generator=gen).to(device, dtype) for _ in range(2))
    w, b = (torch.randn(n, generator=gen).to(device, dtype) for _ in range(2))
    drop = norm.Dropout.of(0.25, 99) if dropout else None
    residual = torch.randn(rows, n, generator=gen).to(device, dtype) if dropout else None
    fwd = norm.forward(x, w, None if rms else b, eps=1e-5, rms=rms, residual=residual, xbias=b if dropout else None,
                       dropout=drop, store_sum=dropout)
    src = fwd.s if dropout else x
    grads = []
    for prefetch in (False, True):
        with tiling.TUNING.replaced(backward_programs_per_sm=1, prefetch=prefetch):  # the plans are rebuilt
            out = norm.backward(src, dy, w, fwd.stats, rms=rms, dropout=drop, need_dweight=True, need_dbias=not rms,
                                need_dxbias=dropout)
        grads.append([g for g in out if g is not None])
    assert (tiling._tile(n, dtype, True, dropout).col_blocks > 1) == wide
    for plain, ahead in zip(*grads):
        assert torch.equal(plain, ahead)


def test_a_zero_stride_gradient_reaches_the_backward_dense(monkeypatch):
    """The gradient of a sum is an expanded (stride-0) tensor; a compiled call's backward gets it
    dense (AOTAutograd), so the direct call's must too: on the GPU the kernel's bits differed."""
    seen = []
    real = norm._BackwardPlan.__call__
    monkeypatch.setattr(norm._BackwardPlan, "__call__", lambda self, src, dy, *rest: seen.append(dy.stride())
                        or real(self, src, dy, *rest))
    device = kernel_device_type()
    x = torch.randn(8, 2, device=device, dtype=torch.float16)
    fwd = norm.forward(x, None, None, eps=1e-5, rms=False)
    expanded = torch.randn(1, 2, device=device, dtype=torch.float16).expand(8, 2)
    dense = norm.backward(x, expanded.contiguous(), None, fwd.stats, rms=False)
    got = norm.backward(x, expanded, None, fwd.stats, rms=False)
    assert seen == [(2, 1), (2, 1)] and torch.equal(got.ds, dense.ds)
