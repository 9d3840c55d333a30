"""Draw the generated test inputs of the exercise tasks with hypothesis and store them in
lib/nexttoken/exercises/cases.json, the tasks' example database (run it after changing a strategy):

    .venv/bin/python scripts/make_cases.py

A task with ``generated=Generated(strategy, build, count)`` gets ``count`` examples of ``strategy()``,
drawn derandomized (a fixed seed), after its named cases. tests/exercises/test_exercises.py checks that the stored
file is what this draws.
"""

import json
from pathlib import Path

from nexttoken.exercises import CHAPTERS, chapter
from nexttoken.exercises.generated import draw_examples

OUT = Path(__file__).resolve().parent.parent / "lib" / "nexttoken" / "exercises" / "cases.json"


def all_examples() -> dict[str, list]:
    """{"ch05.q2": [params, ...]} for every task that has generated inputs."""
    stored = {}
    for name in CHAPTERS:
        module = chapter(name)
        for task_name in module.TASKS:
            generated = getattr(module, task_name).generated
            if generated is not None:
                stored[generated.key] = draw_examples(generated.strategy(), generated.count)
    return stored


def main():
    examples = all_examples()
    # one example a line: the diff of a changed strategy stays readable
    lines = ",\n".join(f'  "{key}": [\n' + ",\n".join(f"    {json.dumps(p)}" for p in params) + "\n  ]"
                       for key, params in examples.items())
    OUT.write_text("{\n" + lines + "\n}\n")
    print(f"{OUT.name}: {', '.join(f'{k} ({len(v)})' for k, v in examples.items())}")


if __name__ == "__main__":
    main()
