"""The declarative record that pairs a fused kernel with its eager reference.

A ``KernelSpec`` says everything the harness needs to verify and benchmark a kernel: its reference,
its implementations, the named tensors and scalars of a call, the sizes they range over, the dtypes
and layouts it accepts, its error budget, its performance model and its known failures. Specs are
plain data: building one validates it and raises ``SpecError`` naming the offending field, so a
malformed spec fails at import, not halfway through a nightly run.
"""

from __future__ import annotations

import functools
import inspect
import keyword
import math
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from hypothesis import strategies as st

from harness.call import Call
from harness.layouts import LAYOUT_CLASSES
from harness.numerics import Budget
from harness.values import known_value_kinds

FLOAT_DTYPES = ("float32", "float16", "bfloat16", "float64")
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8", "bool")
ALL_DTYPES = FLOAT_DTYPES + INT_DTYPES
CHECKS = ("forward", "backward", "unwritten", "guards", "determinism", "gradcheck", "contract", "dropout")
BATCH = "*batch"  # a dims entry that expands to zero or more leading batch dimensions
# The reference's own timings, beside a spec's implementations (reports list them in this order).
REFERENCE_IMPLEMENTATIONS = ("compile", "eager")
# The benchmarked passes, and the two figures each is timed in (harness.bench.timing): device time
# and per-call wall time with the host included.
PASSES = ("forward", "forward_backward")
FIGURES = ("device", "wall")


class SpecError(ValueError):
    """A kernel spec is malformed; the message names the spec and the field."""


@dataclass(frozen=True)
class Dim:
    """A named size shared by the tensors of a case (e.g. ``rows``, ``cols``).

    ``cpu_max`` bounds it under the Triton interpreter, where every program instance costs
    milliseconds; ``gpu_max`` on a real device. ``boundaries`` lists sizes where the kernel's tiling
    changes (its block sizes): the generator draws them and their neighbours. It may be a callable,
    evaluated when cases are generated, because block sizes depend on the backend.
    ``choices``, when given, are the only sizes the kernel supports (an attention head dimension of
    16, 32, 64 or 128): sizes are drawn from those within the backend's bound, nothing else.
    """

    cpu_max: int = 16
    gpu_max: int = 1024
    min: int = 1
    boundaries: Sequence[int] | Callable[[], Sequence[int]] = ()
    choices: Sequence[int] = ()

    def resolved_boundaries(self) -> tuple[int, ...]:
        values = self.boundaries() if callable(self.boundaries) else self.boundaries
        return tuple(int(v) for v in values)


@dataclass(frozen=True)
class Batch:
    """Leading batch dimensions (``*batch`` in a tensor's dims): 0..max_rank sizes of 1..max each."""

    max_rank: int = 2
    cpu_max: int = 3
    gpu_max: int = 8


@dataclass(frozen=True)
class TilingCase:
    """Sizes that take one tiling path of a kernel under its small tiles (``harness.validate.
    small_tiles``: always under the interpreter), run first, as an explicit example, by every check
    that judges a case (``harness.runner.TILING_CHECKS``: all but gradcheck and the contract):
    random draws may miss a path; these never do.

    ``path`` says what the sizes reach ("rows of three column blocks, several row groups");
    ``dims`` pins sizes (a ``*batch`` entry as a list); ``scalars`` pins scalars where the path
    needs them (dropout's masks need p > 0). Tensors are contiguous (where their layouts allow it),
    of their first value kind;
    seeds and the other scalars and sizes are drawn, the same on every run of a check.
    """

    path: str
    dims: Mapping[str, int | Sequence[int]]
    scalars: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class TensorArg:
    """One tensor argument of the kernel.

    ``dims`` names its sizes, outermost first (``("*batch", "rows", "cols")``); an entry that is a
    tuple of dim names is one axis of their product (grouped-query attention's q has
    ``("kv_heads", "group")`` heads). ``values`` names the value kinds to draw from (see
    ``harness.values``). ``dtype`` pins a dtype (token ids are int64 whatever the case's dtype);
    ``None`` means the case's dtype. ``layouts`` restricts the layout classes drawn (all by
    default). ``optional`` tensors are drawn as passed or as ``None`` (a LayerNorm without a
    weight): the call, the reference and the hooks see ``None`` where a case leaves one out.
    """

    name: str
    dims: tuple[str | tuple[str, ...], ...]
    grad: bool = False
    values: tuple[str, ...] = ("normal",)
    dtype: str | None = None
    layouts: tuple[str, ...] = LAYOUT_CLASSES
    optional: bool = False


