"""--no-speculation / --no-constrained-tools and their settings ("speculation", "constrainedTools"),
through the CLI, the local engine and `agent eval`."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.cli import build_parser, session_options
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
    from agent.paths import Locations
    from agent.settings import Settings
    parse = build_parser().parse_args
    options = [session_options(parse(argv), headless=True) for argv in
               (["-p", "x"], ["-p", "x", "--no-speculation"], ["-p", "x", "--no-constrained-tools"])]
    assert [(o.speculation, o.constrained_tools) for o in options] == [(True, True), (False, True), (True, False)]
    proj, home = tmp_path / "proj", tmp_path / "home"
    where = Locations(home, home / ".agent", home / ".claude", tmp_path / "data")
    settings_file(proj / ".agent/settings.local.json", {"constrainedTools": False})
    settings_file(proj / ".agent/settings.json", {"constrainedTools": True, "speculation": False})
    (proj / ".claude").mkdir()
    (proj / ".claude/settings.json").write_text("{")
    # Highest precedence first: local's false wins over shared's true; shared's speculation applies.
    s = Settings.load(proj, where)
    assert (s.speculation, s.constrained_tools) == (False, False)
    settings_file(home / ".agent/settings.json", {"speculation": "no"})
    (proj / ".agent/settings.json").unlink()
    s = Settings.load(proj, where)
    assert (s.speculation, s.constrained_tools) == (True, False)
    assert s.warnings[-1] == f"settings: {home / '.agent/settings.json'}: speculation must be true or false; ignored"


def test_interactive_sessions_honour_the_flags_and_settings(tmp_path, monkeypatch):
    from agent.engines.scripted import ScriptedEngine
    from agent.session.builder import build_session
    from agent.session.options import SessionOptions

    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    monkeypatch.setenv("AGENT_HOME", str(tmp_path / "home"))
    proj = tmp_path / "proj"
    proj.mkdir()

    def requests(**options):
        engine = ScriptedEngine([{"text": "ok"}])
        build_session(SessionOptions(project=proj, engine="scripted", **options), engine=engine).agent.run("hi")
        (req,) = engine.requests
        return req.speculation, req.constrained_tools

    assert requests() == (True, True)
    assert requests(constrained_tools=False, speculation=False) == (False, False)
    settings_file(proj / ".agent" / "settings.json", {"constrainedTools": False})
    assert requests() == (True, False)
    args = build_parser().parse_args(["--no-constrained-tools"])
    assert session_options(args, headless=False).constrained_tools is False
