"""Security classes 6 and 8: memory-file imports from outside the project, and files keeping their inode facts.

Class 8: Edit/Write/MultiEdit refuse read-only files, keep mode, owner and group (also when root edits
another user's file), and rewrite hard-linked files in place. Class 6: `@path` imports in AGENTS.md /
CLAUDE.md that leave the project and the user's memory directories are refused without approval.
Each test checks the files (content, mode, owner, inode) or the context afterwards.
"""
from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import pytest

from agent.core.approval import PermissionAnswer
from agent.core.memory import load_memory
from agent.engines.scripted import ScriptedEngine
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from tools.base import ToolContext
from tools.edit import EditTool
from tools.multiedit import MultiEditTool
from tools.read import ReadTool
from tools.write import WriteTool

REPO = Path(__file__).resolve().parents[2]
ROOT = os.geteuid() == 0
OTHER_UID, OTHER_GID = 4321, 8765  # a user and group that own nothing else
root_only = pytest.mark.skipif(not ROOT, reason="changing owners needs root")


def read_then(ctx: ToolContext, path: Path) -> None:
    assert not ReadTool().run({"file_path": str(path)}, ctx).is_error


def facts(path: Path) -> tuple:
    st = path.stat()
    return stat.S_IMODE(st.st_mode), st.st_uid, st.st_gid, st.st_ino, st.st_nlink


def leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture
def ctx(tmp_path):
    return ToolContext(cwd=tmp_path)


# ---- class 8: read-only files

@pytest.mark.parametrize("mode", [0o444, 0o400, 0o555])
def test_edit_refuses_a_read_only_file(ctx, tmp_path, mode):
    f = tmp_path / "locked.txt"
    f.write_text("keep me\n")
    f.chmod(mode)
    read_then(ctx, f)
    result = EditTool().run({"file_path": str(f), "old_string": "keep", "new_string": "lose"}, ctx)
    assert result.is_error
    assert result.content == (f"locked.txt is read-only (mode {mode:04o}), so it was not changed. If it must change, "
                              "ask the user to make it writable.")
    assert (f.read_text(), stat.S_IMODE(f.stat().st_mode)) == ("keep me\n", mode)
    assert leftovers(tmp_path) == []


def test_write_refuses_a_read_only_file_even_after_reading_it(ctx, tmp_path):
    f = tmp_path / "locked.txt"
    f.write_text("keep me\n")
    f.chmod(0o444)
    before = facts(f)
    read_then(ctx, f)
    result = WriteTool().run({"file_path": str(f), "content": "replaced\n"}, ctx)
    assert result.is_error and "is read-only (mode 0444)" in result.content
    assert (f.read_text(), facts(f)) == ("keep me\n", before)


def test_write_refuses_a_read_only_file_it_never_read(ctx, tmp_path):
    f = tmp_path / "locked.txt"
    f.write_text("keep me\n")
    f.chmod(0o444)
    result = WriteTool().run({"file_path": str(f), "content": "replaced\n"}, ctx)
    assert result.is_error and result.content.startswith("locked.txt is read-only")
    assert f.read_text() == "keep me\n"


def test_multiedit_refuses_a_read_only_file(ctx, tmp_path):
    f = tmp_path / "locked.py"
    f.write_text("a = 1\nb = 2\n")
    f.chmod(0o444)
    read_then(ctx, f)
    result = MultiEditTool().run({"file_path": str(f), "edits": [{"old_string": "a = 1", "new_string": "a = 3"}]}, ctx)
    assert result.is_error and "read-only" in result.content
    assert f.read_text() == "a = 1\nb = 2\n"


