"""nexttoken: the library built by the lesson "Autoregressive text generation".

A tokenizer (GPT-2's), a decoder-only transformer, the chain rule, and the generation loop; the small
Tiny Shakespeare model that ships inside it, and SmolLM2-135M-Instruct, a real model read from its GGUF file.
"""

import importlib

from .cache import KVCache
from .chain_rule import sequence_log_prob, token_log_probs
from .generate import generate, greedy, sample, temperature
from .model import Decoder, DecoderConfig, causal_mask, positions_from_mask
from .tokenizer import END_OF_TEXT_ID, gpt2_tokenizer

# Imported when first asked for (``nexttoken.fast``, ``nexttoken.load_smollm2``, ``from nexttoken import
# load_gpt2``): the grader's sandbox imports this package for every submission and needs none of them, and
# ``fast`` registers a custom torch op. {name: the module that defines it}
LAZY = {"fast": "fast", "from_hf_gpt2": "hf", "from_hf_llama": "hf", "load_gpt2": "hf",
        "load_decoder": "pretrained", "load_pretrained": "pretrained", "save_decoder": "pretrained",
        "load_smollm2": "smollm2", "smollm2_tokenizer": "smollm2"}


def __getattr__(name: str):
    if name not in LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module = importlib.import_module(f".{LAZY[name]}", __name__)
    value = module if name == LAZY[name] else getattr(module, name)
    globals()[name] = value  # found here from now on, as an eager import would be
    return value


def __dir__():
    return sorted(set(globals()) | set(LAZY))


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
