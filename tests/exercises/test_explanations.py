"""The graded explanation of each chapter (nexttoken/exercises/explanations.py): the exercise notebook asks
the question and holds a blank answer cell, the solution a model answer and a rubric, which make_exercises
writes to explanations.json and the student build leaves out. Seconds, no sandbox."""

import json
import os
import subprocess
import sys

import nbformat
import pytest
from helpers import ROOT, load_make_exercises, load_script

from nexttoken.exercises import CHAPTERS, explanations

EXERCISES = {chapter: ROOT / "exercises" / f"{chapter}.ipynb" for chapter in CHAPTERS}
SOLUTIONS = {chapter: ROOT / "solutions" / f"{chapter}.ipynb" for chapter in CHAPTERS}


def cells_of(path):
    return json.loads(path.read_text(encoding="utf-8"))["cells"]  # as the grader reads them: plain JSON


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_exercise_asks_the_question_with_a_blank_answer_cell_and_no_rubric(chapter):
    nb = nbformat.read(EXERCISES[chapter], as_version=4)
    [question] = [c for c in nb.cells if explanations.is_question(c)]
    [answer] = [c for c in nb.cells if explanations.ours(c, "answer") is not None]
    assert nb.cells.index(answer) == nb.cells.index(question) + 1
    assert nb.cells[nb.cells.index(answer) + 1].source.startswith("## Going deeper: what you built")
    assert explanations.ours(answer, "answer") == f"{chapter}.explain" and answer.cell_type == "markdown"
    assert answer.source == f"<!-- answer: {chapter}.explain -->\n{explanations.PLACEHOLDER}"
    assert explanations.answer_text(cells_of(EXERCISES[chapter])) == ""  # the placeholder is no answer
    assert not [c for c in nb.cells if explanations.ours(c, "rubric") is not None or "**Rubric**" in c.source]
    entry = explanations.table()[chapter]
    text = EXERCISES[chapter].read_text(encoding="utf-8")
    assert entry["model_answer"][:60] not in " ".join(text.split())  # neither the model answer ...
    assert entry["rubric"][0]["point"][:60] not in " ".join(text.split())  # ... nor the rubric
    # practice where the core task already applies the idea asked about (ch01, ch04) or beyond lesson 1 (ch07)
    tag = "[practice]" if chapter in ("ch01", "ch04", "ch07") else "[core, about 3 minutes]"
    assert question.source.splitlines()[0].endswith(tag)
    assert "explanation" in nb.cells[0].source  # the intro names it


@pytest.mark.parametrize("chapter", CHAPTERS)
def test_the_table_holds_the_solutions_question_rubric_and_model_answer(chapter):
    entry = explanations.table()[chapter]
    assert entry["task"] == f"{chapter}.explain" and entry["question"].rstrip().endswith("?")
    assert 3 <= len(entry["rubric"]) <= 4 and entry["points"] == sum(p["points"] for p in entry["rubric"]) == 3
    assert all(p["point"] and "\n" not in p["point"] for p in entry["rubric"])
    # What the grader reads from the solution notebook is its model answer (the rubric cell is not read).
    solved = explanations.answer_text(cells_of(SOLUTIONS[chapter]))
    assert " ".join(solved.split()) == entry["model_answer"]
    assert 2 <= entry["model_answer"].count(". ") + 1 <= 5


def test_an_answer_is_found_without_its_metadata_or_marker_and_with_cells_added():
    """Colab or another editor may drop cell metadata, and a learner may retype the cell or add one below."""
    cells = cells_of(EXERCISES["ch02"])
    at = next(i for i, c in enumerate(cells) if explanations.ours(c, "answer"))
    retyped = {"cell_type": "markdown", "metadata": {}, "source": ["Only earlier ", "positions are seen."]}
    assert explanations.answer_text(cells[:at] + [retyped] + cells[at + 1:]) == "Only earlier positions are seen."
    added = {"cell_type": "markdown", "metadata": {}, "source": "And the rest."}
    assert explanations.answer_text(cells[:at + 1] + [added] + cells[at + 1:]) == "And the rest."
    edited = dict(cells[at], source=cells[at]["source"] + ["\n", "My own words."])  # typed below the placeholder
    assert explanations.answer_text(cells[:at] + [edited] + cells[at + 1:]) == "My own words."
    assert explanations.answer_text(cells[:at] + [dict(retyped, source="  \n")] + cells[at + 1:]) == ""
    # Hostile shapes are no text, never an error.
    assert explanations.answer_text([None, 3, {"cell_type": "markdown", "source": {"x": 1}, "metadata": []}]) == ""
    assert explanations.answer_text("cells") == ""


def test_a_solution_without_its_rubric_is_refused_by_name():
    make = load_make_exercises()
    nb = nbformat.read(SOLUTIONS["ch03"], as_version=4)
    nb.cells = [c for c in nb.cells if explanations.ours(c, "rubric") is None]
    with pytest.raises(make.SolutionError, match=r"solutions/ch03.ipynb: expected one rubric cell"):
        make.explanation_of(nb, "ch03", "solutions/ch03.ipynb")


def test_the_student_sources_leave_the_rubrics_out(tmp_path):
    """build_student_package's sources (what its wheel is built from) lack explanations.json, and there
    the table is None: the grader then exports answers without a rubric (test_student_build.py checks the
    wheel itself)."""
    build = load_script("scripts/build_student_package.py")
    assert "nexttoken/exercises/explanations.json" in build.WITHHELD
    build.student_sources(tmp_path)
    assert not (tmp_path / "lib" / "nexttoken" / "exercises" / "explanations.json").exists()
    assert (tmp_path / "lib" / "nexttoken" / "exercises" / "explanations.py").exists()
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "lib")}
    done = subprocess.run([sys.executable, "-c", "from nexttoken.exercises import explanations as e; "
                           "import nexttoken; print(e.table(), nexttoken.__file__)"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    table, where = done.stdout.split()
    assert table == "None" and where.startswith(str(tmp_path))
