"""The live page's model and tokenizer (live_loop.md): the ONNX export of the shipped model gives
nexttoken's logits, attention row and greedy tokens, and js-tiktoken's GPT-2 ranks are the package's gpt2.tiktoken.

The page itself, in headless Chromium, is tested in tests/book/test_website.py (``-k live``).
"""

import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch
from helpers import ROOT, load_script

import nexttoken

ATOL = 1e-4  # float32 logits of the same weights, two runtimes: they differ by about 2e-5 (measured)
# onnxruntime (1.32 on Linux) collects telemetry unless told not to: on import it writes a session file in the
# temporary folder, and a device id and an events database under ~/.cache/Microsoft, for upload over HTTPS
# (it stays off only where it sees a CI's variables, so CI never showed it). Off for these tests and every
# process they start.
os.environ["ORT_DISABLE_TELEMETRY"] = "1"
# The variables onnxruntime 1.32 takes for a CI's (read off its library's strings), left out of the test below
CI_VARIABLES = ("CI", "TF_BUILD", "GITHUB_ACTIONS", "GITLAB_CI", "CIRCLECI", "TRAVIS", "JENKINS_URL",
                "CODEBUILD_BUILD_ID", "BUILDKITE", "TEAMCITY_VERSION", "APPVEYOR", "BITBUCKET_BUILD_NUMBER")


def need(condition: bool, msg: str):
    """Skip with ``msg``, or fail under CI=true, where everything the test needs is installed."""
    if not condition:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg)
        pytest.skip(msg)


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(onnxruntime session, model.json) of a fresh export by scripts/export_onnx.py."""
    ort = pytest.importorskip("onnxruntime")
    out = tmp_path_factory.mktemp("onnx") / "model.onnx"
    subprocess.run([sys.executable, "scripts/export_onnx.py", "--out", str(out)], cwd=ROOT, check=True,
                   capture_output=True, timeout=600)
    session = ort.InferenceSession(str(out), providers=["CPUExecutionProvider"])
    return session, json.loads((out.parent / "model.json").read_text()), out


@pytest.mark.slow
def test_onnxruntime_writes_no_telemetry(tmp_path):
    """Imported and run (a one-node graph) with these tests' environment, outside a CI too, onnxruntime writes
    nothing in the home or the temporary folder (the run's leftover check sees only the latter)."""
    pytest.importorskip("onnxruntime")
    home, tmp = tmp_path / "home", tmp_path / "tmp"
    home.mkdir(), tmp.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in CI_VARIABLES} | {"HOME": str(home), "TMPDIR": str(tmp)}
    code = textwrap.dedent("""\
        import numpy as np, onnxruntime
        from onnx import TensorProto, helper
        x, y = (helper.make_tensor_value_info(name, TensorProto.FLOAT, [1]) for name in "xy")
        graph = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity", [x], [y])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
        session = onnxruntime.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
        assert session.run(None, {"x": np.ones(1, np.float32)})[0] == 1
    """)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, capture_output=True, timeout=120)
    assert list(home.rglob("*")) == list(tmp.rglob("*")) == []


@pytest.mark.slow  # the export takes about 20 s
def test_exported_logits_match_nexttoken(exported):
    session, info, path = exported
    model = nexttoken.load_pretrained()
    assert info["context_length"] == model.config.context_length == 128
    assert info["vocab_size"] == model.config.vocab_size and info["eos_token_id"] == 50256
    assert info["attention_layer"] == model.config.n_layers - 1 and info["n_heads"] == model.config.n_heads
    # float16 storage of the float16-valued weights: about half of the 30.6 MB float32 would take
    assert info["float16_initializers"] > 0 and path.stat().st_size < 0.6 * 4 * model.num_parameters()
    g = torch.Generator().manual_seed(0)
    enc = nexttoken.gpt2_tokenizer()
    rows = [enc.encode("ROMEO:\n"), [50256]] + [torch.randint(0, 50257, (T,), generator=g).tolist()
                                               for T in (1, 2, 37, 128)]
    for ids in rows:
        x = torch.tensor([ids])
        with torch.no_grad():
            want = model(x).numpy()
            _, attention = model(x, return_attention=True)
        want_row = attention[info["attention_layer"]][:, :, -1, :].numpy()  # (1, heads, T)
        got, got_row = session.run(["logits", "attention"], {"input_ids": x.numpy()})
        assert got.shape == (1, len(ids), 50257) and got.dtype == np.float32
        assert np.abs(got - want).max() < ATOL, (len(ids), np.abs(got - want).max())
        assert got[0, -1].argmax() == want[0, -1].argmax()
        # the last position's attention in the exported layer: weights over the T positions, per head
        assert got_row.shape == (1, model.config.n_heads, len(ids)) == want_row.shape
        assert np.abs(got_row - want_row).max() < 1e-5 and np.allclose(got_row.sum(-1), 1, atol=1e-5)


