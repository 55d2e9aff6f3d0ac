"""The checks every kernel gets: equivalence, gradients, safety, determinism and its input contract.

Each check takes a spec, one implementation, one case and a device, runs what it needs, and returns a
``CheckResult``. Checks never look at a particular kernel; everything they know comes from the spec.
"""

from __future__ import annotations

import contextlib
import math
import re
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from harness.call import Call
from harness.case import Case, TensorRecipe, dtype_name, torch_dtype
from harness.device import interpreting
from harness import approximate, bounds
from harness.eager import gpu_like as eager_numerics
from harness.eager import flush, subnormals_flushed
from harness.layouts import Placed
from harness.numerics import Compared, Comparison, compare
from harness.spec import FLOAT_DTYPES, KernelSpec

Fn = Callable[..., Any]


@dataclass
class CheckResult:
    """What one check found on one case."""

    check: str
    passed: bool
    comparisons: list[Comparison] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def score(self) -> float | None:
        """The worst numerics score among this result's comparisons (None when nothing was compared)."""
        scores = [c.score for c in self.comparisons]
        return max(scores) if scores else None

    def details(self) -> str:
        lines = [c.summary() for c in self.comparisons if not c.passed] + self.problems
        lines += [c.summary() for c in self.comparisons if c.passed]
        return "\n".join(lines)


# ---- running the kernel and the reference ---------------------------------------------------


@contextlib.contextmanager
def poisoned_allocations() -> Iterator[None]:
    """Make torch.empty & co. return NaN (floats) or the max integer, so unwritten outputs show."""
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


def as_outputs(value: Any) -> tuple[torch.Tensor, ...]:
    """Normalise a kernel's return value to a tuple of tensors."""
    if isinstance(value, torch.Tensor):
        return (value,)
    if isinstance(value, (tuple, list)) and all(isinstance(v, torch.Tensor) for v in value):
        return tuple(value)
    raise TypeError(f"expected a tensor or a tuple of tensors, got {type(value).__name__}")


@dataclass
class Prepared:
    """A case built on a device: guarded input buffers plus the keyword arguments of the call."""

    case: Case
    placed: dict[str, Placed]
    scalars: dict[str, Any]

    def kwargs(self, grad_names: tuple[str, ...] = ()) -> dict[str, Any]:
        """Arguments pointing at the guarded buffers (None for a tensor the call leaves out);
        ``grad_names`` become leaves that require grad."""
        out: dict[str, Any] = {}
        for name in self.case.tensors:
            p = self.placed.get(name)
            t = p.tensor.detach() if p is not None else None
            out[name] = t.requires_grad_(True) if t is not None and name in grad_names else t
        out.update(self.scalars)
        return out

    def copies(self, dtype: torch.dtype | None = None, grad_names: tuple[str, ...] = (),
               perturb: int | None = None) -> dict[str, Any]:
        """Fresh copies for the reference, optionally moved by an ulp or two (calibration sample
        ``perturb``, see ``harness.numerics``) and then upcast (floating tensors only)."""
        out: dict[str, Any] = {}
        for name in self.case.tensors:
            if name not in self.placed:
                out[name] = None
                continue
            t = self.placed[name].tensor.detach()
            if perturb is not None and t.is_floating_point():
                t = _perturbed(t, seed=perturb)
            t = t.to(dtype) if dtype is not None and t.is_floating_point() else t.clone()
            out[name] = t.requires_grad_(True) if name in grad_names else t
        out.update(self.scalars)
        return out

    def call(self) -> Call:
        """The call as the spec's numerics hooks see it: fp64 copies of the inputs (``Call``; a
        random spec's replayed mask is added by ``harness.random_checks.replaying``)."""
        return Call(self.copies(torch.float64), self.case.dims, torch_dtype(self.case.dtype))

    def snapshots(self) -> dict[str, torch.Tensor]:
        return {name: p.snapshot() for name, p in self.placed.items()}

    def changes(self, snapshots: dict[str, torch.Tensor]) -> list[str]:
        return [f"input '{n}': {c}" for n, p in self.placed.items() for c in p.changes(snapshots[n])]


