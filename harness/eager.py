"""Eager PyTorch as a GPU computes it, on any device: the calibration the error budget rests on.

The budget is a multiple of eager's own error (``harness.numerics``), so it is only as tight as
eager is accurate. On a GPU, ATen's kernels compute 16-bit tensors in fp32 ("opmath": fp32
arithmetic and fp32 accumulation) and round each output once. Several CPU kernels do not: the CPU's
fp16 LayerNorm backward sums the weight gradient in fp16, and at 512x64 its error (0.135) was seven
times that of a kernel that wrongly keeps fp16 partial sums (0.018). A budget calibrated on that
eager passes the faulty kernel on the CPU, where the GPU, whose eager sums in fp32, fails it.

:func:`gpu_like` makes the CPU's eager behave as the GPU's: every ATen op on fp16 or bf16 tensors
runs on fp32 copies, and each floating output that the op would return in 16 bits is rounded back
to that dtype. This is opmath applied op by op, one rounding per op output, as a GPU's eager
rounds: no looser than the GPU's budget, and no tighter, since eager on the GPU rounds every
intermediate of a multi-op reference to 16 bits too. Ops run as they are where emulation would
change their meaning: ops that write into a tensor or return a view of one (their aliasing must
hold; a GPU's in-place accumulation rounds at every step too), random ops (their stream must
match), ops on no 16-bit tensor (fp32 and fp64 work, the fp64 oracle included), and an op that
raises on its widened arguments (so a reference that is wrong in 16 bits still raises).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten, tree_map

_LOW = (torch.float16, torch.bfloat16)


def _runs_as_is(func) -> bool:
    schema = func._schema
    return (schema.is_mutable or any(r.alias_info is not None for r in schema.returns)
            or torch.Tag.nondeterministic_seeded in func.tags)


class _OpMath(TorchDispatchMode):
    """Each op on one 16-bit dtype: computed on fp32 copies, outputs rounded to what the op returns."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        flat, _ = tree_flatten((args, kwargs))
        low = {t.dtype for t in flat if isinstance(t, torch.Tensor) and t.dtype in _LOW}
        if len(low) != 1 or _runs_as_is(func):
            return func(*args, **kwargs)
        (dtype,) = low
        try:  # the dtypes the op returns on these inputs: its meta kernel says, without computing
            meta_args, meta_kwargs = tree_map(
                lambda t: torch.empty_like(t, device="meta") if isinstance(t, torch.Tensor) else t, (args, kwargs))
            want = tree_map(lambda t: t.dtype if isinstance(t, torch.Tensor) else None,
                            func(*meta_args, **meta_kwargs))
        except Exception:  # noqa: BLE001 - an op with no meta kernel: as it is
            return func(*args, **kwargs)
        def widen(v):  # the 16-bit tensors, and a dtype argument naming theirs (softmax's input_dtype)
            if isinstance(v, torch.Tensor):
                return v.float() if v.dtype == dtype else v
            return torch.float32 if v is dtype else v

        wide_args, wide_kwargs = tree_map(widen, (args, kwargs))
        try:
            out = func(*wide_args, **wide_kwargs)
        except Exception:  # noqa: BLE001 - widened, the op would accept what it refuses: as it is
            return func(*args, **kwargs)
        flat_out, spec = tree_flatten(out)
        flat_want, _ = tree_flatten(want)
        if len(flat_out) != len(flat_want):
            return func(*args, **kwargs)
        rounded = [o.to(w) if isinstance(o, torch.Tensor) and w is not None and o.dtype != w else o
                   for o, w in zip(flat_out, flat_want)]
        return spec.unflatten(rounded)


_FP32_TINY = torch.finfo(torch.float32).tiny


def flush(v):
    """An fp32 tensor with its subnormals replaced by zero; anything else as it is."""
    if isinstance(v, torch.Tensor) and v.dtype == torch.float32:
        return torch.where(v.abs() < _FP32_TINY, 0.0, v)
    return v


class _FlushSubnormals(TorchDispatchMode):
    """Each op's fp32 results come out with their subnormals as zero (FTZ at every op boundary),
    as a GPU kernel compiled to flush makes them. (The inputs are flushed once, by the caller:
    every later operand is an op's flushed result.)"""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        return out if _runs_as_is(func) else tree_map(flush, out)


@contextlib.contextmanager
def subnormals_flushed() -> Iterator[None]:
    """Run fp32 eager work with subnormals flushed to zero at every op (``_FlushSubnormals``).

    GPU kernels flush fp32 subnormals (Triton's fast exp and division are the ``.ftz`` forms; so is
    much of what nvcc emits), and eager's kernels do not: a GLU whose activation underflows to a
    subnormal gives 0 in the kernel, 2e-37 in eager (an H200 nightly case). The checks run the
    reference once more in fp32 under this mode (on inputs flushed with :func:`flush`), and each
    element's envelope admits what flushing does to it (harness.numerics): the flush of an
    intermediate is judged by the reference itself, with no term formula from the spec.
    """
    with _FlushSubnormals():
        yield


@contextlib.contextmanager
def gpu_like(device: torch.device | str) -> Iterator[None]:
    """Run eager as a GPU's ATen would (module docstring) while inside, where ``device`` is not a
    GPU; on a GPU, eager is already that."""
    if torch.device(device).type == "cuda":
        yield
        return
    with _OpMath():
        yield
