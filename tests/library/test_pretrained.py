"""The default model that ships with the package: size, loading, and figures that reproduce."""

import json
from importlib import resources
from pathlib import Path

import pytest
import torch

import nexttoken

CORPUS = Path(__file__).resolve().parents[3] / "shared" / "data" / "tinyshakespeare.txt"
# The corpus is public domain but not in the repository (README, "Training the default model").
NO_CORPUS = ("needs the Tiny Shakespeare corpus at ../shared/data/tinyshakespeare.txt (next to the repository), "
             "e.g. karpathy/char-rnn's data/tinyshakespeare/input.txt")
FOLDER = resources.files("nexttoken").joinpath("pretrained")


def test_package_data_is_small_and_fp16():
    size = sum(len(f.read_bytes()) for f in FOLDER.iterdir() if f.is_file())
    assert size <= 16 * 1024 * 1024
    from safetensors import safe_open

    with resources.as_file(FOLDER.joinpath("model.safetensors")) as path, safe_open(path, "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F16"}


def test_load_pretrained_gives_a_float32_eval_model_with_the_full_vocabulary():
    model = nexttoken.load_pretrained()
    assert not model.training
    assert model.config.vocab_size == 50257
    assert all(p.dtype == torch.float32 for p in model.parameters())
    enc = nexttoken.gpt2_tokenizer()
    ids = torch.tensor([enc.encode("ROMEO:\nBut soft")])
    assert model(ids).shape == (1, ids.shape[1], 50257)


def test_shipped_figures_meet_the_quality_bar():
    figures = json.loads(FOLDER.joinpath("evaluation.json").read_text())
    assert figures["val_loss"] <= figures["bigram_val_loss"] - 0.1
    assert figures["eos_rate_t0.8_256"] >= 0.8


@pytest.mark.slow  # 50 samples of up to 256 tokens and a validation pass: about 20 s idle
@pytest.mark.skipif(not CORPUS.exists(), reason=NO_CORPUS)
def test_shipped_figures_reproduce_from_the_weights_and_the_corpus(tmp_path):
    from nexttoken.training.evaluate import main

    out = tmp_path / "figures.json"
    main(["--corpus", str(CORPUS), "--json", str(out)])
    fresh = json.loads(out.read_text())
    shipped = json.loads(FOLDER.joinpath("evaluation.json").read_text())
    assert fresh["val_loss"] == pytest.approx(shipped["val_loss"], abs=2e-3)
    assert fresh["bigram_val_loss"] == pytest.approx(shipped["bigram_val_loss"], abs=1e-3)
    assert fresh["eos_rate_t0.8_256"] == pytest.approx(shipped["eos_rate_t0.8_256"], abs=0.06)


@pytest.mark.skipif(not CORPUS.exists(), reason=NO_CORPUS)
def test_training_data_split_and_end_of_text():
    from nexttoken.training.data import load_corpus, split_speeches

    train, valid = load_corpus(CORPUS)
    speeches = split_speeches(CORPUS.read_text())
    assert (train == nexttoken.END_OF_TEXT_ID).sum() + (valid == nexttoken.END_OF_TEXT_ID).sum() == len(speeches)
    assert int(train[-1]) == int(valid[-1]) == nexttoken.END_OF_TEXT_ID
    assert speeches[0].startswith("First Citizen:")


def test_train_command_runs_a_few_steps(tmp_path):
    """The training entry point end to end on a tiny corpus written here (seeded, writes all outputs)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"A{i}:\nto be or not to be, that is question {i}" for i in range(60)))
    from nexttoken.training.train import main

    main(["--corpus", str(corpus), "--out", str(tmp_path / "run"), "--d-model", "16", "--n-layers", "1",
          "--n-heads", "2", "--context-length", "16", "--batch-size", "4", "--steps", "3", "--eval-every", "3"])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["tokens_seen"] == 3 * 4 * 16 and metrics["val_loss"] > 0
    model = nexttoken.load_decoder(tmp_path / "run")
    assert model.config.d_model == 16


def test_recipe_is_its_phases_run_by_hand(tmp_path):
    """`--recipe` runs its phases in order, each later phase from the previous phase's saved
    weights, and records both histories: the same weights as the phases typed one by one."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"A{i}:\nto be or not to be, that is question {i}" for i in range(60)))
    from safetensors.torch import load_file

    from nexttoken.training.train import RECIPES, main

    main(["--recipe", "smoke", "--corpus", str(corpus), "--out", str(tmp_path / "recipe")])
    first, second = RECIPES["smoke"]
    main(["--corpus", str(corpus), "--out", str(tmp_path / "one"), *first])
    main(["--corpus", str(corpus), "--out", str(tmp_path / "two"), *second, "--init-from", str(tmp_path / "one")])

    by_recipe = load_file(tmp_path / "recipe" / "model.safetensors")
    by_hand = load_file(tmp_path / "two" / "model.safetensors")
    assert by_recipe.keys() == by_hand.keys()
    assert all(torch.equal(by_recipe[k], by_hand[k]) for k in by_hand)
    phase_one = load_file(tmp_path / "one" / "model.safetensors")
    assert not all(torch.equal(phase_one[k], by_hand[k]) for k in by_hand)  # phase 2 trained

    metrics = json.loads((tmp_path / "recipe" / "metrics.json").read_text())
    assert metrics["command"].startswith("python -m nexttoken.train --recipe smoke")
    assert [[h["step"] for h in p["history"]] for p in metrics["phases"]] == [[2, 4], [1, 2]]
    assert metrics["tokens_seen"] == (4 + 2) * 4 * 16  # phase 1 stopped at step 4 of 6
    assert metrics["val_loss"] == json.loads((tmp_path / "two" / "metrics.json").read_text())["val_loss"]


