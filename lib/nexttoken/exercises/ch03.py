"""Chapter 3, the forward pass: tasks for the exercise notebook."""

import torch

from ..model import causal_mask
from .common import random_ids, small_model
from .task import Mistake, Task, compare_tensors

TASKS = ["q1", "q2"]


def _embed(model, input_ids):
    positions = torch.arange(input_ids.shape[1])
    return model.token_embedding(input_ids) + model.position_embedding(positions)


def _forward(model, input_ids):
    x = _embed(model, input_ids)
    mask = causal_mask(input_ids.shape[1])
    for block in model.blocks:
        x, _ = block(x, mask)
    return model.lm_head(model.final_norm(x))


def _cases():
    return [(small_model(1), random_ids(1, 1, 5)), (small_model(2), random_ids(2, 3, 9))]


def _q1_diagnose(args, expected, got):
    model, ids = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        with torch.no_grad():
            if torch.allclose(got, model.token_embedding(ids), atol=1e-5):
                raise Mistake("you forgot the position embeddings: without them the model cannot tell "
                              "'dog bites man' from 'man bites dog'")
    compare_tensors(expected, got, "your embeddings")


q1 = Task(
    name="q1", function="embed", title="token + position embeddings",
    cases=_cases, reference=torch.no_grad()(_embed), diagnose=_q1_diagnose,
    hint_text="model.token_embedding(input_ids) + model.position_embedding(torch.arange(T)); "
              "the positions broadcast over the batch.",
    solution_text=("def embed(model, input_ids):\n    positions = torch.arange(input_ids.shape[1])\n"
                   "    return model.token_embedding(input_ids) + model.position_embedding(positions)"),
)


def _q2_diagnose(args, expected, got):
    model, ids = args
    if isinstance(got, torch.Tensor) and got.shape == expected.shape:
        with torch.no_grad():
            x = _embed(model, ids)
            for block in model.blocks:
                x, _ = block(x, causal_mask(ids.shape[1]))
            if torch.allclose(got, model.lm_head(x), atol=1e-4):
                raise Mistake("you skipped the final norm (model.final_norm) before the LM head")
            x = _embed(model, ids)
            for block in model.blocks:
                x, _ = block(x, torch.ones(ids.shape[1], ids.shape[1], dtype=torch.bool))
            if torch.allclose(got, model.lm_head(model.final_norm(x)), atol=1e-4):
                raise Mistake("future positions are visible: pass causal_mask(T) to every block")
    if isinstance(got, torch.Tensor) and got.dim() == 3 and got.shape[-1] == model.config.d_model:
        raise Mistake("these are hidden states (last dimension d_model); apply model.lm_head to get logits")
    compare_tensors(expected, got, "your logits")


q2 = Task(
    name="q2", function="forward", title="the whole forward pass",
    cases=_cases, reference=torch.no_grad()(_forward), diagnose=_q2_diagnose,
    hint_text="x = embed(...); for each block: x, _ = block(x, causal_mask(T)); "
              "then model.lm_head(model.final_norm(x)).",
    solution_text=("def forward(model, input_ids):\n    x = embed(model, input_ids)\n"
                   "    mask = nexttoken.causal_mask(input_ids.shape[1])\n    for block in model.blocks:\n"
                   "        x, _ = block(x, mask)\n    return model.lm_head(model.final_norm(x))"),
)
