"""Generate exercises/ from solutions/ (the source of truth), nbgrader-style.

    .venv/bin/python scripts/make_exercises.py            # write exercises/*.ipynb (stored without outputs)
    .venv/bin/python scripts/make_exercises.py --check    # exit 1 if exercises/ is out of date

In each solution notebook, the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` become a
stub that raises NotImplementedError. The exercises are stored as written here, with no outputs and no
execution counts (do not execute them in place; ``--check`` fails if they hold outputs): a learner who
opens one, in JupyterLab, on Colab or as a file, sees the tasks and empty functions, not a column of
stored failures (and no stored output that would need trusting). The cells that run a check are tagged
``remove-output``: the website, which executes every notebook, shows no failure either. nbval runs every
cell in a fresh kernel and fails if one raises (a cell stored unrun has no output to compare);
tests/exercises/test_exercises.py runs each exercise's cells and asserts what a learner sees: one ❌ line per
check, naming the NotImplementedError, and nothing printed by any other cell.

It also writes lib/nexttoken/exercises/solutions.json, the code of each solution cell, which is what
``qN.solution()`` prints (the package ships it, so Colab, without solutions/, shows the same code).

Each solution notebook also ends with an explanation to write (``nexttoken/exercises/explanations.py`` says
how its three Markdown cells are marked): the question, an answer cell holding a model answer, and the
rubric. In the exercise notebook the answer cell holds only ``explanations.PLACEHOLDER`` (and its invisible
marker), and the rubric cell is left out. The question, the rubric and the model answer are written to
lib/nexttoken/exercises/explanations.json, which the grader exports with each learner's answer and the
student build leaves out. ``--check`` fails when either JSON file is out of date.
"""

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

from nexttoken.exercises import explanations

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.M | re.S)
STUB = '{indent}raise NotImplementedError("write your code here")\n'
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
DEFINES = re.compile(r"^def (\w+)\(", re.M)
SOLUTIONS_JSON = ROOT / "lib" / "nexttoken" / "exercises" / "solutions.json"
EXPLANATIONS_JSON = ROOT / "lib" / "nexttoken" / "exercises" / "explanations.json"
RUBRIC_LINE = re.compile(r"^- (\d+) points?: ", re.M)
HIDDEN = "remove-output"


def stub_source(source: str) -> str:
    return BLOCK.sub(lambda m: STUB.format(indent=m.group(1)), source)


def solution_code(source: str) -> str:
    """A solution cell as a learner should read it: the code, without the markers."""
    return MARKER.sub("", source).strip() + "\n"


def solutions_table() -> dict[str, dict[str, str]]:
    """{chapter: {function name: solution code}} from every solution cell of solutions/."""
    table = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        chapter = nb.metadata.get("nexttoken", {}).get("chapter", path.stem)
        for cell in nb.cells:
            if cell.cell_type == "code" and BLOCK.search(cell.source):
                for name in DEFINES.findall(cell.source):
                    table.setdefault(chapter, {})[name] = solution_code(cell.source)
    return table


def solutions_json() -> str:
    return json.dumps(solutions_table(), indent=1, sort_keys=True) + "\n"


class SolutionError(ValueError):
    """A solution notebook whose explanation cells are missing or malformed: the message names it."""


def one_cell(found: list, what: str, where: str):
    if len(found) != 1:
        raise SolutionError(f"{where}: expected one {what}, found {len(found)}")
    return found[0]


def rubric_points(text: str, where: str) -> list[dict]:
    """The rubric cell's lines ``- N point(s): what an answer says`` (a point may go on over indented lines)."""
    starts = list(RUBRIC_LINE.finditer(text))
    if not 3 <= len(starts) <= 4:
        raise SolutionError(f"{where}: the rubric needs 3 or 4 lines '- N point(s): ...', found {len(starts)}")
    points = []
    for here, after in zip(starts, starts[1:] + [None]):
        body = text[here.end():after.start() if after else len(text)]
        points.append({"points": int(here.group(1)), "point": " ".join(body.split())})
    return points


def unwrapped(paragraphs: list[str]) -> str:
    """Paragraphs as the CSV shows them: each on one line (the notebook wraps them), a blank line between."""
    return "\n\n".join(" ".join(p.split()) for p in paragraphs if p.strip())


