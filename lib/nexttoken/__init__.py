"""nexttoken: the library built by the lesson "Autoregressive text generation".

A tokenizer (GPT-2's), a decoder-only transformer, the chain rule, and the generation loop.
"""

from .chain_rule import sequence_log_prob, token_log_probs
from .generate import generate, greedy, sample
from .hf import from_hf_gpt2, load_gpt2
from .model import Decoder, DecoderConfig, causal_mask, positions_from_mask
from .tokenizer import END_OF_TEXT_ID, gpt2_tokenizer

__all__ = [
    "END_OF_TEXT_ID",
    "Decoder",
    "DecoderConfig",
    "causal_mask",
    "from_hf_gpt2",
    "generate",
    "gpt2_tokenizer",
    "greedy",
    "load_gpt2",
    "positions_from_mask",
    "sample",
    "sequence_log_prob",
    "token_log_probs",
]
