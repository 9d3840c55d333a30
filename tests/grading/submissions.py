"""The notebooks and records the grading tests share: the right answers to chapter 2's tasks, a notebook made
from cells, what a submission's runs would record, and the hostile cells more than one test grades. A module of
its own, so that no test file imports another."""

from pathlib import Path
from types import SimpleNamespace

import nbformat

from nexttoken.grading.decide import decide
from nexttoken.grading.run import Recording, Settings
from nexttoken.recorder.contract import notebook_read, notebook_refused

CH02_GOOD = {
    "causal_mask": "def causal_mask(T):\n    return torch.ones(T, T, dtype=torch.bool).tril()\n",
    "mask_scores": ("def mask_scores(scores):\n    T = scores.shape[-1]\n"
                    "    return scores.masked_fill(~causal_mask(T), float('-inf'))\n"),
    "attention_weights": ("def attention_weights(q, k):\n"
                          "    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
                          "    return torch.softmax(mask_scores(scores), dim=-1)\n"),
    "padded_causal_mask": ("def padded_causal_mask(attention_mask):\n"
                           "    return causal_mask(attention_mask.shape[-1]) & attention_mask.bool()[:, None, :]\n"),
    "changed_positions": "def changed_positions(T, j):\n    return torch.arange(T) >= j\n",
}

HEADER = "import math\nimport torch\nfrom nexttoken.exercises import ch02\n"


def notebook(path: Path, *cells: str, chapter: str | None = "ch02") -> Path:
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    if chapter:
        nb.metadata["nexttoken"] = {"chapter": chapter}
    nbformat.write(nb, path)
    return path


def recorded(chapter: str, results: dict[str, tuple[str, str]], points: int = 1,
             settings: Settings | None = None) -> Recording:
    """What the runs of a submission would record (``run.run_submission``): each task's (status, reason),
    each task worth ``points``; a stand-in for the sandboxed runs, where a test is about what follows. Its
    decision is the first run's on a notebook of ``chapter`` under ``settings`` (``decide``): a notebook of
    another chapter than --chapter's records no task."""
    decision = decide(notebook_read(chapter, 4), settings or Settings())
    if not decision.graded:
        return Recording(chapter, decision)
    tasks = {name: SimpleNamespace(name=name, function=name, points=points) for name in results}
    return Recording(chapter, decision, tasks=tasks, results=dict(results))


def refused(status: str, reason: str, settings: Settings) -> Recording:
    """What the runs of a notebook the recorder refused would record: no task, one row's (status, reason)."""
    return Recording(decision=decide(notebook_refused(status, reason), settings))


# q2 to q5 that do not call the notebook's causal_mask (which forges): right whatever q1 does.
OTHERS = [
    "def mask_scores(scores):\n    T = scores.shape[-1]\n"
    "    return scores.masked_fill(~torch.ones(T, T, dtype=torch.bool).tril(), float('-inf'))\n",
    "def attention_weights(q, k):\n    scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\n"
    "    return torch.softmax(mask_scores(scores), dim=-1)\n",
    "def padded_causal_mask(attention_mask):\n    T = attention_mask.shape[-1]\n"
    "    return torch.ones(T, T, dtype=torch.bool).tril() & attention_mask.bool()[:, None, :]\n",
    "def changed_positions(T, j):\n    return torch.arange(T) >= j\n",
]
RIGHT_MASK = "    return torch.ones(T, T, dtype=torch.bool).tril()\n"

# causal_mask answers right only after looking for the judging half inside the sandbox; what it finds
# it raises, so the row's reason names it.
LOOKS = ("def causal_mask(T):\n"
         "    import importlib, os, nexttoken.exercises as e\n"
         "    folder = os.path.dirname(e.__file__)\n"
         "    found = [n for n in os.listdir(folder) if n != '__init__.py']\n"
         "    grader = os.path.join(os.path.dirname(folder), 'grading')\n"
         "    found += ['grading/' + n for n in os.listdir(grader)] if os.path.exists(grader) else []\n"
         "    for name in ('ch02', 'held_out', 'task', 'common'):\n"
         "        try:\n"
         "            module = importlib.import_module('nexttoken.exercises.' + name)\n"
         "            found += [f'{name}.{k}' for k in vars(module) if not k.startswith('__')]\n"
         "        except ModuleNotFoundError:  # not in the sandbox\n"
         "            pass\n"
         "    for name in ('nexttoken.grading.orders', 'nexttoken.grading.judge'):\n"
         "        try:\n"
         "            importlib.import_module(name)\n"
         "            found.append(name)\n"
         "        except Exception:\n"
         "            pass\n"
         "    if found:\n"
         "        raise RuntimeError(f'found {found[:8]}')\n"
         + RIGHT_MASK)

# Ways to call the library's generate in a task that forbids it (ch05.q2), each a last cell that redefines
# generate_greedy in an otherwise right notebook. The task runs in a sandbox whose generate.py has no loop.
SNEAKS = {
    # saved before the rule is set: a copy of the function made from its code object
    "saved_code": "import inspect, types, nexttoken\n"
                  "def _copy(f):\n"
                  "    f = inspect.unwrap(f)  # under torch.no_grad's wrapper\n"
                  "    g = types.FunctionType(f.__code__, f.__globals__, 'g', f.__defaults__, f.__closure__)\n"
                  "    g.__kwdefaults__ = f.__kwdefaults__\n"
                  "    return g\n"
                  "_saved = _copy(nexttoken.generate)\n"
                  "def generate_greedy(model, input_ids, max_new_tokens):\n"
                  "    return _saved(model, input_ids, max_new_tokens)\n",
    # the module loaded again from its file
    "reloaded": "def generate_greedy(model, input_ids, max_new_tokens):\n"
                "    import importlib, sys\n"
                "    module = importlib.reload(sys.modules['nexttoken.generate'])\n"
                "    return module.generate(model, input_ids, max_new_tokens)\n",
    # a tensor subclass whose detach runs it, were reading an output to call it after the rule
    "subclass": "import nexttoken\n"
                "class Later(torch.Tensor):\n"
                "    @classmethod\n"
                "    def __torch_function__(cls, func, types, args=(), kwargs=None):\n"
                "        if getattr(func, '__name__', '') == 'detach':\n"
                "            return nexttoken.generate(*Later.call)\n"
                "        return super().__torch_function__(func, types, args, kwargs or {})\n"
                "def generate_greedy(model, input_ids, max_new_tokens):\n"
                "    Later.call = (model, input_ids, max_new_tokens)\n"
                "    return input_ids.as_subclass(Later)\n",
}
