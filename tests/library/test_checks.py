"""nexttoken.checks' int checks, and the library's arguments that use them: a bool is never a count or a size."""

import pytest

import nexttoken
from nexttoken.checks import check_count, check_positive_int, is_int


@pytest.mark.parametrize("value, expected", [(0, True), (7, True), (-3, True), (True, False), (False, False),
                                             (2.0, False), ("2", False), (None, False)])
def test_an_int_is_not_a_bool(value, expected):
    assert is_int(value) is expected


def test_a_positive_int_is_an_int_of_at_least_one():
    assert check_positive_int(1, "n") == 1 and check_positive_int(10**6, "n") == 10**6
    for bad in (0, -1, True, 1.0, "3", None):
        with pytest.raises(ValueError, match=f"^n must be a positive int, got {bad!r}$"):
            check_positive_int(bad, "n")


def test_a_count_may_be_zero_but_not_a_bool():
    assert check_count(0, "k") == 0
    with pytest.raises(TypeError, match="k must be an int, got bool"):
        check_count(True, "k")
    with pytest.raises(ValueError, match="k must be >= 0, got -1"):
        check_count(-1, "k")


@pytest.mark.parametrize("field", ["vocab_size", "context_length", "d_model", "n_layers", "n_heads"])
@pytest.mark.parametrize("value", [True, 2.0, 0])
def test_a_config_refuses_a_size_that_is_not_a_positive_int(field, value):
    sizes = dict(vocab_size=10, context_length=8, d_model=4, n_layers=1, n_heads=1)
    with pytest.raises(ValueError, match=f"DecoderConfig.{field} must be a positive int, got {value!r}"):
        nexttoken.DecoderConfig(**sizes | {field: value})


def test_a_causal_mask_refuses_a_bool_length():
    with pytest.raises(ValueError, match="T must be a non-negative int, got True"):
        nexttoken.causal_mask(True)


def test_whole_and_real_numbers_of_any_type_count_but_bools_never():
    import numpy as np

    from nexttoken.checks import is_int, is_real, is_whole

    assert [is_int(v) for v in (3, np.int64(3), True, 3.0)] == [True, False, False, False]
    assert [is_whole(v) for v in (3, np.int64(3), True, 3.0)] == [True, True, False, False]
    assert [is_real(v) for v in (3, np.float32(0.5), 0.5, False, "1", None)] == [True, True, True, False, False, False]
