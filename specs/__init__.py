"""Kernel specs: one module per op, pairing its kernel with its reference.

Every module-level ``KernelSpec`` in a module of this package is found by the harness; adding a
module is all it takes to add a kernel to the tests, the CLI and the reports.
"""
