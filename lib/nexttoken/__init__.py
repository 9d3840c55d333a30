"""nexttoken: the library built by the lesson "Autoregressive text generation".

A tokenizer (GPT-2's), a decoder-only transformer, the chain rule, and the generation loop; the small
Tiny Shakespeare model that ships inside it, and SmolLM2-135M-Instruct, a real model read from its GGUF file.
"""

from . import fast  # opt-in speed-ups: nexttoken.fast.lay_out_for_cpu(model)
from .cache import KVCache
from .chain_rule import sequence_log_prob, token_log_probs
from .generate import generate, greedy, sample, temperature
from .hf import from_hf_gpt2, from_hf_llama, load_gpt2
from .model import Decoder, DecoderConfig, causal_mask, positions_from_mask
from .pretrained import load_decoder, load_pretrained, save_decoder
from .smollm2 import load_smollm2, smollm2_tokenizer
from .tokenizer import END_OF_TEXT_ID, gpt2_tokenizer

__all__ = [
    "END_OF_TEXT_ID",
    "Decoder",
    "DecoderConfig",
    "KVCache",
    "causal_mask",
    "fast",
    "from_hf_gpt2",
    "from_hf_llama",
    "generate",
    "gpt2_tokenizer",
    "greedy",
    "load_decoder",
    "load_gpt2",
    "load_pretrained",
    "load_smollm2",
    "positions_from_mask",
    "sample",
    "save_decoder",
    "sequence_log_prob",
    "smollm2_tokenizer",
    "temperature",
    "token_log_probs",
]
