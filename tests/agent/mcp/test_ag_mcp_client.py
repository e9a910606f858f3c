"""McpHub and McpManager against real servers: the demo MCPServer over stdio, streamable HTTP and SSE, and
the published mcp-server-time."""
from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from agent.mcp.config import McpSettings
from agent.mcp.hub import McpHub
from tools.base import ToolContext

SERVER = str(Path(__file__).with_name("mcp_demo_server.py"))


def stdio_entry(**extra) -> dict:
    return {"command": sys.executable, "args": [SERVER]} | extra


class FakeAgent:
    """Only what adopt() touches: the tool map and schema list of loop.Agent."""
    def __init__(self):
        self.tools, self.schemas = {}, []


@pytest.fixture
def hub_for(tmp_path):
    hubs = []

    def make(servers: dict, **kw) -> McpHub:
        notes = kw.pop("notes", [])
        project = tmp_path / "project"
        project.mkdir(exist_ok=True)
        user_settings = str(tmp_path / "home" / "settings.json")  # user scope: no approval needed
        hub = McpHub(project, McpSettings({n: (e, user_settings) for n, e in servers.items()}),
                     {"PATH": "/usr/bin:/bin", "DEMO_GREETING": "hi "}, notify=notes.append, **kw)
        hubs.append(hub)
        return hub
    yield make
    for hub in hubs:
        hub.close()


def run(tool, args, cancel=None):
    ctx = ToolContext(cwd=Path("."))
    if cancel is not None:
        ctx.cancel = cancel
    return tool.run(args, ctx)


def test_stdio_server_tools_are_offered_and_called(hub_for):
    hub = hub_for({"demo": stdio_entry()})
    hub.manager.wait()
    agent = FakeAgent()
    added = hub.adopt(agent)
    assert [t.name for t in added] == ["mcp__demo__add", "mcp__demo__echo", "mcp__demo__big", "mcp__demo__slow",
                                       "mcp__demo__crash", "mcp__demo__fail"]
    assert agent.schemas[0]["function"]["parameters"]["required"] == ["a", "b"]
    assert hub.adopt(agent) == []  # once per server
    tools = agent.tools
    assert run(tools["mcp__demo__add"], {"a": 2, "b": 3}).content == "5"
    assert run(tools["mcp__demo__echo"], {"text": "there"}).content == "hi there"  # env reaches the server
    failed = run(tools["mcp__demo__fail"], {})
    assert failed.is_error and "fail" in failed.content
    assert hub.init_entries() == [{"name": "demo", "status": "connected"}]


def test_oversized_result_timeout_and_crash_are_one_line_errors(hub_for):
    notes = []
    hub = hub_for({"demo": stdio_entry()}, notes=notes)
    hub.manager.wait()
    agent = FakeAgent()
    hub.adopt(agent)
    big = agent.tools["mcp__demo__big"]
    big.max_result_chars = 1000
    assert run(big, {"n": 5000}).content == \
        "MCP tool big on 'demo' returned 5,000 characters, over the 1,000 limit; ask it for less."
    slow = agent.tools["mcp__demo__slow"]
    slow.timeout_s = 0.5
    result = run(slow, {"seconds": 3})
    assert (result.is_error, result.content) == (True, "MCP tool slow on 'demo' timed out after 0.5s")
    cancel = threading.Event()
    threading.Timer(0.3, cancel.set).start()
    slow.timeout_s = 30
    assert run(slow, {"seconds": 3}, cancel).content == "MCP tool slow on 'demo' was interrupted"
    assert run(agent.tools["mcp__demo__add"], {"a": 1, "b": 1}).content == "2"  # still serving
    crashed = run(agent.tools["mcp__demo__crash"], {})
    assert crashed.is_error and crashed.content.startswith("MCP server 'demo' stopped during the call to crash")
    assert "crashing on purpose" in crashed.content
    assert "\n" not in crashed.content
    after = run(agent.tools["mcp__demo__add"], {"a": 1, "b": 1})
    assert after.is_error and after.content.startswith("MCP server 'demo' is not connected: failed")
    assert any("failed" in n for n in notes)
    hub.reconnect("demo")  # a crashed server can be started again
    hub.manager.wait()
    assert run(agent.tools["mcp__demo__add"], {"a": 1, "b": 1}).content == "2"