@pytest.mark.slow
def test_exported_model_gives_generates_greedy_tokens(exported):
    """The page's loop in Python: crop to the window, last row, argmax, append. Same tokens as
    nexttoken.generate (which uses its KV cache until the window is full, then recomputes it)."""
    session, info, _ = exported
    model, enc = nexttoken.load_pretrained(), nexttoken.gpt2_tokenizer()
    for prompt, n in (("ROMEO:\n", 30), ("the " * 120, 12)):  # the second crosses the 128-token window
        ids = enc.encode(prompt)
        want = nexttoken.generate(model, torch.tensor([ids]), n, eos_token_id=50256)[0].tolist()
        for _ in range(n):
            window = np.array([ids[-info["context_length"]:]], dtype=np.int64)
            ids.append(int(session.run(["logits"], {"input_ids": window})[0][0, -1].argmax()))
            if ids[-1] == 50256:
                break
        assert ids == want
        assert len(set(want[len(enc.encode(prompt)):])) >= 3  # a continuation that tests something


def test_js_tiktoken_ranks_are_the_packages():
    """js-tiktoken's GPT-2 ranks (the page's tokenizer) hold exactly the package's 50,256 byte tokens with
    the same ranks, and the same special token."""
    need(shutil.which("node") is not None and (ROOT / "node_modules" / "js-tiktoken").is_dir(),
         "needs Node and node_modules (npm ci: bash scripts/setup.sh)")
    result = subprocess.run(["node", "live/check_ranks.mjs", "lib/nexttoken/assets/gpt2.tiktoken"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120)
    summary = json.loads(result.stdout)
    assert result.returncode == 0, summary
    assert summary["ours"] == summary["theirs"] == 50256 and summary["n_differ"] == summary["n_extra"] == 0
    assert summary["special_tokens"] == {"<|endoftext|>": 50256} and summary["explicit_n_vocab"] == 50257


def test_work_counts_are_torchs():
    """The multiply-adds the page's cache comparison counts (scripts/export_onnx.py's work_counts) are those
    torch's FLOP counter finds, on the explicit attention path the export runs (FlopCounterMode does not
    count the fused attention kernel's products on the CPU): the whole window, and one cached step."""
    from torch.utils.flop_counter import FlopCounterMode

    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from export_onnx import work_counts
    finally:
        sys.path.pop(0)
    model = nexttoken.load_pretrained().eval()
    w = work_counts(model)
    macs = lambda q, k: q * (w["block_macs_per_position"] + w["head_macs_per_position"]) \
        + q * k * w["attention_macs_per_pair"]  # noqa: E731

    def counted(run) -> int:
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            run()
        return counter.get_total_flops() // 2  # a multiply-add is two FLOPs

    ids = torch.randint(0, model.config.vocab_size, (1, 20), generator=torch.Generator().manual_seed(0))
    assert counted(lambda: model.forward_unchecked(ids, return_attention=True)) == macs(20, 20)
    cache = model.new_cache()
    with torch.no_grad():
        model.forward_unchecked(ids[:, :19], torch.ones(1, 19, dtype=torch.long), cache=cache)
    assert counted(lambda: model.forward_unchecked(ids[:, 19:], torch.ones(1, 20, dtype=torch.long), cache=cache,
                                                   return_attention=True)) == macs(1, 20)
    assert len(cache) == 20  # the cache now holds every position
    assert w["cache_numbers_per_position"] == 2 * model.config.n_layers * model.config.d_model  # K and V, 4 heads x 32


def test_without_node_the_site_is_built_with_the_pages_code_alone(tmp_path):
    """No node_modules (a reader without Node): the extension builds nothing and raises nothing, copies
    live.js alone (whose failed load then says the site has no live files), and logs no warning (-W)."""
    from types import SimpleNamespace

    live_page = load_script("_ext/live_page.py")
    (tmp_path / "live").mkdir()
    shutil.copyfile(ROOT / "live" / "live.js", tmp_path / "live" / "live.js")
    app = SimpleNamespace(srcdir=str(tmp_path), outdir=str(tmp_path / "html"), builder=SimpleNamespace(format="html"))
    warnings = []
    live_page.logger.warning = lambda *args, **kwargs: warnings.append(args)
    live_page.make_assets(app)
    live_page.copy_assets(app, None)
    assert sorted(p.name for p in (tmp_path / "html" / "_static" / "live").iterdir()) == ["live.js"]
    assert not (tmp_path / "_build").exists() and not warnings
    assert "has no live files" in (ROOT / "live" / "live.js").read_text()
