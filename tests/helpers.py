"""What several test files share: random tiny models, padded batches, the book's pages, and the package's
imports read from its code.

Plain functions, imported by name (``from helpers import random_hf_gpt2``); the fixtures that use them
are in ``conftest.py``.
"""

import ast
import random
import re
import subprocess
import sys
from pathlib import Path

import nbformat

import torch
import yaml

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "nexttoken"  # the package's source, as the repository holds it
CONFIG = yaml.safe_load((ROOT / "_config.yml").read_text())

# ---------------------------------------------------------------------------------------------------
# models and batches


def random_hf_gpt2(seed: int, vocab_size: int = 61, n_positions: int = 32, n_embd: int = 32,
                   n_layer: int = 2, n_head: int = 4, tie: bool = False):
    """A random tiny transformers GPT-2, built locally (no download).

    initializer_range=0.1 and an untied head: with small tied random embeddings a model only repeats
    its last token, which would test nothing. No EOS/BOS/pad ids in its config, so only what a test
    passes to generate() counts.
    """
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(seed)
    config = GPT2Config(
        vocab_size=vocab_size, n_positions=n_positions, n_embd=n_embd, n_layer=n_layer, n_head=n_head,
        initializer_range=0.1, tie_word_embeddings=tie, bos_token_id=None, eos_token_id=None,
        pad_token_id=None,
    )
    return GPT2LMHeadModel(config).eval()


def left_padded_batch(rng: random.Random, batch_size: int, vocab: int, pad: int):
    """Prompts of 1 to 8 tokens, left-padded with ``pad`` to a common length, and their mask."""
    rows = [[rng.randrange(vocab) for _ in range(rng.randint(1, 8))] for _ in range(batch_size)]
    width = max(map(len, rows))
    ids = torch.tensor([[pad] * (width - len(r)) + r for r in rows])
    mask = torch.tensor([[0] * (width - len(r)) + [1] * len(r) for r in rows])
    return ids, mask


# ---------------------------------------------------------------------------------------------------
# the book


def toc_pages() -> list[str]:
    """Every page of _toc.yml in reading order (the root first), as paths without suffix ("chapters/01_...")."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    pages = []

    def walk(node):
        if isinstance(node, dict):
            for key in ("root", "file"):
                if key in node:
                    name = node[key]
                    pages.append(name.rsplit(".", 1)[0] if name.endswith((".md", ".ipynb")) else name)
            for key in ("parts", "chapters", "sections"):
                for child in node.get(key, []):
                    walk(child)

    walk(toc)
    return pages


def source_of(page: str) -> Path:
    """The source file of a toc page (.ipynb or .md)."""
    for suffix in (".ipynb", ".md"):
        if (ROOT / f"{page}{suffix}").exists():
            return ROOT / f"{page}{suffix}"
    raise FileNotFoundError(f"{page} of _toc.yml has no .ipynb or .md source")


def toc_notebooks() -> list[Path]:
    """The notebooks (.ipynb) among the pages of _toc.yml, in order."""
    return [p for p in map(source_of, toc_pages()) if p.suffix == ".ipynb"]


CHAPTERS = sorted((ROOT / "chapters").glob("[0-9][0-9]_*.ipynb"))  # the lesson, one notebook a chapter


def learner_notebooks() -> list[Path]:
    """Every notebook a learner may open in Colab: the book's pages and the solutions (not in the toc)."""
    return sorted({*toc_notebooks(), *(ROOT / "solutions").glob("*.ipynb")})


def repository_url() -> str:
    """The course repository's address, kept in one place: _config.yml's repository.url."""
    return CONFIG["repository"]["url"].rstrip("/")


INSTALL_LINE = re.compile(r'"nexttoken @ git\+([^"]+)"')  # the package install in a notebook's first cell


def random_hf_llama(seed: int, vocab_size: int = 61, max_positions: int = 32, hidden: int = 48,
                    n_layer: int = 2, n_head: int = 6, n_kv_head: int = 2, theta: float = 10000.0,
                    tie: bool = False):
    """A random tiny transformers Llama (RMSNorm, SwiGLU, rotary, grouped-query attention), built locally.

    initializer_range=0.1 and random norm gains (not all ones), so that a wrong norm or a rotary
    layout error changes the tokens; no EOS/BOS/pad ids, so only what a test passes counts.
    """
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab_size, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=n_layer,
        num_attention_heads=n_head, num_key_value_heads=n_kv_head, max_position_embeddings=max_positions,
        rope_theta=theta, initializer_range=0.1, tie_word_embeddings=tie, bos_token_id=None,
        eos_token_id=None, pad_token_id=None, rms_norm_eps=1e-5,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        for name, param in model.named_parameters():
            if name.endswith("norm.weight"):
                param.uniform_(0.5, 1.5)
    return model


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def imports(name: str, path: Path, known: set[str]) -> set[str]:
    """The package's modules this one imports, anywhere in it (a function's own imports too), relative
    imports resolved. A package this module lies in is not counted: Python has run it before this module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom):
            base = package
            for _ in range(node.level - 1):
                base = base.rpartition(".")[0]
            module = (f"{base}.{node.module}" if node.module else base) if node.level else node.module or ""
            # "from . import model" imports the module nexttoken.model; "from .model import Decoder" the module
            names = [f"{module}.{alias.name}" for alias in node.names]
            found |= {n for n in names if n in known} or {module}
        elif isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
    return {m for m in found if m in known and m != name and not name.startswith(m + ".")}


def load_script(relative: str):
    """A script of the repository (scripts/, bench/) as a module, to test its functions: they are not a
    package, and running one would run its main."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(Path(relative).stem, ROOT / relative)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def code_cells(nb) -> list:
    """A notebook's (nbformat's) code cells, in order."""
    return [c for c in nb.cells if c.cell_type == "code"]


