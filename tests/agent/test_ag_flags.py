"""--no-speculation / --no-constrained-tools and their settings ("speculation", "constrainedTools"),
through the CLI, the local engine and `agent eval`."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import build_parser, decoding_switches
from agent.engines import make_engine
from runtime.api import Request, Sampling

REPO = Path(__file__).resolve().parents[2]
TOOLS = [{"type": "function", "function": {"name": "Read", "description": "Read a file",
                                          "parameters": {"type": "object", "properties": {"file_path": {"type": "string"}},
                                                         "required": ["file_path"]}}}]


def settings_file(path: Path, data: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))
    return path


def test_flags_and_settings_turn_the_switches_off(tmp_path):
    parse = build_parser().parse_args
    assert decoding_switches(parse(["-p", "x"]), []) == (True, True)
    assert decoding_switches(parse(["-p", "x", "--no-speculation"]), []) == (False, True)
    assert decoding_switches(parse(["-p", "x", "--no-constrained-tools"]), []) == (True, False)
    local = settings_file(tmp_path / "local.json", {"constrainedTools": False})
    shared = settings_file(tmp_path / "shared.json", {"constrainedTools": True, "speculation": False})
    broken = tmp_path / "broken.json"
    broken.write_text("{")
    # Highest precedence first: local's false wins over shared's true; shared's speculation applies.
    assert decoding_switches(parse(["-p", "x"]), [local, broken, shared]) == (False, False)
    assert decoding_switches(parse(["-p", "x"]), [settings_file(tmp_path / "bad.json", {"speculation": "no"})]) == (True, True)


def test_local_engine_switch_overrides_the_request(tiny_gguf_path, tmp_path):
    def grammars_compiled(**options) -> bool:
        engine = make_engine("local", model=str(tiny_gguf_path), cache_dir=tmp_path / "cache", threads=1,
                             prefix_cache_bytes=0, **options)
        list(engine.stream(Request("s", [{"role": "user", "content": "hi"}], TOOLS, Sampling(max_tokens=2))))
        return bool(engine.grammars._futures)  # a constraint compiles the tools' grammar; none without one

    off = grammars_compiled(constrained_tools=False)
    on = grammars_compiled()
    assert on and not off


def test_headless_accepts_the_flags_on_the_local_engine(tiny_gguf_path, tmp_path):
    home = tmp_path / "home"
    (proj := tmp_path / "proj").mkdir()
    settings_file(proj / ".agent" / "settings.json", {"constrainedTools": False, "speculation": False})
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "agenthome"),
           "HOME": str(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "PYTHONPATH": str(REPO),
           "AGENT_CACHE_DIR": str(tmp_path / "cache"), "AGENT_PREFIX_CACHE_BYTES": "0"}
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "hi", "--model", str(tiny_gguf_path), "--max-turns", "1",
                        "--no-constrained-tools", "--no-speculation", "--output-format", "json"],
                       cwd=proj, env=env, capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    assert r.returncode in (0, 1), r.stderr  # 1: the random model may run out of turns; no usage error
    assert "unexpected error" not in r.stderr and "unrecognized arguments" not in r.stderr
    assert json.loads(r.stdout)["num_turns"] >= 1


def test_eval_passes_the_switches_to_every_run(tmp_path):
    from agent.eval_cmd import run_eval

    tasks = sorted(p.name for p in (REPO / "evals" / "tasks").iterdir() if (p / "task.yaml").is_file())
    if not tasks:
        pytest.skip("no eval tasks in this checkout")
    code = run_eval(["--engine", "scripted", "--tasks", tasks[0], "--out", str(tmp_path / "run"),
                     "--no-speculation", "--no-constrained-tools"])
    report = json.loads((tmp_path / "run" / "report.json").read_text())
    assert report["meta"]["extra_args"] == ["--no-speculation", "--no-constrained-tools"]
    assert code == 0 and report["summary"]["passed_tries"] == report["summary"]["tries"] == 1


def test_interactive_sessions_honour_the_flags_and_settings(tmp_path, monkeypatch):
    from agent.engines.scripted import ScriptedEngine
    from agent.core.session_core import Interactive, InteractiveOptions

    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_HOME", str(tmp_path / "home"))
    proj = tmp_path / "proj"
    proj.mkdir()

    def requests(**options):
        engine = ScriptedEngine([{"text": "ok"}])
        Interactive(InteractiveOptions(project=proj, engine="scripted", **options), engine=engine).agent.run("hi")
        (req,) = engine.requests
        return req.speculation, req.constrained_tools

    assert requests() == (True, True)
    assert requests(constrained_tools=False, speculation=False) == (False, False)
    settings_file(proj / ".agent" / "settings.json", {"constrainedTools": False})
    assert requests() == (True, False)
    args = build_parser().parse_args(["--no-constrained-tools"])
    assert InteractiveOptions.from_args(args).constrained_tools is False
