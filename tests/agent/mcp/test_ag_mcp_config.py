"""MCP configuration: Claude Code's entry shapes, ${VAR} expansion, scopes and precedence, approval."""
from __future__ import annotations

import json

import pytest

from agent.paths import Locations
from agent.settings import Environment, Settings
from agent.mcp.config import McpConfigError, McpSettings, ServerConfig, approval, collect_servers, expand, parse_server


def test_expand_variables_and_defaults():
    env = {"HOME": "/home/me", "EMPTY": ""}
    assert expand("${HOME}/x ${MISSING:-fallback} ${EMPTY:-d} $HOME", env) == "/home/me/x fallback  $HOME"
    with pytest.raises(McpConfigError, match="environment variable NOPE is not set"):
        expand("${NOPE}", env)


def test_entries_of_each_transport():
    env = {"TOKEN": "t0k"}
    assert parse_server("fs", {"command": "npx", "args": ["-y", "server", "${PWD:-.}"], "env": {"K": "${TOKEN}"}},
                        "user", "u.json", env) == \
        ServerConfig("fs", "stdio", "user", "u.json", command="npx", args=("-y", "server", "."), env={"K": "t0k"})
    assert parse_server("web", {"type": "http", "url": "https://x/mcp", "headers": {"A": "Bearer ${TOKEN}"}},
                        "local", "l.json", env) == \
        ServerConfig("web", "http", "local", "l.json", url="https://x/mcp", headers={"A": "Bearer t0k"})
    assert parse_server("old", {"type": "sse", "url": "http://h/sse"}, "user", "u.json", env).transport == "sse"


@pytest.mark.parametrize("name,entry,message", [
    ("a b", {"command": "x"}, "MCP server 'a b' (f.json): a name may hold only letters, digits, _ and -"),
    ("s", ["x"], "MCP server 's' (f.json): expected an object"),
    ("s", {"type": "ws", "url": "ws://x"}, "MCP server 's' (f.json): type must be one of stdio, http, sse, got 'ws'"),
    ("s", {"type": "stdio"}, "MCP server 's' (f.json): a stdio server needs a command"),
    ("s", {"command": "x", "args": "--flag"}, "MCP server 's' (f.json): args must be a list of strings"),
    ("s", {"type": "http", "url": "ftp://x"}, "MCP server 's' (f.json): an http server needs an http(s) url"),
    ("s", {"command": "x", "env": {"A": "${UNSET}"}}, "MCP server 's' (f.json): environment variable UNSET is not set"),
])
def test_bad_entries_are_one_line_errors(name, entry, message):
    with pytest.raises(McpConfigError) as e:
        parse_server(name, entry, "user", "f.json", {})
    assert str(e.value) == message


def test_scopes_precedence_and_approval(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"shared": {"command": "from-repo"},
                                                                  "both": {"command": "repo-both"}}}))
    local, user = str(project / ".agent" / "settings.local.json"), str(tmp_path / "home" / "settings.json")
    mcp = McpSettings({"both": ({"command": "local-both"}, local), "mine": ({"command": "u"}, user)})
    servers, errors = collect_servers(project, mcp, {})
    assert errors == []
    assert [(s.name, s.scope, s.command) for s in servers] == \
        [("both", "local", "local-both"), ("shared", "project", "from-repo"), ("mine", "user", "u")]
    shared = servers[1]
    assert [approval(s, mcp) for s in servers] == ["approved", "pending", "approved"]
    assert approval(shared, McpSettings(enabled=["shared"])) == "approved"
    assert approval(shared, McpSettings(enabled=["shared"], disabled=["shared"])) == "denied"
    assert approval(shared, McpSettings(enable_all_project=True)) == "approved"


def test_a_broken_mcp_json_is_one_warning(tmp_path):
    (tmp_path / ".mcp.json").write_text("{not json")
    servers, errors = collect_servers(tmp_path, McpSettings(), {})
    assert servers == [] and len(errors) == 1 and errors[0].startswith(f"ignoring {tmp_path / '.mcp.json'}: ")


def test_settings_files_merge_servers_by_name_and_union_the_answers(tmp_path):
    project, home = tmp_path / "proj", tmp_path / "home"
    (project / ".agent").mkdir(parents=True)
    (home / ".agent").mkdir(parents=True)
    (project / ".agent" / "settings.local.json").write_text(json.dumps({
        "mcpServers": {"a": {"command": "local-a"}}, "enabledMcpjsonServers": ["x"], "enableAllProjectMcpServers": True}))
    (home / ".agent" / "settings.json").write_text(json.dumps({
        "mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}, "enabledMcpjsonServers": ["y"],
        "disabledMcpjsonServers": "z"}))
    settings = Settings.load(project, Locations.from_env({"HOME": str(home), "AGENT_DATA_DIR": str(tmp_path / "d")}))
    local, user = str(project / ".agent" / "settings.local.json"), str(home / ".agent" / "settings.json")
    assert settings.mcp == McpSettings({"a": ({"command": "local-a"}, local), "b": ({"command": "user-b"}, user)},
                                       ["x", "y"], [], True)
    assert f"settings: {user}: 'disabledMcpjsonServers' must be a list of server names; ignored" in settings.warnings


def test_timeouts_from_the_environment(tmp_path):
    env = Environment.from_env({"HOME": str(tmp_path), "MCP_TIMEOUT": "5000", "MCP_TOOL_TIMEOUT": "soon"})
    assert (env.mcp_startup_timeout_s, env.mcp_tool_timeout_s) == (5.0, 120.0)
    assert env.warnings == ("MCP_TOOL_TIMEOUT must be a number of milliseconds, got 'soon'; using 120000",)
    assert env.variables["MCP_TIMEOUT"] == "5000"
