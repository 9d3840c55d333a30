"""The benchmarks still run (their --tiny mode): speed is reported there, never asserted here."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.parametrize("command, expected", [
    # 32 new tokens, not 128: the uncached loop's cost grows with the square of the length
    (["generate_speed.py", "--tiny", "--repeats", "1", "--new-tokens", "32"], "same tokens from all of them: True"),
    (["weight_layout.py", "--tiny", "--rounds", "1"], "of the bound"),
])
def test_benchmark_runs_in_tiny_mode(command, expected):
    script, *args = command
    result = subprocess.run([sys.executable, str(ROOT / "bench" / script), *args],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr[-2000:]
    assert expected in result.stdout
