"""The lowest transformers the package declares (pyproject.toml: smollm2 = transformers>=4.48) runs what a
learner on an older install (Colab's preinstalled one, say) runs: chapters 1 and 6 (SmolLM2's tokenizer,
its chat turn with return_dict=True, transformers' generate beside ours) give their stored outputs, and
the guide's chat snippet prints its answer. transformers 4.48.0, with the tokenizers and huggingface_hub
it accepts, is installed with pip into _build/lowest-versions/ (once; then reused) and put first on the
import path; everything else is the course's environment."""

import os
import re
import subprocess
import sys

import pytest
from helpers import ROOT

pytestmark = pytest.mark.slow  # about 3 minutes: two chapters executed, and a pip install the first time

LOWEST = ["transformers==4.48.0", "tokenizers>=0.21,<0.22", "huggingface_hub>=0.24,<1.0"]
OVERLAY = ROOT / "_build" / "lowest-versions"


@pytest.fixture(scope="module")
def overlay() -> dict:
    """The environment with transformers 4.48.0 first on the import path."""
    stamp = OVERLAY / "installed.txt"
    if not stamp.is_file() or stamp.read_text() != "\n".join(LOWEST):
        done = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--upgrade",
                               "--target", str(OVERLAY), *LOWEST], capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            message = f"pip could not install {LOWEST}:\n{done.stderr[-2000:]}"
            if os.environ.get("CI", "").lower() == "true":
                pytest.fail(message)
            pytest.skip(message)
        stamp.write_text("\n".join(LOWEST))
    return {**os.environ, "PYTHONPATH": str(OVERLAY), "PYTHONHASHSEED": "0", "TQDM_DISABLE": "1"}


def test_the_lowest_declared_transformers_is_what_the_package_declares():
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert re.search(r'smollm2 = \["gguf>=[\d.]+", "transformers>=4\.48"\]', pyproject)


def test_chapters_1_and_6_give_their_stored_outputs_on_transformers_4_48(overlay):
    version = subprocess.run([sys.executable, "-c", "import transformers; print(transformers.__version__)"],
                             env=overlay, capture_output=True, text=True, timeout=120).stdout.strip()
    assert version == "4.48.0"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval",
                           "--nbval-sanitize-with", "tests/lowest_versions_sanitize.cfg",
                           "chapters/01_chain_rule.ipynb", "chapters/06_termination.ipynb"],
                          cwd=ROOT, env=overlay, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stdout[-6000:]


def test_the_guides_chat_snippet_answers_on_transformers_4_48(overlay):
    guide = (ROOT / "guide" / "contributors" / "library.md").read_text()
    snippet = next(block for block in re.findall(r"```python\n(.*?)```", guide, re.S) if "apply_chat_template" in block)
    done = subprocess.run([sys.executable, "-c", snippet], cwd=ROOT, env=overlay, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip().endswith("The capital of France is Paris.<|im_end|>"), done.stdout
