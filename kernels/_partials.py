"""The last step of a backward that reduces over rows without atomics: sum the partial rows.

Such a backward (the norms' weight and bias gradients, the elementwise ops' grad_bias) runs one
program per (row group, column block) and writes one partial row per group. This kernel adds each
column's partials over the groups in a fixed order (GROUPS rows a step, then one tree sum) and
rounds the total once to the output's dtype, so the result is bitwise reproducible and, for fp64
partials, carries no error of its own. One launch and one allocation: a ``torch.sum`` followed by
a cast costs a second kernel and a temporary.

Bytes: it reads ``parts x groups x n`` partials (a few hundred rows at most, one per row group of
a wave of programs) and writes ``parts x n``: small beside the backward it finishes.
"""

from __future__ import annotations

import triton
import triton.language as tl

from kernels import _launch, _rows

# GROUPS partial rows x BLOCK columns a step (the interpreter's are small, so CPU tests take
# several steps and several column blocks).
_GPU_TILE = (32, 128)
_INTERPRETER_TILE = (4, 64)


@_launch.jit
def sum_partials_kernel(part_ptr, out_ptr, n_groups, n_cols,
                        GROUPS: tl.constexpr, BLOCK: tl.constexpr, ACC: tl.constexpr):
    """out[p, :] = sum over groups of part[p, g, :], in a fixed order, cast to out's dtype."""
    which = tl.program_id(0).to(tl.int64)
    cols = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
    col_ok = cols < n_cols
    base = part_ptr + which * n_groups * n_cols
    acc = tl.full([GROUPS, BLOCK], 0.0, ACC)
    for g0 in range(0, n_groups, GROUPS):
        groups = g0 + tl.arange(0, GROUPS)
        ok = (groups < n_groups)[:, None] & col_ok[None, :]
        acc += tl.load(base + groups.to(tl.int64)[:, None] * n_cols + cols[None, :], mask=ok, other=0.0)
    total = tl.sum(acc, axis=0)
    tl.store(out_ptr + which * n_cols + cols, _rows.cast_for_store(total, out_ptr), mask=col_ok)


def bind(partials, out, parts: int, groups: int, n: int, acc) -> object:
    """A launcher (``_launch.Kernel.bind``) that sums ``partials`` (``parts x groups x n``, of the
    ``acc`` dtype, contiguous) into ``out`` (``parts x n``, contiguous), called as
    ``launch(partials, out)`` with tensors of those layouts."""
    group_tile, block = _rows.limits_for_backend(_GPU_TILE, _INTERPRETER_TILE)
    return sum_partials_kernel.bind((parts, triton.cdiv(n, block)), (partials, out, groups, n),
                                    dict(GROUPS=group_tile, BLOCK=block, ACC=acc), runtime=2)
