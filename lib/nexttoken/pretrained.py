"""Save and load a ``Decoder`` as a JSON config plus safetensors weights; the default model ships this way."""

import json
from dataclasses import asdict
from importlib import resources
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from .model import Decoder, DecoderConfig

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"


def save_decoder(model: Decoder, directory: str | Path, dtype: torch.dtype = torch.float16) -> None:
    """Write ``config.json`` and ``model.safetensors`` (weights stored in ``dtype``) into ``directory``."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    state = {name: t.detach().to(dtype).contiguous() for name, t in model.state_dict().items()}
    if model.config.tie_embeddings:
        del state["lm_head.weight"]  # the same matrix as token_embedding.weight: store it once
    (directory / CONFIG_FILE).write_text(json.dumps(asdict(model.config), indent=2) + "\n")
    save_file(state, directory / WEIGHTS_FILE)


def load_decoder(directory: str | Path) -> Decoder:
    """The ``Decoder`` saved in ``directory``, in float32 and eval mode."""
    directory = Path(directory)
    config = DecoderConfig(**json.loads((directory / CONFIG_FILE).read_text()))
    model = Decoder(config)
    state = {name: t.float() for name, t in load_file(directory / WEIGHTS_FILE).items()}
    missing, unexpected = model.load_state_dict(state, strict=False)
    allowed_missing = ["lm_head.weight"] if config.tie_embeddings else []
    if unexpected or missing != allowed_missing:
        raise RuntimeError(f"{directory} does not fit its config: missing {missing}, unexpected {unexpected}")
    return model.eval()


def load_pretrained() -> Decoder:
    """The default model: a small decoder trained on Tiny Shakespeare, shipped inside the package.

    float32, eval mode, no download. See the model card in the course for how it was trained.
    """
    folder = resources.files("nexttoken").joinpath("pretrained")
    if not folder.joinpath(WEIGHTS_FILE).is_file():
        raise FileNotFoundError(
            "the default model's weights are missing from the installed nexttoken package "
            "(nexttoken/pretrained/model.safetensors); reinstall it with pip install ."
        )
    with resources.as_file(folder) as path:
        return load_decoder(path)
