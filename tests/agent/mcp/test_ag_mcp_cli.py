"""`agent mcp ...` and headless runs with MCP servers, through real `python -m agent` processes and the demo server."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))


@pytest.fixture
def env(tmp_path):
    home = tmp_path / "userhome"
    home.mkdir()
    return {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "agenthome"),
            "HOME": str(home), "CLAUDE_CONFIG_DIR": str(tmp_path / "claude"), "PYTHONPATH": str(REPO),
            "DEMO_GREETING": "hello "}


@pytest.fixture
def proj(tmp_path):
    p = tmp_path / "proj"
    p.mkdir()
    return p


def agent(proj, env, *args, timeout=120):
    return subprocess.run([sys.executable, "-m", "agent", *args], cwd=proj, env=env, capture_output=True, text=True,
                          stdin=subprocess.DEVNULL, timeout=timeout)


def test_add_list_get_remove(proj, env, tmp_path):
    r = agent(proj, env, "mcp", "add", "demo", "-e", "DEMO_GREETING=${DEMO_GREETING:-none}", "--", sys.executable, SERVER)
    assert r.returncode == 0, r.stderr
    local = proj / ".agent" / "settings.local.json"
    assert json.loads(local.read_text())["mcpServers"] == {"demo": {
        "type": "stdio", "command": sys.executable, "args": [SERVER], "env": {"DEMO_GREETING": "${DEMO_GREETING:-none}"}}}
    r = agent(proj, env, "mcp", "add", "-s", "user", "-t", "http", "-H", "Authorization: Bearer ${TOKEN}", "web",
              "http://127.0.0.1:9/mcp")
    assert (r.returncode, r.stderr.strip()) == (1, f"agent: MCP server 'web' ({tmp_path / 'agenthome' / 'settings.json'})"
                                                   ": environment variable TOKEN is not set")
    r = agent(proj, env, "mcp", "list")
    assert (r.returncode, r.stdout) == (0, f"demo: {sys.executable} {SERVER} (stdio, local) - connected\n")
    r = agent(proj, env, "mcp", "get", "demo")
    assert r.returncode == 0 and "  Tools: add, echo, big, slow, crash, fail\n" in r.stdout
    assert agent(proj, env, "mcp", "remove", "demo").returncode == 0
    assert json.loads(local.read_text())["mcpServers"] == {}
    r = agent(proj, env, "mcp", "remove", "demo")
    assert (r.returncode, r.stderr) == (1, "agent: no MCP server named 'demo' in local or project or user config\n")


SCRIPT = [{"text": "Adding.", "tool_calls": [{"name": "mcp__demo__add", "arguments": {"a": 2, "b": 40}}]},
          {"text": "Greeting.", "tool_calls": [{"name": "mcp__demo__echo", "arguments": {"text": "you"}}]},
          {"text": "It is 42."}]


def test_project_server_needs_approval_then_runs_headless(proj, env, tmp_path):
    (proj / ".mcp.json").write_text(json.dumps({"mcpServers": {"demo": {"command": sys.executable, "args": [SERVER]}}}))
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    run = ["-p", "add", "--output-format", "stream-json", "--engine", "scripted", "--script", str(script),
           "--allowedTools", "mcp__demo"]
    r = agent(proj, env, *run)
    init = json.loads(r.stdout.splitlines()[0])
    assert init["mcp_servers"] == [{"name": "demo", "status": "needs-approval"}]
    assert "mcp__demo__add" not in init["tools"]
    assert "MCP servers from the repository need your approval before they start: demo; use agent mcp approve NAME" \
        in r.stderr
    r = agent(proj, env, "mcp", "approve", "demo")
    assert r.returncode == 0, r.stderr
    log = tmp_path / "hook.log"
    hook = {"matcher": "mcp__demo__a.*", "hooks": [{"type": "command", "command": f"cat >> {log}; echo >> {log}"}]}
    (proj / ".agent" / "settings.json").write_text(json.dumps({"hooks": {"PreToolUse": [hook]}}))
    assert json.loads((proj / ".agent" / "settings.local.json").read_text()) == {"enabledMcpjsonServers": ["demo"]}
    r = agent(proj, env, *run)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert lines[0]["mcp_servers"] == [{"name": "demo", "status": "connected"}]
    assert "mcp__demo__add" in lines[0]["tools"]
    results = [b for line in lines if line["type"] == "user" for b in line["message"]["content"]]
    assert [(b["content"], b["is_error"]) for b in results] == [("42", False), ("hello you", False)]
    assert lines[-1]["result"] == "It is 42."
    seen = [json.loads(x) for x in log.read_text().splitlines() if x.strip()]  # hooks match MCP tool names
    assert [(h["tool_name"], h["tool_input"]) for h in seen] == [("mcp__demo__add", {"a": 2, "b": 40})]
