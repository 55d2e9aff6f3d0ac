"""Memory layouts for generated tensors, and their placement inside canary-filled guard bands.

A ``Layout`` is plain data (so it prints in a failure and replays from JSON): the memory order of the
dims, a step per dim (stepped slices leave gaps between elements), a storage offset, and the dims
broadcast with stride 0. ``place`` writes a tensor's values into such a layout inside a buffer whose
every unused byte (guard bands before and after, gaps, offset padding) holds a canary: a NaN with a
recognisable payload for floats. A kernel that reads a gap sees NaN; one that writes outside its
tensor changes a canary, which ``Placed.changes`` reports by region.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

LAYOUT_CLASSES = ("contiguous", "permuted", "stepped", "offset", "broadcast")
GUARD_ELEMENTS = 256

# Bit patterns that fill unused memory: NaNs with a payload no arithmetic produces (floats),
# or an unlikely constant (integers). Compared bitwise after a kernel ran.
_CANARY_BITS = {
    torch.float64: 0x7FF4A5A5A5A5A5A5,
    torch.float32: 0x7FA5A5A5,
    torch.float16: 0x7D5A,
    torch.bfloat16: 0x7FA5,
}
_INT_VIEW = {8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.uint8}


@dataclass(frozen=True)
class Layout:
    """How a logical tensor sits in memory (see module docstring); identity fields mean contiguous."""

    perm: tuple[int, ...] = ()
    steps: tuple[int, ...] = ()
    offset: int = 0
    expanded: tuple[int, ...] = ()

    def classes(self) -> tuple[str, ...]:
        """The layout classes this layout belongs to ('contiguous' when none of the others)."""
        found = []
        if self.perm and list(self.perm) != sorted(self.perm):
            found.append("permuted")
        if any(s > 1 for s in self.steps):
            found.append("stepped")
        if self.offset:
            found.append("offset")
        if self.expanded:
            found.append("broadcast")
        return tuple(found) or ("contiguous",)

    def describe(self) -> str:
        parts = []
        if "permuted" in self.classes():
            parts.append(f"permuted{self.perm}")
        if "stepped" in self.classes():
            parts.append(f"stepped{self.steps}")
        if self.offset:
            parts.append(f"offset {self.offset}")
        if self.expanded:
            parts.append(f"broadcast dims {self.expanded}")
        return ", ".join(parts) or "contiguous"

    def for_rank(self, rank: int) -> Layout:
        """Fill identity defaults for a tensor of ``rank`` dims and check the fields fit it."""
        perm = self.perm or tuple(range(rank))
        steps = self.steps or (1,) * rank
        if sorted(perm) != list(range(rank)) or len(steps) != rank or any(s < 1 for s in steps):
            raise ValueError(f"layout {self} does not fit a tensor of rank {rank}")
        if any(not 0 <= d < rank for d in self.expanded) or self.offset < 0:
            raise ValueError(f"layout {self} does not fit a tensor of rank {rank}")
        return Layout(perm=tuple(perm), steps=tuple(steps), offset=self.offset, expanded=tuple(sorted(set(self.expanded))))

    def to_json(self) -> dict:
        return {"perm": list(self.perm), "steps": list(self.steps), "offset": self.offset, "expanded": list(self.expanded)}

    @classmethod
    def from_json(cls, data: dict) -> Layout:
        return cls(
            perm=tuple(data.get("perm", ())),
            steps=tuple(data.get("steps", ())),
            offset=int(data.get("offset", 0)),
            expanded=tuple(data.get("expanded", ())),
        )


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits of a 1-d buffer, as integers (NaN payloads compare exactly)."""
    return t.view(_INT_VIEW[t.element_size()])


def fill_canary(buffer: torch.Tensor) -> None:
    """Fill a flat buffer with its dtype's canary pattern."""
    pattern = _CANARY_BITS.get(buffer.dtype)
    if pattern is None:
        pattern = int.from_bytes(b"\x5a" * buffer.element_size(), "little", signed=False)
        if buffer.element_size() == 8:
            pattern -= 1 << 64 if pattern >= 1 << 63 else 0
    bits = _bits(buffer)
    if bits.dtype != torch.uint8 and pattern >= 1 << (8 * buffer.element_size() - 1):
        pattern -= 1 << (8 * buffer.element_size())
    bits.fill_(pattern)


@dataclass
class Placed:
    """A tensor placed in its layout inside a guarded buffer."""

    tensor: torch.Tensor
    base: torch.Tensor
    data_start: int
    data_numel: int
    data_mask: torch.Tensor = field(repr=False)

    def snapshot(self) -> torch.Tensor:
        return self.base.detach().clone()

    def changes(self, snapshot: torch.Tensor) -> list[str]:
        """Describe every region of the buffer whose bits differ from ``snapshot``: per region, how
        many elements changed and the first one, regions in the order of their first changed
        element. Counted with tensor operations over each region's span, never element by element:
        a benchmark's peer may write every element of a large input."""
        changed = (_bits(self.base.detach()) != _bits(snapshot)).cpu()
        if not bool(changed.any()):
            return []
        start, end = self.data_start, self.data_start + self.data_numel
        data, mask = changed[start:end], self.data_mask[start:end]
        regions = (  # (offset of the span, its changed elements, what the span is)
            (0, changed[:GUARD_ELEMENTS], "guard band before the tensor (out-of-bounds write)"),
            (GUARD_ELEMENTS, changed[GUARD_ELEMENTS:start], "storage-offset padding before the tensor (out-of-bounds write)"),
            (start, data & mask, "the tensor's own elements (input modified in place)"),
            (start, data & ~mask, "gaps between the tensor's strided elements (write to memory it does not own)"),
            (end, changed[end:], "guard band after the tensor (out-of-bounds write)"),
        )
        found = []
        for offset, span, key in regions:
            count = int(span.sum())
            if count:
                found.append((offset + int(span.to(torch.uint8).argmax()), count, key))
        return [f"{count} element(s) in {key}, first at buffer index {first}" for first, count, key in sorted(found)]


def place(values: torch.Tensor, layout: Layout, dtype: torch.dtype, device: torch.device | str) -> Placed:
    """Write ``values`` (any dtype, CPU) into ``layout`` inside a fresh canary-filled buffer."""
    shape = tuple(values.shape)
    rank = len(shape)
    layout = layout.for_rank(rank)
    stored = tuple(1 if d in layout.expanded else s for d, s in enumerate(shape))
    spread = tuple(s * st for s, st in zip(stored, layout.steps))
    physical = tuple(spread[p] for p in layout.perm)
    numel = math.prod(physical)
    data_start = GUARD_ELEMENTS + layout.offset
    base = torch.empty(data_start + numel + GUARD_ELEMENTS, dtype=dtype, device=device)
    fill_canary(base)
    inverse = tuple(layout.perm.index(d) for d in range(rank))

    def view_of(buffer: torch.Tensor) -> torch.Tensor:
        phys = buffer[data_start : data_start + numel].view(physical)
        logical = phys.permute(inverse)
        return logical[tuple(slice(None, None, st) for st in layout.steps)]

    stored_values = values[tuple(slice(0, 1) if d in layout.expanded else slice(None) for d in range(rank))]
    view = view_of(base)
    view.copy_(stored_values.to(device=device, dtype=dtype))
    mask = torch.zeros(base.numel(), dtype=torch.bool)
    view_of(mask).fill_(True)
    return Placed(tensor=view.expand(shape), base=base, data_start=data_start, data_numel=numel, data_mask=mask)
