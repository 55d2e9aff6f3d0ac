"""Building this package's CUDA C++ extensions at first use, with a cached build directory.

Each extension is a ``.cu`` file (plus header files placed in front of it), or C++ files with no
CUDA code (their own ``PYBIND11_MODULE``), handed to ``torch.utils.cpp_extension.load_inline``.
The first call on a CUDA machine compiles it (tens of seconds); later calls, in this process or
any other, load the cached build. The module name and the build directory carry a key hashed from
everything that changes the binary (the sources, the compiler flags, torch's and CUDA's versions,
the device's compute capability), so an edited source never loads a stale build, and several
extensions or versions coexist.

The cache lives in ``$HARNESS_CUDA_CACHE``, else ``$XDG_CACHE_HOME/harness/cuda-extensions``, else
``~/.cache/harness/cuda-extensions``. torch's builder takes a file lock inside the build
directory, so parallel test workers wait for one build instead of racing.
``HARNESS_CUDA_VERBOSE=1`` shows the compiler's output.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

import torch

SOURCE_DIR = Path(__file__).resolve().parent
# -O3 for the host code too; no --use_fast_math: the kernels' numerics rely on IEEE division and
# the accurate expf/exp (see add_mul_act_math.h).
CUDA_CFLAGS = ("-O3", "--expt-relaxed-constexpr")
CXX_CFLAGS = ("-O3",)


class CudaUnavailable(RuntimeError):
    """Raised when an extension is loaded on a machine with no usable CUDA device."""


@dataclass(frozen=True)
class ExtensionSource:
    """One extension: its name, its CUDA files (headers first), the C++ declarations of the
    functions it exports, and those functions' names; or, with no CUDA files, C++ files (paths
    relative to ``kernels/``) that define their own Python module and need no CUDA toolkit."""

    name: str
    cuda_files: tuple[str, ...] = ()
    declarations: str = ""
    functions: tuple[str, ...] = ()
    cpp_files: tuple[str, ...] = ()

    def cuda_source(self) -> str:
        """The files, concatenated in order (each marked with its name for compiler messages)."""
        return _concatenated(SOURCE_DIR, self.cuda_files)

    def cpp_source(self) -> str:
        """The C++ files (after the declarations), concatenated in order."""
        return _concatenated(SOURCE_DIR.parent, self.cpp_files)


def _concatenated(directory: Path, files: tuple[str, ...]) -> str:
    parts = []
    for file_name in files:
        text = (directory / file_name).read_text()
        parts.append(f'#line 1 "{file_name}"\n{text}')
    return "\n".join(parts)


def cache_root() -> Path:
    explicit = os.environ.get("HARNESS_CUDA_CACHE")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "harness" / "cuda-extensions"


def build_key(source: ExtensionSource, capability: tuple[int, int] | None) -> str:
    """16 hex digits that change whenever the compiled binary would."""
    h = hashlib.sha256()
    for part in (
        source.cuda_source(), source.cpp_source(), source.declarations, ",".join(source.functions),
        " ".join(CUDA_CFLAGS),
        " ".join(CXX_CFLAGS), torch.__version__, str(torch.version.cuda), repr(capability),
    ):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:16]


def unavailable_reason() -> str | None:
    """Why no CUDA extension can be built or run here, or None."""
    if torch.version.cuda is None:
        return f"torch {torch.__version__} is built without CUDA"
    if not torch.cuda.is_available():
        return "no CUDA device is visible"
    return None


# A build takes a minute or two; a lock file older than this was left by a builder that was killed
# (SIGKILL leaves torch's FileBaton in place), and every later load would wait on it forever.
STALE_LOCK_S = 20 * 60


def _remove_stale_lock(lock: Path) -> None:
    try:
        age = time.time() - lock.stat().st_mtime
    except FileNotFoundError:
        return
    if age > STALE_LOCK_S:
        warnings.warn(f"removing the stale build lock {lock} ({age / 60:.0f} min old: its builder was killed)",
                      stacklevel=3)
        lock.unlink(missing_ok=True)


def build(source: ExtensionSource, verbose: bool | None = None) -> ModuleType:
    """Compile (or load the cached build of) ``source`` for the current CUDA device."""
    reason = unavailable_reason()
    if reason is not None:
        raise CudaUnavailable(f"cannot build CUDA extension {source.name!r}: {reason}")
    from torch.utils.cpp_extension import load_inline

    capability = torch.cuda.get_device_capability()
    module_name = f"{source.name}_{build_key(source, capability)}"
    directory = cache_root() / module_name
    directory.mkdir(parents=True, exist_ok=True)
    _remove_stale_lock(directory / "lock")
    if verbose is None:
        verbose = os.environ.get("HARNESS_CUDA_VERBOSE", "") not in ("", "0")
    built = _load_finished_build(module_name, directory)
    if built is not None:
        return built
    module = load_inline(
        name=module_name,
        cpp_sources=[source.declarations + source.cpp_source()],
        cuda_sources=[source.cuda_source()] if source.cuda_files else None,
        functions=list(source.functions) or None,
        extra_cflags=list(CXX_CFLAGS),
        extra_cuda_cflags=list(CUDA_CFLAGS) if source.cuda_files else None,
        build_directory=str(directory),
        verbose=verbose,
    )
    # Only now is the library known to be whole (a builder killed while linking leaves a partial one).
    (directory / FINISHED_MARKER).write_text(f"{getattr(module, '__file__', '')}\n")
    return module


# Written into a build directory once its library has been built and imported. A process that
# finds it imports the library directly: load_inline would instead re-run its build step in every
# new process (on the H100, 38 s for a cached build against 46 s for a fresh one).
FINISHED_MARKER = "harness-build-finished"


def _load_finished_build(module_name: str, directory: Path) -> ModuleType | None:
    """The extension from a finished build in ``directory``, or None if there is none (or it
    does not import: then it is rebuilt)."""
    from torch.utils.cpp_extension import LIB_EXT

    library = directory / f"{module_name}{LIB_EXT}"
    if not (directory / FINISHED_MARKER).exists() or not library.exists():
        return None
    spec = importlib.util.spec_from_file_location(module_name, library)
    if spec is None or spec.loader is None:
        return None
    try:
        module = importlib.util.module_from_spec(spec)  # an extension module is loaded here
        spec.loader.exec_module(module)
    except ImportError as exc:
        warnings.warn(f"rebuilding CUDA extension {module_name}: its cached build does not import ({exc})", stacklevel=3)
        return None
    return module


@functools.lru_cache(maxsize=None)
def load(source: ExtensionSource) -> ModuleType:
    """:func:`build`, once per process."""
    return build(source)
