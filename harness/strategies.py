"""Hypothesis strategies shared by every spec: sizes, layouts, and whole cases.

Sizes favour the values that break kernels: 1, primes, powers of two and their neighbours, and the
kernel's own block boundaries (BLOCK-1, BLOCK, BLOCK+1), with plain integers in between. Layouts
cover every class of ``harness.layouts.LAYOUT_CLASSES`` (and mixtures of them). Everything shrinks
toward a small, contiguous, seed-0 case, so a counterexample reads easily.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, Phase, given
from hypothesis import seed as hyp_seed
from hypothesis import settings as hyp_settings
from hypothesis import strategies as st

from harness.call import Drawn
from harness.case import Case, TensorRecipe
from harness.layouts import LAYOUT_CLASSES, Layout
from harness.spec import BATCH, Batch, Dim, KernelSpec, TilingCase

SEEDS = st.integers(min_value=0, max_value=2**31 - 1)
_PRIMES = (2, 3, 5, 7, 11, 13, 17, 31, 61, 127, 251, 509, 1021, 2039, 4093, 8191, 16381)


def interesting_sizes(dim: Dim, on_gpu: bool) -> list[int]:
    """The sizes a kernel most often gets wrong, within the dim's range, smallest first."""
    hi = dim.gpu_max if on_gpu else dim.cpu_max
    if dim.choices:
        return sorted({c for c in dim.choices if dim.min <= c <= hi})
    special = {1} | set(_PRIMES)
    power = 1
    while power <= 2 * hi:
        special |= {power - 1, power, power + 1}
        power *= 2
    for b in dim.resolved_boundaries():
        special |= {b - 1, b, b + 1, 2 * b + 1}
    return sorted(s for s in special if dim.min <= s <= hi)


# On a GPU every new size can cost a Triton compilation (about a second): a kernel is specialised on
# each integer argument being 1, divisible by 16, or neither, and on its block sizes. So GPU sizes
# come from a fixed menu: the interesting sizes plus a geometric grid between them (ratio 1.3, each
# point moved to the nearest odd number so the grid itself does not favour aligned sizes). The
# number of compiled variants is then bounded whatever the profile's number of examples; the CPU
# interpreter compiles nothing and draws any integer.
_GRID_RATIO = 1.3


def bucketed_sizes(dim: Dim) -> list[int]:
    """The GPU's menu of sizes for ``dim``: interesting sizes and a geometric grid, bounded."""
    menu = set(interesting_sizes(dim, on_gpu=True))
    if dim.choices:
        return sorted(menu)
    value = float(max(dim.min, 2))
    while value <= dim.gpu_max:
        menu.add(int(value) | 1 if int(value) | 1 <= dim.gpu_max else int(value))
        value *= _GRID_RATIO
    return sorted(s for s in menu if dim.min <= s <= dim.gpu_max)


def sizes(dim: Dim, on_gpu: bool) -> st.SearchStrategy[int]:
    special = st.sampled_from(interesting_sizes(dim, on_gpu))
    if dim.choices:
        return special
    if on_gpu:
        return st.one_of(special, st.sampled_from(bucketed_sizes(dim)))
    return st.one_of(special, st.integers(dim.min, dim.cpu_max))


def batch_sizes(batch: Batch, on_gpu: bool) -> st.SearchStrategy[list[int]]:
    hi = batch.gpu_max if on_gpu else batch.cpu_max
    return st.lists(st.integers(1, hi), min_size=0, max_size=batch.max_rank)


def _layout_of_class(cls: str, shape: tuple[int, ...]) -> st.SearchStrategy[Layout]:
    rank = len(shape)
    if cls == "contiguous":
        return st.just(Layout())
    if cls == "permuted":
        identity = list(range(rank))
        return st.permutations(identity).filter(lambda p: p != identity).map(lambda p: Layout(perm=tuple(p)))
    if cls == "stepped":
        return st.lists(st.sampled_from((1, 2, 3)), min_size=rank, max_size=rank).filter(
            lambda s: any(v > 1 for v in s)
        ).map(lambda s: Layout(steps=tuple(s)))
    if cls == "offset":
        return st.integers(1, 17).map(lambda o: Layout(offset=o))
    if cls == "broadcast":
        return st.sets(st.integers(0, rank - 1), min_size=1).map(lambda d: Layout(expanded=tuple(sorted(d))))
    raise ValueError(f"unknown layout class {cls!r}")


def applicable_classes(shape: tuple[int, ...], allowed: tuple[str, ...] = LAYOUT_CLASSES) -> tuple[str, ...]:
    """The layout classes that make sense for a tensor of ``shape`` (a 1-d tensor has no permutation)."""
    rank = len(shape)
    usable = {"contiguous", "offset"}
    if rank >= 1:
        usable |= {"stepped", "broadcast"}
    if rank >= 2:
        usable.add("permuted")
    return tuple(c for c in allowed if c in usable) or ("contiguous",)


