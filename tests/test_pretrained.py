"""The default model that ships with the package: size, loading, and figures that reproduce."""

import json
from importlib import resources
from pathlib import Path

import pytest
import torch

import nexttoken

CORPUS = Path(__file__).resolve().parents[2] / "shared" / "data" / "tinyshakespeare.txt"
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
@pytest.mark.skipif(not CORPUS.exists(), reason="needs ../shared/data/tinyshakespeare.txt")
def test_shipped_figures_reproduce_from_the_weights_and_the_corpus(tmp_path):
    from nexttoken.evaluate import main

    out = tmp_path / "figures.json"
    main(["--corpus", str(CORPUS), "--json", str(out)])
    fresh = json.loads(out.read_text())
    shipped = json.loads(FOLDER.joinpath("evaluation.json").read_text())
    assert fresh["val_loss"] == pytest.approx(shipped["val_loss"], abs=2e-3)
    assert fresh["bigram_val_loss"] == pytest.approx(shipped["bigram_val_loss"], abs=1e-3)
    assert fresh["eos_rate_t0.8_256"] == pytest.approx(shipped["eos_rate_t0.8_256"], abs=0.06)


@pytest.mark.skipif(not CORPUS.exists(), reason="needs ../shared/data/tinyshakespeare.txt")
def test_training_data_split_and_end_of_text():
    from nexttoken.data import load_corpus, split_speeches

    train, valid = load_corpus(CORPUS)
    speeches = split_speeches(CORPUS.read_text())
    assert (train == nexttoken.END_OF_TEXT_ID).sum() + (valid == nexttoken.END_OF_TEXT_ID).sum() == len(speeches)
    assert int(train[-1]) == int(valid[-1]) == nexttoken.END_OF_TEXT_ID
    assert speeches[0].startswith("First Citizen:")


def test_train_command_runs_a_few_steps(tmp_path):
    """The training entry point end to end on a tiny corpus written here (seeded, writes all outputs)."""
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"A{i}:\nto be or not to be, that is question {i}" for i in range(60)))
    from nexttoken.train import main

    main(["--corpus", str(corpus), "--out", str(tmp_path / "run"), "--d-model", "16", "--n-layers", "1",
          "--n-heads", "2", "--context-length", "16", "--batch-size", "4", "--steps", "3", "--eval-every", "3"])
    metrics = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert metrics["tokens_seen"] == 3 * 4 * 16 and metrics["val_loss"] > 0
    model = nexttoken.load_decoder(tmp_path / "run")
    assert model.config.d_model == 16
