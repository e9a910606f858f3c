"""McpHub: a session's MCP servers: which may start (approval), their status, and their tools for the Agent.

Servers start in parallel when the session is built and never delay the first prompt in the TUI: tools of
servers that connected since the last prompt join the offered list when the next prompt starts (the tool list
is part of the KV prefix, so it changes only between prompts). Headless runs wait for the servers first.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Mapping

from tools.base import schema_for_engine

from agent.mcp.client import McpManager
from agent.mcp.config import McpSettings, approval, collect_servers
from agent.mcp.store import remember_choice
from agent.mcp.tool import McpTool, make_tools


@dataclass
class ServerView:
    """What /mcp and `agent mcp list` show for one server."""
    name: str
    status: str
    scope: str
    transport: str
    target: str  # the command or URL
    tools: list[str]
    error: str


class McpHub:
    def __init__(self, project: Path, mcp: McpSettings, environ: Mapping[str, str], *,
                 startup_timeout_s: float = 30.0, call_timeout_s: float = 120.0,
                 notify: Callable[[str], None] | None = None) -> None:
        self.project = project
        self.notify = notify or (lambda text: None)
        self.call_timeout_s = call_timeout_s
        servers, self.errors = collect_servers(project, mcp, environ)
        for e in self.errors:
            self.notify(e)
        self.manager = McpManager(servers, cwd=str(project), environ=environ, startup_timeout_s=startup_timeout_s,
                                  notify=self.notify)
        self.offered: set[str] = set()  # servers whose tools the Agent has
        start = []
        for s in servers:
            verdict = approval(s, mcp)
            if verdict == "approved":
                start.append(s.name)
            else:
                self.manager.hold(s.name, "needs-approval" if verdict == "pending" else "disabled")
        self.manager.start(start)

    @classmethod
    def create(cls, project: Path, mcp: McpSettings, environ: Mapping[str, str], *, startup_timeout_s: float = 30.0,
               call_timeout_s: float = 120.0, notify: Callable[[str], None] | None = None) -> "McpHub | None":
        """A hub when anything is configured (.mcp.json or mcpServers), else None (no thread, nothing to show)."""
        if not mcp.servers and not (project / ".mcp.json").exists():
            return None
        return cls(project, mcp, environ, startup_timeout_s=startup_timeout_s, call_timeout_s=call_timeout_s,
                   notify=notify)

    @property
    def pending_approval(self) -> list[str]:
        return [n for n, s in self.manager.servers.items() if s.status == "needs-approval"]

    def answer(self, name: str, approved: bool) -> str:
        """The user's answer for a repository server: remembered, and the server started when approved."""
        if name not in self.manager.servers:
            raise ValueError(f"no MCP server named {name!r}")
        path = remember_choice(self.project, name, approved)
        if approved:
            self.manager.start([name])
            return f"MCP server {name!r} approved (remembered in {path}); starting it."
        self.manager.hold(name, "disabled")
        return f"MCP server {name!r} declined (remembered in {path})."

    def reconnect(self, name: str) -> None:
        """Start a server again (after a crash or a failed start)."""
        self.manager.start([name])

    def adopt(self, agent: Any) -> list[McpTool]:
        """Offer the tools of servers connected since the last call; between prompts only (KV prefix)."""
        added = []
        for name, state in self.manager.servers.items():
            if state.status != "connected" or name in self.offered:
                continue
            self.offered.add(name)
            tools, warnings = make_tools(self.manager, name, timeout_s=self.call_timeout_s)
            for w in warnings:
                self.notify(w)
            for tool in tools:
                if tool.name in agent.tools:
                    continue
                agent.tools[tool.name] = tool
                agent.schemas.append(schema_for_engine(tool))
                added.append(tool)
        return added

    def command(self, args: str) -> str:
        """/mcp: markdown with each server's status and tools; `approve|deny|reconnect NAME` act on one."""
        verb, _, name = args.partition(" ")
        name = name.strip()
        if verb in ("approve", "deny", "reconnect"):
            if name not in self.manager.servers:
                return f"No MCP server named {name!r}; /mcp lists them."
            if verb == "reconnect":
                self.reconnect(name)
                return f"Reconnecting MCP server {name!r}; its tools are offered from the next prompt."
            try:
                return self.answer(name, verb == "approve") + (" Its tools are offered from the next prompt."
                                                               if verb == "approve" else "")
            except ValueError as e:
                return str(e)
        if verb:
            return "Usage: /mcp [approve|deny|reconnect NAME]"
        lines = ["**MCP servers**", ""]
        for v in self.views():
            why = f": {v.error}" if v.error else ""
            lines.append(f"- `{v.name}` ({v.transport}, {v.scope}) **{v.status}**{why} — {v.target}")
            if v.tools:
                lines.append(f"  tools: {', '.join(v.tools)}" + ("" if v.name in self.offered else
                                                                 " (offered from the next prompt)"))
        lines += [f"- error: {e}" for e in self.errors]
        if self.pending_approval:
            lines += ["", "Servers from the repository start only once you approve them: `/mcp approve NAME`."]
        return "\n".join(lines)

    def views(self) -> list[ServerView]:
        return [ServerView(n, s.status, s.config.scope, s.config.transport, s.config.describe(),
                           [t.name for t in s.tools], s.error) for n, s in self.manager.servers.items()]

    def init_entries(self) -> list[dict]:
        """The stream-json init line's mcp_servers: [{name, status}], as Claude Code writes them."""
        return [{"name": v.name, "status": v.status} for v in self.views()]

    def close(self) -> None:
        self.manager.close()
