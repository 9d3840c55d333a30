"""Mutation testing of the exercise checks: every solution function, mutated by a machine, must fail its check.

    .venv/bin/python scripts/mutate_checks.py                # every task, our own mutator, in process (~1 min)
    .venv/bin/python scripts/mutate_checks.py ch05 ch06      # some chapters
    .venv/bin/python scripts/mutate_checks.py --show         # also print every surviving mutant's code
    .venv/bin/python scripts/mutate_checks.py --held-out-only  # judged on the grader's held-out inputs alone
    .venv/bin/python scripts/mutate_checks.py --tool mutmut  # the same with mutmut (~10 min for every task)
    .venv/bin/python scripts/mutate_checks.py --tool mutmut --keep /tmp/mm   # then `cd /tmp/mm && mutmut browse`

Two mutators, one test suite. The test suite of a task is its own check (``Task.run`` then
``Task.evaluate``, what ``check()`` and the grader do) on the solution notebook's function
(lib/nexttoken/exercises/solutions.json); the other functions of the chapter stay as solved. A mutant is
*killed* when the check does not pass it (failed, raised, broke a rule, ran too long). A mutant that
passes is a *survivor*: either a mistake the checks miss (then the test inputs need work) or an
equivalent mutant, one that computes the same thing (``dim=-1`` and ``dim=1`` on a 2-D tensor).
Equivalent ones are listed, each with why, in scripts/equivalent_mutants.txt (our mutator) and
scripts/equivalent_mutants_mutmut.txt (mutmut's); the command exits 1 if any other mutant survives, or
if a listed one no longer occurs (a stale reason).

``--tool ast`` (the default): our mutator, mutmut's operators (numbers + 1, strings changed, operators
and comparisons swapped, and/or, not dropped, break/continue swapped, an assignment set to None, a call's
argument removed) plus the same kind of swap for the torch names these solutions use (max/min,
argmax/argmin, tril/triu, ...), run in process (seconds; tests/exercises/test_exercise_mutants.py runs it).

``--tool mutmut``: mutmut itself (a well-kept tool, with its own operators: ``-1`` to ``+1``, keyword
arguments set to None, ...). Each task's function is exported into a module of a generated project in a
temporary folder (checked/<chapter>_<task>.py, next to the chapter's other solved functions), with one
pytest test per task that runs that task's check; mutmut's fork server imports torch once and forks a
worker per mutant, and runs only the test that calls the mutated function. Survivors are named here in
the same "function: original line -> mutated line" form as our mutator's.
"""

import argparse
import ast
import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from importlib import resources
from pathlib import Path

import torch

from nexttoken.exercises import CHAPTERS, chapter, held_out, solutions

ROOT = Path(__file__).resolve().parent.parent
EQUIVALENT = ROOT / "scripts" / "equivalent_mutants.txt"
EQUIVALENT_MUTMUT = ROOT / "scripts" / "equivalent_mutants_mutmut.txt"
SECONDS_PER_MUTANT = 30  # a mutant that runs longer (a loop that no longer ends) counts as killed

BINARY_SWAPS = {ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
                ast.FloorDiv: ast.Div, ast.Mod: ast.Div, ast.Pow: ast.Mult, ast.MatMult: ast.Mult,
                ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd, ast.BitXor: ast.BitAnd,
                ast.LShift: ast.RShift, ast.RShift: ast.LShift}
COMPARE_SWAPS = {ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt, ast.Eq: ast.NotEq,
                 ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is, ast.In: ast.NotIn, ast.NotIn: ast.In}
NAME_SWAPS = {"max": "min", "min": "max", "amax": "amin", "amin": "amax", "argmax": "argmin",
              "argmin": "argmax", "tril": "triu", "triu": "tril", "sum": "mean", "mean": "sum",
              "log": "exp", "exp": "log", "log_softmax": "softmax", "softmax": "log_softmax",
              "ones": "zeros", "zeros": "ones", "all": "any", "any": "all", "True": "False", "False": "True"}


