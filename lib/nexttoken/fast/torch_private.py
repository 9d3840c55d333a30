"""Every private or unstable torch entry point the fast path calls, each behind a name of its own.

None of these is torch's public, stable API: each may change or vanish in a release. With all of them in this
one file, a torch upgrade is checked here (``tests/library/test_fast_torch_private.py`` runs each one), and
the rest of ``nexttoken.fast`` calls only torch's public API and these names. Written against torch 2.13.
"""

import os
import types

import torch


def has_onednn_matmul() -> bool:
    """Whether this PyTorch has oneDNN's linear op (x86 CPU builds do) and oneDNN itself is usable."""
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


def onednn_matmul(x, weight, bias):
    """``F.linear(x, weight, bias)`` by oneDNN, on the weight as stored (torch.ops.mkldnn._linear_pointwise,
    the op inductor itself emits for a packed linear layer; "none": no activation fused after it)."""
    return torch.ops.mkldnn._linear_pointwise(x, weight, bias, "none", [None], "")


def keep_address(buffer: torch.Tensor) -> None:
    """Tell the compiler this buffer keeps its address between calls (torch._dynamo.mark_static_address): a
    CUDA graph that writes into it in place may then own it, instead of copying it in at each replay."""
    torch._dynamo.mark_static_address(buffer)


def inductor_settings(options: dict):
    """A context manager that applies inductor's settings ``options`` to the compiles inside it
    (torch._inductor.config.patch). Given to ``torch.compile`` as ``options=``, some of them (max_autotune's
    backends, freezing) were not applied. One object is made and entered at every call: torch builds a new
    class for each new one."""
    import torch._inductor.config as inductor  # imported only when the autotuned path is used

    return inductor.patch(options)


def inductor_default_cache_dir() -> str:
    """Where inductor keeps its caches when ``TORCHINDUCTOR_CACHE_DIR`` is not set."""
    try:
        from torch._inductor.runtime.cache_dir_utils import default_cache_dir
    except ImportError:  # torch < 2.6 kept it beside the other runtime helpers
        from torch._inductor.runtime.runtime_utils import default_cache_dir
    return default_cache_dir()


def point_inductor_cache_at(folder: str) -> None:
    """Inductor's caches (per-matrix autotuning timings, compiled kernels) in ``folder`` from now on: inductor
    reads ``TORCHINDUCTOR_CACHE_DIR`` at every look-up, so this applies to the compiles that follow."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = folder


def compile_with_guard_filter(function, dynamic: bool, guard_filter):
    """``torch.compile(function, dynamic=dynamic)`` that keeps only the guards ``guard_filter(guards)`` says
    True to (Dynamo's ``guard_filter_fn`` option: a list of bools, one a guard)."""
    return torch.compile(function, dynamic=dynamic, options={"guard_filter_fn": guard_filter})


def guard_root(guard) -> str:
    """The name of the argument or global a Dynamo guard reads from: ``model`` for one on
    ``model._modules['blocks']...``, read off the guard's source chain (``.base`` up to a ``local_name``)."""
    source = guard.orig_guard.originating_source
    while hasattr(source, "base"):
        source = source.base
    return getattr(source, "local_name", "")


def function_of_its_own(function):
    """A copy of ``function`` with a code object of its own. Dynamo keeps the graphs it compiles, and their
    guards, on the code object: a prepared model that compiles its own copy never has its graphs tried on
    (nor reused for) another prepared model's call."""
    return types.FunctionType(function.__code__.replace(), function.__globals__, function.__name__,
                              function.__defaults__, function.__closure__)


def compile_package(program, path: str, settings: dict) -> None:
    """Compile an exported program (``torch.export.export``'s) into an AOTInductor package at ``path``, with
    inductor's ``settings`` (torch._inductor.aoti_compile_and_package)."""
    torch._inductor.aoti_compile_and_package(program, package_path=path, inductor_configs=settings)


def load_package(path: str):
    """An AOTInductor package, loaded: a callable of the exported program's arguments
    (torch._inductor.aoti_load_package)."""
    return torch._inductor.aoti_load_package(path)


def package_metadata(loaded) -> dict[str, str]:
    """The metadata a loaded AOTInductor package was built with (its ``aot_inductor.metadata`` setting)."""
    return loaded.get_metadata()
