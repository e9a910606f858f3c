"""`agent mcp add|list|get|remove|approve|deny`, mirroring `claude mcp` (approve/deny answer for .mcp.json servers).

Scopes as Claude Code has them: local (this project, just you: .agent/settings.local.json), project (shared in
the repository: .mcp.json) and user (every project: ~/.agent/settings.json).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Mapping

from agent.mcp.config import McpConfigError, NAME, parse_server
from agent.mcp.hub import McpHub
from agent.mcp.store import remember_choice
from hooks.settings import update_json
from agent.paths import Locations
from agent.settings import Settings

SCOPES = ("local", "project", "user")


def scope_file(scope: str, project: Path, locations: Locations) -> Path:
    return {"local": project / ".agent" / "settings.local.json", "project": project / ".mcp.json",
            "user": locations.agent_home / "settings.json"}[scope]


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="agent mcp", description="Configure and check MCP servers.")
    sub = p.add_subparsers(dest="command", required=True)
    add = sub.add_parser("add", help="add a server: agent mcp add NAME COMMAND [ARGS...] or --transport http NAME URL")
    add.add_argument("-s", "--scope", choices=SCOPES, default="local")
    add.add_argument("-t", "--transport", choices=("stdio", "http", "sse"), default="stdio")
    add.add_argument("-e", "--env", action="append", default=[], metavar="KEY=VALUE")
    add.add_argument("-H", "--header", action="append", default=[], metavar="'Name: value'")
    add.add_argument("name")
    add.add_argument("target", metavar="COMMAND_OR_URL")
    add.add_argument("args", nargs=argparse.REMAINDER)
    sub.add_parser("list", help="every server with its status (each is started to check it)")
    get = sub.add_parser("get", help="one server's configuration, status and tools")
    get.add_argument("name")
    remove = sub.add_parser("remove", help="remove a server")
    remove.add_argument("name")
    remove.add_argument("-s", "--scope", choices=SCOPES, default=None)
    for verb in ("approve", "deny"):
        answer = sub.add_parser(verb, help=f"{verb} a server from the repository's .mcp.json (remembered)")
        answer.add_argument("name")
    return p


def run_mcp(argv: list[str], project: Path, locations: Locations, environ: Mapping[str, str],
            startup_timeout_s: float = 30.0) -> int:
    """The subcommand's exit code; ValueError (one line) for what cannot be done."""
    args = build_parser().parse_args(argv)
    if args.command == "add":
        return _add(args, project, locations, environ)
    if args.command == "remove":
        return _remove(args, project, locations)
    if args.command in ("approve", "deny"):
        print(f"{args.name}: {'approved' if args.command == 'approve' else 'declined'} "
              f"(remembered in {remember_choice(project, args.name, args.command == 'approve')})")
        return 0
    settings = Settings.load(project, locations)
    hub = McpHub(project, settings.mcp, dict(environ) | settings.env, startup_timeout_s=startup_timeout_s)
    try:
        hub.manager.wait()
        views = hub.views()
        for error in hub.errors:
            print(f"error: {error}")
        if args.command == "list":
            if not views and not hub.errors:
                print("No MCP servers configured. Add one with: agent mcp add NAME COMMAND [ARGS...]")
            for v in views:
                print(f"{v.name}: {v.target} ({v.transport}, {v.scope}) - {_status(v.status, v.error)}")
            return 0
        view = next((v for v in views if v.name == args.name), None)
        if view is None:
            raise ValueError(f"no MCP server named {args.name!r}")
        config = hub.manager.servers[view.name].config
        print(f"{view.name}:\n  Scope: {view.scope} ({config.source})\n  Type: {view.transport}")
        if config.transport == "stdio":
            print(f"  Command: {config.command}\n  Args: {' '.join(config.args)}")
            print(f"  Environment: {', '.join(config.env) or '(none)'}")
        else:
            print(f"  URL: {config.url}\n  Headers: {', '.join(config.headers) or '(none)'}")
        print(f"  Status: {_status(view.status, view.error)}\n  Tools: {', '.join(view.tools) or '(none)'}")
        return 0
    finally:
        hub.close()


def _status(status: str, error: str) -> str:
    return {"connected": "connected", "needs-approval": "needs approval (agent mcp approve NAME)",
            "disabled": "declined (agent mcp approve NAME to allow)"}.get(
        status, f"{status}: {error}" if error else status)


def _add(args: argparse.Namespace, project: Path, locations: Locations, environ: Mapping[str, str]) -> int:
    if not NAME.match(args.name):
        raise ValueError(f"invalid server name {args.name!r}: use letters, digits, _ and -")
    if args.transport == "stdio":
        env = dict(_pair(e, "=", "--env") for e in args.env)
        command_args = args.args[1:] if args.args[:1] == ["--"] else args.args
        entry = {"type": "stdio", "command": args.target, "args": command_args, "env": env}
    else:
        entry = {"type": args.transport, "url": args.target,
                 "headers": dict(_pair(h, ":", "--header") for h in args.header)}
    path = scope_file(args.scope, project, locations)
    try:  # check it now, with ${VAR} defaults, rather than at the next start
        parse_server(args.name, entry, args.scope, str(path), environ)
    except McpConfigError as e:
        raise ValueError(str(e)) from None

    def change(data: dict) -> None:
        servers = data.setdefault("mcpServers", {})
        if not isinstance(servers, dict):
            raise ValueError(f"cannot update {path}: mcpServers is not an object")
        if args.name in servers:
            raise ValueError(f"MCP server {args.name!r} already exists in {path}; remove it first")
        servers[args.name] = entry
    update_json(path, change)
    print(f"Added {args.transport} MCP server {args.name!r} to {args.scope} config ({path})")
    return 0


def _remove(args: argparse.Namespace, project: Path, locations: Locations) -> int:
    scopes = [args.scope] if args.scope else list(SCOPES)
    for scope in scopes:
        path = scope_file(scope, project, locations)
        try:
            data = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
        except (OSError, ValueError):
            continue
        if isinstance(data, dict) and isinstance(data.get("mcpServers"), dict) and args.name in data["mcpServers"]:
            update_json(path, lambda d: d["mcpServers"].pop(args.name))
            print(f"Removed MCP server {args.name!r} from {scope} config ({path})")
            return 0
    raise ValueError(f"no MCP server named {args.name!r} in {' or '.join(scopes)} config")


def _pair(text: str, sep: str, flag: str) -> tuple[str, str]:
    key, found, value = text.partition(sep)
    if not found or not key.strip():
        raise ValueError(f"{flag} {text!r}: expected KEY{sep}VALUE")
    return key.strip(), value.strip() if sep == ":" else value
