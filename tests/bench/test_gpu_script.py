"""bench/gpu_table.sh on the CPU: the GPU script's compiled rows, run here before a lent GPU runs them. A file
of its own, not with the other real compiles (test_bench_compiles.py), so that the full run's last tier can
give it to the other worker (scripts/test.sh)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from helpers import ROW, TINY

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow  # 1-3 minutes: each dtype's compiled contenders compile, transformers' recipe among them
def test_the_gpu_script_runs_both_dtypes_with_both_anchors_on_the_cpu_here():
    """bench/gpu_table.sh is run only where a GPU is lent; DEVICE=cpu runs its commands here, so that what a
    lent GPU's few minutes run has run before: both dtypes, the compiled rows, transformers' compiled recipe
    (with a static cache, generate compiling its own one-token call: the fix for the crash on CUDA)."""
    result = subprocess.run(["bash", str(ROOT / "bench" / "gpu_table.sh"), *TINY],
                            capture_output=True, text=True, timeout=900,
                            env={**os.environ, "DEVICE": "cpu", "PYTHON": sys.executable, "PER_DTYPE_S": "600"})
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert out.count("== ") == 2 and "== float32 on cpu" in out and "== bfloat16 on cpu" in out
    for name in ("fast path, torch.compile", "transformers, static cache, torch.compile", "same, torch.compile"):
        assert len(re.findall("^ +" + re.escape(name) + " " + ROW, out, re.M)) == 2, name
    assert "same tokens from all of them: True" in out  # float32; bfloat16 counts agreeing tokens instead