CALIBRATION_SAMPLES = 2


def _perturbed(t: torch.Tensor, seed: int) -> torch.Tensor:
    """``t`` with each element moved by up to two ulps (relative), rounded back to its dtype."""
    gen = torch.Generator(device=t.device).manual_seed(7919 + seed)
    noise = (torch.rand(t.shape, generator=gen, dtype=torch.float64, device=t.device) * 2 - 1) * 2 * torch.finfo(t.dtype).eps
    return (t.to(torch.float64) * (1 + noise)).to(t.dtype)


def prepare(case: Case, device: torch.device | str) -> Prepared:
    return Prepared(case=case, placed=case.build(device), scalars=dict(case.scalars))


def grad_names(spec: KernelSpec, case: Case) -> tuple[str, ...]:
    """The inputs whose gradients a case checks: the spec's, less the optional ones it leaves out."""
    return tuple(n for n in spec.grad_inputs if case.tensors.get(n) is not None)


def _compare_outputs(spec: KernelSpec, names: list[str], got, eager, oracle, dtype: str,
                     calibration: list[tuple[tuple, tuple]], terms: tuple = (), flushed: tuple = (),
                     allowances: tuple = (), derived: tuple = ()) -> list[Comparison]:
    """Compare output k of the kernel with output k of eager/oracle, calibrated on the samples
    (and floored at an ulp of output k's term magnitudes, where the spec gives them, or at the
    floor derived from the reference; with the flushed reference's error and the approximate
    functions' allowance, where there are any)."""
    budget = spec.numerics.budget(dtype, interpreting())
    if len(got) != len(eager):
        return [Comparison("outputs", False, math.inf, budget.multiple,
                           problem=f"kernel returned {len(got)} output(s), the reference {len(eager)}")]
    def padded(values: tuple) -> tuple:
        return tuple(values) + (None,) * (len(eager) - len(values))

    terms, flushed, allowances, derived = padded(terms), padded(flushed), padded(allowances), padded(derived)
    return [
        compare(budget, Compared(n, g, e, o, [(se[k], so[k]) for se, so in calibration if se[k] is not None],
                                 terms=terms[k], flushed=_same_shape(flushed[k], e), allowance=allowances[k],
                                 derived=_same_shape(derived[k], e)))
        for k, (n, g, e, o) in enumerate(zip(names, got, eager, oracle))
    ]


def _same_shape(t: torch.Tensor | None, like: torch.Tensor) -> torch.Tensor | None:
    return t if t is not None and like is not None and t.shape == like.shape and t.is_floating_point() else None


# Cases whose inputs hold more elements than this skip the flushed reference and the derived
# floors: on a GPU shared by many test workers their extra passes (fp32, and fp64 with error
# terms, forward and backward) are memory that the nightly's largest cases (dlrm_embedding's
# 26 M x 16 table) do not have. Flushes and cancellations are matters of values, not of sizes, so
# the smaller cases of every spec still meet them.
FLUSH_LIMIT = 1 << 24


def flushed_reference(prepared: Prepared) -> bool:
    """Whether a case also runs its reference with fp32 subnormals flushed: 16-bit and fp32 cases,
    whose kernels compute in fp32 (fp64 has no flush to model), up to FLUSH_LIMIT elements."""
    wide = torch_dtype(prepared.case.dtype) in (torch.float16, torch.bfloat16, torch.float32)
    return wide and _within_flush_limit(prepared)


def _within_flush_limit(prepared: Prepared) -> bool:
    return sum(p.tensor.numel() for p in prepared.placed.values()) <= FLUSH_LIMIT


def _flushed_copies(prepared: Prepared, names: tuple[str, ...] = (), perturb: int | None = None) -> dict:
    """fp32 copies of the inputs with their subnormals flushed, for the flushed reference."""
    out = prepared.copies(torch.float32, names, perturb)
    return {k: flush(v).detach().requires_grad_(v.requires_grad) if isinstance(v, torch.Tensor) and v.is_floating_point()
            else v for k, v in out.items()}


