"""The decision on one submission (``grading.decide``), made once from its first run's first message, the
notebook's, and the assignment (--chapter, its points): the chapter found, and whether it is graded task by
task, else the one row's facts. No sandbox: the messages are the contract's, as the recorder sends them."""

from nexttoken.exercises import chapter
from nexttoken.grading.decide import Decision, decide
from nexttoken.grading.follow import Stop
from nexttoken.grading.orders import first_tasks, plan
from nexttoken.grading.rows import submission_rows
from nexttoken.grading.run import Recording, Settings
from nexttoken.recorder.contract import notebook_read, notebook_refused

ASSIGNMENT = Settings(chapter="ch02", chapter_points=5)


def test_the_assignments_chapter_is_graded_task_by_task():
    decision = decide(notebook_read("ch02", 4), ASSIGNMENT)
    assert decision.graded and decision.chapter == "ch02" and decision.tasks == tuple(chapter("ch02").TASKS)
    assert decision.problem is None and decision.expected is None


def test_another_chapter_is_one_wrong_chapter_row_of_the_assignments_points():
    decision = decide(notebook_read("ch05", 4), ASSIGNMENT)
    assert not decision.graded and decision.tasks == () and decision.problem is None
    assert (decision.chapter, decision.expected, decision.points) == ("ch05", "ch02", 5)
    [row] = submission_rows("ann.ipynb", None, Recording(decision.chapter, decision), ASSIGNMENT)
    assert (row["task"], row["points"], row["max_points"], row["status"]) == ("-", 0, 5, "wrong_chapter")
    assert row["reason"].startswith("this notebook is ch05's") and "but the assignment is ch02 (--chapter)" in \
        row["reason"]


def test_without_chapter_every_chapter_is_graded_as_it_names():
    for name in ("ch01", "ch05", "ch07"):
        decision = decide(notebook_read(name, 4), Settings())
        assert decision.graded and decision.chapter == name and decision.tasks == tuple(chapter(name).TASKS)


def test_a_refused_notebook_is_its_status_and_reason():
    decision = decide(notebook_refused("old_notebook", "nbformat 3: open and save it again"), ASSIGNMENT)
    assert not decision.graded and decision.chapter is None and decision.tasks == ()
    assert decision.problem == ("old_notebook", "nbformat 3: open and save it again") and decision.points == 5
    [row] = submission_rows("ann.ipynb", None, Recording(decision=decision), ASSIGNMENT)
    assert (row["points"], row["max_points"], row["status"]) == (0, 5, "old_notebook")
    odd = decide({"notebook": "refused", "status": "made_up"}, Settings())  # a status the contract lacks
    assert odd.problem == ("invalid_notebook", "not a readable notebook") and odd.points == 0


def test_a_chapter_we_do_not_grade_is_unknown_chapter():
    for settings in (ASSIGNMENT, Settings()):
        decision = decide(notebook_read("ch99", 4), settings)
        assert not decision.graded and decision.chapter is None and decision.expected is None
        assert decision.problem == ("unknown_chapter", "no chapter in the notebook's metadata or imports")


def test_no_message_at_all_is_an_invalid_notebook_that_says_why():
    stopped = decide(None, ASSIGNMENT, Stop(None, "timeout", "the sandbox did not start within 120 s"))
    assert not stopped.graded and stopped.points == 5
    assert stopped.problem == ("invalid_notebook", "the sandbox stopped before the notebook was read "
                                                   "(timeout: the sandbox did not start within 120 s)")
    silent = decide(None, Settings())
    assert silent.problem == ("invalid_notebook", "the sandbox stopped before the notebook was read "
                                                  "(error: it sent nothing)")


def test_the_first_runs_plan_keeps_the_decision_and_orders_only_what_is_graded():
    decision, tasks, order = plan(None, ASSIGNMENT)(notebook_read("ch02", 4))
    assert decision == decide(notebook_read("ch02", 4), ASSIGNMENT) and tasks == first_tasks("ch02") and order
    assert plan(None, ASSIGNMENT)(notebook_read("ch05", 4))[1:] == ([], None)
    assert plan(None, ASSIGNMENT)(notebook_refused("invalid_notebook", "not JSON"))[1:] == ([], None)


def test_a_later_run_carries_the_decision_and_is_ordered_only_for_the_chapter_decided():
    decided = decide(notebook_read("ch02", 4), ASSIGNMENT)
    later = plan(["q1"], ASSIGNMENT, decided)
    decision, tasks, order = later(notebook_read("ch02", 4))
    assert decision is decided and tasks == ["q1"] and order
    assert later(notebook_read("ch05", 4)) == (decided, [], None)
    assert later(notebook_refused("invalid_notebook", "not JSON")) == (decided, [], None)


def test_a_recording_without_a_decision_is_graded_task_by_task():
    assert Recording("ch02").decision == Decision() and Decision().graded
