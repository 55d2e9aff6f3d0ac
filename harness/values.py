"""Named value kinds: how the numbers inside a generated tensor are drawn.

A value kind is a function ``(shape, generator) -> float64 or int64 CPU tensor``. Values are drawn in
float64 on the CPU from a seeded generator, so a case reproduces bitwise on any device; they are cast
to the case's dtype when placed in their layout. Ops name the kinds they need in their spec
(softmax wants huge logits and -inf masks, norms want constant rows); users add kinds with
``register_value_kind``.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import torch

ValueFn = Callable[[tuple[int, ...], torch.Generator], torch.Tensor]

_KINDS: dict[str, ValueFn] = {}


def register_value_kind(name: str, fn: ValueFn | None = None):
    """Register a value kind (usable as a decorator). Names are global; re-registering is an error."""

    def add(f: ValueFn) -> ValueFn:
        if name in _KINDS and _KINDS[name] is not f:
            raise ValueError(f"value kind {name!r} is already registered")
        _KINDS[name] = f
        return f

    return add(fn) if fn is not None else add


def known_value_kinds() -> frozenset[str]:
    return frozenset(_KINDS)


_DRAW_DEVICE: contextvars.ContextVar[torch.device | None] = contextvars.ContextVar("draw_device", default=None)


@contextlib.contextmanager
def drawn_on(device: torch.device | str) -> Iterator[None]:
    """Draw values on ``device`` instead of the CPU while the block runs.

    For benchmarks: their inputs run to GiBs, and drawing 134M float64 normals on one CPU core
    takes seconds per tensor, far longer than timing the kernel. Values drawn on a CUDA device
    come from its own (Philox) generator: they reproduce on that kind of device, not bitwise
    against the CPU's draw, which is all a benchmark input needs. Property cases never use this.
    """
    token = _DRAW_DEVICE.set(torch.device(device))
    try:
        yield
    finally:
        _DRAW_DEVICE.reset(token)


def generate_values(kind: str, shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Draw the values of one tensor (float64 or int64; on the CPU unless inside ``drawn_on``)."""
    try:
        fn = _KINDS[kind]
    except KeyError:
        raise ValueError(f"unknown value kind {kind!r}; known: {sorted(_KINDS)}") from None
    device = _DRAW_DEVICE.get() or torch.device("cpu")
    gen = torch.Generator(device=device).manual_seed(seed)
    with torch.device(device):
        out = fn(tuple(shape), gen)
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"value kind {kind!r} returned shape {tuple(out.shape)} for requested {tuple(shape)}")
    return out


def _normal(scale: float) -> ValueFn:
    return lambda shape, gen: torch.randn(shape, generator=gen, dtype=torch.float64) * scale


def _rows(values: torch.Tensor) -> torch.Tensor:
    """View the tensor as (rows, last dim); a 0-d tensor is one row of one element."""
    return values.reshape(-1, values.shape[-1] if values.ndim else 1)


register_value_kind("normal", _normal(1.0))
register_value_kind("small", _normal(1e-3))
register_value_kind("large", _normal(1e2))
# Far below any norm's eps (variance ~1e-24): the output is x / sqrt(eps), and a kernel that drops
# eps, or squares in a format that underflows, shows. fp16 flushes these to zero (all-zero rows).
register_value_kind("tiny", _normal(1e-12))


@register_value_kind("huge")
def _huge(shape, gen):
    """Logits of magnitude 1e4 to ~3e4 (fp16 holds them): exp() overflows anything that skips the
    max subtraction."""
    magnitude = 1e4 + torch.randn(shape, generator=gen, dtype=torch.float64).abs() * 4e3
    return magnitude * torch.sign(torch.rand(shape, generator=gen, dtype=torch.float64) - 0.5)


@register_value_kind("uniform")
def _uniform(shape, gen):
    return torch.rand(shape, generator=gen, dtype=torch.float64) * 2 - 1


