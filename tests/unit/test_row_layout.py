"""Row layouts (``kernels._rows``): the offset the kernels compute for each row is that row's.

``row_layout`` describes a tensor as rows of a unit-stride last dimension with three integers, and
the jit function ``row_offset`` turns them into each row's start. A tensor whose leading
dimensions fold into one group (2-D, contiguous, a single row) takes ``inner_rows`` 1, which Triton
compiles as a constant (no division); two groups (a transposed or broadcast batch dimension)
divide. Here a small kernel
writes ``row_offset`` for every row, on the kernels' device (the interpreter on a CPU machine), and
each must match where torch keeps that row's first element.
"""

import itertools

import pytest
import torch
import triton
import triton.language as tl

from kernels import _rows
from kernels._runtime import kernel_device_type


@triton.jit
def _offsets_kernel(out_ptr, n_rows, inner_rows, stride_outer, stride_inner, BLOCK: tl.constexpr):
    rows = tl.arange(0, BLOCK)
    tl.store(out_ptr + rows, _rows.row_offset(rows, inner_rows, stride_outer, stride_inner), mask=rows < n_rows)


def _layouts(device):
    base = torch.empty(6, 5, 8, device=device)
    return {
        "2-D contiguous": torch.empty(7, 8, device=device),
        "3-D contiguous": base,
        "rows sliced": torch.empty(12, 8, device=device)[::3],
        "a single row": torch.empty(1, 1, 8, device=device),
        "batch transposed": base.transpose(0, 1),
        "batch broadcast": torch.empty(5, 8, device=device).expand(6, 5, 8),
        "4-D folding to two groups": torch.empty(2, 3, 5, 8, device=device)[:, :, :4],
        "a storage offset": torch.empty(9, 8, device=device)[2:],
    }


@pytest.mark.parametrize("name", list(_layouts("cpu")))
def test_each_row_starts_where_torch_keeps_it(name):
    device = kernel_device_type()
    t = _layouts(device)[name]
    layout = _rows.row_layout(t)
    assert not layout.copied, f"{name}: copied, so the layout under test is not the caller's"
    offsets = torch.full((64,), -1, dtype=torch.int64, device=device)
    _offsets_kernel[(1,)](offsets, layout.rows, *layout.kernel_args(), BLOCK=64)
    expected = [
        (t[index + (0,)].data_ptr() - t.data_ptr()) // t.element_size()
        for index in itertools.product(*(range(size) for size in t.shape[:-1]))  # row-major: row r is the r-th
    ]
    assert offsets[: layout.rows].tolist() == expected, f"{name}: {layout.kernel_args()}"


def test_one_group_divides_by_one_and_two_groups_by_the_inner_row_count():
    """Triton specialises an integer argument equal to 1 as a constant: one group never divides."""
    assert _rows.row_layout(torch.empty(7, 8)).kernel_args() == (1, 8, 0)
    assert _rows.row_layout(torch.empty(6, 5, 8)).kernel_args() == (1, 8, 0)
    assert _rows.row_layout(torch.empty(12, 8)[::3]).kernel_args() == (1, 24, 0)


def test_a_tensor_without_rows_divides_by_nothing():
    """Zero rows with two groups (a transposed empty batch) once gave inner_rows 0."""
    empty = torch.empty(0, 3, 8).transpose(0, 1)
    assert _rows.row_layout(empty).kernel_args()[0] == 1 and _rows.row_layout(empty).rows == 0
    assert _rows.row_layout(torch.empty(6, 5, 8).transpose(0, 1)).kernel_args() == (6, 8, 40)
