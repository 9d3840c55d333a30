"""The small models the fast path's tests share (tests/library/test_fast*.py): plain functions."""

import pytest
import torch
from helpers import random_hf_gpt2

import nexttoken
from nexttoken.fast import can_use_onednn


def tiny_model(seed, **shape):
    """A random GPT-2 block model (transformers' GPT-2, copied), vocabulary 61."""
    return nexttoken.from_hf_gpt2(random_hf_gpt2(seed, **shape))


def rope_gqa_model(seed=0):
    """A Llama-family block: rotary positions, grouped-query attention, RMSNorm, SwiGLU, an untied head; its
    weights larger than the default init, so that greedy tokens vary."""
    torch.manual_seed(seed)
    config = nexttoken.DecoderConfig(vocab_size=50, context_length=20, d_model=32, n_layers=2, n_heads=4,
                                     n_kv_heads=2, norm="rmsnorm", mlp="swiglu", bias=False, positions="rope",
                                     tie_embeddings=False)
    model = nexttoken.Decoder(config).eval()
    for p in model.parameters():
        p.data.normal_(0, 0.3)
    return model


# x86 CPU builds of PyTorch: yes. Asked of a float32 layer on the CPU, as every model here is (a model
# built at import would import transformers while the fast tier collects)
ONEDNN = can_use_onednn(torch.nn.Linear(2, 2))
KERNELS = [None, pytest.param(True, marks=pytest.mark.skipif(not ONEDNN, reason="no oneDNN here")), False]
KERNEL_IDS = ["default", "onednn", "torch-matmul"]