def test_a_run_from_saved_weights_reads_its_options_without_changing_them(tmp_path):
    """train_once with --init-from trains at the saved model's context length (16 here, the options' default
    being 128) and leaves the options object as it was given."""
    import copy

    from nexttoken.training.train import parse_args, train_once

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"A{i}:\nto be or not to be, that is question {i}" for i in range(60)))
    small = ["--corpus", str(corpus), "--d-model", "16", "--n-layers", "1", "--n-heads", "2", "--batch-size", "4",
             "--steps", "2", "--eval-every", "2"]
    train_once(parse_args([*small, "--out", str(tmp_path / "one"), "--context-length", "16"]))
    args = parse_args([*small, "--out", str(tmp_path / "two"), "--init-from", str(tmp_path / "one")])
    given = copy.deepcopy(vars(args))
    metrics = train_once(args)
    assert vars(args) == given and args.context_length == 128
    assert metrics["tokens_seen"] == 2 * 4 * 16  # the saved model's windows


HELP_OF_EACH = """
import contextlib, io, runpy, sys
for module in ("nexttoken.train", "nexttoken.evaluate"):
    sys.argv = [module, "--help"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    print(module, "usage: python -m " + module in out.getvalue())
"""


@pytest.mark.slow  # a fresh Python under -OO, which compiles torch's sources again here
def test_the_training_commands_run_under_python_OO():
    """``python -OO`` strips docstrings: the commands' descriptions must not need them. (Both in one
    process: where no bytecode is written, every ``-OO`` process compiles torch's sources again.)"""
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-OO", "-c", HELP_OF_EACH], capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == ["nexttoken.train", "True", "nexttoken.evaluate", "True"], done.stderr[-2000:]


def test_recipe_refuses_options_it_fixes(capsys):
    from nexttoken.training.train import main

    with pytest.raises(SystemExit):
        main(["--recipe", "default", "--corpus", "x", "--out", "y", "--lr", "1"])
    assert "--recipe default fixes the training options; remove --lr" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--corpus", "x", "--out", "y", "--steps", "10", "--stop-at", "11"])
    assert "--stop-at must be between 1 and --steps (10), got 11" in capsys.readouterr().err


def test_the_shipped_model_was_made_by_the_default_recipe():
    """metrics.json records `--recipe default`, and each phase ran exactly that phase's options."""
    import shlex

    from nexttoken.training.train import ARCHITECTURE_ARGS, RECIPES, parse_args

    metrics = json.loads(resources.files("nexttoken").joinpath("pretrained", "metrics.json").read_text())
    assert metrics["command"].startswith("python -m nexttoken.train --recipe default ")
    assert len(metrics["phases"]) == len(RECIPES["default"])
    paths = ("corpus", "out", "init_from")
    for phase, options in zip(metrics["phases"], RECIPES["default"]):
        recorded = vars(parse_args(shlex.split(phase["command"])[3:]))
        planned = vars(parse_args(["--corpus", "c", "--out", "o", *options]))
        for key in ARCHITECTURE_ARGS if recorded["init_from"] else ():
            planned.pop(key), recorded.pop(key, None)  # a continued phase takes them from its start
        assert {k: v for k, v in recorded.items() if k not in paths} == \
               {k: v for k, v in planned.items() if k not in paths}
    steps = [phase["history"][-1]["step"] for phase in metrics["phases"]]
    assert steps == [700, 80]
    assert metrics["tokens_seen"] == sum(steps) * 32 * 128
