"""Derived error floors: a first-order running error analysis through the reference itself.

A spec may give term-magnitude hooks (``harness.numerics``) that say where an output is a sum that
cancels, so that two correct kernels can differ by ulps of the terms rather than of the result.
A spec that gives none gets this module's floor instead, derived from the reference's own
computation, forward and backward, with nothing written by hand.

How. The reference runs once more on a tensor subclass, ``Bounded``, that carries for every value
its exact value (fp64), the dtype eager would hold it in (the reference sees that dtype, so its
upcasts and decompositions take eager's path), and two terms of Wilkinson's running error analysis
(Higham, *Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.3):

* ``rho``: the unit of the coarsest rounding the value carries unamplified: the eps of its dtype,
  or of an operand's where that is coarser (0 for an input, which is exact);
* ``amp``: the error it carries beyond that, first order, from roundings that a sum amplified
  where it cancelled. For ``r = f(x_1, x_2, ...)``::

      amp_r = sum_i |df/dx_i| amp_i  (+  sum_i rho_i (|df/dx_i| |x_i| - |r|)+  for a sum or difference)

  A sum or difference whose result is smaller than its terms (x - mean in a LayerNorm, a bias
  that cancels the rest, a gradient's terms that cancel) turns its operands' roundings, ulps of the
  terms, into many ulps of the result. Products and quotients amplify no rounding, and an
  elementary function's own conditioning (exp of a rounded logit) is left to eager's measured
  error, as it was before (``harness.numerics``: the sensitivity term), so a fast exp is still
  judged by its declared allowance (which :func:`approximate_allowances` carries to the
  gradients through this same analysis). Where nothing cancels ``amp`` is 0 and the floor adds nothing
  to the envelope's own ulp. A reduction or a matmul counts its terms together:
  ``(rho_x + u_acc) (sum |terms| - |r|)+``, where ``u_acc`` is the eps of its accumulator (fp32
  for 16-bit eager ops): an ulp of the sum of the terms' magnitudes, what summing them in another
  order costs where they cancel. These are the hooks' term magnitudes, derived.

The comparison's envelope is then at least each output element's ``amp`` (``numerics.Compared``,
``derived``): an element whose error stays within what the reference's own evaluation loses to
amplified roundings passes. It is first order and ignores the ``n`` of long sums, as the hooks do;
eager's measured error, the rest of the envelope, covers those.

The decompositions are the reference's device's: on the CPU a bf16 LayerNorm saves its
statistics in bf16, as the CPU's eager does, so its gradients' floors there are a bf16 ulp of the
terms where the GPU's are an fp32 ulp; looser on the CPU, never tighter.

What it cannot derive it says: an operator with no rule here and no decomposition in
``torch._decomp`` raises ``NotDerivable``; the checks then warn (``DerivationWarning``, naming it)
and compare without a floor.
"""

from __future__ import annotations

import contextvars
import functools
import math
from collections.abc import Callable
from typing import Any

import torch
from torch.fx.operator_schemas import normalize_function
from torch.utils._pytree import tree_flatten, tree_map, tree_unflatten

from harness import approximate

aten = torch.ops.aten


class NotDerivable(Exception):
    """The reference calls an operator that has no rule here and no decomposition."""


class DerivationWarning(UserWarning):
    """A spec's outputs are judged without a derived floor (``NotDerivable`` says why)."""


def _eps(dtype: torch.dtype) -> float:
    return torch.finfo(dtype).eps if dtype.is_floating_point else 0.0


def _accumulator_eps(dtype: torch.dtype) -> float:
    """PyTorch accumulates 16-bit sums and matmuls in fp32."""
    return _eps(torch.float32) if dtype in (torch.float16, torch.bfloat16) else _eps(dtype)