def _to_dtype_of(outputs: tuple, like: tuple) -> tuple:
    return tuple(o.to(l.dtype) if o is not None and l is not None and o.is_floating_point() else o
                 for o, l in zip(outputs, like))


def _approximate_arguments(spec: KernelSpec, prepared: Prepared) -> dict[str, tuple]:
    """Each approximate function the spec declares for this case, with its argument per output
    (None where an output does not go through it); functions declared for no output are left out."""
    out = {}
    with torch.no_grad():
        for function, hook in spec.numerics.approximate_math.items():
            arguments = hook(prepared.call())
            arguments = tuple(arguments) if isinstance(arguments, (tuple, list)) else (arguments,)
            if any(a is not None for a in arguments):
                out[function] = arguments
    return out


def approximate_allowances(spec: KernelSpec, prepared: Prepared, oracle: tuple) -> tuple:
    """Per output, the spec's approximate functions' allowance (harness.approximate), or None."""
    if not spec.numerics.approximate_math:
        return ()
    out: list = [None] * len(oracle)
    for function, arguments in _approximate_arguments(spec, prepared).items():
        for k, (argument, o) in enumerate(zip(arguments, oracle)):
            if argument is None or o is None or not o.is_floating_point():
                continue
            add = approximate.allowance(function, argument, o)
            out[k] = add if out[k] is None else out[k] + add
    return tuple(out)


def approximate_gradient_allowances(spec: KernelSpec, prepared: Prepared, names: tuple[str, ...], grad_outs: list,
                                    first_only: bool, derived: dict) -> dict:
    """Per gradient, what the approximate functions the spec declares for this case may move it by,
    carried from the forward through autograd of the reference (``bounds.approximate_allowances``,
    with ``derived``, the gradients' plain floors, where they were derived). {} where it declares
    none, where the analysis does not run (``derive_floors=False``, a case past FLUSH_LIMIT), and
    where it could not follow the reference (``derived_gradient_floors`` has warned already)."""
    if not spec.numerics.approximate_math or not _derives(spec, prepared):
        return {}
    plain = None
    if spec.numerics.gradient_term_magnitudes is None:  # derived_gradient_floors ran the analysis
        if not derived:
            return {}  # it raised, and said so
        plain = derived
    functions = frozenset(_approximate_arguments(spec, prepared))
    if not functions:
        return {}
    return _derive(spec, lambda: bounds.approximate_allowances(spec.reference, prepared.copies(), names, grad_outs,
                                                               functions, first_only, plain), {},
                   lost="no allowance for its approximate functions in the gradients",
                   instead="they are judged without it")


def term_magnitudes(spec: KernelSpec, prepared: Prepared) -> tuple:
    """The spec's term magnitudes of each output on the case's inputs, in fp64 (empty if none)."""
    hook = spec.numerics.term_magnitudes
    if hook is None:
        return ()
    with torch.no_grad():
        out = hook(prepared.call())
    return tuple(out) if isinstance(out, (tuple, list)) else (out,)


def derived_floors(spec: KernelSpec, prepared: Prepared) -> tuple:
    """Where the spec gives no term magnitudes, each output's floor derived from the reference's
    own evaluation (``harness.bounds``); () where it gives them, opts out, the case is past
    FLUSH_LIMIT, or the derivation cannot follow the reference (an operator with no rule, or
    anything else the reference does that its subclass cannot: a warning says what)."""
    if spec.numerics.term_magnitudes is not None or not _derives(spec, prepared):
        return ()
    return _derive(spec, lambda: bounds.forward_floors(spec.reference, prepared.copies()), ())


