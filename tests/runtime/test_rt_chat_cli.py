"""`python -m runtime` (and `agent chat`) as a real subprocess on the tiny model."""
import os
import subprocess
import sys


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