@dataclass(frozen=True)
class BadInput:
    """A call the kernel must reject with a clear error naming ``argument``.

    ``mutate`` receives the keyword arguments of a valid call and returns the bad ones.
    """

    description: str
    argument: str
    mutate: Callable[[dict[str, Any]], dict[str, Any]]


@dataclass(frozen=True)
class KnownFailure:
    """A check expected to fail, with the reason; run as a strict xfail so a fix is noticed."""

    check: str
    reason: str
    implementation: str | None = None
    dtype: str | None = None

    def matches(self, implementation: str, dtype: str | None, check: str) -> bool:
        return (
            self.check == check
            and self.implementation in (None, implementation)
            and (self.dtype is None or self.dtype == dtype)
        )


@dataclass(frozen=True)
class Implementation:
    """One way of computing the op (a Triton kernel, a CUDA extension, ...).

    ``requires_cuda`` implementations are skipped with that reason when no CUDA device is present.
    ``load`` is called lazily to obtain the callable (a CUDA extension is built at first use).
    """

    load: Callable[[], Callable[..., Any]]
    requires_cuda: bool = False
    min_compute_capability: tuple[int, int] | None = None
    description: str = ""
    # False for an implementation built of PyTorch's own ops alone (an eager composite): it makes
    # no custom op, so ``opcheck`` has nothing to check and is skipped, saying so. A kernel's
    # implementation keeps True, and its opcheck fails if its call makes no custom op.
    custom_ops: bool = True


@dataclass(frozen=True)
class BenchShape:
    """One fixed benchmark point: the dims, the dtype, (optionally) scalars, and the optional
    tensors it leaves out."""

    dims: Mapping[str, int]
    dtype: str
    scalars: Mapping[str, Any] = field(default_factory=dict)
    quick: bool = False
    # Optional tensors this benchmark's call leaves out (every tensor is passed by default).
    absent: tuple[str, ...] = ()


@dataclass(frozen=True)
class OptionalPeer:
    """Another library's kernel for the same function, benchmarked where that library is installed.

    ``load`` imports the library and returns a callable taking the reference's arguments; an
    ``ImportError`` from it means "not installed here", and the benchmark says so, with
    ``install`` (the command that installs it), instead of timing the peer. ``applies``, given a
    benchmark shape's scalars, says whether the library implements that variant of the op (a peer
    with only the tanh form of GELU); by default every variant.
    """

    name: str
    load: Callable[[], Callable[..., Any]]
    install: str
    applies: Callable[[Mapping[str, Any]], bool] | None = None


def _no_flops(call: Call) -> float:
    return 0.0


@dataclass(frozen=True)
class PerfModel:
    """Minimum bytes moved and flops of one call, each a function of the ``harness.call.Call`` at a
    benchmark shape: its tensors on the meta device (shapes, dtypes, and None for an optional
    tensor left out), its scalars, ``dims`` and ``dtype``.

    The harness divides these by measured time to place a kernel against the device's copy
    bandwidth or matmul peak. ``backward_bytes``/``backward_flops`` cover the backward pass alone.
    (A function of ``(dims, dtype name)``, the form before ``Call``, still works, with a
    DeprecationWarning.)
    """

    bytes_moved: Callable[[Call], float]
    flops: Callable[[Call], float] = _no_flops
    backward_bytes: Callable[[Call], float] | None = None
    backward_flops: Callable[[Call], float] | None = None
    shapes: tuple[BenchShape, ...] = ()
    # Other libraries' implementations of the op, timed beside eager and torch.compile as the bar a
    # kernel must clear (torch's scaled_dot_product_attention for attention): a callable taking the
    # reference's arguments, or an OptionalPeer for a library that may not be installed. The
    # harness neither verifies nor gates them: they are context, like eager.
    peers: Mapping[str, Callable[..., Any] | OptionalPeer] = field(default_factory=dict)
    # The launch-overhead shape (harness.bench.runner.launch_shape): by default the first shape
    # with every size at its smallest legal value.
    launch_shape: BenchShape | None = None


def is_context(record: Mapping[str, Any]) -> bool:
    """Whether a benchmark record times the reference (eager, compile) or a peer library: context
    for the kernels under test, never re-checked or gated."""
    return record["implementation"] in REFERENCE_IMPLEMENTATIONS or bool(record.get("peer"))