def test_a_file_made_writable_again_can_be_edited(ctx, tmp_path):
    f = tmp_path / "locked.txt"
    f.write_text("v1\n")
    f.chmod(0o444)
    read_then(ctx, f)
    assert EditTool().run({"file_path": str(f), "old_string": "v1", "new_string": "v2"}, ctx).is_error
    f.chmod(0o644)
    read_then(ctx, f)
    assert not EditTool().run({"file_path": str(f), "old_string": "v1", "new_string": "v2"}, ctx).is_error
    assert (f.read_text(), stat.S_IMODE(f.stat().st_mode)) == ("v2\n", 0o644)


# ---- class 8: mode kept

@pytest.mark.parametrize("mode", [0o600, 0o640, 0o755, 0o2775, 0o664])
def test_edit_keeps_the_mode(ctx, tmp_path, mode):
    f = tmp_path / "script.sh"
    f.write_text("echo one\n")
    f.chmod(mode)
    read_then(ctx, f)
    assert not EditTool().run({"file_path": str(f), "old_string": "one", "new_string": "two"}, ctx).is_error
    assert (f.read_text(), stat.S_IMODE(f.stat().st_mode)) == ("echo two\n", mode)
    assert leftovers(tmp_path) == []


def test_write_keeps_the_mode_and_a_new_file_gets_the_umask(ctx, tmp_path):
    f = tmp_path / "secret.env"
    f.write_text("A=1\n")
    f.chmod(0o600)
    read_then(ctx, f)
    assert not WriteTool().run({"file_path": str(f), "content": "A=2\n"}, ctx).is_error
    assert stat.S_IMODE(f.stat().st_mode) == 0o600
    old = os.umask(0o027)
    try:
        assert not WriteTool().run({"file_path": str(tmp_path / "new.txt"), "content": "x\n"}, ctx).is_error
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.txt").stat().st_mode) == 0o640


# ---- class 8: owner and group kept

