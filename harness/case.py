"""A generated case: plain data that names every tensor's shape, dtype, layout, value kind and seed.

Hypothesis draws ``Case`` objects, not tensors, so a shrunk counterexample prints as a few readable
fields and replays bitwise from its JSON on any machine (``harness repro``). ``Case.build`` turns it
into real tensors on a device, each placed in its layout inside a guarded buffer.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import torch

from harness.layouts import Layout, Placed, place
from harness.values import generate_values

CASE_SCHEMA = 1


def torch_dtype(name: str) -> torch.dtype:
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype):
        raise ValueError(f"unknown dtype name {name!r}")
    return dtype


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class TensorRecipe:
    """How to make one tensor: its shape, dtype, layout, value kind and seed."""

    shape: tuple[int, ...]
    dtype: str
    layout: Layout
    values: str
    seed: int

    def describe(self) -> str:
        return (
            f"shape {self.shape} {self.dtype}, layout {self.layout.describe()}, "
            f"values {self.values} (seed {self.seed})"
        )

    def build(self, device: torch.device | str) -> Placed:
        data = generate_values(self.values, self.shape, self.seed)
        return place(data, self.layout, torch_dtype(self.dtype), device)

    def to_json(self) -> dict:
        return {
            "shape": list(self.shape),
            "dtype": self.dtype,
            "layout": self.layout.to_json(),
            "values": self.values,
            "seed": self.seed,
        }

    @classmethod
    def from_json(cls, data: dict) -> TensorRecipe:
        return cls(
            shape=tuple(int(s) for s in data["shape"]),
            dtype=data["dtype"],
            layout=Layout.from_json(data["layout"]),
            values=data["values"],
            seed=int(data["seed"]),
        )


def canonical_layout(layout_class: str, rank: int, shape: tuple[int, ...]) -> Layout:
    """A fixed representative layout of a class for a tensor of ``shape`` (used for grad_output)."""
    if layout_class == "contiguous" or rank == 0:
        return Layout()
    if layout_class == "permuted":
        return Layout(perm=tuple(reversed(range(rank))))
    if layout_class == "stepped":
        return Layout(steps=(1,) * (rank - 1) + (2,))
    if layout_class == "offset":
        return Layout(offset=3)
    if layout_class == "broadcast":
        dims = tuple(d for d in range(rank) if shape[d] > 1)[:1] or (0,)
        return Layout(expanded=dims)
    raise ValueError(f"unknown layout class {layout_class!r}")


@dataclass(frozen=True)
class Case:
    """One call of a kernel: named tensors (``None`` for an optional tensor the call leaves out),
    scalars, and how to make grad_output for backward.

    grad_output's shape is the output's, known only after the call, so the case stores its layout
    class and seed; ``grad_output_recipe`` turns them into a recipe once the shape is known.
    """

    spec: str
    dtype: str
    dims: dict[str, Any]
    tensors: dict[str, TensorRecipe | None]
    scalars: dict[str, Any] = field(default_factory=dict)
    grad_layout: str = "contiguous"
    grad_seed: int = 0

    def grad_output_recipe(self, shape: tuple[int, ...], dtype: str, layout_class: str | None = None) -> TensorRecipe:
        """grad_output for an output of ``shape``: normal values in the given (or the case's) layout class."""
        layout = canonical_layout(layout_class or self.grad_layout, len(shape), shape)
        return TensorRecipe(shape=tuple(shape), dtype=dtype, layout=layout, values="normal", seed=self.grad_seed)

    def describe(self) -> str:
        lines = [f"kernel {self.spec}, dtype {self.dtype}, dims {self.dims}"]
        for name, recipe in self.tensors.items():
            lines.append(f"  {name}: {recipe.describe() if recipe is not None else 'None (left out)'}")
        for name, value in self.scalars.items():
            lines.append(f"  {name} = {value!r}")
        lines.append(f"  grad_output: layout class {self.grad_layout}, seed {self.grad_seed}")
        return "\n".join(lines)

    def build(self, device: torch.device | str) -> dict[str, Placed]:
        """The tensors the call passes, each placed in its layout (those left out are absent)."""
        return {name: recipe.build(device) for name, recipe in self.tensors.items() if recipe is not None}

    @property
    def absent(self) -> tuple[str, ...]:
        """The optional tensors this call leaves out."""
        return tuple(name for name, recipe in self.tensors.items() if recipe is None)

    def to_json(self) -> dict:
        return {
            "schema": CASE_SCHEMA,
            "spec": self.spec,
            "dtype": self.dtype,
            "dims": self.dims,
            "tensors": {k: v.to_json() if v is not None else None for k, v in self.tensors.items()},
            "scalars": self.scalars,
            "grad_layout": self.grad_layout,
            "grad_seed": self.grad_seed,
        }

    def dumps(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True)

    @classmethod
    def from_json(cls, data: dict) -> Case:
        if data.get("schema") != CASE_SCHEMA:
            raise ValueError(f"case JSON has schema {data.get('schema')!r}; this harness reads schema {CASE_SCHEMA}")
        return cls(
            spec=data["spec"],
            dtype=data["dtype"],
            dims=dict(data["dims"]),
            tensors={k: TensorRecipe.from_json(v) if v is not None else None for k, v in data["tensors"].items()},
            scalars=dict(data.get("scalars", {})),
            grad_layout=data.get("grad_layout", "contiguous"),
            grad_seed=int(data.get("grad_seed", 0)),
        )