@st.composite
def layouts(draw, shape: tuple[int, ...], allowed: tuple[str, ...] = LAYOUT_CLASSES) -> Layout:
    """One layout for a tensor of ``shape``: a single class, or now and then all allowed at once."""
    classes = applicable_classes(tuple(shape), allowed)
    mixed = draw(st.booleans()) if len(classes) > 2 else False
    if not mixed:
        return draw(_layout_of_class(draw(st.sampled_from(classes)), tuple(shape)))
    parts = [draw(_layout_of_class(c, tuple(shape))) for c in classes if c != "contiguous"]
    merged = Layout()
    for p in parts:
        merged = Layout(
            perm=p.perm or merged.perm,
            steps=p.steps or merged.steps,
            offset=p.offset or merged.offset,
            expanded=p.expanded or merged.expanded,
        )
    return merged


def tensor_shape(dims: tuple, sizes_by_name: dict[str, object]) -> tuple[int, ...]:
    """A tensor's shape from its dims entries: a name's size, '*batch''s sizes, or (for a tuple of
    names) the product of their sizes."""
    shape: list[int] = []
    for d in dims:
        if isinstance(d, tuple):
            shape.append(math.prod(sizes_by_name[n] for n in d))  # type: ignore[misc]
        else:
            value = sizes_by_name[d]
            shape.extend(value if d == BATCH else [value])  # type: ignore[arg-type]
    return tuple(shape)


def scalar_strategy(strategy, drawn: Drawn) -> st.SearchStrategy:
    """A spec's scalar strategy; one given as a function is called with what the case drew before
    its scalars (``harness.call.Drawn``: the sizes, and the tensors the call passes)."""
    return strategy if isinstance(strategy, st.SearchStrategy) else strategy(drawn)


@st.composite
def cases(draw, spec: KernelSpec, dtype: str, on_gpu: bool, pinned: TilingCase | None = None) -> Case:
    """A whole case for ``spec`` in ``dtype``: dims, then each tensor (whether an optional one is
    passed, its layout, values and seed), then the scalars. ``pinned`` (a spec's ``TilingCase``)
    fixes the sizes and scalars it names, passes every optional tensor, and makes every tensor
    contiguous with its first value kind."""
    fixed_dims = dict(pinned.dims) if pinned else {}
    fixed_scalars = dict(pinned.scalars) if pinned else {}
    drawn: dict[str, object] = {}
    for name, dim in spec.dims.items():
        if name in fixed_dims:
            drawn[name] = list(fixed_dims[name]) if isinstance(dim, Batch) else fixed_dims[name]
            continue
        drawn[name] = draw(batch_sizes(dim, on_gpu) if isinstance(dim, Batch) else sizes(dim, on_gpu))
    tensors: dict[str, TensorRecipe | None] = {}
    for arg in spec.tensors:
        if arg.optional and not pinned and not draw(st.booleans()):
            tensors[arg.name] = None  # shrinks toward the call without it
            continue
        shape = tensor_shape(arg.dims, drawn)
        tensors[arg.name] = TensorRecipe(
            shape=shape,
            dtype=arg.dtype or dtype,
            # a tiling case: plain data in plain memory, so the path runs on the kernel's own tiles
            layout=Layout() if pinned and "contiguous" in arg.layouts else draw(layouts(shape, arg.layouts)),
            values=arg.values[0] if pinned else draw(st.sampled_from(arg.values)),
            seed=draw(SEEDS),
        )
    before = Drawn(drawn, frozenset(n for n, r in tensors.items() if r is not None))
    scalars = {name: fixed_scalars[name] if name in fixed_scalars else draw(scalar_strategy(strategy, before))
               for name, strategy in spec.scalars.items()}
    return Case(
        spec=spec.name,
        dtype=dtype,
        dims=drawn,
        tensors=tensors,
        scalars=scalars,
        grad_layout="contiguous" if pinned else draw(st.sampled_from(LAYOUT_CLASSES)),
        grad_seed=draw(SEEDS),
    )


def tiling_examples(spec: KernelSpec, dtype: str, on_gpu: bool, salt: int) -> list[Case]:
    """One concrete case per ``spec.tiling_cases`` entry: its pinned sizes and scalars, the rest
    drawn from ``salt`` (the same cases on every run). Explicit examples of a property
    (``harness.runner``), run before its generated cases."""
    return [_fixed_draw(cases(spec, dtype, on_gpu, pinned=tiling), salt + i) for i, tiling in enumerate(spec.tiling_cases)]


def _fixed_draw(strategy: st.SearchStrategy, salt: int) -> object:
    """A value of ``strategy`` that depends on ``salt`` alone: Hypothesis's second draw under that
    seed (its first is the all-minimal value: contiguous, seed 0, the first value kind)."""
    found: list[object] = []

    @hyp_settings(database=None, max_examples=2, phases=(Phase.generate,), deadline=None,
                  derandomize=False, suppress_health_check=list(HealthCheck))
    @hyp_seed(salt)
    @given(strategy)
    def take(value: object) -> None:
        found.append(value)

    take()
    return found[-1]
