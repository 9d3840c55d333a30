"""Opt-in speed-ups that change how a model is stored or run, never what it computes.

Nothing in the lesson needs them: ``Decoder(config)`` builds plain ``nn.Linear`` weights and
``nexttoken.generate`` runs the readable forward pass. The benchmarks in ``bench/`` apply them, and so can you
(see the appendix on CPU weight layout):

- ``lay_out_for_cpu(model)``: widening weights stored (in, out) in memory (``layout.py``).
- ``prepare(model)``: the same model, its own blocks, run with a preallocated cache, no mask where none is
  needed and, on CPU, the faster here of oneDNN's and MKL's matrix products (timed once);
  ``prepare(model).generate(ids, n, ...)`` gives the tokens ``nexttoken.generate(model, ids, n, ...)`` gives.
  ``compile=True`` compiles its layers, ``compile="max-autotune"`` also lets the compiler pick each matrix
  product's kernel, ``compile="ahead-of-time"`` runs that autotuned step from a package built once on disk,
  ``fixed_shapes=True`` gives every step one shape (for CUDA graphs) (``prepared.py``).
- ``build_step_package(model)`` then ``load_step_package(model, path)``: the ahead-of-time package as two
  steps of your own, a build (minutes, once) and a load (seconds, in any process) (``package.py``).

The modules, one concern each: ``static.py`` (the static cache and the forward pass it serves), ``onednn.py``
(oneDNN's matmul and the timing that picks it), ``compiled.py`` (eager and ``torch.compile``), ``autotune.py``
(max-autotune), ``package.py`` (the ahead-of-time package), ``torch_private.py`` (every private or unstable
torch entry point the others call).
"""

from .autotune import (AUTOTUNE_OPTIONS, StepAttention, autotune_cache_dir, frozen_twin, not_on_the_model,
                       one_query_attention, use_autotune_cache_dir)
from .layout import lay_out_for_cpu
from .onednn import can_use_onednn, faster_linear, onednn_linear, torch_linear, with_onednn_linears
from .package import build_step_package, step_package_path
from .prepared import Prepared, load_step_package, prepare
from .static import StaticCache, run_layers

# The public API: first what a learner calls, then the pieces the benchmarks, the library guide and
# bench/README.md name (importable from here as before the package was split; each is defined in its module).
__all__ = [
    "prepare", "lay_out_for_cpu", "build_step_package", "load_step_package", "step_package_path", "Prepared",
    "AUTOTUNE_OPTIONS", "StaticCache", "StepAttention", "autotune_cache_dir", "can_use_onednn", "faster_linear",
    "frozen_twin", "not_on_the_model", "one_query_attention", "onednn_linear", "run_layers", "torch_linear",
    "use_autotune_cache_dir", "with_onednn_linears",
]