def derived_gradient_floors(spec: KernelSpec, prepared: Prepared, names: tuple[str, ...], grad_outs: list,
                            first_only: bool) -> dict:
    """``derived_floors`` of the gradients of ``names``, where the spec gives no gradient terms."""
    if spec.numerics.gradient_term_magnitudes is not None or not _derives(spec, prepared):
        return {}
    return _derive(spec, lambda: bounds.gradient_floors(spec.reference, prepared.copies(), names, grad_outs,
                                                        first_only), {})


def _derives(spec: KernelSpec, prepared: Prepared) -> bool:
    return spec.numerics.derive_floors and _within_flush_limit(prepared)


def _derive(spec: KernelSpec, derive: Callable[[], Any], nothing: Any, lost: str = "no derived error floor",
            instead: str = "its outputs are judged on eager's measured error alone") -> Any:
    """``derive()``, or ``nothing`` with a warning that says what was ``lost`` and what holds ``instead``."""
    try:
        return derive()
    except Exception as exc:  # noqa: BLE001 - NotDerivable, or a reference the subclass cannot run
        warnings.warn(f"{spec.name}: {lost} ({type(exc).__name__}: {exc}); {instead}", bounds.DerivationWarning,
                      stacklevel=2)
        return nothing


def _output_names(spec: KernelSpec, count: int) -> list[str]:
    return list(spec.outputs[:count]) + [f"out{i}" for i in range(len(spec.outputs), count)]


# ---- forward ------------------------------------------------------------------------------------