@dataclass(frozen=True)
class RandomSpec:
    """A kernel that draws random numbers from a seed (dropout): what ``harness.random_checks`` needs.

    ``seed`` and ``p`` name the scalars holding the seed and the drop probability. Called with the
    scalars ``mask_scalars`` (e.g. ``{"return_mask": True}``), an implementation returns its
    keep-mask as its last output (True or 1 = kept, the shape of the dropped tensor). The
    reference takes a keep-mask through its keyword argument ``reference_mask`` and then applies
    that mask instead of drawing one, so the kernel's own mask can be replayed into it. A spec with
    a ``random`` entry gets the ``dropout`` check, and its forward, backward and unwritten checks
    compare against the reference with the kernel's mask replayed.
    """

    seed: str
    p: str
    mask_scalars: Mapping[str, Any] = field(default_factory=dict)
    reference_mask: str = "mask"


# A scalar argument's Hypothesis strategy, or a callable taking what the case drew before its
# scalars and returning the strategy: a ``harness.call.Drawn``, the sizes as a mapping (dim name ->
# size; '*batch' -> list of sizes) with ``present``, the tensors the call passes.
ScalarStrategy = st.SearchStrategy[Any] | Callable[[Mapping[str, Any]], st.SearchStrategy[Any]]


def _wrap_implementation(value: Any) -> Implementation:
    if isinstance(value, Implementation):
        return value
    if callable(value):
        return Implementation(load=lambda fn=value: fn)
    raise TypeError(type(value).__name__)


@dataclass(frozen=True)
class Numerics:
    """How a spec's outputs and gradients are judged (``harness.numerics``): the error budget, in
    multiples of eager's own error, and what the envelope may not drop below. One object per spec
    (``KernelSpec.numerics``); every field has a default that suits a kernel whose outputs are
    rounded once from sums that do not cancel.

    Every hook takes the call (``harness.call.Call``: the fp64 copies of the case's tensors and its
    scalars in ``kwargs``, its ``dims``, its ``dtype`` for terms of mixed precisions and, for a
    random spec, the kernel's keep-mask as ``mask``); the gradient hooks also take
    ``grad_outputs`` (fp64), one per differentiable output. A hook written the way older specs
    wrote them, taking the reference's arguments by name, still works, with a DeprecationWarning.
    """

    # The budget: a multiple of eager's own error (>= 1), or one per dtype name.
    error_multiple: float | Mapping[str, float] = 2.0
    # The gradients' budget, where it differs from the outputs' (None: error_multiple).
    gradient_error_multiple: float | Mapping[str, float] | None = None
    # Per output, a tensor of the sum of |terms| each element is summed from (or None): the scale
    # at which a reordered sum legitimately differs. The forward envelope never drops below one ulp
    # of it. For outputs that cancel, e.g. attention's softmax(qk) @ v.
    term_magnitudes: Callable[[Call], Any] | None = None
    # The same for gradients, ``(call, grad_outputs)``: {input name: sum of |terms| of
    # each gradient element}. For gradients that are sums over many contributions, e.g. an
    # embedding's scatter-add.
    gradient_term_magnitudes: Callable[[Call, Any], Any] | None = None
    # For gradients summed from many terms that are each rounded to the case's dtype first
    # (attention's dS before dS K): called like gradient_term_magnitudes, returns {input name: the
    # root-sum-square of those terms per gradient element}. Independent roundings of n terms add
    # up like a random walk, so their error is about a unit roundoff of this, not of the sum of
    # |terms| (sqrt(n) times larger). The gradient's envelope never drops below a unit roundoff of
    # it: it stands in for eager where eager's own roundings happened to cancel along a whole row.
    gradient_rounded_terms: Callable[[Call, Any], Any] | None = None
    # The dtype whose ulp the terms of the hooks above carry, where finer than the output's:
    # "float32" for sums a kernel forms in fp32 from exact inputs (None: the output's dtype).
    term_precision: str | None = None
    # The GPU's approximate functions the kernel uses ("exp", "sigmoid": harness.approximate), each
    # with a hook of the call (fp64 inputs) that returns, per output, the
    # function's argument for each element (or None for an output without it). An element within
    # the function's documented error at that argument passes whatever the budget.
    approximate_math: Mapping[str, Callable[[Call], Any]] = field(default_factory=dict)
    # Where the hooks above give no term magnitudes (forward or gradients), the envelope's floor is
    # derived from the reference itself: a first-order running error analysis of its own
    # evaluation in eager's dtypes (harness.bounds). False judges on eager's measured error alone,
    # and also drops the gradients' allowance for approximate_math, which that analysis carries.
    derive_floors: bool = True

    def multiple_for(self, dtype: str, interpreter: bool = False, gradients: bool = False) -> float:
        """The error budget for ``dtype``: the declared multiple (``gradient_error_multiple`` for
        gradients, when set), doubled for bf16 under the interpreter, whose fp32->bf16 stores
        truncate (error up to one ulp) where hardware rounds to nearest (half an ulp): a defect
        of the interpreter, not of the kernel."""
        chosen = self.gradient_error_multiple if gradients and self.gradient_error_multiple is not None else self.error_multiple
        if isinstance(chosen, Mapping):
            declared = float(chosen.get(dtype, max(chosen.values())))
        else:
            declared = float(chosen)
        return declared * (2.0 if interpreter and dtype == "bfloat16" else 1.0)

    def term_dtype(self):
        """``term_precision`` as a torch dtype, or None."""
        if self.term_precision is None:
            return None
        from harness.case import torch_dtype

        return torch_dtype(self.term_precision)

    def budget(self, dtype: str, interpreter: bool = False, gradients: bool = False) -> Budget:
        """The policy as it applies to one comparison of a case in ``dtype`` (``harness.numerics.
        compare``): its multiple (``multiple_for``) and its term precision."""
        return Budget(self.multiple_for(dtype, interpreter, gradients), self.term_dtype())


