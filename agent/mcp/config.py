"""MCP server configuration in Claude Code's formats: the project's `.mcp.json` and `mcpServers` in settings.

An entry is {"type": "stdio", "command", "args", "env"} (type optional when there is a command),
{"type": "http", "url", "headers"} (streamable HTTP) or {"type": "sse", "url", "headers"}. Strings may use
${VAR} and ${VAR:-default}. Servers from the repository (.mcp.json, the project's shared settings.json) need the
user's approval once, remembered like Claude Code's enabledMcpjsonServers / disabledMcpjsonServers /
enableAllProjectMcpServers in .agent/settings.local.json.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Mapping

TRANSPORTS = ("stdio", "http", "sse")
TRANSPORT_ALIASES = {"streamable-http": "http", "streamableHttp": "http"}
NAME = re.compile(r"[A-Za-z0-9_-]+\Z")
_VAR = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\}")


class McpConfigError(ValueError):
    """A server entry that cannot be used; one line naming the server and its file."""


@dataclass(frozen=True)
class ServerConfig:
    name: str
    transport: str  # stdio | http | sse
    scope: str  # project (from the repository: needs approval), local (settings.local.json) or user
    source: str  # the file it came from
    command: str = ""
    args: tuple[str, ...] = ()
    env: dict[str, str] = field(default_factory=dict)
    url: str = ""
    headers: dict[str, str] = field(default_factory=dict)

    def describe(self) -> str:
        """`command args` or the URL, as `agent mcp list` shows it."""
        return " ".join([self.command, *self.args]) if self.transport == "stdio" else self.url


@dataclass
class McpSettings:
    """What the settings files say about MCP (parsed by agent.settings.Settings)."""
    servers: dict[str, tuple[Any, str]] = field(default_factory=dict)  # name -> (raw entry, file)
    enabled: list[str] = field(default_factory=list)  # enabledMcpjsonServers
    disabled: list[str] = field(default_factory=list)  # disabledMcpjsonServers
    enable_all_project: bool = False  # enableAllProjectMcpServers


def expand(text: str, environ: Mapping[str, str]) -> str:
    """${VAR} and ${VAR:-default}; an unset variable without a default is an error."""
    def sub(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name in environ:
            return environ[name]
        if default is not None:
            return default
        raise McpConfigError(f"environment variable {name} is not set")
    return _VAR.sub(sub, text)


def parse_server(name: str, entry: Any, scope: str, source: str, environ: Mapping[str, str]) -> ServerConfig:
    """One entry as written in .mcp.json or settings; McpConfigError (one line) when it is unusable."""
    where = f"MCP server {name!r} ({source})"
    if not NAME.match(name):
        raise McpConfigError(f"{where}: a name may hold only letters, digits, _ and -")
    if not isinstance(entry, dict):
        raise McpConfigError(f"{where}: expected an object")
    kind = entry.get("type") or ("stdio" if "command" in entry else "http" if "url" in entry else None)
    kind = TRANSPORT_ALIASES.get(kind, kind)
    if kind not in TRANSPORTS:
        raise McpConfigError(f"{where}: type must be one of {', '.join(TRANSPORTS)}, got {entry.get('type')!r}")
    try:
        if kind == "stdio":
            command, args, env = entry.get("command"), entry.get("args", []), entry.get("env", {})
            if not isinstance(command, str) or not command.strip():
                raise McpConfigError("a stdio server needs a command")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise McpConfigError("args must be a list of strings")
            return ServerConfig(name, kind, scope, source, command=expand(command, environ),
                                args=tuple(expand(a, environ) for a in args), env=_strings(env, "env", environ))
        url = entry.get("url")
        if not isinstance(url, str) or not re.match(r"https?://", url):
            raise McpConfigError(f"an {kind} server needs an http(s) url")
        return ServerConfig(name, kind, scope, source, url=expand(url, environ),
                            headers=_strings(entry.get("headers", {}), "headers", environ))
    except McpConfigError as e:
        if str(e).startswith("MCP server"):
            raise
        raise McpConfigError(f"{where}: {e}") from None


def _strings(value: Any, what: str, environ: Mapping[str, str]) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
        raise McpConfigError(f"{what} must be an object of strings")
    return {k: expand(v, environ) for k, v in value.items()}


def read_mcp_json(project: Path) -> tuple[dict[str, Any], str, list[str]]:
    """The project's .mcp.json: (mcpServers entries, its path, warnings); empty when absent."""
    path = project / ".mcp.json"
    if not path.exists():
        return {}, str(path), []
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        return {}, str(path), [f"ignoring {path}: {e}"]
    servers = data.get("mcpServers") if isinstance(data, dict) else None
    if not isinstance(servers, dict):
        return {}, str(path), [f"ignoring {path}: expected {{\"mcpServers\": {{...}}}}"]
    return servers, str(path), []


def scope_of(source: str, project: Path) -> str:
    """project for files in the repository others wrote (.mcp.json, settings.json), local for settings.local.json."""
    path = Path(source)
    if not path.is_relative_to(project):
        return "user"
    return "local" if path.name == "settings.local.json" else "project"


def collect_servers(project: Path, mcp: McpSettings,
                    environ: Mapping[str, str]) -> tuple[list[ServerConfig], list[str]]:
    """Every configured server (local over project over user for one name), and one-line errors for bad entries."""
    entries, source, errors = read_mcp_json(project)
    found = [(name, entry, src) for name, (entry, src) in mcp.servers.items()]
    found += [(name, entry, source) for name, entry in entries.items()]
    rank = {"local": 0, "project": 1, "user": 2}
    found.sort(key=lambda f: rank[scope_of(f[2], project)])  # stable: settings before .mcp.json within a scope
    servers: dict[str, ServerConfig] = {}
    for name, entry, src in found:
        if name in servers:
            continue
        try:
            servers[name] = parse_server(name, entry, scope_of(src, project), src, environ)
        except McpConfigError as e:
            errors.append(str(e))
    return list(servers.values()), errors


def approval(server: ServerConfig, mcp: McpSettings) -> str:
    """approved, denied or pending (a repository server the user has not answered for yet)."""
    if server.scope != "project":
        return "approved"
    if server.name in mcp.disabled:
        return "denied"
    return "approved" if mcp.enable_all_project or server.name in mcp.enabled else "pending"
