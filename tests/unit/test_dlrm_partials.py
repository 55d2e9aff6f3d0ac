"""dlrm_interaction's fp32 backward summation, simulated: why its partial sums are PARTIAL_TERMS
long (the forward sums exact products on the tensor cores instead: ``tests/unit/test_split_dot.py``).

On a GPU, IEEE fp32 ``tl.dot`` is one running fused multiply-add per output, rounded to fp32 after
every step; the interpreter's numpy matmul sums in another order, so CPU runs of the kernel cannot
show this error. A numpy model of the chain (exact products, one fp32 rounding a step) reproduced
the H100's error on a failing nightly case exactly, so it is the cheap place to judge a summation
scheme. The backward's scheme (``WIDE_SUM``): chains of ``PARTIAL_TERMS`` terms from zero, added in
fp64, rounded once. Its worst error, in units of eps times the sum of |terms| (the floor of the
spec's fp32 envelope, ``term_magnitudes``), must stay well within the spec's fp32 error multiple at
the longest sums the GPU generators draw; one chain over the same terms must not.
"""

import numpy as np
import pytest

import kernels.dlrm_interaction as dlrm
from specs.dlrm_interaction import SPEC

EPS32 = float(np.finfo(np.float32).eps)


def fma_chain_sum(a: np.ndarray, b: np.ndarray, partial: int) -> np.ndarray:
    """``a @ b`` as the GPU sums it: chains of ``partial`` fused multiply-adds from zero, each
    rounded to fp32 after every step, the chains added in fp64 and the total rounded to fp32."""
    total = np.zeros((a.shape[0], b.shape[1]))
    for start in range(0, a.shape[1], partial):
        chain = np.zeros_like(total, dtype=np.float32)
        for k in range(start, min(start + partial, a.shape[1])):
            # the product of two fp32 values is exact in fp64; the sum then rounds once to fp32
            chain = (chain.astype(np.float64) + np.outer(a[:, k], b[k, :]).astype(np.float64)).astype(np.float32)
        total += chain
    return total.astype(np.float32)


def worst_error_in_term_eps(z: np.ndarray, partial: int) -> float:
    """max |simulated - exact| / (eps * sum of |terms|) over the Gram matrix of ``z``'s rows."""
    exact = z.astype(np.float64) @ z.T.astype(np.float64)
    terms = np.abs(z).astype(np.float64) @ np.abs(z).T.astype(np.float64)
    return float(np.max(np.abs(fma_chain_sum(z, z.T.copy(), partial) - exact) / (EPS32 * terms)))


def _rows(kind: str, dim: int) -> np.ndarray:
    """64 rows of ``dim`` values: signed normals, or positive values (no cancellation: every
    rounding error of a chain has the partial sum's full size, the worst case for a long chain)."""
    rng = np.random.default_rng(dim)
    values = rng.standard_normal((64, dim))
    return (np.abs(values) if kind == "positive" else values).astype(np.float32)


@pytest.mark.parametrize("kind", ["normal", "positive"])
@pytest.mark.parametrize("dim", [64, SPEC.dims["dim"].gpu_max])
def test_partial_sums_stay_well_within_the_fp32_budget(kind, dim):
    score = worst_error_in_term_eps(_rows(kind, dim), dlrm.PARTIAL_TERMS.value)
    assert score <= SPEC.error_multiple["float32"] / 2, (
        f"{dlrm.PARTIAL_TERMS.value}-term partials of {dim} {kind} terms: {score:.2f} eps of the terms")


def test_one_chain_over_the_longest_sum_would_not():
    """The same check fails for the plain fp32 tl.dot (one chain): the test can tell the schemes
    apart, and the partials are needed."""
    dim = SPEC.dims["dim"].gpu_max
    assert worst_error_in_term_eps(_rows("positive", dim), dim) > SPEC.error_multiple["float32"]
