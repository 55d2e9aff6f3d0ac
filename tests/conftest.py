"""The harness's own tests plant failures on purpose: their repro scripts and failure-corpus
entries go to a temporary folder, never the user's .harness/ (harness.repro, harness.corpus)."""

import sys

import pytest


@pytest.fixture(autouse=True)
def _harness_files_in_a_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_REPRO_DIR", str(tmp_path / "repros"))
    monkeypatch.setenv("HARNESS_CORPUS", str(tmp_path / "corpus"))


@pytest.fixture(autouse=True)
def _fresh_kernel_plans():
    """Kernels remember a plan per call signature (kernels._launch.plan_table), built from module
    knobs that tests change with monkeypatch: each test starts and ends with none."""
    launch = sys.modules.get("kernels._launch")
    if launch is not None:
        launch.forget_plans()
    yield
    launch = sys.modules.get("kernels._launch")
    if launch is not None:
        launch.forget_plans()