def explanation_of(nb, chapter: str, where: str) -> dict:
    """The question, rubric and model answer of one solution notebook (SolutionError if malformed)."""
    cells = nb.cells
    question = one_cell([c for c in cells if explanations.is_question(c)], "'## Explain:' cell", where)
    answer = one_cell([c for c in cells if explanations.ours(c, "answer") is not None],
                      "answer cell (metadata nexttoken.answer)", where)
    rubric = one_cell([c for c in cells if explanations.ours(c, "rubric") is not None],
                      "rubric cell (metadata nexttoken.rubric)", where)
    task = explanations.task_id(chapter)
    if explanations.ours(answer, "answer") != task or explanations.ours(rubric, "rubric") != task:
        raise SolutionError(f"{where}: the answer and rubric cells must be marked {task!r}")
    if not answer.source.startswith(explanations.marker(chapter) + "\n"):
        raise SolutionError(f"{where}: the answer cell must start with the line {explanations.marker(chapter)}")
    position = {id(cell): i for i, cell in enumerate(cells)}
    if position[id(answer)] != position[id(question)] + 1:
        raise SolutionError(f"{where}: the answer cell must follow the '## Explain:' cell")
    heading, _, body = question.source.partition("\n")
    paragraphs = body.split("\n\n")
    title = re.sub(r"\s*\[[^\]]*\]\s*$", "", explanations.HEADING.sub("", heading).lstrip(": ")).strip()
    rubric_list = rubric_points(rubric.source, where)
    return {"task": task, "title": title,
            "question": unwrapped([p for p in paragraphs if not p.strip().startswith(explanations.INSTRUCTIONS)]),
            "rubric": rubric_list, "points": sum(p["points"] for p in rubric_list),
            "model_answer": unwrapped(explanations.without_scaffold(answer.source).split("\n\n"))}


def explanations_table() -> dict[str, dict]:
    """{chapter: its explanation} from every solution notebook (each must have one)."""
    table = {}
    for path in sorted((ROOT / "solutions").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        chapter = nb.metadata.get("nexttoken", {}).get("chapter", path.stem)
        table[chapter] = explanation_of(nb, chapter, str(path.relative_to(ROOT)))
    return table


def explanations_json() -> str:
    return json.dumps(explanations_table(), indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def exercise_from_solution(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(solution)
    # The rubric is for the instructor, the model answer is replaced by the placeholder (and its marker).
    nb.cells = [cell for cell in nb.cells if explanations.ours(cell, "rubric") is None]
    for cell in nb.cells:
        task = explanations.ours(cell, "answer")
        if cell.cell_type == "markdown" and task is not None:
            cell.source = f"{explanations.marker(task.split('.')[0])}\n{explanations.PLACEHOLDER}"
        if cell.cell_type == "code":
            cell.source = stub_source(cell.source)
            cell.outputs, cell.execution_count = [], None
            if ".check(" in cell.source:
                tags = cell.metadata.setdefault("tags", [])
                if HIDDEN not in tags:
                    tags.append(HIDDEN)
        cell.metadata.pop("execution", None)
    return nb


def sources(nb) -> list[tuple[str, str, list, dict]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", [])), dict(c.metadata.get("nexttoken", {})))
            for c in nb.cells]


def out_of_date() -> list[str]:
    """Exercise notebooks whose cells differ from what their solution generates (or that are missing)."""
    problems = []
    for solution_path in sorted((ROOT / "solutions").glob("*.ipynb")):
        exercise_path = ROOT / "exercises" / solution_path.name
        want = exercise_from_solution(nbformat.read(solution_path, as_version=4))
        if not exercise_path.exists():
            problems.append(f"{exercise_path.relative_to(ROOT)} is missing")
        else:
            exercise = nbformat.read(exercise_path, as_version=4)
            if sources(exercise) != sources(want):
                problems.append(f"{exercise_path.relative_to(ROOT)} is out of date with solutions/")
            if any(c.get("outputs") or c.get("execution_count") for c in exercise.cells if c.cell_type == "code"):
                problems.append(f"{exercise_path.relative_to(ROOT)} has stored outputs: it must open clean "
                                "(regenerate it with scripts/make_exercises.py, do not execute it)")
    if not SOLUTIONS_JSON.exists() or SOLUTIONS_JSON.read_text() != solutions_json():
        problems.append(f"{SOLUTIONS_JSON.relative_to(ROOT)} is out of date with solutions/")
    if not EXPLANATIONS_JSON.exists() or EXPLANATIONS_JSON.read_text(encoding="utf-8") != explanations_json():
        problems.append(f"{EXPLANATIONS_JSON.relative_to(ROOT)} is out of date with solutions/")
    return problems


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    try:
        generate(args.check)
    except SolutionError as exc:
        sys.exit(f"scripts/make_exercises.py: {exc}")


def generate(check: bool) -> None:
    if check:
        problems = out_of_date()
        for p in problems:
            print(p)
        sys.exit(1 if problems else 0)
    explained = explanations_json()  # first: a malformed explanation stops the script before it writes anything
    (ROOT / "exercises").mkdir(exist_ok=True)
    for solution_path in sorted((ROOT / "solutions").glob("*.ipynb")):
        exercise = exercise_from_solution(nbformat.read(solution_path, as_version=4))
        nbformat.write(exercise, ROOT / "exercises" / solution_path.name)
        print(f"wrote exercises/{solution_path.name}")
    SOLUTIONS_JSON.write_text(solutions_json())
    print(f"wrote {SOLUTIONS_JSON.relative_to(ROOT)}")
    EXPLANATIONS_JSON.write_text(explained, encoding="utf-8")
    print(f"wrote {EXPLANATIONS_JSON.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