def test_a_server_that_does_not_start_fails_alone(hub_for):
    notes = []
    hub = hub_for({"demo": stdio_entry(), "broken": {"command": "/nonexistent/server"},
                   "mute": {"command": sys.executable, "args": ["-c", "import time; time.sleep(60)"]},
                   "bad": {"type": "carrier-pigeon"}}, notes=notes, startup_timeout_s=8)
    t0 = time.monotonic()
    hub.manager.wait()
    assert time.monotonic() - t0 < 14  # in parallel, bounded by the startup timeout
    status = {v.name: (v.status, v.error) for v in hub.views()}
    assert status["demo"] == ("connected", "")
    assert status["broken"] == ("failed", "[Errno 2] No such file or directory: '/nonexistent/server'")
    assert status["mute"] == ("failed", "did not start within 8s")
    assert "bad" not in status
    assert any(n.startswith("MCP server 'bad' (") and "type must be one of stdio, http, sse" in n for n in notes)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def http_server():
    procs = []

    def start(kind: str) -> int:
        port = free_port()
        procs.append(subprocess.Popen([sys.executable, SERVER, kind, str(port)], stdout=subprocess.DEVNULL,
                                      stderr=subprocess.DEVNULL))
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=0.2).close()
                return port
            except OSError:
                time.sleep(0.1)
        raise RuntimeError("the demo server did not listen")
    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


@pytest.mark.parametrize("kind,path,entry_type", [("http", "/mcp", "http"), ("sse", "/sse", "sse")])
def test_http_and_sse_servers(hub_for, http_server, kind, path, entry_type):
    port = http_server(kind)
    hub = hub_for({"web": {"type": entry_type, "url": f"http://127.0.0.1:{port}{path}",
                           "headers": {"X-Token": "${DEMO_GREETING}token"}}})
    hub.manager.wait()
    agent = FakeAgent()
    hub.adopt(agent)
    assert [(v.status, v.error) for v in hub.views()] == [("connected", "")]
    assert run(agent.tools["mcp__web__add"], {"a": 20, "b": 22}).content == "42"


@pytest.mark.skipif(importlib.util.find_spec("mcp_server_time") is None, reason="mcp-server-time is not installed")
def test_published_mcp_server_time(hub_for):
    hub = hub_for({"time": {"command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}})
    hub.manager.wait()
    agent = FakeAgent()
    hub.adopt(agent)
    assert {"mcp__time__get_current_time", "mcp__time__convert_time"} <= set(agent.tools)
    result = run(agent.tools["mcp__time__get_current_time"], {"timezone": "Europe/Paris"})
    assert not result.is_error and '"timezone": "Europe/Paris"' in result.content


def test_repository_servers_wait_for_approval_and_the_answer_is_remembered(tmp_path):
    project = tmp_path / "project"
    project.mkdir()
    (project / ".mcp.json").write_text('{"mcpServers": {"demo": {"command": "%s", "args": ["%s"]}}}'
                                       % (sys.executable, SERVER))
    hub = McpHub(project, McpSettings(), {"PATH": "/usr/bin:/bin"})
    try:
        assert hub.init_entries() == [{"name": "demo", "status": "needs-approval"}]
        assert "**needs-approval**" in hub.command("") and "`/mcp approve NAME`" in hub.command("")
        assert hub.command("approve nope") == "No MCP server named 'nope'; /mcp lists them."
        assert hub.command("approve demo").startswith("MCP server 'demo' approved (remembered in")
        hub.manager.wait()
        assert hub.init_entries() == [{"name": "demo", "status": "connected"}]
        assert "tools: add, echo, big, slow, crash, fail (offered from the next prompt)" in hub.command("")
    finally:
        hub.close()
    local = json.loads((project / ".agent" / "settings.local.json").read_text())
    assert local == {"enabledMcpjsonServers": ["demo"]}
    hub = McpHub(project, McpSettings(enabled=["demo"], disabled=[]), {"PATH": "/usr/bin:/bin"})
    try:
        hub.command("deny demo")
        assert hub.init_entries() == [{"name": "demo", "status": "disabled"}]
    finally:
        hub.close()
    assert json.loads((project / ".agent" / "settings.local.json").read_text()) == \
        {"disabledMcpjsonServers": ["demo"]}


def test_a_tool_with_a_malformed_schema_is_left_out_with_a_warning(hub_for):
    notes = []
    hub = hub_for({"demo": stdio_entry(env={"DEMO_WEIRD": "1"})}, notes=notes)
    hub.manager.wait()
    agent = FakeAgent()
    hub.adopt(agent)
    assert "mcp__demo__weird" not in agent.tools and "mcp__demo__add" in agent.tools
    assert notes == ["MCP server 'demo': tool weird left out: its input schema's properties is not an object"]
