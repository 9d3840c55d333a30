"""GPT-2's tokenizer, offline: tiktoken's ``r50k_base`` built from a rank file shipped with the package."""

import base64
import functools
import hashlib
from importlib import resources

import tiktoken

# The hash tiktoken itself expects for r50k_base: a corrupted or swapped file fails loudly.
GPT2_BPE_SHA256 = "306cd27f03c1a714eca7108e03d66b7dc042abe8c258b44c199a7ed9838dd930"
END_OF_TEXT = "<|endoftext|>"
END_OF_TEXT_ID = 50256

# GPT-2's pre-tokenizer, as tiktoken writes it for r50k_base: split text into words, numbers,
# punctuation runs and spaces; byte-pair merges then happen inside each piece.
GPT2_SPLIT_PATTERN = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}++| ?\p{N}++| ?[^\s\p{L}\p{N}]++|\s++$|\s+(?!\S)|\s"""


def _load_ranks() -> dict[bytes, int]:
    """Read ``assets/gpt2.tiktoken``: one ``base64(token bytes) rank`` pair per line."""
    data = resources.files("nexttoken").joinpath("assets/gpt2.tiktoken").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    if digest != GPT2_BPE_SHA256:
        raise RuntimeError(
            f"nexttoken/assets/gpt2.tiktoken has sha256 {digest}, expected {GPT2_BPE_SHA256}: "
            "the packaged tokenizer file is damaged; reinstall nexttoken."
        )
    ranks = {}
    for line in data.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


@functools.cache
def gpt2_tokenizer() -> tiktoken.Encoding:
    """GPT-2's tokenizer (50,257 tokens, ``<|endoftext|>`` = 50256), identical to tiktoken's r50k_base.

    >>> gpt2_tokenizer().encode("AI enhances our")
    [20185, 32479, 674]
    """
    return tiktoken.Encoding(
        name="gpt2",
        pat_str=GPT2_SPLIT_PATTERN,
        mergeable_ranks=_load_ranks(),
        special_tokens={END_OF_TEXT: END_OF_TEXT_ID},
        explicit_n_vocab=50257,
    )
