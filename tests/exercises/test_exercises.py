"""exercises/ is generated from solutions/: every stored check passes on a solution, an exercise opens with no
outputs, and each of its checks fails visibly on its stub."""

from pathlib import Path

import nbformat
import pytest
import torch

from helpers import CHAPTERS as CHAPTER_NOTEBOOKS, load_make_exercises, load_script

ROOT = Path(__file__).resolve().parents[2]





def check_outputs(path: Path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    lines = []
    for cell in nb.cells:
        if cell.cell_type == "code" and ".check(" in cell.source:
            text = "".join(o.get("text", "") for o in cell.outputs if o.output_type == "stream")
            lines.append(text.strip())
    return lines


def test_exercises_are_up_to_date_with_solutions():
    assert load_make_exercises().out_of_date() == []


def test_stub_replaces_exactly_the_solution_block():
    make = load_make_exercises()
    source = "def f(x):\n    '''doc'''\n    ### BEGIN SOLUTION\n    y = x + 1\n    return y\n    ### END SOLUTION\n"
    stub = "def f(x):\n    '''doc'''\n    raise NotImplementedError(\"write your code here\")\n"
    assert make.stub_source(source) == stub


def test_stored_checks_pass_on_solutions():
    solutions = sorted((ROOT / "solutions").glob("*.ipynb"))
    assert len(solutions) == len(CHAPTER_NOTEBOOKS)
    for solution in solutions:
        passed = check_outputs(solution)
        assert len(passed) >= 3 and all(line.startswith("✅") for line in passed), (solution.name, passed)


def test_exercises_open_clean():
    """An exercise notebook stores no output: a learner opening it sees the tasks, not stored failures.
    Its check cells are hidden on the website (which executes every notebook); nbval runs every cell and
    fails if one raises, but compares no output (a cell stored unrun has none)."""
    for path in sorted((ROOT / "exercises").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert all(c.outputs == [] and c.execution_count is None for c in code), path.name
        checks = [c for c in code if ".check(" in c.source]
        assert len(checks) >= 3, path.name
        for cell in checks:
            assert "remove-output" in cell.metadata.get("tags", []), path.name


@pytest.mark.parametrize("path", sorted((ROOT / "exercises").glob("*.ipynb")), ids=lambda p: p.stem)
def test_each_check_fails_visibly_on_its_stub(path, monkeypatch):
    """What a learner sees on running an exercise notebook as it is: every cell runs (no traceback stops
    it), every check prints one ❌ line saying the stub raises NotImplementedError, and no other cell
    prints anything or warns. Run here in-process, cell by cell, in the notebook's folder (nbval runs the
    same cells in a fresh kernel)."""
    import contextlib
    import io
    import warnings

    monkeypatch.delenv("NEXTTOKEN_GRADING", raising=False)
    monkeypatch.chdir(path.parent)
    nb = nbformat.read(path, as_version=4)
    namespace, checks = {"__name__": "__main__"}, []
    with torch.random.fork_rng(), warnings.catch_warnings(record=True) as warned:
        warnings.simplefilter("always")
        for i, cell in enumerate(c for c in nb.cells if c.cell_type == "code"):
            out = io.StringIO()
            with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
                exec(compile(cell.source, f"{path.name} code cell {i}", "exec"), namespace)
            printed = out.getvalue().strip()
            if ".check(" in cell.source:
                checks.append(printed)
                assert "\n" not in printed and printed.startswith("❌") and "NotImplementedError" in printed, printed
            else:
                assert printed == "", f"code cell {i} printed {printed!r}"
    assert not warned, [str(w.message) for w in warned]
    assert len(checks) == len(check_outputs(ROOT / "solutions" / path.name))


# --- The checks themselves (issue: exercises that wrong code cannot pass) ---

import sys  # noqa: E402

import pytest  # noqa: E402

import nexttoken  # noqa: E402
from nexttoken.exercises import CHAPTERS, chapter, solutions  # noqa: E402


def all_tasks():
    return [getattr(chapter(ch), name) for ch in CHAPTERS for name in chapter(ch).TASKS]


LOOP_TASKS = [("ch05", "q2"), ("ch06", "q5"), ("ch06", "q7"), ("ch07", "q3")]
STEP_TASKS = [("ch04", "q2"), ("ch04", "q4"), ("ch05", "q1"), ("ch05", "q4")]


@pytest.mark.parametrize("ch,name", LOOP_TASKS)
def test_loop_inputs_discriminate(ch, name):
    """A loop that ignores its own output, or one row's prediction used for all, must give other tokens:
    each free-running greedy continuation has at least 3 distinct tokens, and the rows of a batch start
    with different predictions. (The named cases: the generated ones cover the space of lengths and counts.)"""
    for model, ids, n, *_ in getattr(chapter(ch), name).named_cases():
        if n < 3:
            continue
        new = nexttoken.generate(model, ids, n)[:, ids.shape[1]:]
        assert all(len(set(row.tolist())) >= 3 for row in new), (ch, name, new)
        assert len(set(new[:, 0].tolist())) == ids.shape[0], (ch, name, new)


@pytest.mark.parametrize("ch,name", STEP_TASKS)
def test_step_inputs_discriminate(ch, name):
    """Rows of a batch get different next tokens, so `logits[0, -1]` for every row cannot pass."""
    batches = 0
    task = getattr(chapter(ch), name)
    for args in task.cases():
        if args[1].shape[0] > 1:
            batches += 1
            out = task.reference(*args)
            first = out.argmax(-1) if out.is_floating_point() else out[:, -1]
            assert len(set(first.tolist())) > 1, (ch, name, first)
    assert batches >= 1


def test_sampling_inputs_differ_from_greedy():
    """Each case's seeded draw differs from the argmax somewhere, except the case whose logits reach the
    hundreds: it is there for a softmax without the max shift, and so peaked that sampling is greedy."""
    q4 = chapter("ch05").q4
    differ = 0
    for model, ids, generator in q4.cases():
        sampled = q4.reference(model, ids, generator)[:, -1]
        with torch.no_grad():
            logits = model(ids)[:, -1]
        if logits.max() > 88:
            continue
        assert not torch.equal(sampled, logits.argmax(-1)), "the seeded draw equals the argmax"
        differ += 1
    assert differ == len(q4.cases()) - 1


def test_eos_rows_stop_at_different_steps():
    """In chapter 6's loop task, rows finish at different steps and one case never finishes."""
    stops, never, all_early = [], False, False
    for model, ids, n, eos, pad in chapter("ch06").q5.cases():
        free = nexttoken.generate(model, ids, n)[:, ids.shape[1]:]
        hits = [(row == eos).nonzero() for row in free]
        steps = {int(h[0]) if len(h) else None for h in hits}
        stops.append(steps)
        never |= steps == {None}
        all_early |= None not in steps and max(steps) < n - 1  # a loop that does not stop is caught
    assert any(len(s) >= 2 for s in stops), stops
    assert never and all_early


def test_eos_cases_separate_the_rules_that_read_tokens_for_flags():
    """The named inputs of ch06.q5: pad == EOS where a prompt holds that id and its row does
    not produce it first (in a batch and alone), a row that produces the pad id before any EOS and then
    another token, and rows whose first EOS comes at steps 1, 2, 3, 4 (with pad == EOS and pad != EOS)."""
    prompt_eos, pad_then_other, every_step = set(), False, set()
    for model, ids, n, eos, pad in chapter("ch06").q5.named_cases():
        free = nexttoken.generate(model, ids, n)[:, ids.shape[1]:]
        if pad == eos and n and any((ids[r] == eos).any() and free[r, 0] != eos for r in range(len(ids))):
            prompt_eos.add(len(ids) > 1)
        for row in free:
            hits = (row == pad).nonzero()
            if pad != eos and len(hits) and eos not in row[:int(hits[0]) + 1] and len(row) > int(hits[0]) + 1:
                pad_then_other |= bool(row[int(hits[0]) + 1] != pad)
        firsts = sorted(int((row == eos).nonzero()[0]) for row in free if (row == eos).any())
        if len(firsts) == len(ids) and firsts == list(range(len(ids))) and len(ids) >= 4:
            every_step.add(pad == eos)
    assert prompt_eos == {True, False} and pad_then_other and every_step == {True, False}


def test_bigram_inputs_discriminate():
    for probs, ids, n in chapter("ch05").q3.named_cases():
        if n < 3:
            continue
        new = chapter("ch05").q3.reference(probs, ids, n)[:, ids.shape[1]:]
        assert all(len(set(row.tolist())) >= 3 for row in new)


@pytest.mark.parametrize("task", all_tasks(), ids=lambda t: f"{t.chapter}.{t.name}")
def test_solution_passes_its_check(task):
    """The solution notebook's own function (from solutions.json, as learners see it) passes."""
    fn = solutions(task.chapter)[task.function]
    assert task.evaluate(task.run(fn)) == ("passed", f"all {len(task.cases())} tests passed")


@pytest.mark.parametrize("task", [t for t in all_tasks() if not t.forbid], ids=lambda t: f"{t.chapter}.{t.name}")
def test_reference_passes_its_own_check(task):
    assert task.evaluate(task.run(task.reference)) == ("passed", f"all {len(task.cases())} tests passed")


FORBIDDEN = [(t, call) for t in all_tasks() for call in t.forbid]


@pytest.mark.parametrize("task,call", FORBIDDEN, ids=lambda x: getattr(x, "name", x))
def test_a_forbidden_call_fails_with_the_rule(task, call):
    """Each rule a task states is enforced inside run (so in check() and in the grader alike), however
    the forbidden function is reached, and the message quotes the rule; afterwards all is as before."""
    from nexttoken import causal_mask as causal_mask_bound_early
    from nexttoken import generate as bound_early

    generate_module = sys.modules["nexttoken.generate"]  # the module (nexttoken.generate is the function)

    softmax_before, init_before = torch.softmax, nexttoken.Decoder.__init__

    def cheat(*args):
        if call == "model(...)":
            model = next(a for a in args if isinstance(a, nexttoken.Decoder))
            return model.forward(args[1])
        if call == "torch.softmax":
            return torch.nn.functional.softmax(args[0], dim=-1)
        if call == "nexttoken.generate":
            return bound_early(args[0], args[1], 1)
        if call == "Decoder(...)":
            return nexttoken.Decoder(nexttoken.DecoderConfig()).num_parameters()
        if call == "nexttoken.causal_mask":
            return causal_mask_bound_early(args[0])
        if call == "model.embed":
            model, ids = args
            return model.embed(ids, torch.arange(ids.shape[1]).expand(ids.shape))
        raise AssertionError(call)

    status, reason = task.evaluate(task.run(cheat))
    assert status == "failed" and task.forbid[call] in reason, reason
    assert torch.softmax is softmax_before and nexttoken.Decoder.__init__ is init_before
    model, ids = nexttoken.Decoder(nexttoken.DecoderConfig(vocab_size=10, context_length=8, d_model=8,
                                                           n_layers=1, n_heads=2)), torch.zeros(1, 2, dtype=torch.long)
    assert generate_module.generate(model, ids, 1).shape == (1, 3) and model(ids).shape == (1, 2, 10)
    assert nexttoken.causal_mask(2).shape == (2, 2)


def question_text(task) -> str:
    """The Markdown of a task's question in its solution notebook (from its heading to the next one), with
    its code marks and line breaks read as a learner reads them."""
    nb = nbformat.read(ROOT / "solutions" / f"{task.chapter}.ipynb", as_version=4)
    heading, text, inside = f"## Question {task.name[1:]}:", [], False
    for cell in nb.cells:
        if cell.cell_type == "markdown" and cell.source.startswith("## "):
            inside = cell.source.startswith(heading)
        if inside and cell.cell_type == "markdown":
            text.append(cell.source)
    return " ".join(" ".join(text).replace("`", "").split())


@pytest.mark.parametrize("task,call", FORBIDDEN, ids=lambda x: getattr(x, "name", x))
def test_a_rule_quotes_the_tasks_own_words(task, call):
    """The one shortcut rule: the error a forbidden call raises quotes a sentence the task's
    text states word for word, "Do not call `nexttoken.generate` here: it is what you are rebuilding"."""
    rule = task.forbid[call]
    assert rule.startswith("do not call ") and " here: " in rule, rule
    assert rule.lower() in question_text(task).lower(), (rule, question_text(task))


@pytest.mark.parametrize("task", [t for t in all_tasks() if t.rebuilds], ids=lambda t: f"{t.chapter}.{t.name}")
def test_every_task_that_rebuilds_a_library_function_refuses_the_shortcut(task):
    """A task whose reference is, or returns the result of, a library function forbids calling it (or, for
    a prediction, building what it predicts): the shortcut would pass its check."""
    assert task.forbid, task.rebuilds


def test_integer_answers_accept_any_integer_type_and_reject_floats():
    import numpy

    q4 = chapter("ch07").q4
    right = solutions("ch07")["positions_processed"]
    assert q4.evaluate(q4.run(lambda *a: numpy.int64(right(*a))))[0] == "passed"
    assert q4.evaluate(q4.run(lambda *a: torch.tensor(right(*a))))[0] == "passed"
    status, reason = q4.evaluate(q4.run(lambda *a: float(right(*a))))
    assert status == "failed" and "should be an integer" in reason, reason


def test_a_large_tensor_difference_shows_its_row_in_context_and_the_count():
    q2 = chapter("ch02").q2
    right = solutions("ch02")["mask_scores"]
    status, reason = q2.evaluate(q2.run(lambda s: right(s).index_fill(-1, torch.tensor([9]), 0.5)
                                        if s.shape[-1] > 9 else right(s)))  # wrong on the 20-wide case
    assert status == "failed" and "first difference at index [0, 0, 9]" in reason, reason
    assert "entries 6 to 12" in reason and "entries differ" in reason, reason


def test_a_config_is_shown_whole():
    q3 = chapter("ch03").q3
    status, reason = q3.evaluate(q3.run(lambda c: 1))
    assert "tie_embeddings=" in reason and "..." not in reason.split("input:")[1].splitlines()[0], reason


_INPUTS: dict[tuple[str, str], list[tuple]] = {}


def inputs_of(task) -> list[tuple]:
    """A task's inputs, built once for the outcomes below (judging them runs the course's own functions on
    the inputs, never an answer's code)."""
    key = (task.chapter, task.name)
    if key not in _INPUTS:
        _INPUTS[key] = task.cases()
    return _INPUTS[key]


@pytest.mark.parametrize("outcomes", [
    None, [], "junk", [("ok",)], [("ok", torch.zeros(2, 2, dtype=torch.float64))] * 9,
    [("ok", "text")], [("ok", [1, 2])], [("weird", 1)], [("ok", torch.zeros(()))], [("ok", 3.5)],
])
def test_evaluate_never_raises(outcomes):
    """Whatever comes back from a kernel, judging gives a status for this task and never raises."""
    for task in all_tasks():
        status, reason = task.evaluate(outcomes, inputs_of(task))
        assert status in ("failed", "error", "missing", "not_implemented") and reason


def test_wrong_dtype_and_rank_are_explained_not_raised():
    q3 = chapter("ch02").q3
    status, reason = q3.evaluate(q3.run(lambda q, k: q3.reference(q, k).double()))
    assert status == "failed" and "float64" in reason
    status, reason = q3.evaluate(q3.run(lambda q, k: q3.reference(q, k)[..., 0]))
    assert status == "failed" and "wrong shape" in reason


def test_failing_input_reproduces_the_failure(capsys):
    q1 = chapter("ch05").q1
    q1._failing = None
    assert q1.failing_input() is None
    q1.check(lambda model, ids: ids)
    args = q1.failing_input()
    assert args is not None and isinstance(args[0], nexttoken.Decoder)
    assert "reproduce: args = q1.failing_input()" in capsys.readouterr().out


def test_checks_do_nothing_while_grading(monkeypatch, capsys):
    monkeypatch.setenv("NEXTTOKEN_GRADING", "1")
    chapter("ch01").q1.check(lambda p: 1 / 0)
    assert capsys.readouterr().out == ""


@pytest.mark.parametrize("task", all_tasks(), ids=lambda t: f"{t.chapter}.{t.name}")
def test_hints_nudge_without_giving_the_code(task, capsys):
    assert len(task.hints) >= 3
    for level, text in enumerate(task.hints, 1):
        assert "def " not in text and "return " not in text, text
        task.hint(level)
        assert text in capsys.readouterr().out


@pytest.mark.parametrize("task", all_tasks(), ids=lambda t: f"{t.chapter}.{t.name}")
def test_solution_prints_the_solution_notebooks_code(task, capsys):
    nb = nbformat.read(ROOT / "solutions" / f"{task.chapter}.ipynb", as_version=4)
    cells = [c.source for c in nb.cells if c.cell_type == "code" and f"def {task.function}(" in c.source]
    assert len(cells) == 1, task.function
    task.solution()
    printed = capsys.readouterr().out
    assert load_make_exercises().solution_code(cells[0]) in printed


# Per chapter, the tasks the chapter does not show line by line.
TRANSFER = {"ch01": ["q3", "q4"], "ch02": ["q4", "q5"], "ch03": ["q3"], "ch04": ["q4", "q5"], "ch05": ["q3", "q5"],
            "ch06": ["q6", "q8"], "ch07": ["q4"]}


def test_every_chapter_has_three_tasks_and_a_transfer_task():
    for ch in CHAPTERS:
        assert len(chapter(ch).TASKS) >= 3, ch
        assert TRANSFER[ch], ch
        assert set(TRANSFER[ch]) <= set(chapter(ch).TASKS)


def test_every_chapter_has_a_task_beyond_writing_and_every_kind_is_used(terminal_summary):
    """Each task declares its kind; every chapter has one that is not writing a function (predict, debug,
    empirical or open), and the course uses every kind. The counts go to the test run's summary."""
    from nexttoken.exercises.task import KINDS

    used = set()
    for ch in CHAPTERS:
        kinds = [getattr(chapter(ch), name).kind for name in chapter(ch).TASKS]
        used |= set(kinds)
        counts = ", ".join(f"{k} {kinds.count(k)}" for k in KINDS if k in kinds)
        terminal_summary.append(f"task kinds {ch}: {counts}")
        assert set(kinds) - {"write"}, f"{ch} has only tasks of kind 'write'"
    assert used == set(KINDS), set(KINDS) - used


def test_a_task_of_an_unknown_kind_is_refused():
    from nexttoken.exercises.task import Task

    with pytest.raises(ValueError, match="Task.kind must be one of"):
        Task(name="q9", function="f", title="t", cases=lambda: [], reference=lambda: None, kind="guess")


def test_the_pad_layout_rule_is_what_the_library_loop_does():
    """ch06.q8's reference (the rule a learner predicts) against nexttoken.generate on real models: the
    EOS step of each row is read from the model's free run, and the padded slots are where generate
    wrote the pad id after that row's EOS."""
    from nexttoken.exercises import ch06
    from nexttoken.exercises.common import random_ids, small_model
    import nexttoken

    checked = 0
    for seed in range(40):
        model, prompt, n = small_model(seed), random_ids(seed, 3, 2), 10
        free = nexttoken.generate(model, prompt, n)[:, 2:]
        eos = int(free[0, seed % 4])  # a token row 0 produces: other rows may or may not
        unused = set(range(50)) - set(free.flatten().tolist())
        if not unused:
            continue
        pad = max(unused)  # a pad id the model never produces here, so every pad in the output is padding
        out = nexttoken.generate(model, prompt, n, eos_token_id=eos, pad_token_id=pad)[:, 2:]
        steps = [int((row == eos).nonzero()[0]) + 1 if (row == eos).any() else None for row in free]
        layout = ch06._pad_layout(steps, n)
        assert out.shape[1] == layout.shape[1], (seed, steps)
        assert torch.equal(out == pad, layout), (seed, steps)
        checked += 1
    assert checked >= 30


# --- The generated test inputs (hypothesis) ---

GENERATED = [t for t in all_tasks() if t.generated is not None]


def load_make_cases():
    return load_script("scripts/make_cases.py")


def test_stored_generated_cases_are_what_hypothesis_draws():
    """cases.json (the example database every process reads) is what scripts/make_cases.py draws now:
    derandomized, and blind to the constants of whichever local modules happen to be imported."""
    import json

    stored = json.loads((ROOT / "lib" / "nexttoken" / "exercises" / "cases.json").read_text())
    assert load_make_cases().all_examples() == stored
    assert {t.generated.key for t in GENERATED} == set(stored)
    assert len(GENERATED) >= 5


@pytest.mark.parametrize("ch,name", [("ch05", "q2"), ("ch06", "q5"), ("ch06", "q7"), ("ch07", "q3")])
def test_generated_loop_cases_cover_the_domain(ch, name):
    """The generated loop inputs hold 0 and 1 new tokens, one row and several, T = 1, and (where the
    window allows it) a prompt plus new tokens of the longest the model reads."""
    task = getattr(chapter(ch), name)
    generated = task.cases()[len(task.named_cases()):]
    assert len(generated) == task.generated.count
    counts = {case[2] for case in generated}
    assert {0, 1} <= counts, counts
    assert {case[1].shape[0] for case in generated} >= {1, 2}
    assert 1 in {case[1].shape[1] for case in generated}
    longest = [c[1].shape[1] + c[2] >= c[0].config.context_length for c in generated]
    assert any(longest)


def test_generated_padding_cases_are_wide_and_ragged():
    task = chapter("ch06").q6
    generated = task.cases()[len(task.named_cases()):]
    widths = [ids.shape[1] for ids, _ in generated]
    assert max(widths) >= 30 and min(widths) <= 2, widths  # past the ~17 where an unstable sort reorders
    assert any(len(set(mask.sum(1).tolist())) > 1 for _, mask in generated)  # rows of different lengths


def test_generated_eos_cases_stop_on_the_prompt_the_model_and_nothing():
    """EOS ids the model produces, ones only the prompt holds, pad ids the model produces too."""
    stops, in_prompt, pad_produced = 0, 0, 0
    task = chapter("ch06").q5
    for model, ids, n, eos, pad in task.cases()[len(task.named_cases()):]:
        free = nexttoken.generate(model, ids, max(n, 1))[:, ids.shape[1]:]
        stops += bool((free[:, :n] == eos).any())
        in_prompt += bool((ids == eos).any())
        pad_produced += bool((free == pad).any())
    assert stops >= 3 and in_prompt >= 1 and pad_produced >= 3, (stops, in_prompt, pad_produced)


def _cuts_wide_rows(input_ids, attention_mask):
    """Right to left padding, but every row wider than 20 slots loses its last real token: a mistake
    that only wide rows show, so only the generated inputs catch it."""
    order = torch.argsort(attention_mask, dim=1, stable=True)
    ids, mask = input_ids.gather(1, order), attention_mask.gather(1, order)
    if ids.shape[1] > 20 and ids.shape[0] < 3:
        ids = torch.cat([ids[:, :1], ids[:, :-1]], dim=1)
    return ids, mask


def test_check_shrinks_a_generated_failure_to_the_smallest_input(tmp_path, monkeypatch, capsys):
    """A failure on a generated input is shown on the smallest input hypothesis finds that still fails
    (here: one row, 21 wide), failing_input() gives that input back, hypothesis prints nothing and
    leaves no .hypothesis folder in the learner's working directory; the grader's half (evaluate) still
    fails the answer on the stored inputs alone."""
    monkeypatch.chdir(tmp_path)
    task = chapter("ch06").q6
    task.check(_cuts_wide_rows)
    out = capsys.readouterr()
    assert out.out.startswith("❌ q6") and "hypothesis shrank" in out.out, out.out
    assert out.err == ""
    ids, mask = task.failing_input()
    assert tuple(ids.shape) == (1, 21)
    assert list(tmp_path.iterdir()) == []
    assert task.evaluate(task.run(_cuts_wide_rows))[0] == "failed"


@pytest.mark.parametrize("ch,name", [(ch, name) for ch in CHAPTERS for name in chapter(ch).TASKS])
def test_feedback_names_each_input_by_the_tasks_argument_name(ch, name):
    """Feedback shows a failing call as f(input_ids=..., max_new_tokens=3): the names are the reference's
    parameters, which must be the ones the task asks the learner's function to take (the solution's)."""
    import ast
    import json
    from importlib import resources

    task = getattr(chapter(ch), name)
    code = json.loads(resources.files("nexttoken.exercises").joinpath("solutions.json").read_text())[ch][task.function]
    solution = next(node for node in ast.parse(code).body
                    if isinstance(node, ast.FunctionDef) and node.name == task.function)
    asked = [a.arg for a in solution.args.args]
    args = task.named_cases()[0]
    assert task.arg_names[:len(args)] == asked and len(asked) == len(args), (task.arg_names, asked)
    assert task.call_text(args).startswith(f"{task.function}({asked[0]}=")
