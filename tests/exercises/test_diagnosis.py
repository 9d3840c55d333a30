"""The shared diagnosis of wrong outputs (nexttoken.exercises.diagnosis): each family is named from the right
answer and the output alone, or from the task's source; nothing is named that the output is not; and a
transformation that fits one input is named only when it explains every input tried."""

import math

import pytest
import torch

from nexttoken.exercises import diagnosis
from nexttoken.exercises.diagnosis import Source
from nexttoken.exercises.task import Question, Task

LOGITS = torch.randn(3, 7, generator=torch.Generator().manual_seed(0)) * 2
PROBS = torch.softmax(LOGITS, -1)


def family(expected, got, source=None):
    found = diagnosis.name(expected, got, source)
    return found.family if found else None


def top3(p):
    kept = torch.zeros_like(p).scatter(-1, p.topk(3, -1).indices, 1.0) * p
    return kept / kept.sum(-1, keepdim=True)


@pytest.mark.parametrize("want, got", [
    ("sign", -torch.log(PROBS)),
    ("log_base", torch.log_softmax(LOGITS, -1) / math.log(2)),
    ("row0", torch.log(PROBS[:1]).expand(3, -1)),
    ("transposed", torch.log(PROBS).T),
    ("extra_axis", torch.log(PROBS)[:, None]),
    ("reduced", torch.log(PROBS).sum(-1)),
])
def test_log_probability_families_from_the_answer_alone(want, got):
    assert family(torch.log(PROBS), got) == want


@pytest.mark.parametrize("want, got", [
    ("unnormalised", PROBS * 3.5),
    ("temperature", torch.softmax(LOGITS / 0.7, -1)),
    ("top_k", top3(PROBS)),
    ("sorted", PROBS.sort(-1, descending=True).values),
])
def test_probability_families_from_the_answer_alone(want, got):
    assert family(PROBS, got) == want


@pytest.mark.parametrize("want, got", [
    ("unnormalised", torch.exp(LOGITS)),
    ("logits_over_sum", LOGITS / LOGITS.sum(-1, keepdim=True)),
    ("sigmoid", torch.sigmoid(LOGITS)),
    ("form_log_probs", torch.log_softmax(LOGITS, -1)),
    ("wrong_dim", torch.softmax(LOGITS, 0)),
])
def test_probability_families_from_the_logits(want, got):
    assert family(PROBS, got, Source(logits=LOGITS)) == want


def test_the_temperature_is_solved_for_and_shown():
    assert "0.8" in diagnosis.name(PROBS, torch.softmax(LOGITS / 0.8, -1)).message


def test_factor_families_of_a_sum_of_logs():
    p = torch.tensor([[0.5, 1e-12, 0.25], [0.9, 0.1, 1e-30]])
    right = torch.log(p).sum(-1)
    assert family(right, torch.log(p[:, 1:]).sum(-1), Source(factors=p)) == "factor_missing"
    assert family(right, torch.log(p + 1e-9).sum(-1), Source(factors=p)) == "epsilon"
    assert family(right, torch.log(p.sum(-1)), Source(factors=p)) == "log_of_sum"


def test_an_unrelated_wrong_output_is_not_named():
    noise = torch.rand(3, 7, generator=torch.Generator().manual_seed(1))
    assert diagnosis.name(torch.log(PROBS), noise, Source(logits=LOGITS)) is None
    assert diagnosis.name(PROBS, noise, Source(logits=LOGITS)) is None


def test_a_fact_is_stated_when_no_family_fits():
    wrong = PROBS.clone()
    wrong[0, 0] += 0.3
    assert "sums to" in diagnosis.properties(PROBS, wrong)


def test_two_words_swapped_on_every_input():
    assert diagnosis.across([("eos", "length"), ("length", "eos")]).family == "swapped_labels"
    assert diagnosis.across([("eos", "length"), ("length", "length")]) is None  # one right: not swapped
    assert diagnosis.across([("eos", "length"), ("eos", "length")]) is None  # one word seen: nothing to swap


