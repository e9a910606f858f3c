"""Checkpoints: real files, real tools, real git; the user's repository is never touched."""
from __future__ import annotations

import hashlib
import os
import subprocess
import threading
import time
from pathlib import Path

import pytest

from agent.services.checkpoints import (Checkpoint, CheckpointError, Checkpoints, DiffStat, FileChange, RestoreReport,
                               SkippedFile, shadow_key)
from tools.base import ToolContext
from tools.bash import BashTool
from tools.edit import EditTool
from tools.read import ReadTool
from tools.write import WriteTool


@pytest.fixture
def proj(tmp_path) -> Path:
    p = tmp_path / "proj"
    (p / "src").mkdir(parents=True)
    (p / "src" / "app.py").write_text("def add(a, b):\n    return a+b\n")
    (p / "README.md").write_text("# demo\n")
    return p


@pytest.fixture
def cps(proj, tmp_path) -> Checkpoints:
    return Checkpoints(proj, data_dir=tmp_path / "data")


def tree_of(root: Path) -> dict[str, bytes | str]:
    """Every file under root (except .git): path -> bytes, symlinks as 'link -> target', dirs as 'dir'."""
    out: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d != ".git"]
        for name in dirnames + filenames:
            p = Path(dirpath) / name
            rel = p.relative_to(root).as_posix()
            if p.is_symlink():
                out[rel] = f"link -> {os.readlink(p)}"
            elif p.is_dir():
                out[rel] = "dir"
            else:
                out[rel] = p.read_bytes()
    return out


def strip_timing(c: Checkpoint) -> Checkpoint:
    return Checkpoint(c.id, c.label, c.created, c.meta, c.tree, c.skipped)


def test_rewind_after_write(proj, cps):
    ctx = ToolContext(cwd=proj)
    before = tree_of(proj)
    cp = cps.snapshot("before Write", {"kind": "tools", "session_id": "s1", "message_index": 3})
    assert ReadTool().run({"file_path": "README.md"}, ctx).is_error is False
    assert not WriteTool().run({"file_path": "README.md", "content": "# rewritten\n"}, ctx).is_error
    assert not WriteTool().run({"file_path": "docs/new/guide.md", "content": "guide\n"}, ctx).is_error
    report = cps.restore_code(cp.id)
    assert tree_of(proj) == before  # docs/new/ is gone too: directories the deletion emptied are removed
    assert report == RestoreReport(strip_timing(cp), report.backup, ("README.md",), ("docs/new/guide.md",), ())
    assert report.backup.meta == {"kind": "rewind", "rewound_to": cp.id, "session_id": "s1"}


def test_rewind_after_edit(proj, cps):
    ctx = ToolContext(cwd=proj)
    ReadTool().run({"file_path": "src/app.py"}, ctx)
    cp = cps.snapshot("before Edit", {"kind": "tools"})
    before = tree_of(proj)
    result = EditTool().run({"file_path": "src/app.py", "old_string": "a+b", "new_string": "a + b"}, ctx)
    assert not result.is_error
    assert cps.diff_stat(cp.id) == DiffStat((FileChange("src/app.py", "modify", 1, 1),))
    report = cps.restore_code(cp.id)
    assert (report.restored, report.deleted) == (("src/app.py",), ())
    assert tree_of(proj) == before


def test_rewind_after_bash_rm_mv_and_generated_files(proj, cps):
    (proj / "data.csv").write_text("a,b\n1,2\n")
    cp = cps.snapshot("before Bash", {"kind": "tools"})
    before = tree_of(proj)
    result = BashTool().run({"command": "rm README.md && mv data.csv moved.csv && mkdir -p gen/x && "
                                        "seq 1 100 > gen/x/out.txt && rm -r src"}, ToolContext(cwd=proj))
    assert result.data.get("exit_code", 0) == 0, result.content
    assert cps.diff_stat(cp.id) == DiffStat((
        FileChange("README.md", "create", 1, 0), FileChange("data.csv", "create", 2, 0),
        FileChange("gen/x/out.txt", "delete", 0, 100), FileChange("moved.csv", "delete", 0, 2),
        FileChange("src/app.py", "create", 2, 0)))
    report = cps.restore_code(cp.id)
    assert (report.restored, report.deleted) == (("README.md", "data.csv", "src/app.py"),
                                                 ("gen/x/out.txt", "moved.csv"))
    assert tree_of(proj) == before


