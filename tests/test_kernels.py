"""Every registered kernel spec, verified: one test per spec x implementation x dtype x check.

The parametrisation comes from the harness plugin (``harness_run``); adding a spec adds its tests.
"""

from harness.pytest_plugin import verify


def test_kernel(harness_run, harness_seed):
    verify(harness_run, harness_seed)
