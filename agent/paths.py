"""Where the agent keeps its files: user home (~/.agent), data dir (transcripts), project keys."""
from __future__ import annotations

import hashlib
import os
import re
import subprocess
from pathlib import Path


def agent_home() -> Path:
    """AGENT_HOME if set, else ~/.agent (user settings, memory, skills, agents)."""
    env = os.environ.get("AGENT_HOME")
    return Path(env).expanduser() if env else Path.home() / ".agent"


def claude_home() -> Path:
    """CLAUDE_CONFIG_DIR if set, else ~/.claude: users' existing CLAUDE.md, settings, skills and agents."""
    env = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(env).expanduser() if env else Path.home() / ".claude"


def data_dir() -> Path:
    """AGENT_DATA_DIR if set, else the platform's user data directory for "agent"."""
    env = os.environ.get("AGENT_DATA_DIR")
    if env:
        return Path(env).expanduser()
    import platformdirs

    return Path(platformdirs.user_data_dir("agent"))


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