@root_only
@pytest.mark.parametrize("tool", ["Edit", "Write", "MultiEdit"])
def test_root_editing_another_users_file_keeps_owner_and_group(ctx, tmp_path, tool):
    f = tmp_path / "theirs.txt"
    f.write_text("owned by someone else\n")
    os.chown(f, OTHER_UID, OTHER_GID)
    f.chmod(0o664)
    read_then(ctx, f)
    if tool == "Edit":
        result = EditTool().run({"file_path": str(f), "old_string": "someone", "new_string": "a user"}, ctx)
    elif tool == "Write":
        result = WriteTool().run({"file_path": str(f), "content": "owned by a user else\n"}, ctx)
    else:
        result = MultiEditTool().run({"file_path": str(f), "edits": [{"old_string": "someone", "new_string": "a user"}]},
                                     ctx)
    assert not result.is_error, result.content
    st = f.stat()
    assert (f.read_text(), st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (
        "owned by a user else\n", OTHER_UID, OTHER_GID, 0o664)


@root_only
def test_setgid_bit_survives_the_chown(ctx, tmp_path):
    f = tmp_path / "tool"
    f.write_text("#!/bin/sh\necho a\n")
    os.chown(f, OTHER_UID, OTHER_GID)
    f.chmod(0o2755)
    read_then(ctx, f)
    assert not EditTool().run({"file_path": str(f), "old_string": "echo a", "new_string": "echo b"}, ctx).is_error
    st = f.stat()
    assert (st.st_uid, st.st_gid, stat.S_IMODE(st.st_mode)) == (OTHER_UID, OTHER_GID, 0o2755)


# ---- class 8: hard links

@pytest.mark.parametrize("tool", ["Edit", "Write", "MultiEdit"])
def test_a_hard_linked_file_is_edited_in_place(ctx, tmp_path, tool):
    f, twin = tmp_path / "a.txt", tmp_path / "twin.txt"
    f.write_text("shared line\n")
    os.link(f, twin)
    inode = f.stat().st_ino
    read_then(ctx, f)
    if tool == "Edit":
        result = EditTool().run({"file_path": str(f), "old_string": "shared", "new_string": "changed"}, ctx)
    elif tool == "Write":
        result = WriteTool().run({"file_path": str(f), "content": "changed line\n"}, ctx)
    else:
        result = MultiEditTool().run({"file_path": str(f), "edits": [{"old_string": "shared", "new_string": "changed"}]},
                                     ctx)
    assert not result.is_error, result.content
    assert (f.stat().st_ino, f.stat().st_nlink, twin.read_text()) == (inode, 2, "changed line\n")
    assert leftovers(tmp_path) == []


def test_a_shorter_in_place_write_leaves_no_old_tail(ctx, tmp_path):
    f, twin = tmp_path / "a.txt", tmp_path / "twin.txt"
    f.write_text("a much longer first version of the file\n" * 3)
    os.link(f, twin)
    read_then(ctx, f)
    assert not WriteTool().run({"file_path": str(f), "content": "short\n"}, ctx).is_error
    assert twin.read_bytes() == b"short\n"
    assert twin.stat().st_size == 6


def test_a_failed_edit_leaves_both_links_untouched(ctx, tmp_path):
    f, twin = tmp_path / "a.txt", tmp_path / "twin.txt"
    f.write_text("one\n")
    os.link(f, twin)
    before = facts(f)
    read_then(ctx, f)
    result = EditTool().run({"file_path": str(f), "old_string": "absent", "new_string": "x"}, ctx)
    assert result.is_error
    assert (f.read_text(), twin.read_text(), facts(f)) == ("one\n", "one\n", before)


def test_a_single_link_is_replaced_atomically(ctx, tmp_path):
    f = tmp_path / "a.txt"
    f.write_text("one\n")
    inode = f.stat().st_ino
    read_then(ctx, f)
    assert not EditTool().run({"file_path": str(f), "old_string": "one", "new_string": "two"}, ctx).is_error
    assert f.read_text() == "two\n" and f.stat().st_ino != inode  # temp file + rename
    assert leftovers(tmp_path) == []


def test_a_symlink_in_the_project_stays_a_symlink(ctx, tmp_path):
    (tmp_path / "real.txt").write_text("value 1\n")
    (tmp_path / "alias.txt").symlink_to("real.txt")
    read_then(ctx, tmp_path / "alias.txt")
    assert not EditTool().run({"file_path": "alias.txt", "old_string": "1", "new_string": "2"}, ctx).is_error
    assert (tmp_path / "alias.txt").is_symlink() and (tmp_path / "real.txt").read_text() == "value 2\n"


# ---- class 8: an unprivileged user (a child process running as nobody)

NOBODY = 65534


def write_as_nobody(directory: Path, file: Path) -> dict:
    """Read then Write `file` as the unprivileged user, in a forked child (the interpreter lives under /root)."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: drop root, run the tools, report, exit without pytest's cleanup
        try:
            os.setgroups([])
            os.setgid(NOBODY)
            os.setuid(NOBODY)
            ctx = ToolContext(cwd=directory)
            ReadTool().run({"file_path": str(file)}, ctx)
            r = WriteTool().run({"file_path": str(file), "content": "written by nobody\n"}, ctx)
            os.write(write_fd, json.dumps({"error": r.is_error, "content": r.content}).encode())
        except BaseException as e:
            os.write(write_fd, json.dumps({"error": True, "content": f"child failed: {e!r}"}).encode())
        finally:
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as f:
        data = f.read()
    os.waitpid(pid, 0)
    return json.loads(data)


@pytest.fixture
def open_dir():
    """A directory the unprivileged user can reach (pytest's tmp_path is root's, 0700)."""
    d = Path(tempfile.mkdtemp(prefix="sec-files-"))
    d.chmod(0o755)
    yield d
    shutil.rmtree(d)


@root_only
def test_a_user_cannot_replace_a_file_they_may_not_write_through_a_writable_directory(open_dir):
    d = open_dir / "shared"
    d.mkdir()
    d.chmod(0o777)  # anyone may create and rename here; the file itself is root's, 0644
    f = d / "roots.txt"
    f.write_text("root's content\n")
    f.chmod(0o644)
    result = write_as_nobody(d, f)
    assert result["error"] and "is read-only" in result["content"]
    st = f.stat()
    assert (f.read_text(), st.st_uid, stat.S_IMODE(st.st_mode)) == ("root's content\n", 0, 0o644)
    assert leftovers(d) == []


@root_only
def test_a_writable_file_in_a_locked_directory_is_written_in_place(open_dir):
    d = open_dir / "locked_dir"
    d.mkdir()
    f = d / "mine.txt"
    f.write_text("old\n")
    os.chown(f, NOBODY, NOBODY)
    d.chmod(0o755)  # nobody may not create the temp file here
    inode = f.stat().st_ino
    result = write_as_nobody(d, f)
    assert not result["error"], result["content"]
    assert (f.read_text(), f.stat().st_ino, f.stat().st_uid) == ("written by nobody\n", inode, NOBODY)


# ---- class 6: memory imports

@pytest.fixture
def layout(tmp_path):
    """A project, the user's home with ~/.ssh, the agent and claude homes, and a directory beside the project."""
    home, proj, outside = tmp_path / "home", tmp_path / "proj", tmp_path / "outside"
    agent_home, claude_home = home / ".agent", home / ".claude"
    for d in (home / ".ssh", proj, outside, agent_home, claude_home):
        d.mkdir(parents=True)
    (home / ".ssh" / "id_rsa").write_text("-----BEGIN PRIVATE KEY----- SECRET-KEY\n")
    (outside / "secret.txt").write_text("OUTSIDE-SECRET\n")
    (agent_home / "style.md").write_text("user style\n")
    (claude_home / "extra.md").write_text("claude extra\n")
    return {"home": home, "proj": proj, "outside": outside, "agent_home": agent_home, "claude_home": claude_home}


def memory_text(layout, approve=None) -> str:
    files = load_memory(layout["proj"], layout["proj"], layout["agent_home"], layout["claude_home"], approve)
    return "\n".join(f.text for f in files)


@pytest.mark.parametrize("line, secret", [
    ("@{home}/.ssh/id_rsa", "SECRET-KEY"),
    ("@../outside/secret.txt", "OUTSIDE-SECRET"),
    ("@{outside}/secret.txt", "OUTSIDE-SECRET"),
    ("@docs/secret.txt", "OUTSIDE-SECRET"),  # docs -> ../outside: resolved through the symlink
    ("@keys/id_rsa", "SECRET-KEY"),  # keys -> ~/.ssh
])
def test_imports_from_outside_are_refused_without_approval(layout, line, secret):
    proj = layout["proj"]
    (proj / "docs").symlink_to(layout["outside"])
    (proj / "keys").symlink_to(layout["home"] / ".ssh")
    (proj / "AGENTS.md").write_text("rules\n" + line.format(**layout) + "\nend\n")
    text = memory_text(layout)
    assert secret not in text
    assert "is outside the project and the memory directories, and reading it was not approved)" in text
    assert text.startswith("rules\n(import ") and text.endswith("end\n")


def test_tilde_imports_resolve_against_home(layout, monkeypatch):
    monkeypatch.setenv("HOME", str(layout["home"]))
    (layout["proj"] / "CLAUDE.md").write_text("@~/.ssh/id_rsa\n")
    text = memory_text(layout)
    assert "SECRET-KEY" not in text and f"{layout['home']}/.ssh/id_rsa is outside" in text


def test_imports_inside_the_project_and_the_memory_dirs_are_read(layout):
    proj = layout["proj"]
    (proj / "docs").mkdir()
    (proj / "docs" / "a.md").write_text("project doc\n")
    (proj / "AGENTS.md").write_text(f"@docs/a.md\n@{layout['agent_home']}/style.md\n@{layout['claude_home']}/extra.md\n")
    assert memory_text(layout) == "project doc\nuser style\nclaude extra\n"


def test_a_nested_import_that_leaves_the_project_is_refused(layout):
    proj = layout["proj"]
    (proj / "a.md").write_text("inner\n@../outside/secret.txt\n")
    (proj / "AGENTS.md").write_text("@a.md\n")
    text = memory_text(layout)
    assert text.startswith("inner\n(import ../outside/secret.txt skipped: ") and "OUTSIDE-SECRET" not in text


def test_approval_lets_an_import_in_and_is_asked_with_the_resolved_path(layout):
    (layout["proj"] / "AGENTS.md").write_text("@../outside/secret.txt\n")
    asked: list[Path] = []
    text = memory_text(layout, lambda p: asked.append(p) or True)
    assert (text, asked) == ("OUTSIDE-SECRET\n", [(layout["outside"] / "secret.txt").resolve()])


def test_a_declined_import_leaves_the_note(layout):
    (layout["proj"] / "AGENTS.md").write_text("@../outside/secret.txt\n")
    text = memory_text(layout, lambda p: False)
    assert "OUTSIDE-SECRET" not in text and "was not approved" in text


@pytest.fixture
def session_env(layout, monkeypatch, tmp_path):
    for name, value in {"HOME": layout["home"], "AGENT_DATA_DIR": tmp_path / "data",
                        "AGENT_HOME": layout["agent_home"], "CLAUDE_CONFIG_DIR": layout["claude_home"]}.items():
        monkeypatch.setenv(name, str(value))
    return layout


def first_user_message(core) -> str:
    return next(m["content"] for m in core.session.messages if m["role"] == "user")


def test_interactive_session_asks_once_and_the_answer_decides(session_env):
    proj = session_env["proj"]
    (proj / "AGENTS.md").write_text("@../outside/secret.txt\n")
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine([{"text": "a"}, {"text": "b"}]))
    asked = []
    core.ask = lambda req: asked.append((req.tool_name, req.tool_input)) or PermissionAnswer("deny")
    try:
        core.run("hello", threading.Event())
        assert "OUTSIDE-SECRET" not in first_user_message(core)
        core.clear()
        core.run("again", threading.Event())  # a new conversation loads memory again: not asked again
        assert asked == [("Read", {"file_path": str((session_env["outside"] / "secret.txt").resolve())})]
        assert "OUTSIDE-SECRET" not in first_user_message(core)
    finally:
        core.close()


