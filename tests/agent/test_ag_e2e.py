"""End to end through `python -m agent`: the real default model answering from a file read (slow), and the
core tool set that models under 2B are offered (fast, with a tiny random GGUF)."""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from agent.core.context import tools_for_profile
from agent.core.profile import ProfileError, choose_profile, model_parameters
from runtime.config import ModelConfig

REPO = Path(__file__).resolve().parents[2]

needs_engine = pytest.mark.skipif(importlib.util.find_spec("runtime.engine") is None,
                                  reason="runtime.engine (the local engine) is not built yet")
ALL_TOOLS = ["Read", "Write", "Edit", "MultiEdit", "Bash", "BashOutput", "KillShell", "Grep", "Glob", "LS", "TodoWrite", "WebFetch", "Task", "Skill",
             "ExitPlanMode"]
CORE = ["Read", "Write", "Edit", "Bash", "Grep", "Glob", "Task", "Skill"]


def isolated_env(tmp_path: Path) -> dict:
    return {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "ah"),
            "HOME": str(tmp_path), "CLAUDE_CONFIG_DIR": str(tmp_path / "ch"), "PYTHONPATH": str(REPO)}


def run_agent(proj: Path, env: dict, *args: str, timeout: float) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=proj, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


@pytest.mark.slow
@needs_engine
def test_real_model_reads_a_file_to_answer(tmp_path, small_gguf_path):
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "config.ini").write_text("[server]\nhost = example.org\nport = 48213\n")
    r = run_agent(proj, isolated_env(tmp_path), "-p", "Read the file config.ini and tell me the server port number.",
                  "--output-format", "json", "--max-turns", "6", "--model", str(small_gguf_path), timeout=900)
    assert r.returncode == 0, r.stderr[-2000:]
    res = json.loads(r.stdout)
    assert res["subtype"] == "success" and "48213" in res["result"], res
    (transcript,) = (tmp_path / "data" / "projects").glob(f"*/{res['session_id']}.jsonl")
    # The small profile's pipeline attaches the file the request names and answers from it in one text-only turn.
    first_user = next(json.loads(line)["message"]["content"] for line in transcript.read_text().splitlines()
                      if (json.loads(line).get("message") or {}).get("role") == "user")
    assert '<attached-file path="config.ini">\n     1\t[server]' in first_user, first_user[-500:]
    assert len(res["turn_usage"]) == 1, res["turn_usage"]  # no tool call was needed


def offered_tools(proj: Path, env: dict, *args: str, prompt: str = "hi") -> list[str]:
    r = run_agent(proj, env, "-p", prompt, "--output-format", "stream-json", "--max-turns", "1", *args, timeout=300)
    init = json.loads(r.stdout.splitlines()[0])
    assert init["subtype"] == "init", r.stdout[:500] + r.stderr[-500:]
    return init["tools"]


@needs_engine
def test_small_models_are_offered_the_core_tool_set(tmp_path, make_tiny_gguf):
    proj = tmp_path / "proj"
    proj.mkdir()
    env = {**isolated_env(tmp_path), "AGENT_CACHE_DIR": str(tmp_path / "cache")}
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "hello"}]))
    # An engine of unknown size (scripted, or an HTTP server) gets every tool, in the offered order.
    every = offered_tools(proj, env, "--engine", "scripted", "--script", str(script))
    assert sorted(every) == sorted(ALL_TOOLS)
    core = [t for t in every if t in CORE and t not in ("Skill", "Task")]  # Skill with a skill, Task when asked for
    tiny = str(make_tiny_gguf(tmp_path / "tiny.gguf", vocab="bytes"))
    assert offered_tools(proj, env, "--model", tiny) == core
    assert offered_tools(proj, env, "--model", tiny, "--permission-mode", "plan") == [
        t for t in every if t in CORE + ["ExitPlanMode"] and t not in ("Skill", "Task")]
    assert offered_tools(proj, env, "--model", tiny, "--disallowedTools", "Bash") == [t for t in core if t != "Bash"]
    skill = proj / ".claude" / "skills" / "deploy" / "SKILL.md"
    skill.parent.mkdir(parents=True)
    skill.write_text("---\nname: deploy\ndescription: Deploy the app\n---\nRun make deploy.\n")
    assert offered_tools(proj, env, "--model", tiny) == [t for t in every if t in CORE and t != "Task"]
    asks = "Have a subagent find the config file."
    assert offered_tools(proj, env, "--model", tiny, prompt=asks) == [t for t in every if t in CORE]


def qwen2(hidden, ffn, layers, heads, head_dim):
    return ModelConfig(arch="qwen2", vocab_size=151936, hidden_size=hidden, intermediate_size=ffn, num_layers=layers,
                       num_heads=heads, num_kv_heads=2, head_dim=head_dim)


def test_parameter_count_matches_the_published_sizes():
    # Qwen2.5-Coder-0.5B: 0.49B parameters; 1.5B: 1.54B (the model cards' figures).
    small = SimpleNamespace(model=SimpleNamespace(config=qwen2(896, 4864, 24, 14, 64)))
    large = SimpleNamespace(model=SimpleNamespace(config=qwen2(1536, 8960, 28, 12, 128)))
    assert round(model_parameters(small) / 1e9, 2) == 0.49
    assert round(model_parameters(large) / 1e9, 2) == 1.54
    assert model_parameters(SimpleNamespace(name="openai")) is None


def test_core_tool_rule_by_size_and_mode():
    import tools
    from agent.harness.tools import harness_tools
    every = tools.builtin_tools() + harness_tools()
    names = lambda ts: [t.name for t in ts]  # noqa: E731
    pick = lambda size, mode, ts=every: names(tools_for_profile(ts, choose_profile(size), mode))  # noqa: E731
    assert pick(493_961_216, "default") == CORE
    assert pick(493_961_216, "plan") == CORE + ["ExitPlanMode"]
    assert pick(493_961_216, "default", every[::-1]) == CORE[::-1]  # the given order is kept
    assert pick(1_543_569_408, "default") == CORE  # the 1.5B too (docs/EVALS.md, E3)
    assert pick(7_615_616_512, "default") == ALL_TOOLS
    assert pick(None, "acceptEdits") == ALL_TOOLS


def test_profiles_are_data_chosen_once_and_overridable_from_settings():
    small, default = choose_profile(493_961_216), choose_profile(None)
    assert (small.name, small.read_window, small.request_reminder, small.env_project_files) == ("small", 200, True, True)
    assert (default.name, default.read_window, default.request_reminder, default.core_tools) == ("default", None, False, None)
    assert choose_profile(None, "small") == small  # a remote model may ask for the small-model shaping
    assert choose_profile(493_961_216, {"read_window": 400}).read_window == 400
    assert choose_profile(493_961_216, {"name": "default", "request_reminder": True}).core_tools is None
    for bad, message in (("tiny", "modelProfile: no profile named 'tiny' (known: small, default)"),
                         ({"read_windw": 3}, "modelProfile: unknown profile field(s) read_windw"),
                         ({"task_tool": "sometimes"}, "profile small: task_tool must be one of always, when_user_skills, when_asked")):
        with pytest.raises(ProfileError) as e:
            choose_profile(493_961_216, bad)
        assert str(e.value) == message
