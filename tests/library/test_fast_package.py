"""nexttoken.fast.package: the ahead-of-time step, built once into a package (build_step_package), loaded by path
(load_step_package), or both at prepare(model, compile="ahead-of-time")."""

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from fast_models import rope_gqa_model
from helpers import left_padded_batch

from nexttoken import generate
from nexttoken.fast import build_step_package, load_step_package, package, prepare, step_package_path

HERE = Path(__file__).parent


def fake_aotinductor(monkeypatch):
    """AOTInductor replaced by the exported program run eagerly (no C++ compiler, seconds): the build writes a
    file and keeps the metadata it was given; the load returns the program's module with that metadata."""
    built = {}

    def compile_package(program, path, settings):
        Path(path).write_bytes(b"a package")
        final = re.sub(r"\.\d+\.partial\.pt2$", "", os.path.realpath(path))  # the name the build renames it to
        built[final] = (program, settings)

    class Loaded:
        def __init__(self, path):
            self.program, self.settings = built[os.path.realpath(path)]
            self.calls = 0

        def __call__(self, *args):
            self.calls += 1
            return self.program.module()(*args)

        def get_metadata(self):
            return self.settings["aot_inductor.metadata"]

    monkeypatch.setattr(package, "compile_package", compile_package)
    monkeypatch.setattr(package, "load_package", Loaded)
    return built


def test_a_package_is_built_at_a_path_then_loaded_from_it_with_progress_shown(tmp_path, monkeypatch, capsys):
    """The life cycle as two steps of the caller's: the build announces each phase on stderr and returns the
    path; the load runs every one-token step of one unpadded row through the package, and the tokens are the
    plain loop's; the prompt, a batch, padding and the window's last slot run eagerly."""
    built = fake_aotinductor(monkeypatch)
    model = rope_gqa_model()
    path = str(tmp_path / "step.pt2")
    assert build_step_package(model, path) == path and os.path.isfile(path) and list(built) == [path]
    lines = capsys.readouterr().err.splitlines()
    assert [line.split(" (")[0].split(" in ")[0] for line in lines] == [
        "nexttoken.fast: exporting the one-token step", "nexttoken.fast: exported",
        f"nexttoken.fast: compiling it into {path}", "nexttoken.fast: built"]
    assert [p.name for p in tmp_path.iterdir()] == ["step.pt2"]  # no partial file left

    fast = load_step_package(model, path, onednn=False)
    step = fast.run_layers.step
    ids = torch.tensor([[3, 1, 4, 1]])
    window = model.config.context_length
    assert torch.equal(fast.generate(ids, 12), generate(model, ids, 12))
    assert step.calls == 11  # the prompt eagerly, then every step
    step.calls = 0
    assert torch.equal(fast.generate(ids, window), generate(model, ids, window))  # cropped past the window
    assert step.calls == window - 4 - 1  # positions 4 to 18: the step that writes the last slot runs eagerly
    step.calls = 0
    ids, mask = left_padded_batch(random.Random(1), 2, model.config.vocab_size, pad=0)
    assert torch.equal(fast.generate(ids, 6, attention_mask=mask), generate(model, ids, 6, attention_mask=mask))
    assert step.calls == 0 and capsys.readouterr().err == ""  # loaded: nothing built, nothing announced


def test_a_package_loads_only_for_the_weights_it_holds(tmp_path, monkeypatch):
    fake_aotinductor(monkeypatch)
    model = rope_gqa_model()
    with pytest.raises(FileNotFoundError, match="no step package at .*build_step_package"):
        load_step_package(model, str(tmp_path / "none.pt2"))
    path = build_step_package(model, str(tmp_path / "step.pt2"))
    other = rope_gqa_model(1)
    with pytest.raises(ValueError, match="holds other weights than this model's"):
        load_step_package(other, path)
    with torch.no_grad():
        model.blocks[0].attn.proj.weight[0, 0] += 1e-3  # one weight: another model
    with pytest.raises(ValueError, match="holds other weights"):
        load_step_package(model, path)


def test_prepare_builds_the_package_at_its_default_path_at_once_and_loads_it_later(tmp_path, monkeypatch, capsys):
    """prepare(compile="ahead-of-time") builds at prepare, not at the first step, under the user's cache
    directory, named by the weights; a second prepare loads it without building."""
    built = fake_aotinductor(monkeypatch)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model = rope_gqa_model()
    fast = prepare(model, compile="ahead-of-time", onednn=False)
    assert list(built) == [os.path.realpath(step_package_path(model))]
    assert step_package_path(model).startswith(str(tmp_path / "nexttoken" / "inductor"))
    assert "nexttoken.fast: built in" in capsys.readouterr().err
    ids = torch.tensor([[3, 1, 4, 1]])
    assert torch.equal(fast.generate(ids, 8), generate(model, ids, 8))
    assert fast.compiled and fast.run_layers.step.calls == 7
    again = prepare(model, compile="ahead-of-time", onednn=False)
    assert capsys.readouterr().err == "" and len(built) == 1
    assert torch.equal(again.generate(ids, 8), generate(model, ids, 8))


