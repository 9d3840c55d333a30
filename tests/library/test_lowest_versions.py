"""The lowest versions the package declares (pyproject.toml: torch>=2.5, and the smollm2 extra's
transformers>=4.48) run what a learner on an older install (Colab's preinstalled one, say) runs: chapters 1,
2 and 6 (SmolLM2's tokenizer, its chat turn with return_dict=True, transformers' generate beside ours) and
the exercise solutions give their stored outputs, and the guide's chat snippet prints its answer.

torch 2.5 is the floor because the decoder's fused attention passes ``enable_gqa`` to
``F.scaled_dot_product_attention``, which torch 2.5 added. Its CPU-only build comes from PyTorch's CPU index
(scripts/torch_cpu.py's INDEX, or TORCH_INDEX) wherever that can be reached: about 175 MB. Where it cannot
(this project's machines and CI reach PyPI alone), the Linux wheel on PyPI is a CUDA build, which imports on
a machine without a GPU only with the NVIDIA libraries it was built against, so those are installed too
(about 3.6 GB, a minute and a half here); triton (used only on a GPU) is not. Sampled text is not compared
(chapter 5): torch.multinomial draws other tokens from the same seed in other versions.

These are installed with pip --no-deps into _build/lowest-versions/ (once; then reused) and put first on
the import path; everything else is the course's environment."""

import os
import re
import shutil
import subprocess
import sys

import urllib.request

import pytest
from helpers import ROOT, load_script

# about 5 minutes: three chapters and the solutions executed, and a pip install the first time
pytestmark = pytest.mark.slow

TORCH_FLOOR = "2.5.1"
# torch 2.5.1's Linux wheel and the NVIDIA libraries its METADATA pins (Requires-Dist), without triton
CUDA_LIBS = ["nvidia-cuda-nvrtc-cu12==12.4.127", "nvidia-cuda-runtime-cu12==12.4.127",
             "nvidia-cuda-cupti-cu12==12.4.127",
             "nvidia-cudnn-cu12==9.1.0.70", "nvidia-cublas-cu12==12.4.5.8", "nvidia-cufft-cu12==11.2.1.3",
             "nvidia-curand-cu12==10.3.5.147", "nvidia-cusolver-cu12==11.6.1.9", "nvidia-cusparse-cu12==12.3.1.170",
             "nvidia-nccl-cu12==2.21.5", "nvidia-nvtx-cu12==12.4.127", "nvidia-nvjitlink-cu12==12.4.127"]
# the package's other declared minimums (pyproject.toml's dependencies and the smollm2 extra), exactly
FLOORS = ["tiktoken==0.7.0", "safetensors==0.4.1", "tqdm==4.60.0", "hypothesis==6.100.0", "gguf==0.16.0"]
# what those old versions need and the course's environment lacks (gguf 0.16 imports sentencepiece; the
# environment's newer one does not)
THEIR_OWN = ["tokenizers>=0.21,<0.22", "huggingface_hub>=0.24,<1.0", "sentencepiece==0.2.0"]
OVERLAY = ROOT / "_build" / "lowest-versions"


def cpu_index() -> str | None:
    """PyTorch's CPU index (TORCH_INDEX, as scripts/setup.sh reads it, else scripts/torch_cpu.py's INDEX) if its
    page for torch can be read, else None."""
    index = os.environ.get("TORCH_INDEX") or load_script("scripts/torch_cpu.py").INDEX
    url = f"{index}/torch/" + ("index.html" if index.startswith("file:") else "")  # as pip reads a file: index
    try:
        with urllib.request.urlopen(url, timeout=15):
            return index
    except (OSError, ValueError):
        return None


def lowest(index: str | None) -> list[str]:
    """pip's arguments for the lowest versions: torch's CPU-only build from INDEX, or without one PyPI's CUDA
    build and the NVIDIA libraries it imports."""
    torch = [f"torch=={TORCH_FLOOR}+cpu", "--extra-index-url", index] if index else [f"torch=={TORCH_FLOOR}",
                                                                                      *CUDA_LIBS]
    return ["transformers==4.48.0", *torch, *FLOORS, *THEIR_OWN]