# Numerics' fields, which KernelSpec took as keywords of its own before Numerics existed.
NUMERICS_FIELDS = ("error_multiple", "gradient_error_multiple", "term_magnitudes", "gradient_term_magnitudes",
                   "gradient_rounded_terms", "term_precision", "approximate_math")


@dataclass(frozen=True)
class KernelSpec:
    """Pairs a kernel with its reference, its inputs' generators and its performance model."""

    name: str
    reference: Callable[..., Any]
    implementations: Mapping[str, Implementation | Callable[..., Any]]
    tensors: tuple[TensorArg, ...]
    dims: Mapping[str, Dim | Batch]
    # A scalar's strategy, or a function of the case's drawn sizes returning one (a per-table
    # cardinality list needs the number of tables and the rows per table): ``ScalarStrategy``.
    scalars: Mapping[str, ScalarStrategy] = field(default_factory=dict)
    dtypes: tuple[str, ...] = ("float32", "float16", "bfloat16")
    # How outputs and gradients are judged: the error budget and its term models (Numerics).
    numerics: Numerics = field(default_factory=Numerics)
    deterministic: bool = True
    outputs: tuple[str, ...] = ("out",)
    bad_inputs: tuple[BadInput, ...] = ()
    bad_scalars: Mapping[str, Sequence[Any]] = field(default_factory=dict)
    perf: PerfModel | None = None
    requires_cuda: bool = False
    known_failures: tuple[KnownFailure, ...] = ()
    description: str = ""
    random: RandomSpec | None = None
    # Sizes that reach each tiling path of the kernel at CPU scale (``TilingCase``): explicit
    # examples of every check that draws cases, so that no path depends on a lucky draw.
    tiling_cases: tuple[TilingCase, ...] = ()
    # Why a branch of the kernel's Triton code is not taken both ways by the CPU suite, keyed
    # "<function>: <branch line>" as ``harness branches`` prints it (harness.branches).
    unreached_on_cpu: Mapping[str, str] = field(default_factory=dict)
    # Whether the compiled call must serve every size with one compilation (``torch.compile`` with
    # dynamic shapes; harness.graph_checks): False for a kernel whose sizes must be static.
    dynamic_shapes: bool = True

    def __post_init__(self) -> None:
        _validate(self)
        impls = {}
        for impl_name, impl in self.implementations.items():
            try:
                impls[impl_name] = _wrap_implementation(impl)
            except TypeError as exc:
                raise SpecError(
                    f"spec {self.name!r}: implementations[{impl_name!r}] must be callable or an "
                    f"Implementation, got {exc}"
                ) from None
        object.__setattr__(self, "implementations", impls)
        object.__setattr__(self, "numerics", _numerics_of_calls(self))
        if self.perf is not None:
            object.__setattr__(self, "perf", _perf_of_calls(self))

    # ---- derived views -------------------------------------------------------------------
    @property
    def grad_inputs(self) -> tuple[str, ...]:
        return tuple(t.name for t in self.tensors if t.grad)

    @property
    def float_dtypes(self) -> tuple[str, ...]:
        """The case dtypes that run property checks (fp64 is for gradcheck only)."""
        return tuple(d for d in self.dtypes if d != "float64")

    def checks(self) -> tuple[str, ...]:
        """The checks that apply to this spec."""
        out = ["forward", "unwritten", "guards"]
        if self.grad_inputs:
            out.insert(1, "backward")
        if self.deterministic:
            out.append("determinism")
        if self.random is not None:
            out.append("dropout")
        if self.grad_inputs and "float64" in self.dtypes:
            out.append("gradcheck")
        out += ["opcheck", "compile", "cudagraph"]  # harness.graph_checks
        out.append("contract")
        return tuple(out)

    def known_failure(self, implementation: str, dtype: str | None, check: str) -> KnownFailure | None:
        for failure in self.known_failures:
            if failure.matches(implementation, dtype, check):
                return failure
        return None


