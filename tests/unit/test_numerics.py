"""The error budget passes legitimate low-precision kernels and fails wrong ones."""

import math

import pytest
import torch

from harness.numerics import Budget, Compared, compare

torch.manual_seed(0)


def _softmax_cases(dtype):
    x = (torch.randn(16, 300, dtype=torch.float64) * 3).to(dtype)
    oracle = torch.softmax(x.double(), -1)
    eager = torch.softmax(x, -1)
    return x, eager, oracle


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_fp32_math_then_rounding_passes(dtype):
    x, eager, oracle = _softmax_cases(dtype)
    kernel = torch.softmax(x.float(), -1).to(dtype)  # what a good kernel does
    result = compare(Budget(2.0), Compared("out", kernel, eager, oracle))
    assert result.passed, result.summary()
    assert result.score <= 2.0


def test_bf16_truncation_instead_of_rounding_passes():
    x, eager, oracle = _softmax_cases(torch.bfloat16)
    exact = torch.softmax(x.float(), -1)
    truncated = (exact.view(torch.int32) & ~0xFFFF).view(torch.float32).to(torch.bfloat16)  # interpreter stores
    assert compare(Budget(2.0), Compared("out", truncated, eager, oracle)).passed


def test_reordered_summation_passes():
    x = torch.randn(64, 512, dtype=torch.float32)
    oracle = x.double().sum(-1)
    eager = x.sum(-1)
    kernel = x.flip(-1).cumsum(-1)[..., -1]  # sequential, another order
    assert compare(Budget(2.0), Compared("sum", kernel, eager, oracle)).passed


def test_fp16_accumulation_fails():
    x, eager, oracle = _softmax_cases(torch.float16)
    e = torch.exp(x.float() - x.float().amax(-1, keepdim=True)).half()
    denom = torch.zeros(x.shape[0], 1, dtype=torch.float16)
    for j in range(x.shape[1]):  # accumulate the sum in fp16, as a buggy kernel would
        denom += e[:, j : j + 1]
    kernel = (e.float() / denom.float()).half()
    result = compare(Budget(2.0), Compared("out", kernel, eager, oracle))
    assert not result.passed
    assert result.score > 2.0 and "OVER budget" in result.summary()


def test_off_by_a_few_ulps_everywhere_fails():
    x, eager, oracle = _softmax_cases(torch.float16)
    kernel = (oracle * (1 + 4 * torch.finfo(torch.float16).eps)).half()
    assert not compare(Budget(2.0), Compared("out", kernel, eager, oracle)).passed


def test_nan_pattern_must_match_exactly():
    x, eager, oracle = _softmax_cases(torch.float32)
    kernel = eager.clone()
    kernel[3, 7] = float("nan")
    result = compare(Budget(2.0), Compared("out", kernel, eager, oracle))
    assert not result.passed and "NaN/inf pattern" in result.problem and "(3, 7)" in result.problem
    masked = torch.full((2, 4), float("-inf"))
    nan_rows = torch.softmax(masked, -1)
    assert compare(Budget(2.0), Compared("out", nan_rows.clone(), nan_rows, torch.softmax(masked.double(), -1))).passed


def test_integer_outputs_must_be_equal():
    a = torch.arange(10)
    b = a.clone()
    b[4] = 0
    assert compare(Budget(2.0), Compared("ids", a.clone(), a, a)).passed
    result = compare(Budget(2.0), Compared("ids", b, a, a))
    assert not result.passed and "index (4,)" in result.problem


def test_shape_and_dtype_mismatches_are_named():
    e = torch.zeros(3, 4)
    assert "shape" in compare(Budget(2.0), Compared("out", torch.zeros(4, 3), e, e.double())).problem
    assert "dtype" in compare(Budget(2.0), Compared("out", torch.zeros(3, 4, dtype=torch.float16), e, e.double())).problem


def test_score_is_kernel_error_in_units_of_eager_error():
    oracle = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = oracle.float()
    eps = torch.finfo(torch.float32).eps
    kernel = (oracle * (1 + 3 * eps)).float()
    result = compare(Budget(10.0), Compared("out", kernel, eager, oracle))
    assert math.isclose(result.score, 3.0, rel_tol=0.1)


def test_calibration_samples_widen_a_lucky_envelope():
    oracle = torch.tensor([1e-3], dtype=torch.float64)
    eager = oracle.float()  # eager rounded luckily: its error is under one ulp
    kernel = (oracle + 5e-10).float()  # off by the rounding error of a sum whose terms are ~1e-2
    assert not compare(Budget(2.0), Compared("g", kernel, eager, oracle)).passed
    unlucky = (oracle + 4e-10).float()
    assert compare(Budget(2.0), Compared("g", kernel, eager, oracle, [(unlucky, oracle)])).passed