def test_packages_are_named_by_the_weights_and_refuse_what_they_cannot_run():
    model = rope_gqa_model()
    name = step_package_path(model)
    assert name == step_package_path(rope_gqa_model())  # the same weights, the same package
    with torch.no_grad():
        model.blocks[0].attn.proj.weight[0, 0] += 1e-3
    assert step_package_path(model) != name  # a package holds its weights: another one
    with pytest.raises(ValueError, match="float32 model on the CPU, without fixed_shapes"):
        prepare(model, compile="ahead-of-time", fixed_shapes=True)
    with pytest.raises(ValueError, match="float32 model on the CPU"):
        prepare(model.to(torch.bfloat16), compile="ahead-of-time")
    with pytest.raises(ValueError, match="float32 model on the CPU"):
        build_step_package(model, "never.pt2")
    assert not os.path.exists("never.pt2")


def test_prepare_warns_and_runs_eagerly_where_the_build_fails_leaving_no_package(tmp_path, monkeypatch):
    """A build that fails halfway (here the compiler writes part of the file, then raises, as a missing C++
    compiler would) leaves nothing under the cache folder, and generation goes on eagerly with the same tokens."""
    def half_a_build(program, package_path, inductor_configs):
        Path(package_path).write_bytes(b"half a package")
        raise RuntimeError("no C++ compiler found")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(torch._inductor, "aoti_compile_and_package", half_a_build)
    model = rope_gqa_model()
    with pytest.warns(UserWarning, match="could not be built or loaded .*no C\\+\\+ compiler found.* runs eagerly"):
        prepared = prepare(model, compile="ahead-of-time", onednn=False)
    ids = torch.tensor([[3, 1, 4, 1]])
    assert torch.equal(prepared.generate(ids, 5), generate(model, ids, 5))
    assert not prepared.compiled
    assert [p.name for p in tmp_path.rglob("*") if p.is_file() and "steps" in p.parts] == []


LOAD_SCRIPT = """
import sys, torch, nexttoken
sys.path[:0] = [{here!r}, {tests!r}]
from fast_models import rope_gqa_model
from nexttoken.fast import load_step_package, prepare
model = rope_gqa_model()
ids = torch.tensor([[3, 1, 4, 1]])
for fast in (load_step_package(model, {path!r}, onednn=False), prepare(model, compile="ahead-of-time")):
    print(fast.compiled and fast.generate(ids, 12).tolist() == nexttoken.generate(model, ids, 12).tolist())
"""


@pytest.mark.slow  # 40-60 s: an export and an AOTInductor build, then a second process
def test_a_real_package_built_once_is_loaded_by_a_new_process_with_the_plain_loops_tokens(tmp_path, monkeypatch):
    """AOTInductor for real: the package built (its autotuning included) gives the plain loop's tokens (a
    prompt, steps through the package, a batch and padding eagerly, cropping past the window); a second
    process loads it by path, and prepare there finds it at its default path, without building."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    model = rope_gqa_model()
    path = build_step_package(model)  # the default path: prepare's, in the second process
    assert path == step_package_path(model)
    prepared = load_step_package(model, path, onednn=False)
    ids = torch.tensor([[3, 1, 4, 1]])
    window = model.config.context_length
    for new in (0, 1, 12, window):  # window: past the context, cropped
        assert torch.equal(prepared.generate(ids, new), generate(model, ids, new)), new
    ids, mask = left_padded_batch(random.Random(1), 2, model.config.vocab_size, pad=0)
    assert torch.equal(prepared.generate(ids, 6, attention_mask=mask), generate(model, ids, 6, attention_mask=mask))
    assert len(list(tmp_path.rglob("*.pt2"))) == 1
    script = LOAD_SCRIPT.format(here=str(HERE), tests=str(HERE.parent), path=path)
    second = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300,
                            env={**os.environ, "XDG_CACHE_HOME": str(tmp_path)})
    assert second.stdout.split() == ["True", "True"], second.stderr[-2000:]
    assert "nexttoken.fast" not in second.stderr  # loaded, nothing built