def _accept_numerics_keywords(init: Callable[..., None]) -> Callable[..., None]:
    """KernelSpec's generated ``__init__``, taking Numerics' fields as keywords of its own as well,
    as specs written before Numerics did: they go into ``numerics`` (over the one given, so that
    ``dataclasses.replace(spec, error_multiple=3.0)`` changes that field alone), with a
    DeprecationWarning that says where they belong now."""

    @functools.wraps(init)
    def __init__(self, *args: Any, **kwargs: Any) -> None:
        legacy = {name: kwargs.pop(name) for name in NUMERICS_FIELDS if name in kwargs}
        if legacy:
            named = ", ".join(f"{name}=..." for name in legacy)
            warnings.warn(f"KernelSpec({named}): these are fields of harness.Numerics; pass "
                          f"numerics=Numerics({named})", DeprecationWarning, stacklevel=2)
            given = kwargs.get("numerics")
            kwargs["numerics"] = replace(given, **legacy) if isinstance(given, Numerics) else Numerics(**legacy)
        init(self, *args, **kwargs)

    return __init__


KernelSpec.__init__ = _accept_numerics_keywords(KernelSpec.__init__)


def _validate(spec: KernelSpec) -> None:
    def fail(field_name: str, message: str) -> None:
        raise SpecError(f"spec {spec.name!r}: {field_name}: {message}")

    if not isinstance(spec.name, str) or not spec.name.isidentifier() or keyword.iskeyword(spec.name):
        raise SpecError(f"spec name must be a Python identifier (it names tests and files), got {spec.name!r}")
    if not callable(spec.reference):
        fail("reference", f"must be callable, got {type(spec.reference).__name__}")
    if not isinstance(spec.implementations, Mapping) or not spec.implementations:
        fail("implementations", "must be a non-empty mapping of name -> callable")
    for impl_name in spec.implementations:
        if not isinstance(impl_name, str) or not impl_name.isidentifier():
            fail("implementations", f"implementation names must be identifiers, got {impl_name!r}")
        if impl_name in REFERENCE_IMPLEMENTATIONS:
            fail("implementations", f"{impl_name!r} is reserved for the reference's own timings")
    if not spec.tensors:
        fail("tensors", "a kernel needs at least one tensor argument")
    names = [t.name for t in spec.tensors] + list(spec.scalars)
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        fail("tensors/scalars", f"argument names must be unique, repeated: {duplicates}")
    for t in spec.tensors:
        if not isinstance(t, TensorArg):
            fail("tensors", f"entries must be TensorArg, got {type(t).__name__}")
        for entry in t.dims:
            if isinstance(entry, tuple):
                if not entry or BATCH in entry or not all(isinstance(d, str) for d in entry):
                    fail(f"tensors[{t.name!r}].dims", f"a product entry is a non-empty tuple of dim names other than '*batch', got {entry!r}")
                unknown = [d for d in entry if d not in spec.dims]
                if unknown:
                    fail(f"tensors[{t.name!r}].dims", f"names dims {unknown}, which are not in dims {sorted(spec.dims)}")
                continue
            d = entry
            if d == BATCH:
                if not any(isinstance(v, Batch) for v in spec.dims.values()) and BATCH not in spec.dims:
                    fail(f"tensors[{t.name!r}].dims", "uses '*batch' but dims has no Batch entry named '*batch'")
            elif d not in spec.dims:
                fail(f"tensors[{t.name!r}].dims", f"names dim {d!r}, which is not in dims {sorted(spec.dims)}")
        if t.dims.count(BATCH) > 1 or (BATCH in t.dims and t.dims[0] != BATCH):
            fail(f"tensors[{t.name!r}].dims", "'*batch' may appear once, first")
        unknown_values = [v for v in t.values if v not in known_value_kinds()]
        if unknown_values:
            fail(f"tensors[{t.name!r}].values", f"unknown value kinds {unknown_values}; known: {sorted(known_value_kinds())}")
        bad_layouts = [c for c in t.layouts if c not in LAYOUT_CLASSES]
        if bad_layouts or not t.layouts:
            fail(f"tensors[{t.name!r}].layouts", f"must be a non-empty subset of {LAYOUT_CLASSES}, got {t.layouts}")
        if t.dtype is not None and t.dtype not in ALL_DTYPES:
            fail(f"tensors[{t.name!r}].dtype", f"unknown dtype {t.dtype!r}; expected one of {ALL_DTYPES}")
        if not isinstance(t.optional, bool):
            fail(f"tensors[{t.name!r}].optional", f"must be True or False, got {t.optional!r}")
        if t.grad and t.dtype is not None and t.dtype not in FLOAT_DTYPES:
            fail(f"tensors[{t.name!r}].grad", f"a {t.dtype} tensor cannot take gradients")
    for dim_name, dim in spec.dims.items():
        if isinstance(dim, Batch):
            if dim_name != BATCH:
                fail(f"dims[{dim_name!r}]", "a Batch entry must be named '*batch'")
            if dim.max_rank < 0 or dim.cpu_max < 1 or dim.gpu_max < 1:
                fail(f"dims[{dim_name!r}]", "max_rank must be >= 0 and cpu_max/gpu_max >= 1")
        elif isinstance(dim, Dim):
            if not (1 <= dim.min <= dim.cpu_max and dim.min <= dim.gpu_max):
                fail(f"dims[{dim_name!r}]", f"need 1 <= min <= cpu_max and min <= gpu_max, got {dim}")
            if dim.choices:
                if any(isinstance(c, bool) or not isinstance(c, int) or c < dim.min for c in dim.choices):
                    fail(f"dims[{dim_name!r}].choices", f"must be integers >= min ({dim.min}), got {tuple(dim.choices)}")
                if not any(c <= dim.cpu_max for c in dim.choices) or not any(c <= dim.gpu_max for c in dim.choices):
                    fail(f"dims[{dim_name!r}].choices", f"need at least one choice <= cpu_max and one <= gpu_max, got {tuple(dim.choices)}")
        else:
            fail(f"dims[{dim_name!r}]", f"must be Dim or Batch, got {type(dim).__name__}")
    for scalar_name, strategy in spec.scalars.items():
        if not isinstance(strategy, st.SearchStrategy) and not callable(strategy):
            fail(f"scalars[{scalar_name!r}]", f"must be a hypothesis strategy or a function of the dims returning one, got {type(strategy).__name__}")
    if not spec.dtypes or any(d not in FLOAT_DTYPES for d in spec.dtypes):
        fail("dtypes", f"must be a non-empty subset of {FLOAT_DTYPES}, got {spec.dtypes}")
    if not [d for d in spec.dtypes if d != "float64"]:
        fail("dtypes", "needs at least one of float32/float16/bfloat16 (float64 alone only serves gradcheck)")
    numerics = spec.numerics
    if not isinstance(numerics, Numerics):
        fail("numerics", f"must be a Numerics, got {type(numerics).__name__}")
    multiples = []
    for declared in (numerics.error_multiple, numerics.gradient_error_multiple):
        if declared is not None:
            multiples += list(declared.values()) if isinstance(declared, Mapping) else [declared]
    for m in multiples:
        if not isinstance(m, (int, float)) or not math.isfinite(m) or m < 1:
            fail("numerics.error_multiple", f"must be a finite number >= 1 (a multiple of eager's own error), got {m!r}")
    if not spec.outputs or len(set(spec.outputs)) != len(spec.outputs):
        fail("outputs", f"must name each output once, got {spec.outputs}")
    for bad in spec.bad_inputs:
        if not isinstance(bad, BadInput):
            fail("bad_inputs", f"entries must be BadInput, got {type(bad).__name__}")
    for scalar_name in spec.bad_scalars:
        if scalar_name not in spec.scalars:
            fail("bad_scalars", f"names {scalar_name!r}, which is not a scalar of the spec")
    for failure in spec.known_failures:
        if failure.check not in CHECKS:
            fail("known_failures", f"check {failure.check!r} is not one of {CHECKS}")
        if not failure.reason.strip():
            fail("known_failures", "every known failure needs a reason")
        if failure.implementation is not None and failure.implementation not in spec.implementations:
            fail("known_failures", f"implementation {failure.implementation!r} is not in implementations")
    for i, tiling in enumerate(spec.tiling_cases):
        where = f"tiling_cases[{i}]"
        if not isinstance(tiling, TilingCase):
            fail(where, f"entries must be TilingCase, got {type(tiling).__name__}")
        if not isinstance(tiling.path, str) or not tiling.path.strip():
            fail(f"{where}.path", "say which tiling path the sizes reach")
        for dim_name, value in tiling.dims.items():
            dim = spec.dims.get(dim_name)
            if dim is None:
                fail(f"{where}.dims", f"names dim {dim_name!r}, which is not in dims {sorted(spec.dims)}")
            if isinstance(dim, Batch):
                if (not isinstance(value, Sequence) or len(value) > dim.max_rank
                        or any(isinstance(v, bool) or not isinstance(v, int) or not 1 <= v <= dim.cpu_max for v in value)):
                    fail(f"{where}.dims[{dim_name!r}]", f"must be a list of at most {dim.max_rank} sizes in 1..{dim.cpu_max}, got {value!r}")
            elif (isinstance(value, bool) or not isinstance(value, int) or not dim.min <= value <= dim.cpu_max
                  or (dim.choices and value not in dim.choices)):
                fail(f"{where}.dims[{dim_name!r}]", f"must be a size the CPU draws ({dim.min}..{dim.cpu_max}"
                     f"{', one of ' + str(tuple(dim.choices)) if dim.choices else ''}), got {value!r}")
        for scalar_name in tiling.scalars:
            if scalar_name not in spec.scalars:
                fail(f"{where}.scalars", f"names {scalar_name!r}, which is not a scalar of the spec")
    from harness.approximate import FUNCTIONS as _APPROXIMATE

    for function, hook in numerics.approximate_math.items():
        if function not in _APPROXIMATE:
            fail("numerics.approximate_math", f"unknown function {function!r}; known: {sorted(_APPROXIMATE)}")
        if not callable(hook):
            fail(f"numerics.approximate_math[{function!r}]", f"must be a function of the inputs giving the argument, got {type(hook).__name__}")
    for key, reason in spec.unreached_on_cpu.items():
        if not isinstance(key, str) or ": " not in key:
            fail("unreached_on_cpu", f"keys are '<function>: <branch line>' as `harness branches` prints them, got {key!r}")
        if not isinstance(reason, str) or not reason.strip():
            fail(f"unreached_on_cpu[{key!r}]", "say why the CPU suite cannot take this branch both ways")
    if numerics.term_precision is not None and numerics.term_precision not in FLOAT_DTYPES:
        fail("numerics.term_precision", f"must be one of {FLOAT_DTYPES} or None, got {numerics.term_precision!r}")
    for hook in TERM_HOOKS:
        if getattr(numerics, hook) is not None and not callable(getattr(numerics, hook)):
            fail(f"numerics.{hook}", f"must be callable, got {type(getattr(numerics, hook)).__name__}")
    if spec.random is not None:
        if not isinstance(spec.random, RandomSpec):
            fail("random", f"must be a RandomSpec, got {type(spec.random).__name__}")
        for role, scalar in (("seed", spec.random.seed), ("p", spec.random.p), *(("mask_scalars", s) for s in spec.random.mask_scalars)):
            if scalar not in spec.scalars:
                fail(f"random.{role}", f"names {scalar!r}, which is not a scalar of the spec")
    if spec.perf is not None:
        if not isinstance(spec.perf, PerfModel):
            fail("perf", f"must be a PerfModel, got {type(spec.perf).__name__}")
        for peer, fn in spec.perf.peers.items():
            if not isinstance(peer, str) or not peer.isidentifier() or peer in REFERENCE_IMPLEMENTATIONS:
                fail("perf.peers", f"peer names must be identifiers other than {REFERENCE_IMPLEMENTATIONS}, got {peer!r}")
            if peer in spec.implementations:
                fail("perf.peers", f"{peer!r} is already an implementation of the spec")
            if not (callable(fn) or isinstance(fn, OptionalPeer)):
                fail("perf.peers", f"{peer!r} must be callable or an OptionalPeer, got {type(fn).__name__}")
        if spec.perf.launch_shape is not None and not isinstance(spec.perf.launch_shape, BenchShape):
            fail("perf.launch_shape", f"must be a BenchShape or None, got {type(spec.perf.launch_shape).__name__}")
        for shape in spec.perf.shapes + ((spec.perf.launch_shape,) if spec.perf.launch_shape else ()):
            missing = [d for d in spec.dims if not isinstance(spec.dims[d], Batch) and d not in shape.dims]
            if missing:
                fail("perf.shapes", f"shape {dict(shape.dims)} lacks dims {missing}")
            if shape.dtype not in spec.dtypes:
                fail("perf.shapes", f"dtype {shape.dtype!r} is not among the spec's dtypes {spec.dtypes}")
            optional = {t.name for t in spec.tensors if t.optional}
            if not set(shape.absent) <= optional:
                fail("perf.shapes", f"absent names {sorted(set(shape.absent) - optional)}, not optional tensors of "
                     f"the spec (optional: {sorted(optional)})")


