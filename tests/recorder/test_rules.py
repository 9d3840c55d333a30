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
