"""Counts in words, in a module of their own that the sandbox and the grader both import."""

from nexttoken.recorder.words import counted, tokens


def test_a_count_takes_its_noun_in_the_right_number():
    assert [counted(k, "row") for k in (0, 1, 2)] == ["0 rows", "1 row", "2 rows"]
    assert counted(2, "forward pass", "forward passes") == "2 forward passes"
    assert counted(1, "forward pass", "forward passes") == "1 forward pass"
    assert [tokens(k) for k in (1, 3)] == ["1 token", "3 tokens"]