def test_a_kernel_that_avoids_eagers_intermediate_overflow_is_judged_against_the_oracle():
    z = torch.tensor([1e4, 2.0], dtype=torch.float16)
    oracle = z.double() * 0.5
    eager = torch.tensor([float("nan"), 1.0], dtype=torch.float16)  # z*z*z overflowed in fp16
    assert compare(Budget(2.0), Compared("out", (z.double() * 0.5).half(), eager, oracle)).passed
    wrong = torch.tensor([4000.0, 1.0], dtype=torch.float16)
    assert not compare(Budget(2.0), Compared("out", wrong, eager, oracle)).passed


def test_where_eager_and_the_kernel_both_fail_no_particular_nan_or_inf_is_owed():
    # fp16 dropout-add-LayerNorm on a row whose sum rounds to a constant: the exact gradient is
    # finite, eager's inf - inf gives NaN, the kernel's other order of sums gives -inf.
    oracle = torch.tensor([-17532.3, 1693129.7, 2.0], dtype=torch.float64)
    eager = torch.tensor([float("nan"), float("nan"), 2.0], dtype=torch.float16)
    kernel = torch.tensor([float("-inf"), float("-inf"), 2.0], dtype=torch.float16)
    assert compare(Budget(2.0), Compared("g", kernel, eager, oracle)).passed
    # still held: a kernel not finite where eager is, and a finite kernel where the truth overflows
    finite_eager = torch.tensor([-17530.0, float("inf"), 2.0], dtype=torch.float16)
    result = compare(Budget(2.0), Compared("g", kernel, finite_eager, oracle))
    assert not result.passed and "index (0,)" in result.problem
    assert not compare(Budget(2.0), Compared("g", torch.tensor([-17532.0, 60000.0, 2.0], dtype=torch.float16), eager, oracle)).passed


def test_an_oracle_just_past_the_largest_finite_value_still_fits_when_it_rounds_to_it():
    oracle = torch.tensor([-65513.8, 3.0], dtype=torch.float64)  # rounds to -65504 in fp16, not -inf
    eager = torch.tensor([float("-inf"), 3.0], dtype=torch.float16)  # an intermediate overflowed
    assert compare(Budget(2.0), Compared("g", oracle.half(), eager, oracle)).passed
    beyond = torch.tensor([-65530.0, 3.0], dtype=torch.float64)  # rounds to -inf: eager is right
    assert not compare(Budget(2.0), Compared("g", torch.tensor([-65504.0, 3.0], dtype=torch.float16), eager, beyond)).passed


def _tail_rows():
    """An elementwise op in its ill-conditioned tail: exp of an argument near -30, where a last-ulp
    rounding of the argument moves the result by ~30 ulps. Returns (oracle, sample_oracle, eager,
    argument rounding as the kernel does it)."""
    gen = torch.Generator().manual_seed(0)
    arg = -30 + torch.rand(4, 64, generator=gen, dtype=torch.float64)
    oracle = arg.exp()
    moved = arg * (1 + 2 * torch.finfo(torch.float32).eps)  # a calibration sample's input move
    return oracle, moved.exp(), arg


def test_condition_sized_errors_pass_where_eager_makes_them_too():
    oracle, sample_oracle, arg = _tail_rows()
    eps32 = torch.finfo(torch.float32).eps
    # eager rounds the argument to fp32 before exp; the kernel rounds a slightly different
    # intermediate (another order of operations): half an ulp of the argument each, at other elements.
    eager = arg.float().double().exp().float()
    kernel = (arg * (1 + 0.3 * eps32)).float().double().exp().float()
    plain = compare(Budget(2.0), Compared("out", kernel, eager, oracle))
    conditioned = compare(Budget(2.0), Compared("out", kernel, eager, oracle, [(sample_oracle.float(), sample_oracle)]))
    assert conditioned.passed and conditioned.score < plain.score


def test_condition_term_gives_nothing_where_eager_is_exact():
    oracle, sample_oracle, arg = _tail_rows()
    eps32 = torch.finfo(torch.float32).eps
    eager = oracle.float()  # eager computes the tail exactly (one rounding)
    sloppy = (arg * (1 + 8 * eps32)).exp().float()  # an argument off by 8 ulps: ~240 ulps out
    result = compare(Budget(2.0), Compared("out", sloppy, eager, oracle, [(sample_oracle.float(), sample_oracle)]))
    assert not result.passed and result.score > 50