# The Numerics hooks that size the error budget from the inputs (validated alike; a random spec's
# are handed the replayed keep-mask alike).
TERM_HOOKS = ("term_magnitudes", "gradient_term_magnitudes", "gradient_rounded_terms")
PERF_FUNCTIONS = ("bytes_moved", "flops", "backward_bytes", "backward_flops")


# ---- hooks written before ``Call`` --------------------------------------------------------------
# Older specs wrote numerics hooks that take the reference's arguments by name (with ``dtype`` and
# the random spec's mask keyword where they asked for them) and performance functions of ``(dims,
# dtype name)``. Each such function is recognised once, when its spec is built, and wrapped into
# the function of a ``Call`` that the harness calls, with a DeprecationWarning naming it.


def _takes_arguments_by_name(spec: KernelSpec, hook: Callable[..., Any]) -> bool:
    """Whether a numerics hook is of the older form: it names one of the spec's arguments, or takes
    them all as ``**kwargs``."""
    names = {t.name for t in spec.tensors} | set(spec.scalars)
    params = inspect.signature(hook).parameters.values()
    return any(p.kind is p.VAR_KEYWORD or p.name in names for p in params)


def _of_call(hook: Callable[..., Any], mask_keyword: str | None, gradient: bool) -> Callable[..., Any]:
    params = inspect.signature(hook).parameters
    wants_dtype = "dtype" in params
    wants_mask = mask_keyword is not None and mask_keyword in params

    def hook_of_call(call: Call, grad_outputs: Any = None) -> Any:
        extra: dict[str, Any] = {"grad_outputs": grad_outputs} if gradient else {}
        if wants_dtype:
            extra["dtype"] = call.dtype
        if wants_mask and call.mask is not None:
            extra[mask_keyword] = call.mask
        return hook(**call.kwargs, **extra)

    return hook_of_call


