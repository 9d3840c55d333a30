import pytest
import torch
import torch.nn.functional as F
from helpers import random_hf_gpt2

import nexttoken


def test_sum_of_token_log_probs_is_minus_cross_entropy_times_count(tiny_decoder):
    x = torch.randint(50, (3, 12), generator=torch.Generator().manual_seed(0))
    per_token = nexttoken.token_log_probs(tiny_decoder, x)
    assert per_token.shape == (3, 11) and (per_token <= 0).all()
    with torch.no_grad():
        logits = tiny_decoder(x)
    loss = F.cross_entropy(logits[:, :-1].flatten(0, 1), x[:, 1:].flatten())  # mean over 3 * 11 tokens
    total = nexttoken.sequence_log_prob(tiny_decoder, x).sum()
    assert torch.allclose(total, -loss * 33, atol=1e-4)


def test_chain_rule_equals_the_product_of_step_by_step_conditionals(tiny_decoder):
    """p(x_2..x_T | x_1) as a product of one prediction per prefix, each from its own forward pass."""
    x = torch.tensor([[3, 17, 4, 40, 8, 8, 21]])
    product = 1.0
    with torch.no_grad():
        for t in range(1, x.shape[1]):
            probs = torch.softmax(tiny_decoder(x[:, :t])[0, -1], dim=-1)
            product *= probs[x[0, t]].item()
    assert torch.allclose(nexttoken.sequence_log_prob(tiny_decoder, x).exp(), torch.tensor([product]), rtol=1e-4)


def test_token_log_probs_match_transformers():
    hf = random_hf_gpt2(4)
    model = nexttoken.from_hf_gpt2(hf)
    x = torch.randint(61, (2, 15), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        theirs = torch.log_softmax(hf(x).logits[:, :-1], -1).gather(-1, x[:, 1:, None]).squeeze(-1)
    assert torch.allclose(nexttoken.token_log_probs(model, x), theirs, atol=1e-4)


def test_bad_input(tiny_decoder):
    with pytest.raises(ValueError, match="at least 2 tokens"):
        nexttoken.token_log_probs(tiny_decoder, torch.tensor([[5]]))
    with pytest.raises(TypeError, match="input_ids"):
        nexttoken.sequence_log_prob(tiny_decoder, torch.tensor([[0.5, 1.0]]))
