#!/usr/bin/env bash
# End to end, as an outside kernel author (README, "Verify your own kernel"): a kernel package in
# its own folder, with its own pyproject, entry point, Triton kernel and spec, installed beside the
# harness; `pytest -n 2 --kernels my_silu` from that folder runs exactly its tests and passes, and
# the same run with a planted backward bug fails naming the kernel. Runs in the active environment
# (which has the harness installed) and leaves nothing behind.
set -euo pipefail
work=$(mktemp -d)
trap 'python3 -m pip uninstall -q -y mysilu >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
pkg="$work/mysilu-repo"
mkdir -p "$pkg/mysilu"

cat > "$pkg/pyproject.toml" <<'TOML'
[build-system]
requires = ["setuptools>=69"]
build-backend = "setuptools.build_meta"

[project]
name = "mysilu"
version = "0.0.1"

[project.entry-points."harness.specs"]
mysilu = "mysilu.harness_specs"

[tool.setuptools]
packages = ["mysilu"]
TOML

touch "$pkg/mysilu/__init__.py"

cat > "$pkg/mysilu/kernel.py" <<'PY'
"""SiLU, x * sigmoid(x), in Triton: forward and backward as PyTorch custom ops."""
import os

import torch
import triton
import triton.language as tl

from harness.validate import FLOAT_DTYPES, check_tensor

BLOCK = 256
_PLANTED_BUG = os.environ.get("MYSILU_BUG") == "1"  # the e2e test's wrong backward


@triton.jit
def _forward(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    tl.store(y_ptr + offs, (x * tl.sigmoid(x)).to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _backward(x_ptr, dy_ptr, dx_ptr, n, BUG: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    dy = tl.load(dy_ptr + offs, mask=mask).to(tl.float32)
    s = tl.sigmoid(x)
    slope = s if BUG else s + x * s * (1.0 - s)
    tl.store(dx_ptr + offs, (dy * slope).to(dx_ptr.dtype.element_ty), mask=mask)


# The kernel as a PyTorch custom op (forward and backward ops, fake implementations for the
# compiler, the autograd formula): torch.compile traces it as one op and CUDA graphs capture it;
# the harness's opcheck, compile and cudagraph checks demand it.
@torch.library.custom_op("mysilu::silu", mutates_args=())
def silu_op(x: torch.Tensor) -> torch.Tensor:
    x = x.contiguous()
    y = torch.empty_like(x)
    _forward[(triton.cdiv(x.numel(), BLOCK),)](x, y, x.numel(), BLOCK=BLOCK)
    return y


@silu_op.register_fake
def _(x):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


@torch.library.custom_op("mysilu::silu_backward", mutates_args=())
def silu_backward_op(x: torch.Tensor, dy: torch.Tensor) -> torch.Tensor:
    x, dy = x.contiguous(), dy.to(x.dtype).contiguous()
    dx = torch.empty_like(x)
    _backward[(triton.cdiv(x.numel(), BLOCK),)](x, dy, dx, x.numel(), BUG=_PLANTED_BUG, BLOCK=BLOCK)
    return dx


@silu_backward_op.register_fake
def _(x, dy):
    return torch.empty_like(x, memory_format=torch.contiguous_format)


def _save(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])


def _grad(ctx, dy):
    return silu_backward_op(ctx.saved_tensors[0], dy)


silu_op.register_autograd(_grad, setup_context=_save)


def silu(x):
    check_tensor("my_silu", "x", x, dtypes=FLOAT_DTYPES)
    return silu_op(x)
PY

cat > "$pkg/mysilu/harness_specs.py" <<'PY'
"""The harness spec of my_silu: the kernel against torch's SiLU."""
import torch

from harness import Dim, KernelSpec, TensorArg

from mysilu import kernel

def reference(x):
    """The eager truth, called with the spec's argument names."""
    return torch.nn.functional.silu(x)


SPEC = KernelSpec(
    name="my_silu",
    description="x * sigmoid(x)",
    reference=reference,
    implementations={"triton": kernel.silu},
    tensors=(TensorArg("x", dims=("rows", "cols"), grad=True),),
    dims={"rows": Dim(cpu_max=4, gpu_max=256), "cols": Dim(cpu_max=300, gpu_max=4096, boundaries=(kernel.BLOCK,))},
    dtypes=("float32", "float16"),
)
PY

python3 -m pip install -q --no-build-isolation --no-deps -e "$pkg"
cd "$pkg"
echo "e2e: pytest -n 2 --kernels my_silu in $pkg"
if ! pytest -n 2 -q -p no:cacheprovider --kernels my_silu > "$work/pass.log" 2>&1; then
  cat "$work/pass.log"; echo "e2e: FAILED: the correct kernel did not pass"; exit 1
fi
tail -n 3 "$work/pass.log"
ran=$(grep -Eo '[0-9]+ passed' "$work/pass.log" | grep -Eo '[0-9]+')
pytest --collect-only -q -p no:xdist --kernels my_silu > "$work/collect.log" 2>&1 || { cat "$work/collect.log"; echo "e2e: FAILED: collection"; exit 1; }
others=$(grep '::' "$work/collect.log" | grep -vc 'test_kernel\[my_silu-' || true)
if [ "${ran:-0}" -lt 10 ] || [ "$others" != 0 ]; then
  echo "e2e: FAILED: expected only my_silu's tests (ran ${ran:-0}, others collected $others)"; exit 1
fi
echo "e2e: planted backward bug (MYSILU_BUG=1)"
if MYSILU_BUG=1 pytest -n 2 -q -p no:cacheprovider --kernels my_silu > "$work/bug.log" 2>&1; then
  cat "$work/bug.log"; echo "e2e: FAILED: the planted bug passed"; exit 1
fi
if ! grep -q "my_silu\[triton\] backward" "$work/bug.log"; then
  tail -n 40 "$work/bug.log"; echo "e2e: FAILED: the failure does not name my_silu's backward"; exit 1
fi
grep -E '[0-9]+ (passed|failed)' "$work/bug.log" | tail -n 1
echo "e2e: passed (the correct kernel passes its $ran tests; the planted bug fails my_silu's backward)"
