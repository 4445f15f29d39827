"""The output comparison of evaluate, on hand-made tensors."""

import math

import pytest
import torch

from egg_worker.evaluate import Errors, compare_outputs, compare_tensor, flatten

TOL = 1e-4


def test_equal_tensors_pass_with_zero_errors():
    ref = torch.randn(8, 8)
    comparison = compare_tensor(ref.clone(), ref, TOL)
    assert comparison.passed and comparison.reason == ""
    assert (comparison.errors.max_abs_err, comparison.errors.max_rel_err, comparison.errors.rel_l2_err) == (0, 0, 0)


def test_errors_are_max_abs_max_rel_and_relative_l2():
    ref = torch.tensor([1.0, -2.0, 0.0, 4.0], dtype=torch.float64)
    out = ref + torch.tensor([0.5, 0.0, 3e-5, 0.0], dtype=torch.float64)
    errors = compare_tensor(out, ref, TOL).errors
    assert errors.max_abs_err == pytest.approx(0.5)
    assert errors.max_rel_err == pytest.approx(0.5)  # the 3e-5 error at ref 0 counts 3e-5 / tol = 0.3
    assert errors.rel_l2_err == pytest.approx(math.sqrt(0.25 + 9e-10) / math.sqrt(21))


def test_zero_reference_uses_the_norm_of_the_output():
    ref = torch.zeros(4)
    assert compare_tensor(torch.full((4,), 1e-5), ref, TOL).passed
    small_but_many = compare_tensor(torch.full((10000,), 9e-5), torch.zeros(10000), TOL)
    assert not small_but_many.passed and "rel_l2_err over tol" in small_but_many.reason
    assert small_but_many.errors.rel_l2_err == pytest.approx(9e-3)


@pytest.mark.parametrize("out, ref, reason", [
    (torch.zeros(2, 3), torch.zeros(3, 2), "shape (2, 3), expected (3, 2)"),
    (torch.zeros(2, dtype=torch.float16), torch.zeros(2), "dtype torch.float16, expected torch.float32"),
])
def test_shape_and_dtype_must_match(out, ref, reason):
    comparison = compare_tensor(out, ref, TOL)
    assert not comparison.passed and comparison.reason == reason
    assert comparison.errors == Errors()


def test_nan_where_the_reference_is_finite_fails_and_matching_nan_passes():
    ref = torch.tensor([1.0, float("nan"), float("inf")])
    assert compare_tensor(ref.clone(), ref, TOL).passed
    bad = compare_tensor(torch.tensor([float("nan"), float("nan"), float("inf")]), ref, TOL)
    assert not bad.passed and bad.reason == "1 non-finite values where the reference is finite"
    for out in (torch.tensor([1.0, 2.0, float("inf")]), torch.tensor([1.0, float("nan"), -float("inf")])):
        comparison = compare_tensor(out, ref, TOL)
        assert not comparison.passed and comparison.reason == "1 values differ where the reference is NaN or inf"


def test_integer_and_bool_outputs_must_be_exactly_equal():
    ref = torch.tensor([1, 2, 3])
    assert compare_tensor(ref.clone(), ref, TOL).passed
    off_by_one = compare_tensor(torch.tensor([1, 2, 4]), ref, 10.0)
    assert not off_by_one.passed and off_by_one.errors.max_abs_err == 1.0
    assert not compare_tensor(torch.tensor([True, False]), torch.tensor([True, True]), TOL).passed


def test_nested_outputs_are_flattened_and_compared_in_order():
    a, b, c = torch.ones(2), torch.zeros(3), torch.full((1,), 2.0)
    assert flatten((a, [b, (c,)])) == [a, b, c]
    assert compare_outputs(flatten((a, [b, c])), [a, b, c], TOL).passed
    wrong = compare_outputs([a, b, c + 1], [a, b, c], TOL)
    assert not wrong.passed and wrong.reason.startswith("output 2: not allclose")
    assert not compare_outputs([a, b], [a, b, c], TOL).passed
    assert compare_outputs([a, 3], [a, 3], TOL).passed
    assert compare_outputs([a, 1.5], [a, torch.tensor(1.5)], TOL).reason == "output 1: is a float, expected a tensor"


