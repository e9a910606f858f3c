"""The `proj` fixture for the TUI tests; helpers live in tui_support.py (importable from here on)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # --import-mode=importlib: make tui_support importable


@pytest.fixture
def proj(tmp_path, monkeypatch) -> Path:
    """~/proj (HOME is tmp) with one commit on branch main; data and user dirs in tmp too."""
    home = tmp_path / "home"
    p = home / "proj"
    p.mkdir(parents=True)
    for name, value in {"HOME": home, "AGENT_DATA_DIR": tmp_path / "data", "AGENT_HOME": tmp_path / "agenthome",
                        "CLAUDE_CONFIG_DIR": tmp_path / "claude"}.items():
        monkeypatch.setenv(name, str(value))
    (p / "calc.py").write_text("def add(a, b):\n    return a - b\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=p, check=True)
    subprocess.run(git + ["add", "-A"], cwd=p, check=True)
    subprocess.run(git + ["commit", "-q", "-m", "init"], cwd=p, check=True)
    return p

