"""Fused Triton kernels with autograd wrappers.

Importing this package decides where kernels run: on a CUDA device when one is visible, otherwise
through Triton's CPU interpreter. ``TRITON_INTERPRET`` is read when ``@triton.jit`` decorates a
function, so it must be set before any kernel module is imported; this is the one place that does it.
Kernels never import the harness.
"""

from kernels._runtime import ensure_backend_selected

ensure_backend_selected()
