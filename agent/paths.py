"""Where the agent keeps its files: user home (~/.agent), data dir (transcripts), project keys.

The CLI resolves the locations from the environment once (Locations.from_env) and installs them with
use_locations(); library callers that never do get the same resolution on first use.
"""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

import platformdirs


@dataclass(frozen=True)
class Locations:
    """Where the agent's files live (user settings, memory, skills; transcripts and checkpoints)."""
    user_home: Path
    agent_home: Path  # AGENT_HOME, else ~/.agent
    claude_home: Path  # CLAUDE_CONFIG_DIR, else ~/.claude: users' existing CLAUDE.md, settings, skills, agents
    data_dir: Path  # AGENT_DATA_DIR, else the platform's user data directory

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> "Locations":
        home = Path(environ["HOME"]).expanduser() if environ.get("HOME") else Path.home()
        if environ.get("AGENT_DATA_DIR"):
            data = Path(environ["AGENT_DATA_DIR"]).expanduser()
        else:
            data = Path(platformdirs.user_data_dir("agent"))
        agent = Path(environ["AGENT_HOME"]).expanduser() if environ.get("AGENT_HOME") else home / ".agent"
        claude = Path(environ["CLAUDE_CONFIG_DIR"]).expanduser() if environ.get("CLAUDE_CONFIG_DIR") else home / ".claude"
        return cls(home, agent, claude, data)


_installed: Locations | None = None


def use_locations(locations: Locations | None) -> None:
    """Install the locations every function below returns (None: resolve from the environment on each use)."""
    global _installed
    _installed = locations


def locations() -> Locations:
    return _installed if _installed is not None else Locations.from_env(os.environ)


def agent_home() -> Path:
    return locations().agent_home


def claude_home() -> Path:
    return locations().claude_home


def data_dir() -> Path:
    return locations().data_dir


def project_key(project_dir: Path) -> str:
    """A directory name for a project: its path with every non-alphanumeric character as '-'."""
    key = re.sub(r"[^A-Za-z0-9]", "-", str(Path(project_dir).resolve()))
    if len(key) > 120:  # keep names legal on every filesystem; the hash keeps them distinct
        key = key[:100] + "-" + hashlib.sha256(key.encode()).hexdigest()[:16]
    return key


def project_sessions_dir(project_dir: Path) -> Path:
    return data_dir() / "projects" / project_key(project_dir)


def repo_root(cwd: Path) -> Path:
    """The git top-level containing `cwd`, else `cwd` itself."""
    try:
        out = subprocess.run(["git", "rev-parse", "--show-toplevel"], cwd=cwd, capture_output=True,
                             text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return Path(cwd).resolve()
    if out.returncode != 0 or not out.stdout.strip():
        return Path(cwd).resolve()
    return Path(out.stdout.strip()).resolve()
