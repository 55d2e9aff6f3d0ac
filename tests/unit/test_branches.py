"""harness.branches: which branches of the kernels' Triton code a measured run took both ways."""

import subprocess
import sys
import textwrap

import pytest

from harness import branches

coverage = pytest.importorskip("coverage", reason="the branch report reads coverage.py's data (pip install pytest-cov)")

KERNEL = textwrap.dedent('''
    def jit(fn=None, **options):
        return fn if fn is not None else (lambda f: f)


    @jit
    def kernel(x, SPLIT, EVEN):
        if SPLIT:  # rows of several blocks
            x = x + 1
        else:
            x = x - 1
        if EVEN:
            x = x * 2
        return x


    @jit(do_not_specialize=["seed"])
    def never_run(x, FLAG):
        if FLAG:
            return x
        return -x


    def launcher(x):
        if x > 100:  # host code: not a Triton branch
            return 0
        return kernel(x, SPLIT=True, EVEN=False)
''')


def _measured(tmp_path):
    """Run the toy kernel under coverage.py in a process of its own (no nesting inside a measured
    test run) and return its data file and kernel folder."""
    folder = tmp_path / "kernels"
    folder.mkdir()
    (folder / "toy.py").write_text(KERNEL)
    (folder / "host.py").write_text("def plan(n):\n    if n > 1:\n        return 2\n    return 1\n")  # no Triton code
    (tmp_path / "run.py").write_text("import sys; sys.path.insert(0, 'kernels'); import host, toy; toy.launcher(host.plan(1))\n")
    data = tmp_path / ".coverage"
    subprocess.run([sys.executable, "-m", "coverage", "run", "--branch", f"--source={folder}", f"--data-file={data}",
                    "--rcfile=/dev/null", "run.py"], cwd=tmp_path, check=True, capture_output=True)
    return data, folder


def test_the_branches_of_triton_functions_a_run_took_one_way_or_never_are_listed_with_their_function(tmp_path):
    data, folder = _measured(tmp_path)
    totals, found = branches.measure(data, folder)
    assert [t.file for t in totals] == ["kernels/toy.py"] and totals[0].partial >= 2  # host.py: no Triton code
    # the totals count the Triton functions' lines alone: 7 + 4 statements, the launcher's 4 left out;
    # missed: x - 1 and x * 2 (SPLIT true, EVEN false), and never_run's body
    assert (totals[0].statements, totals[0].missed) == (11, 5)
    keys = {b.key: b for b in found}
    assert set(keys) == {"kernel: if SPLIT:", "kernel: if EVEN:", "never_run: if FLAG:"}
    assert keys["never_run: if FLAG:"].never_reached and not keys["kernel: if SPLIT:"].never_reached
    # a spec's reason explains a branch; the rest are reported, keyed as a spec would write them
    known, unknown = branches.explained(found, {"kernel: if EVEN:": "EVEN needs rows that fill every tile"})
    assert [b.key for b, _ in known] == ["kernel: if EVEN:"]
    text = branches.render(totals, known, unknown)
    assert "EVEN needs rows that fill every tile" in text
    assert '2 Triton branch(es) not taken both ways' in text and '"kernel: if SPLIT:"' in text
    assert "(never reached)" in text and "launcher" not in text


def test_the_report_is_clean_when_every_branch_is_taken_or_explained(tmp_path):
    data, folder = _measured(tmp_path)
    totals, found = branches.measure(data, folder)
    reasons = {b.key: "explained" for b in found}
    known, unknown = branches.explained(found, reasons)
    assert not unknown and "Every branch of the kernels' Triton code was taken both ways" in branches.render(totals, known, unknown)
    # a reason for a branch that is taken both ways now explains nothing: it is named, to be removed
    unused = branches.stale(found, {**reasons, "kernel: if RAGGED:": "old"})
    assert unused == ["kernel: if RAGGED:"] and '"kernel: if RAGGED:"' in branches.render(totals, known, unknown, unused)


def test_the_cli_says_how_to_get_coverage_data(tmp_path, capsys):
    from harness.cli import main

    assert main(["branches", "--data", str(tmp_path / "missing")]) == 2
    assert "pytest --cov" in " ".join(capsys.readouterr().out.split())