class Bounded(torch.Tensor):
    """A value as eager would hold it (``dtype``), with its exact fp64 ``value`` and its running
    error terms ``amp`` (a tensor like ``value``) and ``rho`` (a float)."""

    value: torch.Tensor
    amp: torch.Tensor
    rho: float

    @staticmethod
    def __new__(cls, value: torch.Tensor, amp: torch.Tensor, rho: float, dtype: torch.dtype,
                requires_grad: bool = False):
        out = torch.Tensor._make_wrapper_subclass(
            cls, value.shape, strides=value.stride(), storage_offset=value.storage_offset(), dtype=dtype,
            device=value.device, requires_grad=requires_grad)
        out.value, out.amp, out.rho = value, amp, rho
        return out

    def __repr__(self) -> str:  # pragma: no cover - debugging aid
        return f"Bounded({self.dtype}, value={self.value}, amp={self.amp}, rho={self.rho})"

    __torch_function__ = torch._C._disabled_torch_function_impl

    @classmethod
    def __torch_dispatch__(cls, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        rule = _RULES.get(func) or _RULES.get(func.overloadpacket)
        if rule is not None:
            return rule(func, args, kwargs)
        if func.overloadpacket.__name__.endswith("_") and not func.overloadpacket.__name__.startswith("_"):
            return _in_place(func, args, kwargs)
        decomposition = _decompositions().get(func)
        if decomposition is not None:
            return decomposition(*args, **kwargs)
        result = func.decompose(*args, **kwargs)
        if result is not NotImplemented:
            return result
        if _no_float_output(func, args, kwargs):
            return _plain(func, args, kwargs)
        raise NotDerivable(f"{func} has no error rule and no decomposition")


@functools.cache
def _decompositions() -> dict:
    from torch._decomp import core_aten_decompositions, decomposition_table

    table = dict(decomposition_table)
    table.update(core_aten_decompositions())
    return table


def exact(t: torch.Tensor, requires_grad: bool = False) -> Bounded:
    """An input: exact, held in ``t``'s dtype."""
    value = t.detach().to(torch.float64)
    return Bounded(value, torch.zeros_like(value), 0.0, t.dtype, requires_grad)


# ---- taking calls apart -------------------------------------------------------------------------


def _meta(x: Any) -> Any:
    if isinstance(x, Bounded):
        return torch.empty_strided(x.shape, x.stride(), dtype=x.dtype, device="meta")
    if isinstance(x, torch.Tensor):
        return x.to("meta")
    if isinstance(x, torch.device):
        return torch.device("meta")
    return x


def _value(x: Any) -> Any:
    if isinstance(x, Bounded):
        return x.value
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return x.to(torch.float64)
    if isinstance(x, torch.dtype) and x.is_floating_point:
        return torch.float64
    return x


def _amp(x: Any) -> Any:
    if isinstance(x, Bounded):
        return x.amp
    if isinstance(x, torch.Tensor) and x.is_floating_point():
        return torch.zeros_like(x, dtype=torch.float64)
    if isinstance(x, torch.dtype) and x.is_floating_point:
        return torch.float64
    return x


def _rho(x: Any) -> float:
    return x.rho if isinstance(x, Bounded) else 0.0


def _excess(rho: float, conditioned: torch.Tensor, result: torch.Tensor) -> torch.Tensor | float:
    """An operand's rounding ``rho`` where it is amplified: ``rho (|df/dx| |x| - |r|)+``."""
    if not rho:
        return 0.0
    # fp64's own rounding of |df/dx| |x| (a quotient times its divisor) is no cancellation
    return rho * (conditioned - result.abs() * (1 + 1e-12)).clamp_min(0.0)


def _finite(amp: torch.Tensor) -> torch.Tensor:
    """Errors where the values themselves overflow are not a floor: 0 there."""
    return torch.where(amp.isfinite(), amp, torch.zeros_like(amp))


def _out_dtypes(func, args, kwargs) -> list:
    out = func(*tree_map(_meta, args), **tree_map(_meta, kwargs))
    return [t.dtype if isinstance(t, torch.Tensor) else None for t in tree_flatten(out)[0]]


def _no_float_output(func, args, kwargs) -> bool:
    return not any(d is not None and d.is_floating_point for d in _out_dtypes(func, args, kwargs))


def _plain(func, args, kwargs):
    """An operator whose outputs are not floating (comparisons, indices): run on the values."""
    return func(*tree_map(_value, args), **tree_map(_value, kwargs))


def _wrap(values, amps, rhos, dtypes):
    """Outputs as ``Bounded`` where floating, plain elsewhere, in the operator's output structure."""
    flat_values, spec = tree_flatten(values)
    flat_amps = tree_flatten(amps)[0] if amps is not None else [None] * len(flat_values)
    out = []
    for k, (v, a, d) in enumerate(zip(flat_values, flat_amps, dtypes)):
        if isinstance(v, torch.Tensor) and d is not None and d.is_floating_point:
            rho = rhos[k] if isinstance(rhos, list) else rhos
            out.append(Bounded(v, a if a is not None else torch.zeros_like(v), rho, d))
        elif isinstance(v, torch.Tensor) and d is not None:
            out.append(v.to(d))
        else:
            out.append(v)
    return tree_unflatten(out, spec)


# ---- rules --------------------------------------------------------------------------------------

Rule = Callable[[Any, tuple, dict], Any]
_RULES: dict[Any, Rule] = {}


def _rule(*ops):
    def register(fn: Rule) -> Rule:
        for op in ops:
            _RULES[op] = fn
        return fn

    return register


@_rule(aten.view, aten._unsafe_view, aten.reshape, aten.expand, aten.permute, aten.transpose, aten.t,
       aten.slice, aten.select, aten.unsqueeze, aten.squeeze, aten.clone, aten.alias, aten.detach,
       aten.contiguous, aten.cat, aten.stack, aten.index, aten.gather, aten.index_select, aten.flip,
       aten.repeat, aten.split, aten.split_with_sizes, aten.unbind, aten.chunk, aten.as_strided,
       aten.narrow, aten.unfold, aten.roll, aten.embedding, aten.lift_fresh, aten.movedim,
       aten.expand_as, aten.view_as, aten.diagonal, aten.tril, aten.triu, aten.lift_fresh_copy,
       aten.masked_select, aten.take_along_dim)
def _moves(func, args, kwargs):
    """Moves values without arithmetic: the same moves of each error term."""
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    amps = func(*tree_map(_amp, args), **tree_map(_amp, kwargs))
    rho = max((_rho(a) for a in tree_flatten(args)[0]), default=0.0)
    return _wrap(values, amps, rho, dtypes)


@_rule(aten._to_copy, aten._copy_from_and_resize)
def _convert(func, args, kwargs):
    """A dtype change: a narrowing one rounds (the input's error passes through unchanged)."""
    x = args[0]
    (dtype,) = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    if not isinstance(x, Bounded):
        return values
    if not dtype.is_floating_point:
        return values.to(dtype)
    amp = func(*tree_map(_amp, args), **tree_map(_amp, kwargs))
    narrowing = _eps(dtype) > _eps(x.dtype)  # widening is exact
    return Bounded(values, amp, max(x.rho, _eps(dtype)) if narrowing else x.rho, dtype)


@_rule(aten.zeros_like, aten.ones_like, aten.full_like, aten.empty_like, aten.new_zeros, aten.new_ones,
       aten.new_full, aten.new_empty, aten.new_empty_strided, aten.empty_strided, aten.scalar_tensor,
       aten.zero, aten.fill)
def _fresh(func, args, kwargs):
    """New tensors of given values: exact."""
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    if isinstance(values, torch.Tensor) and values.is_floating_point():
        values = values.to(torch.float64)
    return _wrap(values, None, 0.0, dtypes)


def _arith(func, args, kwargs, partials: Callable[..., list], cancels: bool = True):
    """An elementwise arithmetic operator: ``partials(operand values..., result)`` gives
    |d result / d x_i| for each tensor operand in order (None where it is 0). ``cancels``: a sum
    or difference, whose operands' roundings it amplifies where it cancels (a product or a
    quotient amplifies none; a function's own conditioning is left to eager's measured error)."""
    (dtype,) = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    operands = [a for a in args if isinstance(a, torch.Tensor)]
    amp, rho = torch.zeros_like(values), _eps(dtype)
    for operand, partial in zip(operands, partials(*[_value(a) for a in operands], values)):
        if partial is None or not isinstance(operand, Bounded):
            continue
        amp = amp + partial * operand.amp
        if cancels:
            amp = amp + _excess(operand.rho, partial * operand.value.abs(), values)
        rho = max(rho, operand.rho)
    return Bounded(values, _finite(amp), rho, dtype)


def _scalar(x: Any, default: float = 1.0) -> float:
    return float(x) if isinstance(x, (int, float)) else default


@_rule(aten.add, aten.sub, aten.rsub)
def _add(func, args, kwargs):
    alpha = abs(_scalar(_bind(func, args, kwargs).get("alpha")))
    if not isinstance(args[1], torch.Tensor):  # x + scalar
        return _arith(func, args, kwargs, lambda a, r: [torch.ones_like(r)])
    first, second = (alpha, 1.0) if func.overloadpacket is aten.rsub else (1.0, alpha)
    if not isinstance(args[0], torch.Tensor):
        return _arith(func, args, kwargs, lambda b, r: [torch.full_like(r, second)])
    return _arith(func, args, kwargs, lambda a, b, r: [torch.full_like(r, first), torch.full_like(r, second)])


@_rule(aten.mul)
def _mul(func, args, kwargs):
    if not isinstance(args[1], torch.Tensor):
        return _arith(func, args, kwargs, lambda a, r: [torch.full_like(r, abs(float(args[1])))])
    return _arith(func, args, kwargs, lambda a, b, r: [b.abs().expand_as(r), a.abs().expand_as(r)], cancels=False)


@_rule(aten.div)
def _div(func, args, kwargs):
    if kwargs.get("rounding_mode") is not None:
        raise NotDerivable("div with a rounding mode")
    if not isinstance(args[1], torch.Tensor):
        return _arith(func, args, kwargs, lambda a, r: [torch.full_like(r, 1.0 / abs(float(args[1])))])
    if not isinstance(args[0], torch.Tensor):
        return _arith(func, args, kwargs, lambda b, r: [(r / b).abs()])
    return _arith(func, args, kwargs, lambda a, b, r: [(1.0 / b).abs().expand_as(r), (r / b).abs()])


# The functions a kernel computes on the GPU's fast approximations (``approximate_allowances``):
# while they are set, each call of one adds its documented error to its result's ``amp``.
_APPROXIMATE: contextvars.ContextVar[frozenset[str]] = contextvars.ContextVar("approximate", default=frozenset())
_APPROXIMATE_NAMES = {aten.exp: "exp", aten.sigmoid: "sigmoid"}


def _unary(derivative: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Rule:
    def rule(func, args, kwargs):
        out = _arith(func, args, kwargs, lambda a, r: [derivative(a, r).abs()], cancels=False)
        name = _APPROXIMATE_NAMES.get(func.overloadpacket)
        if name in _APPROXIMATE.get() and isinstance(out, Bounded):
            out.amp = out.amp + _finite(approximate.allowance(name, _value(args[0]), out.value))
        return out

    return rule


_UNARY = {
    aten.exp: lambda a, r: r,
    aten.exp2: lambda a, r: r * math.log(2.0),
    aten.expm1: lambda a, r: r + 1.0,
    aten.log: lambda a, r: 1.0 / a,
    aten.log2: lambda a, r: 1.0 / (a * math.log(2.0)),
    aten.log1p: lambda a, r: 1.0 / (1.0 + a),
    aten.sqrt: lambda a, r: 0.5 / r,
    aten.rsqrt: lambda a, r: 0.5 * r.pow(3),
    aten.reciprocal: lambda a, r: r * r,
    aten.tanh: lambda a, r: 1.0 - r * r,
    aten.sigmoid: lambda a, r: r * (1.0 - r),
    aten.erf: lambda a, r: (2.0 / math.sqrt(math.pi)) * torch.exp(-a * a),
    aten.erfc: lambda a, r: (2.0 / math.sqrt(math.pi)) * torch.exp(-a * a),
    aten.sin: lambda a, r: torch.cos(a),
    aten.cos: lambda a, r: torch.sin(a),
}
for _op, _derivative in _UNARY.items():
    _RULES[_op] = _unary(_derivative)


@_rule(aten.pow)
def _pow(func, args, kwargs):
    if isinstance(args[1], torch.Tensor):
        raise NotDerivable("pow with a tensor exponent")
    p = float(args[1])
    return _arith(func, args, kwargs, lambda a, r: [(p * a.pow(p - 1.0)).abs()], cancels=False)


@_rule(aten.neg, aten.abs, aten.relu, aten.clamp, aten.clamp_min, aten.clamp_max, aten.hardtanh,
       aten.sign, aten.sgn, aten.ceil, aten.floor, aten.round, aten.trunc)
def _exact_unary(func, args, kwargs):
    """Exact (or 1-Lipschitz and exact) elementwise operators: the error passes through."""
    (dtype,) = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    x = args[0]
    if func.overloadpacket in (aten.sign, aten.sgn, aten.ceil, aten.floor, aten.round, aten.trunc):
        return Bounded(values, torch.zeros_like(values), 0.0, dtype)
    return Bounded(values, x.amp.expand_as(values).clone(), x.rho, dtype)


@_rule(aten.where)
def _where(func, args, kwargs):
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    cond, a, b = args[0], args[1], args[2]
    amp = torch.where(_value(cond), _amp_like(a, values), _amp_like(b, values))
    rho = max(_rho(a), _rho(b))
    return _wrap(values, amp, rho, dtypes)


def _amp_like(x: Any, like: torch.Tensor) -> torch.Tensor:
    return x.amp if isinstance(x, Bounded) else torch.zeros_like(like)


@_rule(aten.masked_fill)
def _masked_fill(func, args, kwargs):
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    amp = args[0].amp.masked_fill(_value(args[1]), 0.0)
    return _wrap(values, amp, args[0].rho, dtypes)


@_rule(aten.constant_pad_nd)
def _pad(func, args, kwargs):
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    amp = aten.constant_pad_nd(args[0].amp, args[1], 0.0)
    return _wrap(values, amp, args[0].rho, dtypes)


@_rule(aten.maximum, aten.minimum, aten.fmax, aten.fmin)
def _extreme(func, args, kwargs):
    (dtype,) = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    a, b = args[0], args[1]
    amp = torch.maximum(_amp_like(a, values).expand_as(values), _amp_like(b, values).expand_as(values))
    return Bounded(values, amp.clone(), max(_rho(a), _rho(b)), dtype)


@_rule(aten.amax, aten.amin, aten.max, aten.min)
def _select(func, args, kwargs):
    """A maximum is one of its operands: at most the largest error among them."""
    if len(args) > 1 and isinstance(args[1], torch.Tensor):  # max(a, b): elementwise
        return _extreme(func, args, kwargs)
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    x, call = args[0], _bind(func, args, kwargs)
    if "dim" not in call:  # max(x): the whole tensor's
        amp = x.amp.max()
    else:
        amp = x.amp.amax(dim=call["dim"], keepdim=bool(call["keepdim"])) if x.amp.numel() else x.amp
        if func.overloadpacket in (aten.max, aten.min):  # (values, indices)
            amp = (amp, None)
    return _wrap(values, amp, x.rho, dtypes)


@_rule(aten.sum, aten.mean)
def _sum(func, args, kwargs):
    """A sum (or mean): the operands' ``amp`` summed alike, and where the terms cancel, their
    roundings and an ulp of the accumulator on the sum of their magnitudes."""
    (dtype,) = _out_dtypes(func, args, kwargs)
    rest, options = tuple(tree_map(_value, args[1:])), tree_map(_value, kwargs)
    x = args[0]
    values = func(x.value, *rest, **options)
    magnitudes = func(x.value.abs(), *rest, **options)
    amp = func(x.amp, *rest, **options) + _excess(x.rho + _accumulator_eps(dtype), magnitudes, values)
    return Bounded(values, _finite(amp), max(x.rho, _eps(dtype)), dtype)


@_rule(aten.index_put, aten._unsafe_index_put, aten.index_add, aten.scatter_add, aten.scatter,
       aten.embedding_dense_backward, aten._embedding_bag, aten.index_fill, aten.select_scatter,
       aten.slice_scatter, aten.diagonal_scatter, aten.index_copy, aten.masked_scatter)
def _scatter(func, args, kwargs):
    """Writes or sums of values into places: the same operator on the errors; where it sums
    (``accumulate``, ``index_add``, ``scatter_add``, embedding gradients) and the terms cancel,
    their roundings and an ulp of the accumulator, as for a sum."""
    dtypes = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    amps = func(*tree_map(_amp, args), **tree_map(_amp, kwargs))
    tensors = [a for a in tree_flatten(args)[0] if isinstance(a, Bounded)]
    rho = max((t.rho for t in tensors), default=0.0)
    flat_values, flat_amps = tree_flatten(values)[0], tree_flatten(amps)[0]
    if isinstance(flat_values[0], torch.Tensor) and flat_values[0].is_floating_point():
        magnitudes = func(*tree_map(lambda a: _value(a).abs() if isinstance(a, torch.Tensor) and a.is_floating_point()
                                    else _value(a), args), **tree_map(_value, kwargs))
        magnitudes = tree_flatten(magnitudes)[0][0]
        out_dtype = next(d for d in dtypes if d is not None)
        flat_amps[0] = _finite(flat_amps[0] + _excess(rho + _accumulator_eps(out_dtype), magnitudes, flat_values[0]))
        rho = max(rho, _eps(out_dtype))
    return _wrap(values, tree_unflatten(flat_amps, tree_flatten(amps)[1]), rho, dtypes)


def _variance(x: Bounded, dims, correction: float, keepdim: bool) -> Bounded:
    """The two-pass variance, written out so that its cancellation is seen: mean((x - mean)^2)."""
    dims = list(range(x.dim())) if dims is None else [dims] if isinstance(dims, int) else list(dims)
    count = math.prod(x.shape[d] for d in dims) if dims else x.numel()
    centred = x - x.mean(dims, keepdim=True)
    return (centred * centred).sum(dims, keepdim=keepdim) / max(count - correction, 0)


def _bind(func, args, kwargs) -> dict[str, Any]:
    """The call's arguments by their schema names, defaults filled in (torch.fx's normaliser)."""
    bound = normalize_function(func, args, kwargs, normalize_to_only_use_kwargs=True)
    if bound is None:
        raise NotDerivable(f"{func}: its arguments do not bind to its schema")
    return bound.kwargs


@_rule(torch.ops.prims.var, aten.var, aten.var_mean)
def _var(func, args, kwargs):
    call = _bind(func, args, kwargs)
    x, dims = args[0], call.get("dim", call.get("dims"))
    correction = call.get("correction")
    if correction is None:  # the overloads with ``unbiased`` (None: its default, True)
        correction = 0 if call.get("unbiased") is False else 1
    keepdim = bool(call.get("keepdim"))
    variance = _variance(x, dims, float(correction), keepdim)
    if func.overloadpacket is aten.var_mean:
        all_dims = list(range(x.dim())) if dims is None else dims
        return variance, x.mean(all_dims, keepdim=keepdim)
    return variance


def _matmul_rule(func, args, kwargs, a_index: int, b_index: int, bias_index: int | None):
    """A matmul (``alpha A @ B + beta C`` for addmm and baddbmm): ``|A| @ amp_B + amp_A @ |B|``,
    and where the products cancel, the factors' roundings and an ulp of the accumulator on
    ``|A| @ |B|``."""
    (dtype,) = _out_dtypes(func, args, kwargs)
    values = func(*tree_map(_value, args), **tree_map(_value, kwargs))
    product = aten.bmm if func.overloadpacket in (aten.bmm, aten.baddbmm) else aten.mm
    a, b = args[a_index], args[b_index]
    va, vb = _value(a).abs(), _value(b).abs()
    amp = product(va, _amp(b)) + product(_amp(a), vb)
    magnitudes = product(va, vb)
    if bias_index is not None:
        call = _bind(func, args, kwargs)
        alpha, beta = abs(_scalar(call.get("alpha"))), abs(_scalar(call.get("beta")))
        amp, magnitudes = alpha * amp + beta * _amp(args[bias_index]), alpha * magnitudes + beta * _value(args[bias_index]).abs()
    rho_in = _rho(a) + _rho(b) + (_rho(args[bias_index]) if bias_index is not None else 0.0)
    amp = amp + _excess(rho_in + _accumulator_eps(dtype), magnitudes, values)
    rho = max(_eps(dtype), _rho(a), _rho(b))
    return Bounded(values, _finite(amp.expand_as(values).clone()), rho, dtype)


_RULES[aten.mm] = lambda f, a, k: _matmul_rule(f, a, k, 0, 1, None)
_RULES[aten.bmm] = lambda f, a, k: _matmul_rule(f, a, k, 0, 1, None)
_RULES[aten.addmm] = lambda f, a, k: _matmul_rule(f, a, k, 1, 2, 0)
_RULES[aten.baddbmm] = lambda f, a, k: _matmul_rule(f, a, k, 1, 2, 0)


def _in_place(func, args, kwargs):
    """``op_(self, ...)``: the functional operator's result written into self's value and errors."""
    name = func.overloadpacket.__name__[:-1]
    functional = getattr(getattr(aten, name), func._overloadname, None) if hasattr(aten, name) else None
    if functional is None:
        raise NotDerivable(f"{func} has no functional form")
    target = args[0]
    if not isinstance(target, Bounded):
        raise NotDerivable(f"{func} writes a derived value into a plain tensor")
    result = functional(*args, **kwargs)
    if isinstance(result, Bounded):
        _write(target, result)
    else:
        target.value.copy_(_value(result))
        target.amp.zero_()
    return target


@_rule(aten.copy_)
def _copy(func, args, kwargs):
    target, source = args[0], args[1]
    if not isinstance(target, Bounded):
        raise NotDerivable("copy_ of a derived value into a plain tensor")
    if isinstance(source, Bounded):
        _write(target, _convert(aten._to_copy.default, (source,), {"dtype": target.dtype}))
    else:
        target.value.copy_(_value(source))
        target.amp.zero_()
    return target


def _write(target: Bounded, result: Bounded) -> None:
    target.value.copy_(result.value)
    target.amp.copy_(result.amp)
    target.rho = max(target.rho, result.rho)


# ---- entry points --------------------------------------------------------------------------------


def _unwrap_amp(t: Any) -> torch.Tensor | None:
    """An output's floor: its ``amp``, and any rounding it carries coarser than its own dtype's."""
    if not isinstance(t, Bounded):
        return None
    coarser = t.rho - _eps(t.dtype)
    return (t.amp + coarser * t.value.abs() if coarser > 0 else t.amp).detach()


def forward_floors(reference: Callable, kwargs: dict[str, Any]) -> tuple:
    """Each output's ``amp`` (fp64, or None for an output that is not floating) of the reference
    called on ``kwargs`` (tensors in eager's dtypes)."""
    inputs = {k: exact(v) if isinstance(v, torch.Tensor) and v.is_floating_point() else v for k, v in kwargs.items()}
    with torch.no_grad():
        out = reference(**inputs)
    outs = out if isinstance(out, (tuple, list)) else (out,)
    return tuple(_unwrap_amp(o) for o in outs)


def gradient_floors(reference: Callable, kwargs: dict[str, Any], names: tuple[str, ...],
                    grad_outputs: list[torch.Tensor], first_only: bool = False,
                    approximate: frozenset[str] = frozenset()) -> dict[str, torch.Tensor | None]:
    """Each gradient's ``amp`` (fp64) through autograd of the reference: the inputs ``names``
    differentiated, ``grad_outputs`` exact, one per differentiable output (``first_only``: the
    first output's alone). ``approximate``: functions charged their fast forms' bounds in the
    reference's forward (:func:`approximate_allowances`)."""
    inputs = {k: exact(v, requires_grad=k in names) if isinstance(v, torch.Tensor) and v.is_floating_point() else v
              for k, v in kwargs.items()}
    token = _APPROXIMATE.set(approximate)
    try:
        out = reference(**inputs)
    finally:
        _APPROXIMATE.reset(token)
    outs = [o for o in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(o, torch.Tensor) and o.requires_grad]
    if first_only:
        outs = outs[:1]
    grads = torch.autograd.grad(outs, [inputs[n] for n in names], [exact(g) for g in grad_outputs[: len(outs)]],
                                allow_unused=True)
    return {n: _unwrap_amp(g) for n, g in zip(names, grads)}


def approximate_allowances(reference: Callable, kwargs: dict[str, Any], names: tuple[str, ...],
                           grad_outputs: list[torch.Tensor], functions: frozenset[str],
                           first_only: bool = False,
                           plain: dict[str, torch.Tensor | None] | None = None) -> dict[str, torch.Tensor | None]:
    """What each gradient may err by because the kernel's forward computes ``functions``
    (``harness.approximate``'s names) on the GPU's fast approximations, first order.

    A backward reads what its forward computed: softmax's gradient is ``y * (dy - sum(y * dy))``
    on the saved y, so an element of y on the fast exp, ``2 + |1.173 x|`` ulps off where its
    argument is x, moves its gradient by as much, and every gradient of the row through the sum.
    Each call of such a function in the reference's forward adds its documented bound at its own
    argument to its result's ``amp`` (every call: a declaration names functions, not outputs),
    and autograd of the reference carries it to the gradients as it carries amplified roundings.
    A function the reference's backward evaluates again is not charged: the declaration is the
    forward's (and on a GPU autograd runs the backward on threads of its own, which would not see
    it). The allowance is what that adds to ``gradient_floors`` (``plain``, when the caller has
    them): the approximations' share alone (the analysis is linear in its error terms), judged as
    the forward's allowance is, whatever the budget. It is an upper bound, taken with every error
    at its largest and of one sign, so in the bulk of a row it is a few times the floor."""
    approximated = gradient_floors(reference, kwargs, names, grad_outputs, first_only, frozenset(functions))
    if plain is None:
        plain = gradient_floors(reference, kwargs, names, grad_outputs, first_only)
    return {n: None if a is None or plain[n] is None else (a - plain[n]).clamp_min(0.0)
            for n, a in approximated.items()}
