"""Generate exercises/ from solutions/ (the source of truth), nbgrader-style.

    .venv/bin/python scripts/make_exercises.py            # write exercises/*.ipynb (then execute them)
    .venv/bin/python scripts/make_exercises.py --check    # exit 1 if exercises/ is out of date

In each solution notebook, the lines between ``### BEGIN SOLUTION`` and ``### END SOLUTION`` become a
stub that raises NotImplementedError; outputs are cleared, so the exercises must then be executed
(scripts/execute_notebooks.py) to store each check failing on its stub.
"""

import argparse
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parent.parent
BLOCK = re.compile(r"^([ \t]*)### BEGIN SOLUTION\n.*?^[ \t]*### END SOLUTION[ \t]*\n?", re.M | re.S)
STUB = '{indent}raise NotImplementedError("write your code here")\n'


def stub_source(source: str) -> str:
    return BLOCK.sub(lambda m: STUB.format(indent=m.group(1)), source)


def exercise_from_solution(solution: nbformat.NotebookNode) -> nbformat.NotebookNode:
    nb = nbformat.from_dict(solution)
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.source = stub_source(cell.source)
            cell.outputs, cell.execution_count = [], None
        cell.metadata.pop("execution", None)
    return nb


def sources(nb) -> list[tuple[str, str]]:
    return [(c.cell_type, c.source) for c in nb.cells]


def out_of_date() -> list[str]:
    """Exercise notebooks whose cells differ from what their solution generates (or that are missing)."""
    problems = []
    for solution_path in sorted((ROOT / "solutions").glob("*.ipynb")):
        exercise_path = ROOT / "exercises" / solution_path.name
        want = exercise_from_solution(nbformat.read(solution_path, as_version=4))
        if not exercise_path.exists():
            problems.append(f"{exercise_path.relative_to(ROOT)} is missing")
        elif sources(nbformat.read(exercise_path, as_version=4)) != sources(want):
            problems.append(f"{exercise_path.relative_to(ROOT)} is out of date with solutions/")
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


if __name__ == "__main__":
    main()
