"""The rules of how, inside the recorder (no sandbox): what a task forbids cannot be reached another way, and
the library functions a task rebuilds are seen however the answer reaches their code. (Through the whole
grader: tests/grading/test_grade_honest_notebooks.py.)"""

import types

import pytest
import torch
import torch.nn.functional as F

import nexttoken.model
from nexttoken.recorder.calling import run_on
from nexttoken.recorder.main import library_codes, watched

NO_SOFTMAX = {"torch.softmax": "do not call torch.softmax (or F.softmax, Tensor.softmax) here: the softmax is "
                               "what you are rebuilding"}


@pytest.mark.parametrize("softmax, name", [
    (lambda x: x.log_softmax(-1).exp(), "log_softmax"),  # passed the task that forbids every softmax of torch
    (lambda x: torch.log_softmax(x, -1).exp(), "log_softmax"),
    (lambda x: torch.special.log_softmax(x, -1).exp(), "log_softmax"),
    (lambda x: F.softmin(-x, -1), "softmin"),
    (lambda x: torch.ops.aten._softmax(x, -1, False), "softmax"),
    (lambda x: torch.ops.aten._log_softmax(x, -1, False).exp(), "log_softmax"),
    (lambda x: torch.softmax(x, -1), "softmax")])
def test_every_softmax_of_torch_breaks_the_rule_that_forbids_the_softmax(softmax, name):
    [(kind, text)] = run_on(softmax, [(torch.randn(2, 5),)], NO_SOFTMAX)
    assert kind == "broke_rule" and text.startswith(f"forbidden call: torch's {name} was called, but the task says: "
                                                    "do not call torch.softmax"), text


def test_a_softmax_by_hand_keeps_the_rule():
    def by_hand(x):
        e = (x - x.amax(-1, keepdim=True)).exp()
        return e / e.sum(-1, keepdim=True)

    [(kind, value)] = run_on(by_hand, [(torch.randn(2, 5),)], NO_SOFTMAX)
    assert kind == "ok" and torch.allclose(value.sum(-1), torch.ones(2))


def test_a_function_made_from_a_copy_of_the_library_functions_code_is_seen_as_it():
    """types.FunctionType(nexttoken.model.causal_mask.__code__, ...) escapes the rule (which replaces the
    library function's code in place), and a renamed copy of the code was not reported as a library call."""
    library = library_codes(["nexttoken.model:causal_mask"])
    code = nexttoken.model.causal_mask.__code__
    for copy in (code, code.replace(co_name="mine", co_filename="<code cell 3>", co_firstlineno=1)):
        fn = types.FunctionType(copy, {"__name__": "__main__", **vars(nexttoken.model)}, "causal_mask", (0, None))
        called: set = set()
        run_on(watched(fn, library, called), [(3,)], {"nexttoken.causal_mask": "do not call it"})
        assert called == {"nexttoken.model.causal_mask"}

    def mine(T):
        return torch.ones(T, T, dtype=torch.bool).tril()

    called = set()
    assert run_on(watched(mine, library, called), [(3,)])[0][0] == "ok" and called == set()


def _drawing(draw):
    """A joint_frequencies (ch01.q4) that draws with ``draw(first, table, n, generator)`` -> (x1, x2)."""
    def joint_frequencies(first, table, n, generator):
        x1, x2 = draw(first, table, n, generator)
        V = first.shape[0]
        return torch.bincount(x1 * V + x2, minlength=V * V).reshape(V, V).float() / n
    return joint_frequencies


def _one_at_a_time(first, table, n, generator):
    x1 = [int(torch.multinomial(first, 1, generator=generator)) for _ in range(n)]
    return torch.tensor(x1), torch.tensor([int(torch.multinomial(table[a], 1, generator=generator)) for a in x1])


def _inverse_cdf(first, table, n, generator):
    u = torch.empty(n, 2).uniform_(generator=generator)
    x1 = torch.searchsorted(first.cumsum(0), u[:, 0].contiguous()).clamp(max=len(first) - 1)
    return x1, torch.searchsorted(table[x1].cumsum(-1), u[:, 1:].contiguous()).squeeze(-1).clamp(max=len(first) - 1)


@pytest.mark.parametrize("draw", [
    lambda f, t, n, g: (lambda x1: (x1, torch.multinomial(t[x1], 1, generator=g).squeeze(-1)))(
        torch.multinomial(f, n, replacement=True, generator=g)),
    _one_at_a_time, _inverse_cdf])
def test_a_sampled_task_counts_the_draws_made_with_its_generator(draw):
    from nexttoken.recorder.watches import draws_from

    first, table = torch.tensor([0.5, 0.3, 0.2]), torch.tensor([[0.6, 0.3, 0.1], [0.1, 0.8, 0.1], [0.3, 0.3, 0.4]])
    [(kind, value)] = run_on(_drawing(draw), [(first, table, 500, torch.Generator().manual_seed(1))],
                             watch=draws_from)
    assert kind == "ok" and abs(float(value.sum()) - 1) < 1e-5, value


def test_one_dummy_draw_beside_computed_frequencies_breaks_the_check_of_how():
    """Frequencies computed from the probabilities (rounded expected counts), with one draw to move the
    generator: the check of how counts 1 value drawn with it for 500 texts."""
    from nexttoken.recorder.watches import draws_from

    def joint_frequencies(first, table, n, generator):
        torch.rand(1, generator=generator)
        return ((first[:, None] * table) * n).round() / n

    first, table = torch.tensor([0.5, 0.5]), torch.tensor([[0.6, 0.4], [0.2, 0.8]])
    [(kind, text)] = run_on(joint_frequencies, [(first, table, 500, torch.Generator().manual_seed(1))],
                            watch=draws_from)
    assert kind == "broke_rule" and "drew 1 random value with `generator` for n_draws = 500" in text, text


def test_a_list_input_changed_in_place_is_reported_and_a_copy_is_not():
    def fills_in_place(steps, n):
        for i, s in enumerate(steps):
            steps[i] = n if s is None else s
        return sum(steps)

    def on_a_copy(steps, n):
        steps = list(steps)
        steps[0] = n
        return len(steps)

    [(kind, text)] = run_on(fills_in_place, [([3, None], 5)], arg_names=("eos_steps", "max_new_tokens"))
    assert kind == "changed_input" and "`eos_steps`, a list, in place" in text, text
    assert run_on(on_a_copy, [([3, None], 5)]) == [("ok", 2)]
    assert run_on(fills_in_place, [([3, 4], 5)]) == [("ok", 7)]  # nothing to fill: the list is as it was