def test_rewind_can_be_undone_with_the_backup(proj, cps):
    cp = cps.snapshot("start", {})
    (proj / "README.md").write_text("changed\n")
    (proj / "added.txt").write_text("new\n")
    after_edits = tree_of(proj)
    report = cps.restore_code(cp.id)
    cps.restore_code(report.backup.id)
    assert tree_of(proj) == after_edits


def test_works_outside_git_and_leaves_no_trace_in_the_project(proj, cps, tmp_path):
    assert subprocess.run(["git", "rev-parse"], cwd=proj, capture_output=True).returncode != 0
    before = tree_of(proj)
    cp = cps.snapshot("first", {})
    assert tree_of(proj) == before  # nothing written into the project
    assert cps.git_dir == tmp_path / "data" / "checkpoints" / shadow_key(proj)
    assert shadow_key(proj) == "proj-" + hashlib.sha256(str(proj.resolve()).encode()).hexdigest()[:12]
    (proj / "src" / "app.py").unlink()
    cps.restore_code(cp.id)
    assert tree_of(proj) == before


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout


def _dot_git_digest(repo: Path) -> str:
    """Hash of every path, mode and byte under .git."""
    h = hashlib.sha256()
    for p in sorted((repo / ".git").rglob("*")):
        st = p.lstat()
        h.update(f"{p.relative_to(repo)}\0{st.st_mode:o}\0".encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


def test_user_git_state_is_byte_identical(proj, tmp_path, monkeypatch):
    # A real repository: two commits, a stash, a staged change, an unstaged change, an untracked file.
    _git(proj, "init", "-q", "-b", "main")
    _git(proj, "config", "user.name", "U")
    _git(proj, "config", "user.email", "u@example.com")
    _git(proj, "add", "-A")
    _git(proj, "commit", "-qm", "one")
    (proj / "README.md").write_text("# demo\nstashed\n")
    _git(proj, "stash", "-q")
    (proj / "src" / "app.py").write_text("def add(a, b):\n    return b+a\n")
    _git(proj, "add", "src/app.py")
    (proj / "README.md").write_text("# demo\nunstaged\n")
    (proj / "notes.txt").write_text("untracked\n")
    # Hooks that would leave a mark if any git command of ours ran them.
    marker = tmp_path / "hook-ran"
    hooks = [proj / ".git" / "hooks", tmp_path / "global-hooks"]
    for d in hooks:
        d.mkdir(exist_ok=True)
        for name in ("pre-commit", "post-commit", "post-checkout", "post-index-change", "reference-transaction"):
            (d / name).write_text(f"#!/bin/sh\necho {name} >> {marker}\n")
            (d / name).chmod(0o755)
    # A hostile global config and an inherited environment pointing at the user's repository.
    home = tmp_path / "home"
    home.mkdir()
    (home / ".gitconfig").write_text(f"[core]\n\thooksPath = {hooks[1]}\n[commit]\n\tgpgSign = true\n"
                                     "[gpg]\n\tprogram = false\n")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.setenv("GIT_DIR", str(proj / ".git"))
    monkeypatch.setenv("GIT_INDEX_FILE", str(proj / ".git" / "index"))
    status = _git(proj, "status", "--porcelain")
    stashes = _git(proj, "stash", "list")
    digest = _dot_git_digest(proj)
    files = tree_of(proj)
    marker.unlink(missing_ok=True)  # the user's own `git status` may run post-index-change

    cps = Checkpoints(proj, data_dir=tmp_path / "data")
    cp = cps.snapshot("prompt", {"kind": "prompt"})
    (proj / "README.md").write_text("agent edit\n")
    (proj / "new.py").write_text("print(1)\n")
    (proj / "notes.txt").unlink()
    cps.snapshot("tools", {"kind": "tools"})
    assert cps.diff_stat(cp.id).summary() == "1 restored, 1 re-created, 1 deleted (+3 -2 lines)"
    cps.restore_code(cp.id)
    cps.list()

    assert not marker.exists()
    assert _dot_git_digest(proj) == digest  # hashed before any git command of the test touches the index
    assert (_git(proj, "status", "--porcelain"), _git(proj, "stash", "list")) == (status, stashes)
    assert tree_of(proj) == files


def test_gitignore_and_info_exclude_are_respected(proj, cps):
    _git(proj, "init", "-q")
    (proj / ".gitignore").write_text("*.log\nbuild/\n")
    (proj / "src" / ".gitignore").write_text("secret.txt\n")
    (proj / ".git" / "info" / "exclude").write_text("local.tmp\n")
    (proj / "old.log").write_text("old log\n")
    (proj / "src" / "secret.txt").write_text("v1\n")
    cp = cps.snapshot("start", {})
    before = tree_of(proj)
    # Ignored files created or changed afterwards are neither deleted nor restored.
    ignored = {"old.log": b"old log\nmore\n", "new.log": b"x\n", "build/out.o": b"\x00\x01",
               "src/secret.txt": b"v2\n", "local.tmp": b"tmp\n"}
    for rel, data in ignored.items():
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_bytes(data)
    (proj / "kept.py").write_text("x = 1\n")
    assert cps.diff_stat(cp.id) == DiffStat((FileChange("kept.py", "delete", 0, 1),))
    report = cps.restore_code(cp.id)
    assert (report.restored, report.deleted) == ((), ("kept.py",))
    assert tree_of(proj) == {**before, **ignored, "build": "dir"}


def test_file_ignored_after_it_was_snapshotted_is_kept(proj, cps):
    cp = cps.snapshot("start", {})
    (proj / "gen.txt").write_text("generated\n")
    cps.snapshot("after generating", {})
    (proj / ".gitignore").write_text("gen.txt\n")
    report = cps.restore_code(cp.id)
    assert (report.deleted, report.kept) == ((".gitignore",), ("gen.txt",))
    assert (proj / "gen.txt").read_text() == "generated\n"


def test_size_cap_skips_and_reports_large_files(proj, tmp_path):
    cps = Checkpoints(proj, data_dir=tmp_path / "data", max_file_bytes=1000)
    small = bytes(range(256)) * 2  # binary under the cap: snapshotted like any file
    (proj / "small.bin").write_bytes(small)
    (proj / "grows.txt").write_text("short\n")
    (proj / "big.bin").write_bytes(os.urandom(2000))
    cp = cps.snapshot("start", {})
    assert cp.skipped == (SkippedFile("big.bin", "over size cap", 2000),)
    assert cps.list()[0].skipped == cp.skipped  # stored with the checkpoint
    (proj / "small.bin").write_bytes(b"overwritten")
    (proj / "grows.txt").write_text("x" * 5000)  # now over the cap: leaves later snapshots
    (proj / "huge.bin").write_bytes(os.urandom(3000))  # created after, over the cap: never deleted
    later = cps.snapshot("later", {})
    assert later.skipped == (SkippedFile("big.bin", "over size cap", 2000), SkippedFile("grows.txt", "over size cap", 5000),
                             SkippedFile("huge.bin", "over size cap", 3000))
    report = cps.restore_code(cp.id)
    assert (report.restored, report.deleted) == (("grows.txt", "small.bin"), ())
    assert (proj / "small.bin").read_bytes() == small
    assert (proj / "grows.txt").read_text() == "short\n"
    assert (proj / "huge.bin").stat().st_size == 3000 and (proj / "big.bin").stat().st_size == 2000


def test_modes_symlinks_and_line_endings_round_trip(proj, cps):
    (proj / ".gitattributes").write_text("* text eol=crlf\n")  # must not rewrite bytes on restore
    (proj / "lf.txt").write_bytes(b"a\nb\n")
    (proj / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (proj / "run.sh").chmod(0o755)
    os.symlink("src/app.py", proj / "link.py")
    cp = cps.snapshot("start", {})
    before = tree_of(proj)
    (proj / "lf.txt").write_bytes(b"changed\n")
    (proj / "run.sh").write_text("#!/bin/sh\necho bye\n")
    (proj / "link.py").unlink()
    cps.restore_code(cp.id)
    assert tree_of(proj) == before
    assert os.access(proj / "run.sh", os.X_OK) and (proj / "link.py").is_symlink()


def test_nested_repository_is_skipped_and_left_alone(proj, cps):
    nested = proj / "vendor" / "lib"
    nested.mkdir(parents=True)
    _git(nested, "init", "-q")  # no commit: `git add` of it would fail outright
    (nested / "code.c").write_text("int x;\n")
    cp = cps.snapshot("start", {})
    assert cp.skipped == (SkippedFile("vendor/lib", "nested git repository"),)
    (proj / "README.md").write_text("changed\n")
    report = cps.restore_code(cp.id)
    assert (report.restored, report.deleted) == (("README.md",), ())
    assert (nested / "code.c").read_text() == "int x;\n"


def test_data_dir_inside_the_project_is_never_snapshotted(proj):
    cps = Checkpoints(proj, data_dir=proj / ".agent-data")
    cp = cps.snapshot("start", {})
    transcript = proj / ".agent-data" / "projects" / "x.jsonl"
    transcript.parent.mkdir(parents=True)
    transcript.write_text('{"type": "meta"}\n')
    report = cps.restore_code(cp.id)
    assert (report.restored, report.deleted) == ((), ())
    assert transcript.read_text() == '{"type": "meta"}\n'


def test_list_get_and_unchanged_snapshots(proj, cps):
    assert cps.list() == []
    a = cps.snapshot("prompt one", {"kind": "prompt", "prompt": "fix it", "session_id": "s1", "message_index": 1,
                                    "kv_tokens": 812})
    b = cps.snapshot("prompt two", {"kind": "prompt", "session_id": "s2"})
    c = cps.snapshot("multi\nline  label", {"kind": "tools", "session_id": "s1"})
    assert a.tree == b.tree == c.tree and len({a.id, b.id, c.id}) == 3  # no changes: same tree, new checkpoint
    assert cps.list() == [strip_timing(x) for x in (c, b, a)]
    assert cps.list(session_id="s1") == [strip_timing(c), strip_timing(a)]
    assert cps.get(a.id[:6].upper()) == strip_timing(a)
    with pytest.raises(CheckpointError, match="not a checkpoint id: 'zz'"):
        cps.get("zz")
    with pytest.raises(CheckpointError, match="no checkpoint 0000"):
        cps.get("0000")


def test_concurrent_snapshots_all_recorded(proj, cps):
    errors: list[BaseException] = []

    def take(i: int) -> None:
        try:
            (proj / f"f{i}.txt").write_text(str(i))
            cps.snapshot(f"t{i}", {"i": i})
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=take, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert sorted(c.meta["i"] for c in cps.list()) == [0, 1, 2, 3]


def test_unreadable_file_is_skipped(proj, cps):
    if os.geteuid() == 0:
        pytest.skip("root reads every file")
    secret = proj / "secret.key"
    secret.write_text("k")
    secret.chmod(0)
    cp = cps.snapshot("start", {})
    assert cp.skipped == (SkippedFile("secret.key", "unreadable"),)


def test_snapshot_speed_on_a_few_thousand_files(proj, cps):
    for i in range(3000):
        d = proj / f"pkg{i % 50}"
        d.mkdir(exist_ok=True)
        (d / f"mod{i}.py").write_text(f"x = {i}\n" * 50)
    first = cps.snapshot("first", {})
    time.sleep(1.1)  # past git's racy-timestamp window, as between real prompts
    unchanged = cps.snapshot("unchanged", {})
    (proj / "pkg1" / "mod1.py").write_text("changed\n")
    edited = cps.snapshot("edited", {})
    print(f"\nsnapshot of 3000 files: first {first.duration_s:.3f}s, unchanged {unchanged.duration_s:.3f}s, "
          f"one edit {edited.duration_s:.3f}s")
    assert unchanged.tree == first.tree != edited.tree
    assert unchanged.duration_s < 1.0 and edited.duration_s < 1.0
