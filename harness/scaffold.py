"""``harness new NAME``: the four files of a new kernel, generated so that they pass the harness.

The scaffold is a real (if trivial) kernel, ``x * scale`` with its backward, so a user starts from a
green ``harness check NAME`` and changes one thing at a time. Existing files are never overwritten.
"""

from __future__ import annotations

import keyword
from importlib import resources
from pathlib import Path
from string import Template

from harness.io import atomic_write_text
from harness.project import find_project

_FILES = {
    "kernel.py.tmpl": "kernels/{name}.py",
    "reference.py.tmpl": "references/{name}.py",
    "spec.py.tmpl": "specs/{name}.py",
    "doc.md.tmpl": "docs/kernels/{name}.md",
}


class ScaffoldError(ValueError):
    """The name is unusable or a file would be overwritten."""


def scaffold(name: str, root: Path) -> list[Path]:
    """Write the new kernel's files under ``root``; return their paths."""
    if not name.isidentifier() or keyword.iskeyword(name) or not name.islower() or name.startswith("_"):
        raise ScaffoldError(f"NAME must be a lower-case Python identifier not starting with '_', got {name!r}")
    targets = {tmpl: root / rel.format(name=name) for tmpl, rel in _FILES.items()}
    existing = [str(p) for p in targets.values() if p.exists()]
    if existing:
        raise ScaffoldError(f"refusing to overwrite existing file(s): {', '.join(existing)}")
    for package in ("kernels", "references", "specs"):
        if not (root / package / "__init__.py").exists():
            raise ScaffoldError(f"{root} does not look like the project root: no {package}/__init__.py")
    project = find_project(root)
    if project is not None and "specs" not in project.specs:
        raise ScaffoldError(f"{project.config_file} names the spec modules {list(project.specs)} but not the "
                            "'specs' package the new spec goes into: add \"specs\" to them")
    class_name = "".join(part.capitalize() for part in name.split("_")) + "Function"
    templates = resources.files("harness") / "templates"
    for tmpl, target in targets.items():
        text = Template((templates / tmpl).read_text()).substitute(name=name, class_name=class_name)
        atomic_write_text(target, text)
    written = list(targets.values())
    if project is None:  # the registry finds a project's specs through its settings (harness.project)
        config = root / "harness.toml"
        atomic_write_text(config, '# The spec modules (or packages) this project verifies: harness/project.py\nspecs = ["specs"]\n')
        written.append(config)
    return written
