"""End to end with the real default model on the local engine (slow): a question that needs a file read."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(importlib.util.find_spec("runtime.engine") is None,
                                 reason="runtime.engine (the local engine) is not built yet")]


def test_real_model_reads_a_file_to_answer(tmp_path, default_gguf_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "config.ini").write_text("[server]\nhost = example.org\nport = 48213\n")
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "ah"),
           "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "ch"), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "agent", "-p",
                        "Read the file config.ini and tell me the server port number.",
                        "--output-format", "json", "--max-turns", "6", "--model", str(default_gguf_path)],
                       cwd=proj, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["subtype"] == "success" and "48213" in res["result"], res
    (transcript,) = (tmp_path / "data" / "projects").glob(f"*/{res['session_id']}.jsonl")
    calls = [c["function"] for line in transcript.read_text().splitlines() for c in
             (json.loads(line).get("message") or {}).get("tool_calls") or []]
    assert any(c["name"] == "Read" and c["arguments"]["file_path"].endswith("config.ini") for c in calls), calls
    # The KV invariant on the real engine: no turn re-prefills what an earlier turn computed.
    turns = res["turn_usage"]
    assert len(turns) >= 2
    for prev, cur in zip(turns, turns[1:]):
        assert cur["reused_tokens"] >= prev["prompt_tokens"], turns
