"""Input validation shared by every kernel wrapper: the harness's public helpers (harness.validate)."""

from harness.validate import (  # noqa: F401 - re-exported for the kernels
    FLOAT_DTYPES,
    check_choice,
    check_finite_scalar,
    check_same_device,
    check_same_dtype,
    check_shape,
    check_tensor,
    kernel_device_type,
)
