"""The chain rule: log p(x_1..x_T) = sum over t of log p(x_t | x_<t), read off one forward pass."""

import torch

from .checks import check_token_ids
from .model import Decoder


def token_log_probs(model: Decoder, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(x_t | x_<t) for t = 2..T: float (B, T - 1). A 1-D input is a batch of one.

    Teacher forcing: one forward pass over the true sequence; position t - 1 predicts token t.
    """
    input_ids = check_token_ids(input_ids, model.config.vocab_size, "input_ids")
    if input_ids.shape[1] < 2:
        raise ValueError("input_ids needs at least 2 tokens: the first token has no conditional to score")
    logits = model(input_ids)[:, :-1, :].float()  # the last position predicts a token we do not have
    log_probs = torch.log_softmax(logits, dim=-1)  # log space: a product of 100 small numbers underflows
    targets = input_ids[:, 1:]
    return log_probs.gather(-1, targets[..., None]).squeeze(-1)


def sequence_log_prob(model: Decoder, input_ids: torch.Tensor) -> torch.Tensor:
    """log p(x_2..x_T | x_1) for each row: the sum of ``token_log_probs``, float (B,)."""
    return token_log_probs(model, input_ids).sum(dim=-1)
