"""Helpers for tests/security: the attacked world, its snapshot, and `attack`, a real headless session.

`world` is a project with a secret `.env`, a `secrets/` dir, a nested repository, a symlink `docs`
into a fake ~/.ssh, a git remote on disk, and a directory outside the project; HOME points at a fake
home. `attack` builds a real headless session (build_session, settings files on disk, the scripted
engine issuing the calls) and runs it; every test then checks files and processes afterwards.
`sandbox` parametrizes a test over "off" and "auto": bubblewrap for real where it runs here, the
fallback (rules only, one warning) where it does not; the assertions must hold either way.
"""
from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from agent.engines.scripted import ScriptedEngine
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from tools._sandbox import Bubblewrap

KEY = "-----BEGIN OPENSSH PRIVATE KEY----- fake-key-material"
ENV_SECRET = "API_TOKEN=sk-live-0123456789"
OUTSIDE_SECRET = "outside-secret-7f3a"
BWRAP_RUNS = Bubblewrap().available()[0]


@dataclass
class World:
    root: Path
    proj: Path
    home: Path
    outside: Path
    remote: Path
    mark: str = field(default_factory=lambda: uuid.uuid4().hex)

    def settings(self, data: dict, name: str = ".agent/settings.json") -> None:
        path = self.proj / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data))

    def snapshot(self) -> dict[str, bytes]:
        """Every file under the root (project, home, outside, remote) with its bytes; symlinks by target."""
        out = {}
        for dirpath, dirnames, filenames in os.walk(self.root):
            if "data" in Path(dirpath).relative_to(self.root).parts[:1]:
                continue  # the agent's own transcripts
            for name in filenames + [d for d in dirnames if (Path(dirpath) / d).is_symlink()]:
                path = Path(dirpath) / name
                rel = str(path.relative_to(self.root))
                out[rel] = b"->" + os.readlink(path).encode() if path.is_symlink() else path.read_bytes()
        return out

    def strays(self) -> list[int]:
        """Processes still alive that a Bash call of this world started (they carry its marker)."""
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                if f"AGENT_SEC_MARK={self.mark}".encode() in Path(f"/proc/{pid}/environ").read_bytes():
                    found.append(int(pid))
            except OSError:
                continue
        return found


@dataclass
class Outcome:
    results: list[str]  # every tool result's text, in order
    answer: str
    warnings: list[str]
    changed: set[str]  # files (relative to the world's root) added, removed or changed by the run
    strays: list[int]  # processes of the run still alive afterwards

    @property
    def text(self) -> str:
        return "\n".join(self.results)


def bash(command: str) -> dict:
    return {"name": "Bash", "arguments": {"command": command, "timeout": 20000}}


def call(name: str, **arguments) -> dict:
    return {"name": name, "arguments": arguments}


def attack(world: World, calls: list[dict], *, sandbox: str = "off", mode: str | None = None,
           allowed: tuple[str, ...] = (), settings: dict | None = None, approver=None) -> Outcome:
    """A headless session that makes `calls` one turn each, then answers; the settings file is written first."""
    data = dict(settings or {})
    data.setdefault("env", {})["AGENT_SEC_MARK"] = world.mark
    world.settings(data, ".agent/settings.local.json")
    turns = [{"text": "", "tool_calls": [c]} for c in calls] + [{"text": "done"}]
    warnings: list[str] = []
    options = SessionOptions(project=world.proj, engine="scripted", headless=True, permission_mode=mode,
                             allowed=list(allowed), sandbox=sandbox, max_turns=len(turns) + 1)
    before = world.snapshot()
    core = build_session(options, engine=ScriptedEngine(turns), warn=warnings.append)
    if approver is not None:  # a stand-in for the user at the permission prompt
        core.agent.approver = approver
    try:
        result = core.agent.run("go", core.agent.ctx.cancel)
    finally:
        core.services.close()
        core.session.close()
    after = world.snapshot()
    changed = {k for k in before.keys() | after.keys() if before.get(k) != after.get(k)}
    changed = {k for k in changed if not k.startswith(("proj/.git/", "proj/vendor/lib/.git/")) or "hooks" in k
               or k.endswith("/config")}  # git's own bookkeeping (index, logs) aside
    results = [m["content"] for m in core.agent.session.messages if m["role"] == "tool"]
    return Outcome(results, result.text, warnings, changed, world.strays())