def defining(nb, function: str):
    """The one code cell of a notebook that defines ``function`` (its source starts with the def)."""
    [cell] = [c for c in code_cells(nb) if c.source.startswith(f"def {function}(")]
    return cell


class Slips(list):
    """A bank of plausible wrong answers, each (task, the words that a first line naming its mistake holds, the
    function); ``@bank.slip("ch01.q3", "sign")`` above a function adds it."""

    def slip(self, task: str, *words: str):
        def register(fn):
            self.append((task, words, fn))
            return fn
        return register


def first_line(task, fn, revealing: bool = False) -> tuple[str, str]:
    """The status and first line of the feedback ``check()`` gives (a predict task's tries 1 to 3 when not
    ``revealing``; its fourth and later when it is)."""
    cases = task.cases()
    verdict = task.verdict(task.run(fn, cases), cases, revealing=revealing)
    return verdict.status, verdict.text().split("\n")[0]


def named_share(slips: Slips, tasks: dict, revealing: bool = False) -> dict[str, list]:
    """{task: [(slip, named?, first line)]}: named when the first line holds one of the slip's words; a slip that
    passes is never named, and its line is "PASSES"."""
    out = {name: [] for name in tasks}
    for task, words, fn in slips:
        torch.manual_seed(0)
        status, line = first_line(tasks[task].task, fn, revealing)
        named = status != "passed" and any(w.lower() in line.lower() for w in words)
        out[task].append((fn.__name__, named, "PASSES" if status == "passed" else line))
    return out


# ---------------------------------------------------------------------------------------------------
# the book's Markdown: links, code left out, citations; the browser the page tests drive

NOTEBOOKS = [p for folder in ("chapters", "exercises", "solutions", "appendix")
             for p in sorted((ROOT / folder).glob("*.ipynb"))] + sorted(ROOT.glob("*.ipynb"))
FENCE = re.compile(r"^[ \t]*(`{3,}|~{3,})(.*)$")  # a code fence's opening line
LINK = re.compile(r"(!?)\[((?:[^\[\]]|\[[^\]]*\])*)\]\(([^)\s]+)\)")


def without_code(text: str) -> str:
    """Markdown without its fenced code blocks and inline code (a ```{...} fence is kept: MyST, not code;
    so is the `content` of a role)."""
    kept, fence = [], None
    for line in text.split("\n"):
        m = FENCE.match(line)
        if fence is None and m and not m.group(2).strip().startswith("{"):
            fence = m.group(1)
            continue
        if fence is not None:
            if line.strip() == fence:
                fence = None
            continue
        kept.append(line)
    return re.sub(r"(?<!\})`[^`\n]+`", "", "\n".join(kept))  # a role's `content` is kept


def markdown_sources(path: Path) -> list[tuple[str, str]]:
    """(where, Markdown) of a page: each Markdown cell of a notebook, or the whole .md file."""
    if path.suffix == ".md":
        return [(path.name, path.read_text())]
    nb = nbformat.read(path, as_version=4)
    return [(f"cell {i}", c.source) for i, c in enumerate(nb.cells) if c.cell_type == "markdown"]


def citation_links(path: Path):
    """(where, link text, fragment) of every link from ``path`` to the references page's entries."""
    for where, text in markdown_sources(path):
        for m in LINK.finditer(without_code(text)):
            target = m.group(3)
            page, _, fragment = target.partition("#")
            if (path.parent / page).resolve() == ROOT / "references.md" and fragment:
                yield where, m.group(2), fragment


CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


# ---------------------------------------------------------------------------------------------------
# the benchmarks' --tiny runs and their table rows

def run_bench(script, *args, env=None):
    result = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                            capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-2000:]
    return result.stdout


# a table row after its name: a median with its (min-max), fractions of bounds (b) and (c), then the token verdict
ROW = r".* [\d.]+ \([\d.]+-[\d.]+\) +\d+% +\d+% +[\d.]+ +\d+%  "


# 32 new tokens, not 128: the uncached loop's cost grows with the square of the length
TINY = ["--tiny", "--repeats", "1", "--new-tokens", "32"]


# ---------------------------------------------------------------------------------------------------
# the exercises' generator

def load_make_exercises():
    return load_script("scripts/make_exercises.py")
