"""Finding specs: the project's own, installed plugins, and named modules.

A spec is any module-level ``KernelSpec`` in a spec module. Three sources are searched, so adding a
kernel never means editing a central list:

1. the modules the project names (``[tool.harness] specs = [...]`` in its pyproject.toml, or a
   harness.toml: ``harness.project``); a package stands for every public module in it (this
   repository names its ``specs`` package);
2. modules advertised by installed distributions under the ``harness.specs`` entry-point group
   (``[project.entry-points."harness.specs"] mykernels = "mykernels.harness_specs"``);
3. modules named in the ``HARNESS_SPECS`` environment variable, comma-separated.

Nothing else: in another project the harness's own example kernels are not verified.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import os
import pkgutil
from types import ModuleType

from harness.project import find_project, on_path
from harness.spec import KernelSpec, SpecError

ENTRY_POINT_GROUP = "harness.specs"


class RegistryError(RuntimeError):
    """A spec module failed to import, or two specs share a name."""


def _import(module_name: str, source: str) -> ModuleType:
    try:
        return importlib.import_module(module_name)
    except SpecError:
        raise
    except Exception as exc:
        raise RegistryError(f"cannot import spec module {module_name!r} (from {source}): {exc!r}") from exc


def spec_modules() -> list[tuple[str, str]]:
    """(module name, where it was found) for every spec module, in a stable order."""
    found: list[tuple[str, str]] = []
    project = find_project()
    if project is not None:
        on_path(project)
        source = f"the project's {project.config_file.name}"
        for name in project.specs:
            module = _import(name, source)
            if hasattr(module, "__path__"):  # a package: each public module in it
                found += [(f"{name}.{info.name}", source) for info in sorted(pkgutil.iter_modules(module.__path__),
                                                                             key=lambda i: i.name)
                          if not info.name.startswith("_")]
            else:
                found.append((name, source))
    for ep in sorted(importlib.metadata.entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
        found.append((ep.value, f"entry point {ep.name!r} of group {ENTRY_POINT_GROUP!r}"))
    for name in filter(None, (s.strip() for s in os.environ.get("HARNESS_SPECS", "").split(","))):
        found.append((name, "HARNESS_SPECS"))
    return found


def specs_in(module: ModuleType) -> list[KernelSpec]:
    return [v for v in vars(module).values() if isinstance(v, KernelSpec)]


def load_specs() -> dict[str, KernelSpec]:
    """All specs by name; raises ``RegistryError`` on import failures and duplicate names."""
    specs: dict[str, KernelSpec] = {}
    origin: dict[str, str] = {}
    for module_name, source in spec_modules():
        for spec in specs_in(_import(module_name, source)):
            if spec.name in specs and specs[spec.name] is not spec:
                raise RegistryError(f"spec name {spec.name!r} is defined in both {origin[spec.name]} and {module_name}")
            specs[spec.name] = spec
            origin[spec.name] = module_name
    return dict(sorted(specs.items()))


def select(specs: dict[str, KernelSpec], names: list[str] | None) -> dict[str, KernelSpec]:
    """The specs named in ``names`` (all when empty); an unknown name is an error listing the known."""
    if not names:
        return specs
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise RegistryError(f"unknown kernel(s) {unknown}; known: {sorted(specs)}")
    return {n: specs[n] for n in names}
