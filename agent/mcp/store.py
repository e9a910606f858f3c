"""Edits to the JSON files MCP configuration lives in (.mcp.json, settings files), written atomically."""
from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Callable


def update_json(path: Path, change: Callable[[dict], None]) -> None:
    """Read the object in `path` (or {}), apply `change`, write it back; ValueError (one line) when it cannot."""
    data: dict = {}
    if path.exists():
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise ValueError(f"cannot update {path}: {e}; fix it first") from None
        if not isinstance(data, dict):
            raise ValueError(f"cannot update {path}: it is not a JSON object")
    change(data)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as e:
        raise ValueError(f"cannot write in {path.parent} ({e.strerror or e})") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=2, ensure_ascii=False)
            f.write("\n")
        os.replace(tmp, path)
    except BaseException as e:
        os.unlink(tmp)
        if isinstance(e, OSError):
            raise ValueError(f"cannot write {path} ({e.strerror or e})") from None
        raise


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