def _task():
    inputs = [torch.tensor([[0.5, 0.2]]), torch.tensor([[0.1, 0.3, 0.6]])]
    return Question(Task(name="q9", function="f", title="test", cases=lambda: [(x.clone(),) for x in inputs],
                         reference=lambda x: torch.log(x).sum(-1), source=lambda x: Source(factors=x)))


def test_a_transformation_is_named_only_when_it_explains_every_input():
    task = _task().task

    def sign_on_the_first_input_only(x):
        right = torch.log(x).sum(-1)
        return -right if x.shape[-1] == 2 else right * 0.5

    def sign_everywhere(x):
        return -torch.log(x).sum(-1)

    cases = task.cases()
    assert "sign" not in task.verdict(task.run(sign_on_the_first_input_only, cases), cases).summary
    assert "sign" in task.verdict(task.run(sign_everywhere, cases), cases).summary


def test_a_solved_parameter_is_not_named_from_one_number():
    # any one wrong number is some factor times the right one: that says nothing
    assert diagnosis.name(torch.tensor([-1900.0]), torch.tensor([-103.6])) is None


LAYOUT = torch.arange(6)[None, :] >= torch.tensor([[2], [4], [6]])  # rows True from some place on


@pytest.mark.parametrize("want, got", [
    ("inverted", ~LAYOUT),
    ("shifted", torch.cat([LAYOUT[:, 1:], torch.ones(3, 1, dtype=torch.bool)], 1)),  # one place earlier
    ("shifted", torch.cat([torch.zeros(3, 1, dtype=torch.bool), LAYOUT[:, :-1]], 1)),  # one place later
    ("reversed", LAYOUT.flip(-1)),
    ("rows_swapped", LAYOUT.flip(0)),
    ("transposed", LAYOUT.T),
    ("row0", LAYOUT[0]),
])
def test_layout_families_say_nothing_of_the_answer(want, got):
    found = diagnosis.name(LAYOUT, got)
    assert found.family == want and found.safe == found.message and found.leading


def test_a_loop_parts_from_the_reference():
    right = torch.tensor([[1, 2, 7, 8, 9]])  # a prompt of 2, then 3 new tokens
    assert family((right,), (torch.tensor([[1, 2, 7, 7, 3, 3, 5, 5]]),), Source(prompt_length=2)) == "appended_twice"
    assert family((right,), (right[:, :4],), Source(prompt_length=2)) == "stopped_early"
    assert family((right,), (torch.tensor([[1, 2, 7, 8, 9, 4]]),), Source(prompt_length=2)) == "stopped_late"
    assert "new token 2 of row 0" in diagnosis.name((right,), (torch.tensor([[1, 2, 7, 3, 9]]),),
                                                    Source(prompt_length=2)).message


def test_a_mean_divided_by_the_wrong_count():
    lp = torch.log(torch.tensor([[0.5, 0.2, 0.4, 0.9], [0.1, 0.3, 0.6, 0.7]]))
    source = Source(factors=torch.exp(lp), of=lambda total, count: torch.exp(-total / count))
    right = torch.exp(-lp.mean(-1))
    assert family(right, torch.exp(-lp.sum(-1) / 3), source) == "count_minus_1"
    assert family(right, torch.exp(-lp.sum(-1) / 8), source) == "count_all"
    assert family(right, torch.exp(-lp.sum(-1) / 5), source) == "count_5"


def test_a_product_that_underflows():
    p = torch.full((1, 12), 1e-4)
    assert family(torch.log(p).sum(-1), torch.log(p.prod(-1)), Source(factors=p)) == "underflow"


def test_a_prediction_is_told_only_words_that_hide_the_answer():
    task = Task(name="q9", function="f", title="test", kind="predict", cases=lambda: [(3, 1), (5, 2)],
                reference=lambda T, j: torch.arange(T) >= j)
    cases = task.cases()
    shifted = task.verdict(task.run(lambda T, j: torch.arange(T) >= j - 1, cases), cases)
    assert "shifted one place earlier" in shifted.summary
    scaled = task.verdict(task.run(lambda T, j: (torch.arange(T) >= j).float() * 2, cases), cases)
    assert "times" not in scaled.summary  # a float answer's families would show the right values
