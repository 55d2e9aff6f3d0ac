"""Which function runs a check: the graph checks of ``harness.graph_checks`` (opcheck, compile,
cudagraph: bitwise against the direct call, for every spec), the standard checks of
``harness.checks``, or, for a spec with random outputs (``KernelSpec.random``),
``harness.random_checks``, which builds on them (mask replay and the dropout check). Here, above
all three, so that none imports another back.
"""

from __future__ import annotations

import contextlib

import torch

from harness.case import Case
from harness.checks import CHECK_FUNCTIONS, CheckResult, Fn
from harness.graph_checks import GRAPH_CHECK_FUNCTIONS
from harness.random_checks import run_random_check
from harness.spec import KernelSpec


def run_check(spec: KernelSpec, fn: Fn, check: str, case: Case, device) -> CheckResult:
    """Run check ``check`` of ``spec`` on ``fn`` for one case, on ``device`` (made current)."""
    device = torch.device(device)
    ctx = torch.cuda.device(device) if device.type == "cuda" else contextlib.nullcontext()
    with ctx:
        if check in GRAPH_CHECK_FUNCTIONS:  # bitwise against the direct call: no mask replay needed
            return GRAPH_CHECK_FUNCTIONS[check](spec, fn, case, device)
        if spec.random is not None:  # random kernels: mask replay and the dropout check
            return run_random_check(spec, fn, check, case, device)
        return CHECK_FUNCTIONS[check](spec, fn, case, device)
