"""The project a run verifies: its root and the spec modules it names.

A repository says which specs are its own in ``pyproject.toml``::

    [tool.harness]
    specs = ["mykernels.harness_specs"]   # modules, or packages (every public module in them)

or in a ``harness.toml`` beside it with a top-level ``specs = [...]``. The nearest such file from
the current directory up is the project; its folder goes on ``sys.path``, so the named modules
import from the checkout (this repository names its ``specs`` package). Specs also come from the
installed distributions' ``harness.specs`` entry points and from ``HARNESS_SPECS``
(``harness.registry``); with none of these a run verifies nothing, never the harness's own
example kernels.
"""

from __future__ import annotations

import sys
import tomllib
from dataclasses import dataclass
from pathlib import Path


class ProjectError(ValueError):
    """A project file that cannot be read, or whose ``specs`` setting is malformed."""


@dataclass(frozen=True)
class Project:
    root: Path
    config_file: Path
    specs: tuple[str, ...]


def _settings(path: Path) -> dict | None:
    """The harness settings in ``path`` (``[tool.harness]`` of a pyproject.toml, the whole of a
    harness.toml), or None where a pyproject.toml has none."""
    try:
        data = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ProjectError(f"cannot read {path}: {exc}") from exc
    if path.name == "harness.toml":
        return data
    tool = data.get("tool", {})
    settings = tool.get("harness") if isinstance(tool, dict) else None
    if settings is not None and not isinstance(settings, dict):
        raise ProjectError(f"{path}: [tool.harness] must be a table, got {settings!r}")
    return settings


def find_project(start: Path | None = None) -> Project | None:
    """The project of the folder ``start`` (the current directory) is in: the nearest folder up
    with a harness.toml or a pyproject.toml. A pyproject.toml without ``[tool.harness]`` is a
    project that names no specs (None): a package nested in a harness checkout is its own
    project. Raises ``ProjectError`` for a file that cannot be read or a malformed setting."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        for name in ("harness.toml", "pyproject.toml"):
            path = folder / name
            if not path.is_file():
                continue
            settings = _settings(path)
            if settings is None:
                return None
            specs = settings.get("specs", [])
            if not isinstance(specs, list) or not all(isinstance(s, str) and s for s in specs):
                raise ProjectError(f"{path}: 'specs' must be a list of module names, got {specs!r}")
            return Project(folder, path, tuple(specs))
    return None


def on_path(project: Project) -> None:
    """Make the project's modules importable from its checkout (idempotent)."""
    root = str(project.root)
    if root not in sys.path:
        sys.path.insert(0, root)