def test_worst_errors_merge_over_outputs():
    ref = [torch.zeros(2), torch.ones(2)]
    out = [torch.tensor([0.2, 0.0]), torch.tensor([1.0, 1.5])]
    errors = compare_outputs(out, ref, TOL).errors
    assert errors.max_abs_err == pytest.approx(0.5) and errors.max_rel_err == pytest.approx(2000.0)


def test_chunked_comparison_matches_the_whole_tensor_one(monkeypatch):
    ref = torch.randn(50)
    out = ref + 1e-3 * torch.randn(50)
    out[7] = float("nan")
    whole = compare_tensor(out, ref, TOL)
    monkeypatch.setattr("egg_worker.evaluate.COMPARE_CHUNK_ELEMENTS", 3)
    chunked = compare_tensor(out, ref, TOL)
    assert chunked.reason == whole.reason == "1 non-finite values where the reference is finite"
    for field in ("max_abs_err", "max_rel_err", "rel_l2_err"):  # finite chunks in float32, the NaN one in float64
        assert getattr(chunked.errors, field) == pytest.approx(getattr(whole.errors, field), rel=1e-6)


def test_float32_path_agrees_with_float64_and_falls_back_where_float32_overflows(monkeypatch):
    from egg_worker import evaluate
    torch.manual_seed(0)
    ref = torch.randn(10_000)
    out = ref * (1 + 3e-4 * torch.randn(10_000))
    fast = evaluate._Accumulator()
    assert fast._add_finite_float32(out, ref, TOL)
    exact = evaluate._Accumulator()
    exact._add_float64(out.double(), ref.double(), TOL)
    for field in ("max_abs", "max_rel", "diff_sq", "ref_sq", "out_sq"):
        assert getattr(fast, field) == pytest.approx(getattr(exact, field), rel=1e-6)
    assert fast.close == exact.close is False
    huge = torch.tensor([3e38, 1.0])
    assert not evaluate._Accumulator()._add_finite_float32(huge, -huge, TOL)  # the difference overflows
    assert not evaluate._Accumulator()._add_finite_float32(torch.tensor([1e20]), torch.tensor([1e20]), TOL)
    whole = compare_tensor(huge, -huge, TOL)
    assert not whole.passed and "not allclose" in whole.reason and whole.errors.max_abs_err == pytest.approx(6e38)


@pytest.mark.parametrize("factor, close", [(0.999, True), (1.001, False)])
def test_allclose_boundary_is_atol_plus_rtol_times_the_reference(factor, close):
    ref = torch.cat([torch.tensor([1.0, 100.0, -2.0]), torch.full((1000,), 50.0)])  # rel L2 stays far below tol
    out = ref.clone()
    out[1] += factor * (TOL + TOL * 100.0)
    comparison = compare_tensor(out, ref, TOL)
    assert comparison.passed is close
    assert close or comparison.reason.startswith("not allclose")


def test_relative_criterion_ignores_rounding_at_outputs_that_cross_zero():
    # a deep product of signed inputs: outputs of scale ~128 crossing zero, rounding ~1e-6 of that scale
    generator = torch.Generator().manual_seed(0)
    ref = torch.randn(128, 128, generator=generator) * 128
    out = ref + torch.randn(128, 128, generator=generator) * (1e-6 * 128)
    elementwise = compare_tensor(out, ref, TOL)
    assert not elementwise.passed and elementwise.reason.startswith("not allclose")
    relative = compare_tensor(out, ref, TOL, elementwise=False)
    assert relative.passed and relative.errors.rel_l2_err < 1e-5
    wrong = compare_tensor(ref.clamp_min(0), ref, TOL, elementwise=False)
    assert not wrong.passed and "rel_l2_err over tol" in wrong.reason