def test_term_magnitudes_floor_the_envelope_of_a_cancelling_sum():
    # 1.0 + 2^-8 - 1.0 in bf16 terms: the result is 2^-8, its terms ~1; another rounding of a term
    # moves the result by an ulp of the terms (2^-8), 128 ulps of the result.
    oracle = torch.tensor([[2.0**-8, 0.5]], dtype=torch.float64)
    eager = oracle.to(torch.bfloat16)  # eager's order happened to be exact
    kernel = torch.tensor([[2.0**-7, 0.5]], dtype=torch.bfloat16)
    terms = torch.tensor([[2.0, 0.5]], dtype=torch.float64)
    assert not compare(Budget(2.0), Compared("out", kernel, eager, oracle)).passed
    assert compare(Budget(2.0), Compared("out", kernel, eager, oracle, terms=terms)).passed
    wrong = torch.tensor([[0.25, 0.5]], dtype=torch.bfloat16)  # 32 ulps of the terms: a bug
    assert not compare(Budget(2.0), Compared("out", wrong, eager, oracle, terms=terms)).passed


def _layer_norm_bf16(x: torch.Tensor, round_mean: bool) -> torch.Tensor:
    """LayerNorm of bf16 x in fp32, rounded once to bf16; or with the mean rounded to bf16 (a bug)."""
    x32 = x.to(torch.float32)
    mean = x32.mean(dim=-1, keepdim=True)
    if round_mean:
        mean = mean.to(torch.bfloat16).to(torch.float32)
    centred = x32 - mean
    rstd = torch.rsqrt(centred.pow(2).mean(dim=-1, keepdim=True) + 1e-5)
    return (centred * rstd).to(torch.bfloat16)


def test_terms_carry_the_precision_the_sum_is_formed_in():
    # A bf16 LayerNorm forms its output in fp32 from exact inputs: its terms carry fp32 ulps. An
    # envelope of bf16 ulps of the terms would pass a kernel that rounds the mean to bf16.
    import references.layer_norm as reference

    gen = torch.Generator().manual_seed(3)
    x = (2 + 0.3 * torch.randn(8, 64, generator=gen, dtype=torch.float64)).to(torch.bfloat16)
    oracle = reference.layer_norm(x.to(torch.float64))
    eager = reference.layer_norm(x)
    terms = reference.term_magnitudes(x.to(torch.float64))
    good, bad = _layer_norm_bf16(x, round_mean=False), _layer_norm_bf16(x, round_mean=True)
    assert compare(Budget(2.0, torch.float32), Compared("out", good, eager, oracle, terms=terms)).passed
    assert not compare(Budget(2.0, torch.float32), Compared("out", bad, eager, oracle, terms=terms)).passed
    assert compare(Budget(2.0), Compared("out", bad, eager, oracle, terms=terms)).passed, "the bf16-ulp floor is the loose one"


def test_an_infinity_that_is_the_true_values_rounding_passes_where_eager_made_nan():
    oracle = torch.tensor([[1144306.06, 0.5]], dtype=torch.float64)  # past fp16's 65504
    eager = torch.tensor([[float("nan"), 0.5]], dtype=torch.float16)  # eager's inf - inf
    assert compare(Budget(2.0), Compared("dx", torch.tensor([[float("inf"), 0.5]], dtype=torch.float16), eager, oracle)).passed
    wrong_sign = torch.tensor([[-float("inf"), 0.5]], dtype=torch.float16)
    # where eager made NaN it gives no evidence of the sign (the rule below); where it made the
    # right infinity, the wrong sign fails
    right_eager = torch.tensor([[float("inf"), 0.5]], dtype=torch.float16)
    assert not compare(Budget(2.0), Compared("dx", wrong_sign, right_eager, oracle)).passed
    saturated = torch.tensor([[65504.0, 0.5]], dtype=torch.float16)  # not the rounding of the true value
    assert not compare(Budget(2.0), Compared("dx", saturated, eager, oracle)).passed


