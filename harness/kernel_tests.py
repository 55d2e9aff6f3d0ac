"""Every selected kernel spec, verified: one test per spec x implementation x dtype x check.

The harness's pytest plugin adds this module to a run about kernels (``harness.pytest_plugin``)
and parametrises ``harness_run`` over the selected specs; adding a spec adds its tests.
"""

from harness.pytest_plugin import verify
from harness.results import PASSED, numerics_note


def test_kernel(harness_run, harness_seed, request):
    verify(harness_run, harness_seed)
    if numerics_note(PASSED, harness_run.worst_score):  # shown in the run's summary (pytest_plugin)
        request.node.user_properties.append(("harness_note", f"{harness_run.label}: worst score {harness_run.worst_score:.2f}"))