@register_value_kind("positive")
def _positive(shape, gen):
    return torch.rand(shape, generator=gen, dtype=torch.float64) + 0.5


@register_value_kind("neg_inf_mask")
def _neg_inf_mask(shape, gen):
    """Normal values with about a third of the entries -inf (attention-style masks)."""
    values = torch.randn(shape, generator=gen, dtype=torch.float64)
    mask = torch.rand(shape, generator=gen, dtype=torch.float64) < 0.35
    return values.masked_fill(mask, float("-inf"))


@register_value_kind("masked_rows")
def _masked_rows(shape, gen):
    """Normal values where every other row is entirely -inf (fully masked rows)."""
    values = torch.randn(shape, generator=gen, dtype=torch.float64)
    rows = _rows(values)
    rows[::2] = float("-inf")
    return values


@register_value_kind("constant_rows")
def _constant_rows(shape, gen):
    """Each row holds one repeated value (zero variance for norms, uniform softmax)."""
    values = torch.randn(shape, generator=gen, dtype=torch.float64)
    rows = _rows(values)
    rows.copy_(rows[:, :1].expand_as(rows) * 3.0)
    return values


@register_value_kind("zero_rows")
def _zero_rows(shape, gen):
    """Normal values with every third row all zeros (RMSNorm's 0/0 edge)."""
    values = torch.randn(shape, generator=gen, dtype=torch.float64)
    _rows(values)[::3] = 0.0
    return values


@register_value_kind("mixed_scales")
def _mixed_scales(shape, gen):
    """Rows at scales from 1e-4 to 1e4, so one tolerance for all rows would be wrong."""
    values = torch.randn(shape, generator=gen, dtype=torch.float64)
    rows = _rows(values)
    exponents = torch.randint(-4, 5, (rows.shape[0], 1), generator=gen).to(torch.float64)
    rows.mul_(torch.pow(10.0, exponents))
    return values


@register_value_kind("tokens")
def _tokens(shape, gen):
    """Token ids from a small vocabulary (0..7), so repeats are common."""
    return torch.randint(0, 8, shape, generator=gen, dtype=torch.int64)


@register_value_kind("spread_tokens")
def _spread_tokens(shape, gen):
    """Token ids from a small alphabet (2 to 6 ids) spread log-uniformly over 0..2^17, about one id
    in seven negative: n-grams repeat as often as with ``tokens``, but the ids land anywhere in a
    vocabulary (its first and last blocks included) and past either end of it."""
    size = int(torch.randint(2, 7, (1,), generator=gen))
    alphabet = (2.0 ** (torch.rand(size, generator=gen, dtype=torch.float64) * 17)).floor().to(torch.int64) - 1
    negative = torch.rand(size, generator=gen) < 0.15
    alphabet = torch.where(negative, -alphabet - 1, alphabet)
    return alphabet[torch.randint(0, size, shape, generator=gen)]


@register_value_kind("int64_ids")
def _int64_ids(shape, gen):
    """Ids anywhere in int64 (hashed categorical features), a quarter of them from the edges:
    -2^63, -2, -1, 0, 1 and 2^63 - 1 (where id + 1 wraps around)."""
    values = torch.randint(-(2**63), 2**63 - 1, shape, generator=gen, dtype=torch.int64)
    edges = torch.tensor([-(2**63), -2, -1, 0, 1, 2**63 - 1], dtype=torch.int64)
    picks = edges[torch.randint(0, len(edges), shape, generator=gen)]
    return torch.where(torch.rand(shape, generator=gen) < 0.25, picks, values)


@register_value_kind("repeated_tokens")
def _repeated_tokens(shape, gen):
    """Token ids repeating a short period, the worst case for n-gram blocking."""
    period = int(torch.randint(1, 4, (1,), generator=gen))
    base = torch.arange(shape[-1] if shape else 1) % period
    return base.expand(shape).clone().to(torch.int64)
