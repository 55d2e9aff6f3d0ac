"""The harness's own tests plant failures on purpose: their repro scripts and failure-corpus
entries go to a temporary folder, never the user's .harness/ (harness.repro, harness.corpus)."""

import pytest


@pytest.fixture(autouse=True)
def _harness_files_in_a_temporary_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("HARNESS_REPRO_DIR", str(tmp_path / "repros"))
    monkeypatch.setenv("HARNESS_CORPUS", str(tmp_path / "corpus"))
