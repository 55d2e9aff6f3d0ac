"""Which specs a project verifies (``harness.project``), and a pytest plugin that stays out of the
way of projects that are not about kernels."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from harness.project import ProjectError, find_project

ROOT = Path(__file__).resolve().parents[2]


def test_the_nearest_project_file_decides(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.harness]\nspecs = ["specs"]\n')
    inner = tmp_path / "a" / "b"
    inner.mkdir(parents=True)
    project = find_project(inner)
    assert project.root == tmp_path and project.specs == ("specs",)
    (tmp_path / "a" / "pyproject.toml").write_text('[project]\nname = "nested"\n')
    assert find_project(inner) is None  # a package of its own inside a harness checkout names no specs
    (tmp_path / "a" / "harness.toml").write_text('specs = ["mine.specs", "more"]\n')
    assert find_project(inner).specs == ("mine.specs", "more")  # harness.toml beside it wins


@pytest.mark.parametrize("text, message", [
    ('[tool.harness]\nspecs = "specs"\n', "must be a list of module names"),
    ("[tool]\nharness = 3\n", r"\[tool.harness\] must be a table"),
    ("[tool.harness\n", "cannot read"),
])
def test_a_malformed_setting_is_an_error_naming_the_file(tmp_path, text, message):
    (tmp_path / "pyproject.toml").write_text(text)
    with pytest.raises(ProjectError, match=message):
        find_project(tmp_path)


def test_the_plugin_leaves_a_project_without_kernels_alone(tmp_path):
    (tmp_path / "pyproject.toml").write_text("[tool]\nharness = 3\n")  # not the plugin's to judge
    (tmp_path / "test_plain.py").write_text("def test_plain():\n    assert True\n")
    env = {k: v for k, v in os.environ.items() if k not in ("HARNESS_SPECS", "TRITON_INTERPRET")}
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and "1 passed" in done.stdout, done.stdout + done.stderr
    assert "harness:" not in done.stdout and "test_kernel" not in done.stdout


def test_recorded_results_hold_no_code():
    """benchmarks/results keeps READMEs and machine-readable results; probe scripts and frozen old
    kernels stay in git history (benchmarks/results/README.md)."""
    from pathlib import Path

    results = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
    assert results.is_dir()
    assert sorted(str(p.relative_to(results)) for p in results.rglob("*.py")) == []


def _harness_import_graph() -> dict[str, set[str]]:
    """Module -> the harness modules it imports, at the top or inside a function."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    modules = {}
    for path in (root / "harness").rglob("*.py"):
        name = ".".join(path.relative_to(root).with_suffix("").parts)
        modules[name.removesuffix(".__init__")] = path
    graph: dict[str, set[str]] = {name: set() for name in modules}
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                graph[name] |= {alias.name for alias in node.names if alias.name in modules}
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([node.module] if node.module else []))
                targets = {base} | {f"{base}.{alias.name}" for alias in node.names}
                graph[name] |= {t for t in targets if t in modules and t != name}
    return graph


def test_the_harness_imports_without_loops():
    """No two harness modules import each other, directly or around a loop, even from inside a
    function: each layer imports only what sits below it."""
    graph = _harness_import_graph()
    assert graph["harness.dispatch"] >= {"harness.checks", "harness.random_checks"}  # the walk sees imports
    seen: dict[str, int] = {}
    path: list[str] = []

    def visit(module: str) -> None:
        seen[module] = 1
        path.append(module)
        for target in sorted(graph[module]):
            if seen.get(target) == 1:
                raise AssertionError("import loop: " + " -> ".join(path[path.index(target):] + [target]))
            if target not in seen:
                visit(target)
        path.pop()
        seen[module] = 2

    for module in sorted(graph):
        if module not in seen:
            visit(module)
