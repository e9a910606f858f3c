"""Fixtures for tests/security: `world` (the attacked project) and `sandbox` ("off" / "auto"); the helpers
live in sec_support.py (importable from here on)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))  # --import-mode=importlib: make sec_support importable

from sec_support import ENV_SECRET, KEY, OUTSIDE_SECRET, World  # noqa: E402


def _git(*args: str, cwd: Path) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def world(tmp_path, monkeypatch) -> World:
    home, proj, outside, remote = (tmp_path / n for n in ("home", "proj", "outside", "remote.git"))
    for name, value in {"HOME": home, "AGENT_DATA_DIR": tmp_path / "data", "AGENT_HOME": home / ".agent",
                        "CLAUDE_CONFIG_DIR": home / ".claude"}.items():
        monkeypatch.setenv(name, str(value))
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text(KEY + "\n")
    (home / ".bashrc").write_text("# rc\n")
    outside.mkdir()
    (outside / "secret").write_text(OUTSIDE_SECRET + "\n")
    (tmp_path / ".env").write_text(ENV_SECRET + "-parent\n")  # a .env above the project
    (proj / "src").mkdir(parents=True)
    (proj / "a.txt").write_text("alpha\n")
    (proj / "src" / "app.py").write_text("print('app')\n")
    (proj / ".env").write_text(ENV_SECRET + "\n")
    (proj / "secrets").mkdir()
    (proj / "secrets" / "db.txt").write_text("TOKEN hunter2\n")
    (proj / "docs").symlink_to(home / ".ssh")
    (proj / ".agent" / "skills" / "helper").mkdir(parents=True)
    (proj / ".agent" / "skills" / "helper" / "SKILL.md").write_text(
        "---\nname: helper\ndescription: Helps.\n---\nHelp out.\n")
    (proj / ".agent" / "skills" / "toucher").mkdir(parents=True)
    (proj / ".agent" / "skills" / "toucher" / "SKILL.md").write_text(
        "---\nname: toucher\ndescription: Touches markers.\nallowed-tools: Bash(touch:*)\n---\nTouch.\n")
    env = {"GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    _git("init", "-q", "--bare", str(remote), cwd=tmp_path)
    _git("init", "-q", cwd=proj)
    _git("add", "a.txt", "src", cwd=proj)
    _git("commit", "-qm", "init", cwd=proj)
    _git("remote", "add", "origin", str(remote), cwd=proj)
    (proj / "vendor" / "lib").mkdir(parents=True)
    _git("init", "-q", cwd=proj / "vendor" / "lib")
    return World(tmp_path, proj, home, outside, remote)


@pytest.fixture(params=["off", "auto"])
def sandbox(request) -> str:
    """The --sandbox mode: "auto" runs bubblewrap for real where it works, the fallback where it does not."""
    return request.param


