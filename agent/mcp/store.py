"""Edits to the JSON files MCP configuration lives in (.mcp.json, settings files), written atomically."""
from __future__ import annotations

from pathlib import Path

from hooks.settings import update_json


def remember_choice(project: Path, name: str, approved: bool) -> Path:
    """Record the answer for a repository server in .agent/settings.local.json (enabled/disabledMcpjsonServers)."""
    path = project / ".agent" / "settings.local.json"
    keep, drop = ("enabledMcpjsonServers", "disabledMcpjsonServers")[:: 1 if approved else -1]

    def change(data: dict) -> None:
        for key in (keep, drop):
            if not isinstance(data.get(key, []), list):
                raise ValueError(f"cannot update {path}: {key} is not a list")
        data[keep] = [n for n in data.get(keep, []) if n != name] + [name]
        data[drop] = [n for n in data.get(drop, []) if n != name]
        if not data[drop]:
            del data[drop]
    update_json(path, change)
    return path
