"""File watching with real inotify events: stale reads, the agent's own writes, config reloads, clean shutdown."""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path

from agent.services.watch import ConfigWatcher, FileWatcher, config_roots, stale_notice
from tools.base import ToolContext
from tools.edit import EditTool
from tools.read import ReadTool
from tools.write import WriteTool

DEADLINE_S = 5.0


def wait_for(predicate, timeout: float = DEADLINE_S):
    """Poll until predicate() is truthy (returns it) or the deadline passes (returns the last value)."""
    end = time.monotonic() + timeout
    while True:
        value = predicate()
        if value or time.monotonic() > end:
            return value
        time.sleep(0.02)


def read(ctx: ToolContext, path: str) -> None:
    assert not ReadTool().run({"file_path": path}, ctx).is_error


def setup(tmp_path: Path) -> tuple[ToolContext, Path]:
    (tmp_path / "src").mkdir()
    f = tmp_path / "src" / "app.py"
    f.write_text("x = 1\n")
    ctx = ToolContext(cwd=tmp_path)
    read(ctx, "src/app.py")
    return ctx, f


def test_external_edit_is_detected(tmp_path):
    ctx, f = setup(tmp_path)
    calls: list[set[str]] = []
    with FileWatcher(ctx.read_files, on_change=calls.append) as w:
        assert w.stale() == set()
        f.write_text("x = 2  # edited in another window\n")
        assert wait_for(lambda: calls) == [{str(f)}]
        assert w.stale() == {str(f)}
        assert w.new_stale() == {str(f)}
        assert w.new_stale() == set()  # told once
        assert w.stale() == {str(f)}  # still stale until read again
        read(ctx, "src/app.py")
        assert w.stale() == set()
        assert stale_notice({str(f)}, tmp_path) == ("These files changed on disk since you last read them; "
                                                    "Read them again before editing: src/app.py")
        assert stale_notice(set(), tmp_path) is None


def test_the_agents_own_writes_are_not_stale(tmp_path):
    ctx, f = setup(tmp_path)
    calls: list[set[str]] = []
    with FileWatcher(ctx.read_files, on_change=calls.append, debounce_s=0.1) as w:
        assert not EditTool().run({"file_path": "src/app.py", "old_string": "x = 1", "new_string": "x = 10"},
                                  ctx).is_error
        assert not WriteTool().run({"file_path": "src/new.py", "content": "y = 1\n"}, ctx).is_error
        time.sleep(0.5)  # well past the debounce: any notification would have arrived
        assert (w.stale(), calls) == (set(), [])
        # The file written by the agent is now known; an external change to it is caught.
        (tmp_path / "src" / "new.py").write_text("y = 2\n")
        assert wait_for(lambda: calls) == [{str(tmp_path / "src" / "new.py")}]


def test_deleted_and_replaced_files_are_stale(tmp_path):
    ctx, f = setup(tmp_path)
    other = tmp_path / "other.txt"
    other.write_text("a\n")
    read(ctx, "other.txt")
    with FileWatcher(ctx.read_files) as w:
        f.unlink()
        tmp = tmp_path / "other.txt.tmp"
        tmp.write_text("replaced atomically\n")
        os.replace(tmp, other)  # what editors and formatters do
        assert wait_for(lambda: w.stale() == {str(f), str(other)})


def test_files_read_after_start_are_watched(tmp_path):
    ctx = ToolContext(cwd=tmp_path)
    with FileWatcher(lambda: ctx.read_files) as w:
        (tmp_path / "late").mkdir()
        late = tmp_path / "late" / "l.txt"
        late.write_text("1\n")
        read(ctx, "late/l.txt")
        w.refresh()
        late.write_text("22\n")
        assert wait_for(lambda: w.stale()) == {str(late)}


def test_polling_fallback_when_no_directory_may_be_watched(tmp_path):
    ctx, f = setup(tmp_path)
    with FileWatcher(ctx.read_files, max_dirs=0) as w:
        f.write_text("changed with no watch at all\n")
        assert w.stale() == {str(f)}  # found by comparing stamps, without any event


def test_config_reload_on_settings_change(tmp_path):
    project = tmp_path / "proj"
    (project / ".agent").mkdir(parents=True)
    reloads: list[set[str]] = []
    roots = [project / ".agent", project / ".claude"]
    with ConfigWatcher(roots, reloads.append, debounce_s=0.2):
        settings = project / ".agent" / "settings.json"
        for i in range(5):  # a burst of writes: one reload
            settings.write_text(f'{{"model": "m{i}"}}')
        assert wait_for(lambda: reloads) == [{str(settings)}]
        time.sleep(0.4)
        assert reloads == [{str(settings)}]
        (project / ".agent" / "notes.txt").write_text("not configuration")
        time.sleep(0.5)
        assert len(reloads) == 1
        # A directory that did not exist when watching began, written into at once (before its watch can exist).
        reloads.clear()
        (project / ".claude" / "agents").mkdir(parents=True)
        agent_file = project / ".claude" / "agents" / "reviewer.md"
        agent_file.write_text("---\nname: reviewer\n---\n")
        assert wait_for(lambda: any(str(agent_file) in r for r in reloads))
        # Once watched, a later file there is seen by its own event.
        later = project / ".claude" / "agents" / "tester.md"
        time.sleep(0.3)
        later.write_text("---\nname: tester\n---\n")
        assert wait_for(lambda: any(str(later) in r for r in reloads))


def test_reload_errors_are_kept_and_watching_continues(tmp_path):
    root = tmp_path / ".agent"
    root.mkdir()
    seen: list[set[str]] = []

    def reload(paths: set[str]) -> None:
        seen.append(paths)
        if len(seen) == 1:
            raise ValueError("bad json")

    with ConfigWatcher([root], reload, debounce_s=0.1) as w:
        (root / "settings.json").write_text("{")
        assert wait_for(lambda: w.errors) == ["reload failed: ValueError: bad json"]
        (root / "settings.local.json").write_text("{}")
        assert wait_for(lambda: len(seen) == 2)


def test_close_joins_every_thread(tmp_path):
    ctx, f = setup(tmp_path)
    before = set(threading.enumerate())
    fw = FileWatcher(ctx.read_files).start()
    cw = ConfigWatcher([tmp_path / ".agent"], lambda paths: None).start()
    assert set(threading.enumerate()) - before  # observers, emitters and debouncers are running
    fw.close()
    cw.close()
    assert wait_for(lambda: set(threading.enumerate()) <= before, timeout=2.0)


def test_config_roots(tmp_path):
    p = tmp_path / "proj"
    assert config_roots(p, tmp_path / "home-agent", tmp_path / "home-claude") == [p / ".agent", p / ".claude", p / ".agents", tmp_path / "home-agent",
                               tmp_path / "home-claude"]


def test_directory_deleted_and_recreated_is_watched_again(tmp_path):
    ctx, f = setup(tmp_path)
    calls: list[set[str]] = []
    with FileWatcher(ctx.read_files, on_change=calls.append, debounce_s=0.05) as w:
        f.unlink()
        f.parent.rmdir()
        assert wait_for(lambda: w.stale()) == {str(f)}
        f.parent.mkdir()
        f.write_text("x = 1\n")
        read(ctx, "src/app.py")
        assert w.stale() == set()  # re-read: fresh, and the directory is watched again
        calls.clear()
        f.write_text("x = 3  # external\n")
        assert wait_for(lambda: calls) == [{str(f)}]  # on_change comes from events only: the new watch works