def mutations(node):
    """The one-change variants of one AST node (each a new node), with a short name of the operator."""
    if isinstance(node, ast.Constant):
        if isinstance(node.value, bool):
            yield "constant", ast.Constant(not node.value)
        elif isinstance(node.value, (int, float)):
            yield "number + 1", ast.Constant(node.value + 1)
        elif isinstance(node.value, str):
            yield "string", ast.Constant("XX" + node.value + "XX")
    elif isinstance(node, ast.BinOp) and type(node.op) in BINARY_SWAPS:
        yield "operator", ast.BinOp(node.left, BINARY_SWAPS[type(node.op)](), node.right)
    elif isinstance(node, ast.Compare) and len(node.ops) == 1 and type(node.ops[0]) in COMPARE_SWAPS:
        yield "comparison", ast.Compare(node.left, [COMPARE_SWAPS[type(node.ops[0])]()], node.comparators)
    elif isinstance(node, ast.BoolOp):
        yield "and/or", ast.BoolOp(ast.Or() if isinstance(node.op, ast.And) else ast.And(), node.values)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert, ast.USub)):
        yield "unary dropped", node.operand
    elif isinstance(node, ast.Break):
        yield "break/continue", ast.Continue()
    elif isinstance(node, ast.Continue):
        yield "break/continue", ast.Break()
    elif isinstance(node, ast.Assign):
        yield "assignment to None", ast.Assign(node.targets, ast.Constant(None))
    elif isinstance(node, ast.Attribute) and node.attr in NAME_SWAPS:
        yield "torch name", ast.Attribute(node.value, NAME_SWAPS[node.attr], node.ctx)
    elif isinstance(node, ast.Name) and node.id in NAME_SWAPS and isinstance(node.ctx, ast.Load):
        yield "torch name", ast.Name(NAME_SWAPS[node.id], node.ctx)
    elif isinstance(node, ast.Call):
        for i in range(len(node.args)):
            yield "argument removed", ast.Call(node.func, node.args[:i] + node.args[i + 1:], node.keywords)
        for i in range(len(node.keywords)):
            yield "argument removed", ast.Call(node.func, node.args, node.keywords[:i] + node.keywords[i + 1:])


def places(function_def: ast.FunctionDef) -> list:
    """Every node of a function's body, in a fixed order (the docstring and the signature left alone)."""
    body = function_def.body[1:] if ast.get_docstring(function_def) else function_def.body
    return [node for statement in body for node in ast.walk(statement)]


def all_mutants(function_def: ast.FunctionDef):
    """(operator, mutated function source) for every one-change mutant: each variant at each place."""
    for index, node in enumerate(places(function_def)):
        for variant in range(len(list(mutations(node)))):
            tree = copy.deepcopy(function_def)  # the same place in a fresh copy, changed there
            target = places(tree)[index]
            operator, replacement = list(mutations(target))[variant]
            yield operator, ast.unparse(ast.fix_missing_locations(_replace(tree, target, replacement)))


def _replace(tree, target, replacement):
    """``tree`` with the node ``target`` replaced by ``replacement`` (in place)."""
    for parent in ast.walk(tree):
        for field, value in ast.iter_fields(parent):
            if value is target:
                setattr(parent, field, replacement)
                return tree
            if isinstance(value, list) and any(v is target for v in value):
                setattr(parent, field, [replacement if v is target else v for v in value])
                return tree
    raise ValueError("node not found")


def changed_line(original: str, mutated: str) -> str:
    """The mutant as one readable line: 'original line -> mutated line' (the first line that differs)."""
    for before, after in zip(original.splitlines(), mutated.splitlines()):
        if before != after:
            return f"{before.strip()} -> {after.strip()}"
    return "(no visible change)"


def equivalent_mutants(path: Path = EQUIVALENT) -> dict[str, str]:
    """{'function: original -> mutated': why} from scripts/equivalent_mutants.txt or another such file
    (blocks of a key line and an indented 'why' line; '#' lines are comments)."""
    known, key = {}, None
    for line in path.read_text().splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        if line.startswith(" "):
            known[key] = line.strip()
        else:
            key = line.strip()
    return known


class TookTooLong(Exception):
    pass


def killed(task, fn, held_out_only: bool = False) -> tuple[bool, str]:
    def stop(signum, frame):
        raise TookTooLong
    signal.signal(signal.SIGALRM, stop)
    signal.alarm(SECONDS_PER_MUTANT)
    try:
        torch.manual_seed(0)
        status, reason = held_out.held_out_only(task, fn) if held_out_only else task.evaluate(task.run(fn))
    except TookTooLong:
        return True, "timed out"
    finally:
        signal.alarm(0)
    return status != "passed", status


def mutate_task(task, namespace_of_solutions: dict, equivalent: dict, show: bool, held_out_only: bool = False):
    """(killed, equivalent, survivors) counts and the surviving keys for one task."""
    source = namespace_of_solutions["__sources__"][task.function]
    function_def = next(node for node in ast.parse(source).body
                        if isinstance(node, ast.FunctionDef) and node.name == task.function)
    original = ast.unparse(function_def)
    dead = same = 0
    survivors = []
    for operator, mutated in all_mutants(function_def):
        key = f"{task.function}: {changed_line(original, mutated)}"
        namespace = dict(namespace_of_solutions["__namespace__"])
        try:
            exec(compile(mutated, f"<mutant of {task.function}>", "exec"), namespace)
        except Exception:
            dead += 1  # does not even compile (a string mutated in an f-string, say)
            continue
        is_dead, _ = killed(task, namespace[task.function], held_out_only)
        if is_dead:
            dead += 1
        elif key in equivalent:
            same += 1
        else:
            survivors.append(key)
            if show:
                print(f"--- survivor ({operator}) of {task.chapter}.{task.name}:\n{mutated}\n")
    return dead, same, survivors


