"""nexttoken.fast.torch_private: each private or unstable torch entry point the fast path calls, run here, so
that a torch upgrade that moves one fails in this file (the AOTInductor pair runs for real in
test_fast_package.py's slow test, the guard filter in test_fast_autotune.py's)."""

import ast
import os

import pytest
import torch

import nexttoken
from nexttoken.fast import torch_private
from nexttoken.fast.autotune import AUTOTUNE_OPTIONS

FAST = os.path.dirname(nexttoken.fast.__file__)


def test_the_other_modules_of_the_fast_path_call_no_private_torch_name():
    """How: ``torch._something`` (``torch.__version__`` aside) and ``torch.ops.mkldnn`` appear in
    torch_private.py alone."""
    for name in sorted(os.listdir(FAST)):
        if not name.endswith(".py") or name == "torch_private.py":
            continue
        tree = ast.parse(open(os.path.join(FAST, name)).read())
        dotted = {ast.unparse(node) for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        private = {d for d in dotted if d.startswith("torch.")
                   and any(part.startswith("_") and not part.endswith("__") for part in d.split("."))}
        private |= {d for d in dotted if d.startswith("torch.ops.mkldnn")}
        assert not private, (name, private)


def test_the_aotinductor_and_dynamo_entry_points_exist_in_this_torch():
    assert callable(torch._inductor.aoti_compile_and_package) and callable(torch._inductor.aoti_load_package)
    assert callable(torch._dynamo.mark_static_address)
    assert torch_private.inductor_default_cache_dir()


@pytest.mark.skipif(not torch_private.has_onednn_matmul(), reason="this PyTorch has no oneDNN linear op")
def test_onednn_matmul_is_a_linear_layers_product():
    torch.manual_seed(0)
    x, weight, bias = torch.randn(2, 3, 16), torch.randn(40, 16), torch.randn(40)
    expected = torch.nn.functional.linear(x, weight, bias)
    torch.testing.assert_close(torch_private.onednn_matmul(x, weight, bias), expected)
    torch.testing.assert_close(torch_private.onednn_matmul(x, weight, None), x @ weight.T)


def test_inductor_settings_apply_inside_and_only_inside():
    import torch._inductor.config as inductor

    before = inductor.max_autotune, inductor.freezing
    settings = torch_private.inductor_settings(AUTOTUNE_OPTIONS)
    for _ in range(2):  # one object, entered at every call
        with settings:
            assert inductor.max_autotune and inductor.freezing and inductor.cpp.enable_concat_linear
        assert (inductor.max_autotune, inductor.freezing) == before


def test_pointing_inductors_cache_sets_the_variable_inductor_reads(monkeypatch, tmp_path):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "before")
    torch_private.point_inductor_cache_at(str(tmp_path))
    from torch._inductor.runtime.cache_dir_utils import cache_dir

    assert cache_dir() == str(tmp_path)


def test_a_function_of_its_own_computes_the_same_with_another_code_object():
    def twice(x, k=2):
        return x * k

    copy = torch_private.function_of_its_own(twice)
    assert copy.__code__ is not twice.__code__ and copy(3) == twice(3) == 6 and copy.__name__ == "twice"


@pytest.mark.slow  # a real compile: seconds to tens of seconds on 2 cores
@pytest.mark.filterwarnings("ignore:`torch.jit.script_method` is deprecated:DeprecationWarning")  # torch's own import
def test_the_guard_filter_sees_each_guard_and_its_root_argument():
    seen = []

    def keep_all(guards):
        seen.extend(guards)
        return [True] * len(guards)

    def scaled(model, x):
        return model(x) * 2

    torch._dynamo.reset()
    layer = torch.nn.Linear(4, 4)
    compiled = torch_private.compile_with_guard_filter(scaled, dynamic=False, guard_filter=keep_all)
    x = torch.ones(1, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(layer, x), layer(x) * 2)
    roots = {torch_private.guard_root(guard) for guard in seen}
    assert {"model", "x"} <= roots, roots