def _deprecated(spec: KernelSpec, names: list[str], form: str) -> None:
    if names:
        verb, it = ("take", "them") if len(names) > 1 else ("takes", "it")
        warnings.warn(f"spec {spec.name!r}: {', '.join(names)} {verb} {form}; write {it} as a function of the call "
                      "(harness.call.Call)", DeprecationWarning, stacklevel=4)


def _numerics_of_calls(spec: KernelSpec) -> Numerics:
    """``spec.numerics`` with every hook of the older form wrapped into a function of the call."""
    numerics, mask_keyword = spec.numerics, spec.random.reference_mask if spec.random is not None else None
    changes: dict[str, Any] = {}
    for name in TERM_HOOKS:
        hook = getattr(numerics, name)
        if hook is not None and _takes_arguments_by_name(spec, hook):
            changes[name] = _of_call(hook, mask_keyword, gradient=name != "term_magnitudes")
    approximate = {function: _of_call(hook, mask_keyword, gradient=False) if _takes_arguments_by_name(spec, hook) else hook
                   for function, hook in numerics.approximate_math.items()}
    if any(approximate[f] is not h for f, h in numerics.approximate_math.items()):
        changes["approximate_math"] = approximate
    older = [f"numerics.{n}" for n in changes if n != "approximate_math"]
    older += [f"numerics.approximate_math[{f!r}]" for f, h in numerics.approximate_math.items() if approximate[f] is not h]
    _deprecated(spec, older, "the reference's arguments by name")
    return replace(numerics, **changes) if changes else numerics


def _perf_of_calls(spec: KernelSpec) -> PerfModel:
    """``spec.perf`` with every function of ``(dims, dtype name)`` wrapped into a function of the call."""
    perf = spec.perf
    changes = {}
    for name in PERF_FUNCTIONS:
        fn = getattr(perf, name)
        if fn is None:
            continue
        required = [p for p in inspect.signature(fn).parameters.values()
                    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
        if len(required) == 2:
            changes[name] = lambda call, fn=fn: fn({k: v for k, v in call.dims.items() if k != BATCH},
                                                   str(call.dtype).removeprefix("torch."))
    _deprecated(spec, [f"perf.{n}" for n in changes], "(dims, dtype)")
    return replace(perf, **changes) if changes else perf