@pytest.fixture(scope="module")
def overlay(tmp_path_factory) -> dict:
    """The environment with the lowest declared versions first on the import path (installed anew when the
    versions listed change)."""
    stamp = OVERLAY / "installed.txt"
    wanted = lowest(cpu_index())
    if not stamp.is_file() or stamp.read_text() not in ("\n".join(wanted), "\n".join(lowest(None))):
        shutil.rmtree(OVERLAY, ignore_errors=True)  # pip --target --upgrade leaves old versions' metadata behind
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade",
                               "--target", str(OVERLAY), *wanted], capture_output=True, text=True, timeout=1200)
        if done.returncode != 0:
            message = f"pip could not install {wanted}:\n{done.stderr[-2000:]}"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(message)
            pytest.skip(message)
        stamp.write_text("\n".join(wanted))
    # torch 2.5 makes a temporary folder as it is imported (torch/distributed/nn/jit/instantiator.py), which
    # a kernel shut down at once never removes: the processes here keep theirs in a folder of the tests'
    temporary = tmp_path_factory.mktemp("lowest-versions-tmp")
    return {**os.environ, "PYTHONPATH": str(OVERLAY), "PYTHONHASHSEED": "0", "TQDM_DISABLE": "1",
            "TMPDIR": str(temporary)}


def test_the_lowest_declared_versions_are_what_the_package_declares():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'smollm2 = \["gguf>=[\d.]+", "transformers>=4\.48"\]', pyproject)
    assert '"torch>=2.5"' in pyproject and TORCH_FLOOR.startswith("2.5.")
    declared = dict(re.findall(r'"([\w-]+)>=([\d.]+)"', pyproject))
    for pin in FLOORS:  # each floor tested is the one declared (0.10.0 for ">=0.10")
        name, version = pin.split("==")
        assert version == declared[name] or version == declared[name] + ".0", (pin, declared.get(name))
    assert declared["transformers"] == "4.48"  # every extra that names transformers: the one tested here


def test_torch_comes_from_the_cpu_index_where_it_can_be_reached_else_from_pypi_with_its_libraries(tmp_path,
                                                                                                  monkeypatch):
    (tmp_path / "torch").mkdir()
    (tmp_path / "torch" / "index.html").write_text("<a href='torch-2.5.1%2Bcpu-cp311-none-any.whl'>w</a>")
    monkeypatch.setenv("TORCH_INDEX", tmp_path.as_uri())
    index = cpu_index()
    assert index == tmp_path.as_uri()
    assert f"torch=={TORCH_FLOOR}+cpu" in lowest(index) and not set(CUDA_LIBS) & set(lowest(index))
    monkeypatch.setenv("TORCH_INDEX", (tmp_path / "nowhere").as_uri())
    assert cpu_index() is None
    assert f"torch=={TORCH_FLOOR}" in lowest(None) and set(CUDA_LIBS) <= set(lowest(None))


def test_the_overlay_imports_the_lowest_versions(overlay):
    versions = "import torch, transformers; print(torch.__version__, transformers.__version__)"
    done = subprocess.run([sys.executable, "-c", versions],
                          env=overlay, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() in ([f"{TORCH_FLOOR}+cpu", "4.48.0"], [f"{TORCH_FLOOR}+cu124", "4.48.0"]), \
        done.stdout + done.stderr[-2000:]
    versions = "; ".join(f"import {m}" for m in ("tiktoken", "safetensors", "tqdm", "hypothesis", "gguf"))
    done = subprocess.run([sys.executable, "-c", versions + "; from importlib.metadata import version; print("
                           "*(version(p) for p in ('tiktoken', 'safetensors', 'tqdm', 'hypothesis', 'gguf')))"],
                          env=overlay, capture_output=True, text=True, timeout=300)
    assert done.stdout.split() == [pin.split("==")[1] for pin in FLOORS], done.stdout + done.stderr[-2000:]


def test_chapters_and_solutions_give_their_stored_outputs_on_the_lowest_versions(overlay):
    notebooks = ["chapters/01_chain_rule.ipynb", "chapters/02_causal_mask.ipynb", "chapters/06_termination.ipynb",
                 *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "solutions").glob("ch0*.ipynb"))]
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-sanitize-with", "tests/lowest_versions_sanitize.cfg", *notebooks],
                          cwd=ROOT, env=overlay, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-6000:]


def test_the_guides_chat_snippet_answers_on_the_lowest_versions(overlay):
    guide = (ROOT / "guide" / "contributors" / "library.md").read_text()
    snippet = next(block for block in re.findall(r"```python\n(.*?)```", guide, re.S) if "apply_chat_template" in block)
    done = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=overlay, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("The capital of France is Paris.<|im_end|>"), done.stdout
