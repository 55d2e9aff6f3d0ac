"""A run records the code it measured: the checkout's commit, marked dirty where the tracked files
differ from it, or what the runner says (``HARNESS_COMMIT``).

GPU runs of this project's working tree were copied with a stale ``.git`` and reported, as their
own, the commit the copy had started from; the mark makes such a run say that its code is not
that commit.
"""

import shutil
import subprocess

import pytest

from harness.nightly import _commit

needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="git is not installed on this machine")


def _git(cwd, *args):
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false",
                    "-c", "tag.gpgsign=false", *args], cwd=cwd, check=True, capture_output=True)


@needs_git
def test_a_clean_checkout_gives_its_commit_and_a_changed_one_is_marked_dirty(tmp_path, monkeypatch):
    monkeypatch.delenv("HARNESS_COMMIT", raising=False)
    _git(tmp_path, "init", "-q")
    (tmp_path / "kernel.py").write_text("x = 1\n")
    _git(tmp_path, "add", "kernel.py")
    _git(tmp_path, "commit", "-q", "-m", "first")
    head = subprocess.run(["git", "rev-parse", "--short=7", "HEAD"], cwd=tmp_path, capture_output=True,
                          text=True, check=True).stdout.strip()
    _git(tmp_path, "tag", "-a", "v1", "-m", "a release")  # a tag's name is not the commit
    monkeypatch.chdir(tmp_path)
    assert _commit() == head
    (tmp_path / "kernel.py").write_text("x = 2\n")
    assert _commit() == f"{head}-dirty"


def test_the_runner_can_name_the_commit(monkeypatch):
    monkeypatch.setenv("HARNESS_COMMIT", "0123abc")
    assert _commit() == "0123abc"
