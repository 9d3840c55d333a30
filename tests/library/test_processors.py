"""generate(..., logits_processors=[...]): transformers' own processors plug in and give its tokens."""

import random

import pytest
import torch
from helpers import left_padded_batch, random_hf_gpt2
from transformers import (
    RepetitionPenaltyLogitsProcessor,
    TemperatureLogitsWarper,
    TopKLogitsWarper,
    TopPLogitsWarper,
)

import nexttoken
from nexttoken import generate


@pytest.mark.parametrize("seed", range(3))
def test_greedy_with_repetition_penalty_matches_transformers(seed):
    hf = random_hf_gpt2(seed, n_layer=1 + seed % 2)
    model = nexttoken.from_hf_gpt2(hf)
    ids, mask = left_padded_batch(random.Random(seed), 3, 61, pad=60)
    theirs = hf.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=False, pad_token_id=60,
                         repetition_penalty=1.5)
    # transformers' generate builds its processor so that the left padding of each row is not penalized;
    # the same processor, built the same way, here:
    padding_lengths = (mask != 0).int().argmax(dim=1)
    penalty = RepetitionPenaltyLogitsProcessor(penalty=1.5, prompt_ignore_length=padding_lengths)
    ours = generate(model, ids, 16, attention_mask=mask, logits_processors=[penalty])
    assert ours.tolist() == theirs.tolist()
    # and the penalty did something: plain greedy repeats where the penalized loop does not
    assert ours.tolist() != generate(model, ids, 16, attention_mask=mask).tolist()


SAMPLING = {
    "temperature": (dict(temperature=0.7, top_k=0), [TemperatureLogitsWarper(0.7)]),
    "top-k": (dict(top_k=5), [TopKLogitsWarper(5)]),
    "top-p": (dict(top_p=0.8, top_k=0), [TopPLogitsWarper(0.8)]),
    "all three": (dict(temperature=1.3, top_k=8, top_p=0.9),
                  [TemperatureLogitsWarper(1.3), TopKLogitsWarper(8), TopPLogitsWarper(0.9)]),
}


@pytest.mark.parametrize("kind", SAMPLING)
@pytest.mark.parametrize("seed", range(2))
def test_sampling_with_warpers_matches_transformers_under_the_same_seed(kind, seed):
    """Both draw from PyTorch's global generator, one multinomial per step: seed it the same way."""
    hf_kwargs, processors = SAMPLING[kind]
    hf = random_hf_gpt2(seed)
    model = nexttoken.from_hf_gpt2(hf)
    ids, mask = left_padded_batch(random.Random(10 + seed), 4, 61, pad=60)
    runs = []
    for draw_seed in (seed, seed + 100):
        torch.manual_seed(draw_seed)
        theirs = hf.generate(ids, attention_mask=mask, max_new_tokens=16, do_sample=True, pad_token_id=60,
                             **hf_kwargs)
        torch.manual_seed(draw_seed)
        ours = generate(model, ids, 16, attention_mask=mask, select=nexttoken.sample,
                        logits_processors=processors)
        assert ours.tolist() == theirs.tolist()
        runs.append(ours)
    assert not torch.equal(runs[0], runs[1])  # really sampled: another seed, other tokens


def test_temperature_is_a_processor_like_transformers_warper():
    scores = torch.randn(3, 61, generator=torch.Generator().manual_seed(0))
    ids = torch.zeros(3, 4, dtype=torch.long)
    assert torch.allclose(nexttoken.temperature(0.8)(ids, scores), TemperatureLogitsWarper(0.8)(ids, scores))
    with pytest.raises(ValueError, match="temperature must be a number > 0"):
        nexttoken.temperature(0)


def test_processors_are_called_in_order_on_the_last_logits_before_the_softmax(tiny_decoder):
    calls = []

    def record(name):
        def process(input_ids, scores):
            calls.append((name, input_ids.clone(), scores.clone()))
            return scores if name == "first" else scores.flip(-1)  # the last one reverses the order
        return process

    prompt = torch.tensor([[1, 2], [3, 4]])
    out = generate(tiny_decoder, prompt, 3, logits_processors=[record("first"), record("second")])
    assert [name for name, _, _ in calls] == ["first", "second"] * 3
    for step in range(3):
        _, input_ids, scores = calls[2 * step]
        assert torch.equal(input_ids, out[:, :2 + step])  # every token so far, prompt included
        assert scores.dtype == torch.float32 and scores.shape == (2, 50)
        with torch.no_grad():
            assert torch.allclose(scores, tiny_decoder(out[:, :2 + step])[:, -1], atol=1e-5)
        # greedy picks the argmax of what the last processor returned: the flipped scores
        assert torch.equal(out[:, 2 + step], 49 - scores.argmax(-1))
