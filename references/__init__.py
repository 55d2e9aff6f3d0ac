"""Eager-PyTorch references: the plain, readable truth each fused kernel is checked against.

One module per op, with the same signature as the kernel in ``kernels/``. No validation beyond what
torch does, no tricks: the harness runs these in the kernel's dtype (eager's own error) and on
inputs upcast to float64 (the oracle), so every function here must work for float64 too.
"""