def test_interactive_approval_brings_the_import_in(session_env):
    proj = session_env["proj"]
    (proj / "AGENTS.md").write_text("@../outside/secret.txt\n")
    core = build_session(SessionOptions(project=proj, engine="scripted"), engine=ScriptedEngine([{"text": "a"}]))
    core.ask = lambda req: PermissionAnswer("once")
    try:
        core.run("hello", threading.Event())
        assert "OUTSIDE-SECRET" in first_user_message(core)
    finally:
        core.close()


def test_headless_refuses_with_a_note_to_the_user_and_the_model(session_env, tmp_path):
    proj = session_env["proj"]
    (proj / "AGENTS.md").write_text("@~/.ssh/id_rsa\n")
    script = tmp_path / "s.json"
    script.write_text(json.dumps([{"text": "done"}]))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run([sys.executable, "-m", "agent", "-p", "hi", "--engine", "scripted", "--script", str(script)],
                         cwd=proj, env=env, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    assert (out.returncode, out.stdout) == (0, "done\n")
    key = (session_env["home"] / ".ssh" / "id_rsa").resolve()
    assert out.stderr == (f"agent: memory import {key} refused: it is outside the project and the memory directories "
                          "(approve it in an interactive session)\n")
    transcripts = list((tmp_path / "data").rglob("*.jsonl"))
    assert len(transcripts) == 1
    text = transcripts[0].read_text()
    assert "SECRET-KEY" not in text and "was not approved" in text
