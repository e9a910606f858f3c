"""MCP in an interactive session: tools join between prompts, calls ask for permission, /mcp shows the servers."""
from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

from agent.core.approval import PermissionAnswer
from agent.engines.scripted import ScriptedEngine
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.ui.slash import SlashRegistry

SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))


def test_tools_join_at_the_next_prompt_and_calls_ask(tmp_path, monkeypatch):
    for name in ("HOME", "AGENT_DATA_DIR", "AGENT_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    proj = tmp_path / "proj"
    (proj / ".agent").mkdir(parents=True)
    (proj / ".agent" / "settings.local.json").write_text(json.dumps(
        {"mcpServers": {"demo": {"command": sys.executable, "args": [SERVER]}}}))
    add = {"tool_calls": [{"name": "mcp__demo__add", "arguments": {"a": 1, "b": 2}}]}
    engine = ScriptedEngine([{"text": "Ready."}, add, {"text": "3."}])
    notes = []
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=engine, notify=notes.append)
    asked = []
    core.ask = lambda request: asked.append((request.tool_name, request.rules)) or PermissionAnswer("once")
    registry = SlashRegistry(proj)
    try:
        core.mcp.manager.wait()
        assert "mcp__demo__add" not in core.agent.tools  # nothing changes until a prompt starts
        assert "tools: add, echo, big, slow, crash, fail (offered from the next prompt)" in registry.run(core, "/mcp").text
        core.run("hello", threading.Event())
        assert "MCP tools offered: mcp__demo__add, mcp__demo__echo, mcp__demo__big, mcp__demo__slow, " \
               "mcp__demo__crash, mcp__demo__fail" in notes
        assert [s["function"]["name"] for s in engine.requests[0].tools][-1] == "mcp__demo__fail"
        assert core.run("add 1 and 2", threading.Event()).text == "3."
        assert asked == [("mcp__demo__add", ["mcp__demo__add"])]
        assert [m["content"] for m in core.session.messages if m["role"] == "tool"] == ["3"]
        # The tool list did not change between the two prompts: the second reuses the first's prefix.
        assert engine.requests[1].tools == engine.requests[0].tools
        text = registry.run(core, "/mcp").text
        assert text.startswith("**MCP servers**\n\n- `demo` (stdio, local) **connected** — ")
        assert "  tools: add, echo, big, slow, crash, fail" in text and "next prompt" not in text
    finally:
        core.close()
    assert core.mcp.manager.servers["demo"].client is None  # stopped with the session