def check_forward(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Outputs within the error budget of eager against the fp64 oracle; run with poisoned
    allocations. The references run first, on the pristine inputs: a kernel that writes into an
    input fails once, for that write, with no numerics derived from the overwritten values."""
    prepared = prepare(case, device)
    with eager_numerics(device):
        eager = as_outputs(spec.reference(**prepared.copies()))
        calibration_eager = [as_outputs(spec.reference(**prepared.copies(perturb=s))) for s in range(CALIBRATION_SAMPLES)]
    oracle = as_outputs(spec.reference(**prepared.copies(torch.float64)))
    calibration = [(sample, as_outputs(spec.reference(**prepared.copies(torch.float64, perturb=s))))
                   for s, sample in enumerate(calibration_eager)]
    flushed = ()
    if flushed_reference(prepared):
        with subnormals_flushed():
            flushed = _to_dtype_of(as_outputs(spec.reference(**_flushed_copies(prepared))), eager)
    terms = term_magnitudes(spec, prepared)
    allowances = approximate_allowances(spec, prepared, oracle)
    derived = derived_floors(spec, prepared)
    snapshots = prepared.snapshots()
    with poisoned_allocations():
        got = as_outputs(fn(**prepared.kwargs()))
    written = prepared.changes(snapshots)
    if written:
        return CheckResult("forward", False, problems=[f"the forward wrote into its inputs: {c}" for c in written])
    comparisons = _compare_outputs(spec, _output_names(spec, len(eager)), got, eager, oracle, case.dtype, calibration,
                                   terms, flushed, allowances, derived)
    return CheckResult("forward", all(c.passed for c in comparisons), comparisons)


def check_unwritten(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Every output element is written: outputs are allocated poisoned, and poison must not survive."""
    prepared = prepare(case, device)
    with poisoned_allocations():
        got = as_outputs(fn(**prepared.kwargs()))
    eager = as_outputs(spec.reference(**prepared.copies()))
    problems = []
    for name, g, e in zip(_output_names(spec, len(got)), got, eager):
        if g.shape != e.shape:
            problems.append(f"{name}: shape {tuple(g.shape)} differs from eager's {tuple(e.shape)}")
            continue
        if g.is_floating_point():
            # NaN where eager has none: the poison's own bits, or a NaN the kernel computed (from
            # the guard bands' canaries, NaNs with payloads, or an invalid operation)
            nan = g.detach().isnan() & ~e.detach().isnan()
            poisoned = nan & (_bits(g.detach()) == _poison_bits(g))
            computed = nan & ~poisoned
        elif g.dtype == torch.bool:
            continue  # a bool has no value outside True/False to poison with
        else:
            top = torch.iinfo(g.dtype).max
            poisoned, computed = (g.detach() == top) & (e.detach() != top), None
        count = int(poisoned.sum())
        if count:
            first = tuple(int(v) for v in torch.nonzero(poisoned)[0])
            problems.append(
                f"{name}: {count} of {g.numel()} element(s) still hold the allocation poison "
                f"(never written), first at index {first}"
            )
        if computed is not None and bool(computed.any()):
            first = tuple(int(v) for v in torch.nonzero(computed)[0])
            problems.append(
                f"{name}: {int(computed.sum())} of {g.numel()} element(s) were written as NaN where eager's are "
                f"not (not the allocation poison: computed from NaN values such as the guard bands' canaries, "
                f"or by an invalid operation), first at index {first}"
            )
    return CheckResult("unwritten", not problems, problems=problems)


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The bit patterns of a floating tensor, as integers of its width."""
    return t.contiguous().view({8: torch.int64, 4: torch.int32, 2: torch.int16, 1: torch.int8}[t.element_size()])


def _poison_bits(like: torch.Tensor) -> torch.Tensor:
    """The bits of the NaN that ``poisoned_allocations`` fills new floating tensors with."""
    with poisoned_allocations():
        return _bits(torch.empty(1, dtype=like.dtype, device=like.device))[0]


# ---- backward -----------------------------------------------------------------------------------


def _grad_outputs(case: Case, outs: tuple[torch.Tensor, ...], device, layout_class: str) -> list[Placed]:
    placed = []
    for out in outs:
        recipe = case.grad_output_recipe(tuple(out.shape), dtype_name(out.dtype), layout_class)
        placed.append(recipe.build(device))
    return placed


def _backward(fn: Fn, kwargs: dict[str, Any], names: tuple[str, ...], grad_outs: list[torch.Tensor],
              first_only: bool = False):
    """Gradients of ``names`` through ``fn``, from every differentiable output (``first_only``:
    from the first alone, the others unused, as a caller that ignores attention's lse)."""
    outs = [o for o in as_outputs(fn(**kwargs)) if o.requires_grad]
    if first_only:
        outs = outs[:1]
    leaves = [kwargs[n] for n in names]
    return torch.autograd.grad(outs, leaves, grad_outs[: len(outs)], allow_unused=True)


def gradient_term_magnitudes(spec: KernelSpec, prepared: Prepared, grad_outputs) -> dict:
    """The spec's term magnitudes of each gradient, in fp64 ({} if it gives none)."""
    return _gradient_hook(spec.numerics.gradient_term_magnitudes, prepared, grad_outputs)


def gradient_rounded_terms(spec: KernelSpec, prepared: Prepared, grad_outputs) -> dict:
    """The spec's root-sum-square of rounded terms of each gradient, in fp64 ({} if none)."""
    return _gradient_hook(spec.numerics.gradient_rounded_terms, prepared, grad_outputs)


def _gradient_hook(hook, prepared: Prepared, grad_outputs) -> dict:
    """Call a gradient hook with the call (fp64 copies of the inputs) and fp64 grad_outputs."""
    if hook is None:
        return {}
    outs = [g.detach().to(torch.float64) for g in grad_outputs]
    return dict(hook(prepared.call(), outs))


def check_backward(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Gradients within budget vs fp64 autograd through the reference, for contiguous and the case's
    grad_output layout, and, where several outputs are differentiable, from the first output alone
    (the others unused: their gradients reach the kernel as None where its autograd Function does
    not materialise them, else as zeros); grad_output and the inputs must come out unchanged."""
    names = grad_names(spec, case)
    comparisons: list[Comparison] = []
    problems: list[str] = []
    passes = [("contiguous", False)] + ([(case.grad_layout, False)] if case.grad_layout != "contiguous" else [])
    for layout, first_only in passes:
        prepared = prepare(case, device)
        probe = [o for o in as_outputs(spec.reference(**prepared.copies(grad_names=names))) if o.requires_grad]
        if len(probe) > 1 and ("contiguous", True) not in passes:
            passes.append(("contiguous", True))  # several differentiable outputs: one more pass, last
        grad_placed = _grad_outputs(case, tuple(probe), device, layout)
        if first_only:  # the unused outputs' gradients are zero, for the term hooks
            grad_placed = grad_placed[:1]
        grad_outs = [g.tensor for g in grad_placed]
        hook_grads = grad_outs + [torch.zeros_like(o) for o in probe[len(grad_outs):]]
        where = layout + (", the first output alone" if first_only else "")

        def reference_grads(dtype=None, perturb=None, flushed=False):
            kwargs = _flushed_copies(prepared, names) if flushed else prepared.copies(dtype, names, perturb)
            outs = [_perturbed(g.detach(), seed=perturb) if perturb is not None else g.detach() for g in grad_outs]
            outs = [g.to(dtype) if dtype is not None else g.clone() for g in outs]
            with eager_numerics(device) if dtype is None else contextlib.nullcontext():
                return _backward(spec.reference, kwargs, names, outs, first_only)

        # The references first, on the pristine inputs and grad_outputs: a kernel that writes into
        # either fails once, for that write, with no numerics derived from the overwritten values.
        eager, oracle = reference_grads(), reference_grads(torch.float64)
        calibration = [(reference_grads(perturb=s), reference_grads(torch.float64, s)) for s in range(CALIBRATION_SAMPLES)]
        flushed = [None] * len(names)
        if flushed_reference(prepared):
            with subnormals_flushed():
                flushed = _to_dtype_of(reference_grads(torch.float32, flushed=True), eager)
        terms = gradient_term_magnitudes(spec, prepared, hook_grads)
        rounded = gradient_rounded_terms(spec, prepared, hook_grads)
        derived = derived_gradient_floors(spec, prepared, names, grad_outs, first_only)
        allowances = approximate_gradient_allowances(spec, prepared, names, grad_outs, first_only, derived)
        grad_snaps = [g.snapshot() for g in grad_placed]
        input_snaps = prepared.snapshots()
        with poisoned_allocations():
            got = _backward(fn, prepared.kwargs(names), names, grad_outs, first_only)
        written = [f"grad_output[{i}] ({where}): {c}" for i, (g, snap) in enumerate(zip(grad_placed, grad_snaps))
                   for c in g.changes(snap)]
        written += [f"during backward, {c}" for c in prepared.changes(input_snaps)]
        if written:
            problems += written
            continue
        budget = spec.numerics.budget(case.dtype, interpreting(), gradients=True)
        for k, (name, g, e, o) in enumerate(zip(names, got, eager, oracle)):
            label = f"grad {name} (grad_output {where})"
            if e is None:
                continue
            if g is None:
                problems.append(f"{label}: the kernel returned no gradient")
                continue
            samples = [(se[k], so[k]) for se, so in calibration if se[k] is not None]
            comparisons.append(compare(budget, Compared(label, g, e, o, samples, terms=terms.get(name),
                                                        rounded_terms=rounded.get(name), flushed=_same_shape(flushed[k], e),
                                                        derived=_same_shape(derived.get(name), e),
                                                        allowance=_same_shape(allowances.get(name), e))))
    return CheckResult("backward", not problems and all(c.passed for c in comparisons), comparisons, problems)


def check_gradcheck(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """torch.autograd.gradcheck in float64 (fast mode), on normal values (no infinities to perturb)
    and without broadcast layouts (gradcheck cannot perturb an element that several indices share)."""
    tensors = {
        n: replace(r, values="normal", layout=replace(r.layout, expanded=())) if r is not None and r.dtype in FLOAT_DTYPES else r
        for n, r in case.tensors.items()
    }
    prepared = prepare(replace(case, tensors=tensors), device)
    names = grad_names(spec, case)
    kwargs = prepared.kwargs(names)

    def call(*leaves):
        return fn(**{**kwargs, **dict(zip(names, leaves))})

    # raise_exception=False: on a mismatch, fast mode with raise_exception=True recomputes the full
    # Jacobians in slow mode only to word its message, once per shrink step; under the interpreter
    # that turned a wrong backward into a 900 s test. The backward check says which gradient is off
    # and where; this check says that the gradient is not the derivative.
    try:
        ok = torch.autograd.gradcheck(call, tuple(kwargs[n] for n in names), fast_mode=True, raise_exception=False)
    except Exception as exc:  # noqa: BLE001 - the kernel itself raised: keep its message
        return CheckResult("gradcheck", False, problems=[f"gradcheck failed: {exc}"])
    if not ok:
        return CheckResult("gradcheck", False, problems=[
            f"gradcheck failed: the backward's gradient of {', '.join(repr(n) for n in names)} differs from the "
            "numerical derivative (fast mode, float64); the backward check names the gradient and the elements"])
    return CheckResult("gradcheck", True)


# ---- safety -------------------------------------------------------------------------------------


def check_guards(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Guard bands, gaps and the inputs themselves are bitwise unchanged by forward and backward."""
    prepared = prepare(case, device)
    snaps = prepared.snapshots()
    names = grad_names(spec, case)
    outs = as_outputs(fn(**prepared.kwargs(names)))
    problems = [f"during forward, {c}" for c in prepared.changes(snaps)]
    diff = [o for o in outs if o.requires_grad]
    if diff:
        grad_placed = _grad_outputs(case, tuple(diff), device, case.grad_layout)
        grad_snaps = [g.snapshot() for g in grad_placed]
        torch.autograd.backward(diff, [g.tensor for g in grad_placed])
        problems += [f"during backward, {c}" for c in prepared.changes(snaps)]
        for i, (g, snap) in enumerate(zip(grad_placed, grad_snaps)):
            problems += [f"during backward, grad_output[{i}]: {c}" for c in g.changes(snap)]
    return CheckResult("guards", not problems, problems=problems)


def _same_bits(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.shape != b.shape or a.dtype != b.dtype:
        return False
    if a.is_floating_point():
        return bool(torch.equal(a.isnan(), b.isnan())) and bool(torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0)))
    return bool(torch.equal(a, b))


def check_determinism(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Two calls on the same inputs give bitwise the same outputs (and gradients). Each call gets
    inputs of its own, built afresh from the case: a kernel that writes into its inputs or its
    grad_output (which the forward, backward and guards checks report) does not read here as
    nondeterministic."""
    names = grad_names(spec, case)
    runs = []
    for _ in range(2):
        kwargs = prepare(case, device).kwargs(names)
        outs = as_outputs(fn(**kwargs))
        grads: tuple = ()
        diff = [o for o in outs if o.requires_grad]
        if diff:
            grad_outs = [g.tensor for g in _grad_outputs(case, tuple(diff), device, case.grad_layout)]
            grads = torch.autograd.grad(diff, [kwargs[n] for n in names], grad_outs, allow_unused=True)
        runs.append(([o.detach() for o in outs], grads))
    problems = []
    for name, a, b in zip(_output_names(spec, len(runs[0][0])), runs[0][0], runs[1][0]):
        if not _same_bits(a, b):
            problems.append(f"{name}: a second call on the same inputs gave different bits")
    for name, a, b in zip(names, runs[0][1], runs[1][1]):
        if a is not None and b is not None and not _same_bits(a, b):
            problems.append(f"grad {name}: a second backward on the same inputs gave different bits")
    return CheckResult("determinism", not problems, problems=problems)


# ---- the input contract -------------------------------------------------------------------------


@dataclass(frozen=True)
class Rejection:
    """One bad call and the argument its error must name."""

    description: str
    argument: str
    kwargs: dict[str, Any]


def _wrong_device(device) -> str:
    return "cpu" if torch.device(device).type == "cuda" else "meta"


def _rebuilt(recipe: TensorRecipe, device, **changes) -> torch.Tensor:
    return replace(recipe, **changes).build(device).tensor


def bad_calls(spec: KernelSpec, case: Case, device) -> Iterator[Rejection]:
    """The automatic contract: wrong device, wrong dtype and mismatched sizes for every tensor,
    plus the spec's own bad scalars and bad inputs.

    Convention for sizes: the first tensor holding a dim defines it; a later tensor whose size
    disagrees is the one the error must name. An axis that is a product of dims (``TensorArg.dims``)
    neither defines nor tests a dim: other sizes of it may be valid. An optional tensor the case
    leaves out has nothing to corrupt.
    """
    valid = prepare(case, device).kwargs()
    passed = [arg for arg in spec.tensors if case.tensors.get(arg.name) is not None]
    for arg in passed:
        good = valid[arg.name]
        yield Rejection(f"'{arg.name}' on the wrong device", arg.name, {**valid, arg.name: good.to(_wrong_device(device))})
        wrong = [torch.int32] if arg.dtype is None else []
        if arg.dtype is None and "float64" not in spec.dtypes:
            wrong.append(torch.float64)
        for dt in wrong:
            yield Rejection(f"'{arg.name}' as {dtype_name(dt)}", arg.name, {**valid, arg.name: good.to(dt)})
    owner: dict[str, str] = {}
    for arg in passed:
        for axis, dim in enumerate(d for d in arg.dims if d != "*batch"):
            if isinstance(dim, tuple):
                continue
            if dim in owner:
                recipe = case.tensors[arg.name]
                position = len(recipe.shape) - len([d for d in arg.dims if d != "*batch"]) + axis
                shape = list(recipe.shape)
                shape[position] += 1
                yield Rejection(
                    f"'{arg.name}' with {dim}={shape[position]} while '{owner[dim]}' has {shape[position] - 1}",
                    arg.name,
                    {**valid, arg.name: _rebuilt(recipe, device, shape=tuple(shape))},
                )
            else:
                owner[dim] = arg.name
    for name, values in spec.bad_scalars.items():
        for value in values:
            yield Rejection(f"scalar '{name}' = {value!r}", name, {**valid, name: value})
    for bad in spec.bad_inputs:
        yield Rejection(bad.description, bad.argument, bad.mutate(dict(valid)))


def check_contract(spec: KernelSpec, fn: Fn, case: Case, device) -> CheckResult:
    """Every bad call raises TypeError or ValueError whose message names the argument."""
    problems = []
    count = 0
    for rejection in bad_calls(spec, case, device):
        count += 1
        pattern = re.compile(rf"['\"`]{re.escape(rejection.argument)}['\"`]")
        try:
            fn(**rejection.kwargs)
        except (TypeError, ValueError) as exc:
            if not pattern.search(str(exc)):
                problems.append(
                    f"{rejection.description}: raised {type(exc).__name__} that does not name "
                    f"'{rejection.argument}': {exc}"
                )
        except Exception as exc:  # noqa: BLE001 - any other failure is a contract violation
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
            problems.append(
                f"{rejection.description}: raised {type(exc).__name__} ({first[:160]}) instead of a "
                f"TypeError/ValueError naming '{rejection.argument}'"
            )
        else:
            problems.append(f"{rejection.description}: was accepted; expected an error naming '{rejection.argument}'")
    if not count:
        problems.append("the spec defines no bad call to test (no tensors?)")
    return CheckResult("contract", not problems, problems=problems)


CHECK_FUNCTIONS: dict[str, Callable[[KernelSpec, Fn, Case, Any], CheckResult]] = {
    "forward": check_forward,
    "backward": check_backward,
    "unwritten": check_unwritten,
    "guards": check_guards,
    "determinism": check_determinism,
    "gradcheck": check_gradcheck,
    "contract": check_contract,
}


def case_dtype_for(check: str, dtype: str) -> str:
    """gradcheck runs in float64 whatever the parametrised dtype says."""
    return "float64" if check == "gradcheck" else dtype


__all__ = ["CheckResult", "CHECK_FUNCTIONS", "poisoned_allocations"]
