"""``compile="ahead-of-time"``: the autotuned one-token step, built once into a package on disk (minutes) and
loaded by path in any later process (seconds), as CTranslate2 converts a model once and loads it after.

    path = build_step_package(model)        # once per model, machine and torch version: progress on stderr
    fast = load_step_package(model, path)   # in any process: the fast path, its steps run by the package

The package holds the weights (frozen into it, as in max-autotune), so it is named by a hash of them and of
the model's configuration, and refuses to load for another model. A float32 model on the CPU.
"""

import hashlib
import os

import torch
from torch import nn

from ..model import Decoder
from .autotune import AUTOTUNE_OPTIONS, autotune_cache_dir, frozen_twin, use_autotune_cache_dir, with_step_attention
from .compiled import Eager, announced
from .static import StaticCache, run_layers
from .torch_private import compile_package, load_package, package_metadata

WEIGHTS_KEY = "nexttoken.weights"  # the package's metadata entry that names the weights it holds


class AheadOfTime:
    """``compile="ahead-of-time"``: a one-token step of one unpadded row through the loaded package;
    everything else (the prompt, batches, padding, the window's last slot) eagerly on ``runner``."""

    compiled = True

    def __init__(self, runner, step, context_length: int):
        self.eager = Eager(runner)
        self.step = step  # the loaded package: a callable of PackagedStep.forward's arguments
        self.context_length = context_length

    def __call__(self, input_ids, positions, mask, cache):
        if (input_ids.shape != (1, 1) or mask is not None or cache is None
                or cache.length >= self.context_length):  # the last slot: keys[:, :, :end] is another graph
            return self.eager(input_ids, positions, mask, cache)
        keys_after = torch.empty(cache.length)  # its size is the package's dynamic number of keys
        return self.step(input_ids, cache.write_at, cache.keys, cache.values, keys_after)


class PackagedStep(nn.Module):
    """One generation step of the autotuned twin, as ``torch.export`` sees it: the new token (1, 1), its
    position (1,), every layer's key and value buffers (written in place at the position) and a tensor whose
    length is the number of keys after the write (a size, so that the export keeps it symbolic)."""

    def __init__(self, twin: Decoder):
        super().__init__()
        self.twin = twin

    def forward(self, input_ids, position, keys, values, keys_after):
        cache = StaticCache(buffers=(keys, values))
        cache.advance(position, keys_after.shape[0])
        return run_layers(self.twin, input_ids, position[None], None, cache)


def weights_digest(model: Decoder) -> str:
    """A hash of the model's configuration and every weight: what a package holds."""
    digest = hashlib.sha256(repr(model.config).encode())
    for tensor in model.state_dict().values():
        digest.update(tensor.detach().cpu().contiguous().numpy().tobytes())
    return digest.hexdigest()[:24]


def step_package_path(model: Decoder, digest: str | None = None) -> str:
    """Where ``prepare(model, compile="ahead-of-time")`` keeps the model's package: in
    ``autotune_cache_dir()`` (one folder per torch version and CPU), named by ``weights_digest``."""
    return os.path.join(autotune_cache_dir(), "steps", (digest or weights_digest(model)) + ".pt2")


def build_step_package(model: Decoder, path: str | None = None) -> str:
    """Build the model's one-token step into a package at ``path`` (default: ``step_package_path(model)``)
    and return the path: the step exported, then compiled with ``AUTOTUNE_OPTIONS`` (AOTInductor; minutes,
    the autotuning of every product included), a line on stderr as each phase starts and ends. Written
    through a temporary name of this process's, so that neither a failed or interrupted build nor two
    processes building at once leave a broken package."""
    check_float32_cpu(model)
    digest = weights_digest(model)
    path = path or step_package_path(model, digest)
    with announced("exporting the one-token step (seconds)", "exported"), torch.no_grad():
        program = exported_step(model)
    use_autotune_cache_dir()  # the per-matrix timings the max-autotune path keeps there too
    settings = {name: value for name, value in AUTOTUNE_OPTIONS.items() if name != "cpp_wrapper"}  # C++ anyway
    settings["aot_inductor.metadata"] = {WEIGHTS_KEY: digest}
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    partial = f"{path}.{os.getpid()}.partial.pt2"
    try:
        with announced(f"compiling it into {path} (minutes: the compiler times each product's kernels)",
                       "built"), torch.no_grad():
            compile_package(program, partial, settings)
        os.replace(partial, path)
    finally:
        if os.path.exists(partial):
            os.remove(partial)
    return path


def exported_step(model: Decoder):
    """``PackagedStep`` of the model's autotuned twin, exported with the number of keys left symbolic."""
    config = model.config
    shape = (1, config.n_kv_heads, config.context_length, config.head_dim)
    keys = [torch.zeros(shape) for _ in range(config.n_layers)]
    values = [torch.zeros(shape) for _ in range(config.n_layers)]
    example = (torch.tensor([[0]]), torch.tensor([4]), keys, values, torch.empty(5))
    # the window's last slot is left out: there keys[:, :, :end] is the whole buffer, another graph
    keys_after = torch.export.Dim("keys_after", min=2, max=config.context_length - 1)
    shapes = {"input_ids": None, "position": None, "keys": [None] * len(keys), "values": [None] * len(values),
              "keys_after": {0: keys_after}}
    twin = with_step_attention(frozen_twin(model))
    return torch.export.export(PackagedStep(twin), example, dynamic_shapes=shapes, strict=False)


def loaded_step(model: Decoder, path: str, digest: str | None = None):
    """The package at ``path``, loaded, after checking that it holds this model's weights."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"no step package at {path}: build one with "
                                "nexttoken.fast.build_step_package(model, path)")
    step = load_package(path)
    held, expected = package_metadata(step).get(WEIGHTS_KEY), digest or weights_digest(model)
    if held != expected:
        raise ValueError(f"the step package at {path} holds other weights than this model's (or was built by "
                         "an older nexttoken): build it again with nexttoken.fast.build_step_package(model, path)")
    return step


def check_float32_cpu(model: Decoder) -> None:
    weight = model.token_embedding.weight
    if weight.device.type != "cpu" or weight.dtype != torch.float32:
        raise ValueError("compile='ahead-of-time' (a step package) is for a float32 model on the CPU; this "
                         f"model's weights are {weight.dtype} on {weight.device.type}")
