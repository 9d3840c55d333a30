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
"""

import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.M | re.S)
STUB = '{indent}raise NotImplementedError("write your code here")\n'
MARKER = re.compile(r"^[ \t]*### (BEGIN|END) SOLUTION[ \t]*\n?", re.M)
DEFINES = re.compile(r"^def (\w+)\(", re.M)
SOLUTIONS_JSON = ROOT / "lib" / "nexttoken" / "exercises" / "solutions.json"
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


def exercise_from_solution(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(solution)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = stub_source(cell.source)
            cell.outputs, cell.execution_count = [], None
            if ".check(" in cell.source:
                tags = cell.metadata.setdefault("tags", [])
                if HIDDEN not in tags:
                    tags.append(HIDDEN)
        cell.metadata.pop("execution", None)
    return nb


def sources(nb) -> list[tuple[str, str, list]]:
    return [(c.cell_type, c.source, list(c.metadata.get("tags", []))) for c in nb.cells]


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
    return problems


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true")
    args = parser.parse_args()
    if args.check:
        problems = out_of_date()
        for p in problems:
            print(p)
        sys.exit(1 if problems else 0)
    (ROOT / "exercises").mkdir(exist_ok=True)
    for solution_path in sorted((ROOT / "solutions").glob("*.ipynb")):
        exercise = exercise_from_solution(nbformat.read(solution_path, as_version=4))
        nbformat.write(exercise, ROOT / "exercises" / solution_path.name)
        print(f"wrote exercises/{solution_path.name}")
    SOLUTIONS_JSON.write_text(solutions_json())
    print(f"wrote {SOLUTIONS_JSON.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