def solution_namespace(name: str) -> dict:
    """The chapter's solution functions and their sources, plus the notebook's imports: each mutant is
    defined into a copy, so that it calls the other (right) solution functions as the notebook would."""
    import json
    import math
    from importlib import resources

    import nexttoken

    table = json.loads(resources.files("nexttoken.exercises").joinpath("solutions.json").read_text())[name]
    namespace = {"math": math, "torch": torch, "nexttoken": nexttoken, **solutions(name)}
    return {"__sources__": table, "__namespace__": namespace}


# --- mutmut: a generated project, one module per task, one test per task ---------------------------

TEST_HEADER = '''"""Each test is one task's check, run on the function of checked/<chapter>_<task>.py."""
import torch

from nexttoken.exercises import chapter

torch.set_num_threads(1)  # one small run per mutant: threads only contend
'''

TEST_TEMPLATE = '''

def test_{chapter}_{task}():
    from checked.{chapter}_{task} import {function}
    task = chapter("{chapter}").{task}
    torch.manual_seed(0)  # a mutant that draws from the global random state draws the same in every run
    status, reason = task.evaluate(task.run({function}))
    assert status == "passed", reason
'''

MODULE_TEMPLATE = '''"""{chapter}.{task}: the solution notebook's {function}; the chapter's others as solved."""
import math

import torch

import nexttoken
from nexttoken.exercises import solutions

# The other solution functions this one may call (generate_greedy calls generation_step): not mutated here.
globals().update({{name: f for name, f in solutions("{chapter}").items() if name != "{function}"}})


{source}'''

MUTMUT_CONFIG = '''[tool.mutmut]
source_paths = ["checked/"]
pytest_add_cli_args_test_selection = ["tests/"]
pytest_add_cli_args = ["-p", "no:cacheprovider", "-q"]
# mutmut's README: torch is not fork-safe in a process that has run tests; a fork server has not
process_isolation = "forkserver"
use_git_change_detection = false
'''


def export_project(folder: Path, chapters) -> dict[str, tuple[str, str, str]]:
    """Write the project mutmut runs in: {module: (chapter, task, function)} of what it holds."""
    table = json.loads(resources.files("nexttoken.exercises").joinpath("solutions.json").read_text())
    (folder / "checked").mkdir(parents=True)
    (folder / "tests").mkdir()
    (folder / "checked" / "__init__.py").write_text("")
    modules, tests = {}, [TEST_HEADER]
    for name in chapters:
        module = chapter(name)
        for task_name in module.TASKS:
            fields = dict(chapter=name, task=task_name, function=getattr(module, task_name).function)
            source = table[name][fields["function"]]
            (folder / "checked" / f"{name}_{task_name}.py").write_text(MODULE_TEMPLATE.format(source=source, **fields))
            tests.append(TEST_TEMPLATE.format(**fields))
            modules[f"{name}_{task_name}"] = (name, task_name, fields["function"])
    (folder / "tests" / "test_checks.py").write_text("".join(tests))
    (folder / "pyproject.toml").write_text(MUTMUT_CONFIG)
    return modules


