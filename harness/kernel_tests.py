"""Every selected kernel spec, verified: one test per spec x implementation x dtype x check.

The harness's pytest plugin adds this module to a run about kernels (``harness.pytest_plugin``)
and parametrises ``harness_run`` over the selected specs; adding a spec adds its tests.
"""

from harness.pytest_plugin import verify


def test_kernel(harness_run, harness_seed):
    verify(harness_run, harness_seed)
