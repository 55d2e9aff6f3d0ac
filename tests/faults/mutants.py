"""Faults planted in the production kernels themselves, one source edit each (mutation testing).

A mutant is a copy of one kernel module with one snippet of its source replaced, imported from a
file of its own (Triton reads a kernel's source from its file) and put in place of the original in
the op modules that use it, for one test. The production modules carry no fault switches, and a
mutant follows the kernel as it changes: its snippet must occur exactly once in today's source, so
an edit that removes it fails the test by name instead of silently testing nothing.

These faults sit on the paths that only the small tiles reach at CPU sizes (``harness.validate.
small_tiles``): rows of several column blocks, weight-gradient sums split over row groups, and the
dropout mask of a later column block. The CPU ci profile must catch each one (tests/test_faults.py).
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from kernels import _launch


@dataclass(frozen=True)
class Mutant:
    """One planted fault: ``original`` replaced by ``replacement`` in ``module``'s source, seen by
    the modules ``users`` (each refers to the module by its last name, ``_norm_kernels._norm_fwd_kernel``).
    The spec, check and dtype that must catch it, and a text the report must contain."""

    name: str
    why: str
    module: str
    original: str
    replacement: str
    users: tuple[str, ...]
    spec: str
    check: str
    dtype: str
    expected: str


MUTANTS = (
    Mutant(
        name="norm_later_blocks_scaled_by_the_first",
        why="the forward's second pass scales every column block by the weights of the first block "
            "(a block offset forgotten): only rows of several blocks are wrong",
        module="kernels._norm_kernels",
        original="y = _normalized(s, k, m, rstd, RMS) * _scale_vector(w_ptr, start, cols, n_cols, w_offset, HAS_W, COMPUTE)",
        replacement="y = _normalized(s, k, m, rstd, RMS) * _scale_vector(w_ptr, 0, cols, n_cols, w_offset, HAS_W, COMPUTE)",
        users=("kernels._norm",),
        spec="layer_norm",
        check="forward",
        dtype="float32",
        expected="OVER budget",
    ),
    Mutant(
        name="norm_partials_of_every_group_in_one_row",
        why="the backward's row groups all write their weight-gradient partial sums to the first "
            "group's row (the group offset forgotten): only a split reduction is wrong",
        module="kernels._norm_kernels",
        original="part_row = group.to(tl.int64) * n_cols + start",
        replacement="part_row = start + 0 * group",
        users=("kernels._norm",),
        spec="rms_norm",
        check="backward",
        dtype="float32",
        expected="grad weight",
    ),
    Mutant(
        name="dropout_mask_of_later_blocks_from_column_zero",
        why="the backward regenerates the keep-mask of every column block at column 0 instead of "
            "at the block's offset: the mask differs from the forward's past the first block",
        module="kernels._norm_kernels",
        original="keep = keep_mask(seed, threshold, rows, start, ROWS, BLOCK, DRAW)\n            dx = _dropped(",
        replacement="keep = keep_mask(seed, threshold, rows, 0, ROWS, BLOCK, DRAW)\n            dx = _dropped(",
        users=("kernels._norm",),
        spec="dropout_add_norm",
        check="backward",
        dtype="float32",
        expected="grad x",
    ),
)


class StaleMutant(AssertionError):
    """A mutant's snippet no longer occurs exactly once in its module: the kernel changed."""


def mutated_source(mutant: Mutant) -> str:
    """The module's source with the mutant's one edit (raises ``StaleMutant`` otherwise)."""
    path = Path(importlib.import_module(mutant.module).__file__)
    source = path.read_text()
    found = source.count(mutant.original)
    if found != 1:
        raise StaleMutant(f"mutant {mutant.name}: its snippet occurs {found} times in {path} (expected once): "
                          f"update the mutant to today's kernel\n  snippet: {mutant.original}")
    return source.replace(mutant.original, mutant.replacement)


@contextlib.contextmanager
def planted(mutant: Mutant, monkeypatch) -> Iterator[object]:
    """Import the mutant from a file of its own and put it in place of the original in its users'
    globals (undone by ``monkeypatch``); yields the mutant module."""
    with tempfile.TemporaryDirectory(prefix="mutant-") as folder:
        file = Path(folder) / f"{mutant.name}.py"
        file.write_text(mutated_source(mutant))
        name = f"tests.faults._mutant_{mutant.name}"
        spec = importlib.util.spec_from_file_location(name, file)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        # plans (and native programs) built from the original kernels must not serve the mutant's calls
        _launch.forget_plans()
        try:
            spec.loader.exec_module(module)
            attribute = mutant.module.rsplit(".", 1)[-1]
            for user in mutant.users:
                monkeypatch.setattr(importlib.import_module(user), attribute, module)
            yield module
        finally:
            sys.modules.pop(name, None)
            _launch.forget_plans()
