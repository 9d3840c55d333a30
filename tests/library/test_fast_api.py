"""nexttoken.fast's public API: the names, signatures and commands the chapters, the appendix, the benchmarks,
the guides and the tests use, all of them still there."""

import inspect
import json
import re
import shlex

import pytest
import torch
from helpers import ROOT

import nexttoken
import nexttoken.fast

# Every name importable from nexttoken.fast that a page, a benchmark or a test outside the fast path's own
# tests uses, and the ahead-of-time load.
PUBLIC = ["AUTOTUNE_OPTIONS", "Prepared", "StaticCache", "StepAttention", "autotune_cache_dir", "build_step_package",
          "can_use_onednn", "faster_linear", "frozen_twin", "lay_out_for_cpu", "load_step_package", "not_on_the_model",
          "one_query_attention", "onednn_linear", "prepare", "run_layers", "step_package_path", "torch_linear",
          "use_autotune_cache_dir", "with_onednn_linears"]
SIGNATURES = {  # the arguments a caller passes, by name and default
    "prepare": "(model, compile=False, onednn=None, fixed_shapes=False)",
    "lay_out_for_cpu": "(model)",
    "build_step_package": "(model, path=None)",
    "load_step_package": "(model, path=None, onednn=None)",
    "step_package_path": "(model, digest=None)",
}
FAST_NAME = re.compile(r"nexttoken\.fast\.([A-Za-z_]\w*)|from nexttoken\.fast import (?:\(([\w\s,]+)\)|([\w ,]+))")
BENCH_COMMAND = re.compile(r"^(?:\.venv/bin/python|python3?) (bench/\w+\.py)(.*?)(?:#.*)?$", re.M)


def texts():
    """Every page, notebook, benchmark and test outside the fast path's own: (its path, its text)."""
    paths = [ROOT / "README.md", *ROOT.glob("guide/**/*.md"), *ROOT.glob("chapters/*.ipynb"),
             *ROOT.glob("appendix/*.ipynb"), *ROOT.glob("bench/*"), *ROOT.glob("tests/**/*.py"),
             *(p for p in (ROOT / "lib" / "nexttoken").rglob("*.py") if "fast" not in p.parts)]
    for path in paths:
        if path.is_file() and not path.name.startswith("test_fast"):
            text = path.read_text(encoding="utf-8")
            if path.suffix == ".ipynb":
                text = "\n".join("".join(cell["source"]) for cell in json.loads(text)["cells"])
            yield path, text


def test_every_public_name_is_importable_and_in_all():
    assert sorted(nexttoken.fast.__all__) == PUBLIC
    for name in PUBLIC:
        assert getattr(nexttoken.fast, name) is not None
    assert nexttoken.fast.prepare.__module__ == "nexttoken.fast.prepared"
    assert nexttoken.fast.__doc__ is None or nexttoken.fast.__doc__.startswith("Opt-in speed-ups")


def test_every_name_the_pages_benchmarks_and_tests_use_is_public():
    used = {}
    for path, text in texts():
        for attribute, *imported in FAST_NAME.findall(text):
            for name in [attribute] if attribute else re.split(r"[\s,]+", "".join(imported).strip()):
                if name and not name.startswith("__"):
                    used.setdefault(name, str(path.relative_to(ROOT)))
    assert {"prepare", "lay_out_for_cpu", "step_package_path", "AUTOTUNE_OPTIONS"} <= set(used)  # the scan finds
    assert {name: where for name, where in used.items() if name not in PUBLIC} == {}


@pytest.mark.parametrize("name", sorted(SIGNATURES))
def test_the_functions_take_the_arguments_callers_pass(name):
    parameters = inspect.signature(getattr(nexttoken.fast, name)).parameters.values()
    written = "(" + ", ".join(p.name + ("" if p.default is inspect.Parameter.empty else f"={p.default!r}")
                              for p in parameters) + ")"
    assert written == SIGNATURES[name]


def test_a_prepared_model_has_what_the_loop_and_the_benchmarks_read():
    model = nexttoken.Decoder(nexttoken.DecoderConfig(vocab_size=20, context_length=8, d_model=8, n_layers=1,
                                                      n_heads=2))
    prepared = nexttoken.fast.prepare(model, onednn=False)
    assert prepared.config is model.config and prepared.linear is nexttoken.fast.torch_linear
    assert prepared.compiled is False and prepared.kept == {}
    assert isinstance(prepared.new_cache(), nexttoken.fast.StaticCache)
    assert prepared.generate(torch.tensor([[1, 2]]), 2).shape == (1, 4)


def test_the_benchmark_commands_the_pages_give_exist_with_their_options():
    commands = []
    for path in [ROOT / "bench" / "README.md", ROOT / "guide" / "contributors" / "library.md"]:
        commands += BENCH_COMMAND.findall(path.read_text(encoding="utf-8"))
    assert len(commands) >= 8, commands
    for script, rest in commands:
        source = (ROOT / script).read_text(encoding="utf-8")
        options = [word.split("=")[0] for word in shlex.split(rest) if word.startswith("--")]
        missing = [option for option in options if f'"{option}"' not in source]
        assert not missing, f"{script} has no option {missing}"
