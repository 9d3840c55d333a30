import os
import subprocess
import sys

import pytest
import torch
from helpers import random_hf_gpt2

import nexttoken


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("tie", [False, True])
def test_from_hf_gpt2_logits_match(seed, tie):
    hf = random_hf_gpt2(seed, n_layer=2 + seed, tie=tie)
    model = nexttoken.from_hf_gpt2(hf)
    assert model.config.tie_embeddings == tie and not model.training
    x = torch.randint(61, (3, 20), generator=torch.Generator().manual_seed(seed))
    with torch.no_grad():
        assert torch.allclose(model(x), hf(x).logits, atol=1e-4)
        mask = torch.ones_like(x)
        mask[0, :5] = 0  # left padding: transformers needs position_ids from the mask, as generate() does
        positions = nexttoken.positions_from_mask(mask)
        theirs = hf(x, attention_mask=mask, position_ids=positions).logits
        assert torch.allclose(model(x, attention_mask=mask)[0, 5:], theirs[0, 5:], atol=1e-4)


def test_from_hf_gpt2_rejects_other_models():
    with pytest.raises(TypeError, match="GPT2LMHeadModel"):
        nexttoken.from_hf_gpt2(torch.nn.Linear(2, 2))


def test_from_hf_gpt2_rejects_unsupported_activation():
    hf = random_hf_gpt2(0)
    hf.config.activation_function = "relu"
    with pytest.raises(ValueError, match="activation_function"):
        nexttoken.from_hf_gpt2(hf)


def test_load_gpt2_from_a_local_folder(tmp_path):
    hf = random_hf_gpt2(3)
    hf.save_pretrained(tmp_path)
    model = nexttoken.load_gpt2(str(tmp_path))
    x = torch.randint(61, (2, 9))
    with torch.no_grad():
        assert torch.allclose(model(x), hf(x).logits, atol=1e-4)


@pytest.mark.slow  # a fresh Python (HF_HUB_OFFLINE is read at import)
def test_load_gpt2_offline_fails_with_a_clear_message(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_HOME": str(tmp_path)}  # an empty cache, no network
    code = "import nexttoken\ntry:\n    nexttoken.load_gpt2('gpt2')\nexcept RuntimeError as e:\n    print(e)\n"
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert "load_gpt2('gpt2') could not load GPT-2 weights" in out.stdout, out.stderr[-2000:]
    assert "nexttoken.load_pretrained()" in out.stdout


def test_past_the_window_transformers_gpt2_fails_with_an_index_error():
    """What generate's docstring says of transformers past the context on a learned position table:
    GPT-2's table has no row for position n_positions (nexttoken's generate crops instead)."""
    hf = random_hf_gpt2(0, n_positions=8)
    ids = torch.randint(61, (1, 6), generator=torch.Generator().manual_seed(0))
    with pytest.raises(IndexError):
        hf.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert nexttoken.generate(nexttoken.from_hf_gpt2(hf), ids, 5).shape == (1, 11)