def run_mutmut(folder: Path) -> dict[str, str]:
    """Run mutmut in ``folder``: {mutant name: status} (killed, survived, timeout, ...)."""
    mutmut = [sys.executable, "-c", "import sys; from mutmut.__main__ import cli; sys.exit(cli())"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with open(folder / "mutmut-run.log", "w") as log:  # its progress line is rewritten in place: keep it aside
        run = subprocess.run(mutmut + ["run", "--max-children", "1"], cwd=folder, env=env, stdout=log,
                             stderr=subprocess.STDOUT)
    if run.returncode != 0:
        sys.exit(f"mutmut run failed (exit {run.returncode}); its output is in {folder / 'mutmut-run.log'}")
    listing = subprocess.run(mutmut + ["results", "--all", "true"], cwd=folder, env=env, capture_output=True,
                             text=True, check=True).stdout
    return dict(line.strip().rsplit(": ", 1) for line in listing.splitlines() if ": " in line)


def mutmut_keys(folder: Path, module: str, function: str) -> dict[str, str]:
    """{mutant name: 'function: original line -> mutated line'}, read from the module mutmut wrote (each
    mutant is a function x_<function>__mutmut_<n>, the original x_<function>__mutmut_orig)."""
    tree = ast.parse((folder / "mutants" / "checked" / f"{module}.py").read_text())
    prefix = f"x_{function}__mutmut_"
    versions = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name.startswith(prefix):
            suffix = node.name[len(prefix):]
            node.name = function
            versions[suffix] = ast.unparse(node)
    original = versions.pop("orig")
    return {f"checked.{module}.{prefix}{suffix}": f"{function}: {changed_line(original, mutated)}"
            for suffix, mutated in versions.items()}


def main_mutmut(chapters, keep: Path | None) -> int:
    """mutmut over every task of ``chapters``: a line per task, a line per chapter; 1 if any non-equivalent
    mutant survives or a listed equivalent one no longer occurs."""
    equivalent = equivalent_mutants(EQUIVALENT_MUTMUT)
    folder = keep or Path(tempfile.mkdtemp(prefix="mutmut-checks-"))
    if keep and keep.exists():
        shutil.rmtree(keep)
    start = time.perf_counter()
    modules = export_project(folder, chapters)
    statuses = run_mutmut(folder)
    seen, survivors, per_chapter = set(), [], {}
    for module, (name, task_name, function) in modules.items():
        counts = dict.fromkeys(("killed", "timeout", "equivalent", "survived", "other"), 0)
        for mutant, key in mutmut_keys(folder, module, function).items():
            status = statuses.get(mutant, "not run")
            if status in ("killed", "timeout"):
                counts[status] += 1
            elif status == "survived" and key in equivalent:
                counts["equivalent"] += 1
                seen.add(key)
            else:
                counts["survived" if status == "survived" else "other"] += 1
                survivors.append(f"{name}.{task_name} ({status}) {key}")
        shown = {k: n for k, n in counts.items() if n or k != "other"}
        print(f"{name}.{task_name} {function}: " + ", ".join(f"{n} {k}" for k, n in shown.items()))
        chapter_counts = per_chapter.setdefault(name, dict.fromkeys(counts, 0))
        for k, n in counts.items():
            chapter_counts[k] += n
    for name, counts in per_chapter.items():
        print(f"{name}: " + ", ".join(f"{n} {k}" for k, n in counts.items()))
    stale = [key for key in equivalent if key not in seen and key.split(":")[0] in
             {function for _, _, function in modules.values()}]
    for line in survivors:
        print(f"    survived: {line}")
    for key in stale:
        print(f"    listed as equivalent but no longer a survivor: {key}")
    print(f"total: {sum(c['killed'] + c['timeout'] for c in per_chapter.values())} killed, "
          f"{sum(c['equivalent'] for c in per_chapter.values())} equivalent, {len(survivors)} survived "
          f"({time.perf_counter() - start:.0f} s; mutmut's files in {folder})")
    if not keep:
        shutil.rmtree(folder)
    return 1 if survivors or stale else 0


def main():
    parser = argparse.ArgumentParser(description=(__doc__ or "").partition("\n")[0])
    parser.add_argument("chapters", nargs="*", default=list(CHAPTERS))
    parser.add_argument("--show", action="store_true", help="print each surviving mutant's code (--tool ast)")
    parser.add_argument("--tool", choices=("ast", "mutmut"), default="ast",
                        help="our in-process mutator (default) or mutmut")
    parser.add_argument("--keep", type=Path, help="with --tool mutmut: the folder for mutmut's project, kept")
    parser.add_argument("--held-out-only", action="store_true",
                        help="with --tool ast: judge on the grader's held-out inputs alone (exercises/held_out.py)")
    args = parser.parse_args()
    if args.tool == "mutmut":
        sys.exit(main_mutmut(args.chapters, args.keep))
    torch.set_num_threads(1)
    equivalent = equivalent_mutants()
    totals, all_survivors = [0, 0], []
    start = time.perf_counter()
    for name in args.chapters:
        module, namespace = chapter(name), solution_namespace(name)
        for task_name in module.TASKS:
            task = getattr(module, task_name)
            dead, same, survivors = mutate_task(task, namespace, equivalent, args.show, args.held_out_only)
            totals[0] += dead
            totals[1] += same
            all_survivors += survivors
            print(f"{name}.{task_name} {task.function}: {dead} killed, {same} equivalent, "
                  f"{len(survivors)} survived")
            for key in survivors:
                print(f"    survived: {key}")
    print(f"total: {totals[0]} killed, {totals[1]} equivalent, {len(all_survivors)} survived "
          f"({time.perf_counter() - start:.0f} s)")
    sys.exit(1 if all_survivors else 0)


if __name__ == "__main__":
    main()
