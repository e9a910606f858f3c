"""`python -m runtime` (and `agent chat`) as a real subprocess on the tiny model."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_one_shot_prompt_streams_reply_and_stats(tiny_gguf_path, tmp_path):
    env = {**os.environ, "AGENT_CACHE_DIR": str(tmp_path)}
    proc = subprocess.run([sys.executable, "-m", "runtime", "--model", str(tiny_gguf_path), "-p", "hello",
                           "--max-tokens", "5", "--stats"], capture_output=True, text=True, env=env, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "loaded from GGUF" in proc.stderr
    assert "generated 5;" in proc.stderr and "reused 0" in proc.stderr


def test_missing_model_is_one_line_error(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "agent", "chat", "--model", str(tmp_path / "nope.gguf"), "-p", "x"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1
    assert len(proc.stderr.strip().splitlines()) == 1 and "nope.gguf" in proc.stderr


@pytest.mark.parametrize("flag, value, message", [
    ("--max-tokens", "0", "argument --max-tokens: '0' is not a whole number from 1 to 1048576"),
    ("--top-p", "0", "argument --top-p: '0' is not a number above 0 to 1"),
    ("--top-p", "1.5", "argument --top-p: '1.5' is not a number above 0 to 1"),
    ("--temperature", "nan", "argument --temperature: 'nan' is not a number from 0 to 100"),
    ("--temperature", "-1", "argument --temperature: '-1' is not a number from 0 to 100"),
    ("--threads", "0", "argument --threads: '0' is not a whole number from 1 to 1024"),
    ("--top-k", "1.5", "argument --top-k: '1.5' is not a whole number from 0 to 1048576"),
    ("--seed", "-2", "argument --seed: '-2' is not a whole number from 0 to 9223372036854775807"),
])
def test_numeric_flags_are_one_line_errors(flag, value, message):
    r = subprocess.run([sys.executable, "-m", "runtime", f"{flag}={value}", "-p", "hi"], capture_output=True, text=True,
                       timeout=60, cwd=REPO)
    assert (r.returncode, r.stdout) == (2, "")
    assert r.stderr == f"agent chat: {message} (agent chat --help lists the flags)\n"