def test_rounded_terms_floor_the_envelope_at_a_unit_roundoff_of_their_root_sum_square():
    oracle = torch.tensor([[0.5, 0.25, -0.125, 1.0]], dtype=torch.float64)
    eager = oracle.to(torch.bfloat16)  # eager's roundings cancelled: within half an ulp everywhere
    unit = torch.finfo(torch.bfloat16).eps / 2
    rss = torch.full_like(oracle, 8.0)  # the terms' root-sum-square: 16 times the largest output
    off = oracle.clone()
    off[0, 1] += 3 * unit * 8.0  # three unit roundoffs of it: a random walk's size, not a bug
    kernel = off.to(torch.bfloat16)
    assert not compare(Budget(4.0), Compared("g", kernel, eager, oracle)).passed
    assert compare(Budget(4.0), Compared("g", kernel, eager, oracle, rounded_terms=rss)).passed
    wrong = oracle.clone()
    wrong[0, 1] += 6 * unit * 8.0
    assert not compare(Budget(4.0), Compared("g", wrong.to(torch.bfloat16), eager, oracle, rounded_terms=rss)).passed


def _large_output_case():
    """A (5, 6, 7) fp32 output with rows of varied scale, eager's rounding, a kernel a few ulps off
    in places (worst in a late row), term magnitudes and a calibration sample."""
    gen = torch.Generator().manual_seed(3)

    def noise():
        return torch.randn(5, 6, 7, dtype=torch.float64, generator=gen)

    oracle = noise() * torch.logspace(-3, 3, 6, dtype=torch.float64)[:, None]
    eager = (oracle * (1 + 1e-7 * noise())).float()
    kernel = (oracle * (1 + 2e-7 * noise())).float()
    kernel[4, 2, 5] = float(oracle[4, 2, 5] * (1 + 3e-5))
    terms = oracle.abs() * 3
    sample = ((oracle * (1 + 1e-7 * noise())).float(), oracle * (1 + 1e-12))
    return kernel, eager, oracle, terms, sample


@pytest.mark.parametrize("block_elements", [7, 20, 63, 1 << 30])
def test_large_outputs_are_judged_in_blocks_of_rows_with_the_same_outcome(monkeypatch, block_elements):
    """The H100's 26 M x 16 embedding gradient ran out of memory judged at once; blocks of whole
    rows (the envelope's unit) must give exactly what judging at once gives, indices included."""
    import harness.numerics as numerics

    kernel, eager, oracle, terms, sample = _large_output_case()
    transposed = [t.transpose(0, 1) for t in (kernel, eager, oracle)]  # non-contiguous
    row_terms = terms[..., :1] * 1e3  # broadcast along the rows, as at once allows
    judged = [(Budget(2.0, torch.float32), Compared("g", kernel, eager, oracle, [sample], terms=terms, rounded_terms=terms / 2)),
              (Budget(2.0), Compared("g", *transposed)), (Budget(2.0), Compared("g", kernel, eager, oracle, terms=row_terms))]
    at_once = [compare(*j) for j in judged]
    monkeypatch.setattr(numerics, "_BLOCK_ELEMENTS", block_elements)
    blocked = [compare(*j) for j in judged]
    assert blocked == at_once and at_once[0].worst_index == (4, 2, 5) and not at_once[0].passed
    assert at_once[2].passed, "the broadcast terms must have widened the envelope"


def test_blocks_without_a_finite_element_do_not_hide_the_worst_index(monkeypatch):
    """A block whose elements are all NaN in kernel and eager alike scores 0 without an index; an
    exact kernel's report still names an element of the other blocks, and the same verdict."""
    import harness.numerics as numerics

    kernel, eager, oracle, _, _ = _large_output_case()
    oracle = oracle.float().double()  # representable: the exact kernel scores 0 everywhere
    kernel[0], eager[0], oracle[0] = float("nan"), float("nan"), float("nan")
    exact = oracle.float()
    at_once = compare(Budget(2.0), Compared("g", exact, eager, oracle))
    monkeypatch.setattr(numerics, "_BLOCK_ELEMENTS", 42)  # a block is one first-dim slice
    blocked = compare(Budget(2.0), Compared("g", exact, eager, oracle))
    assert blocked.passed == at_once.passed and blocked.score == at_once.score
    assert blocked.worst_index is not None and blocked.worst_index[0] == 1 and blocked.atol > 0


def test_a_nan_pattern_in_a_late_block_is_found_and_located(monkeypatch):
    import harness.numerics as numerics

    kernel, eager, oracle, _, _ = _large_output_case()
    kernel[3, 4, 1] = float("nan")
    monkeypatch.setattr(numerics, "_BLOCK_ELEMENTS", 14)  # two rows a block
    result = compare(Budget(2.0), Compared("g", kernel, eager, oracle))
    assert not result.passed and result.worst_index == (3, 4, 1)
    assert "first at index (3, 4, 1)" in result.problem and "of rows 22 to 23" in result.problem
