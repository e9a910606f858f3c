"""System prompt stability, tool signatures, and the tail context of user messages."""
import datetime
import platform
import subprocess

from agent.core.context import (BASE_SYSTEM_PROMPT, ContextBuilder, environment_facts, render_todos, system_prompt,
                           tool_schemas, tool_signature)
from tools import builtin_tools


def test_system_prompt_is_constant_text_replace_and_append():
    assert system_prompt() == BASE_SYSTEM_PROMPT
    assert system_prompt(append="Answer in French.") == BASE_SYSTEM_PROMPT + "\n\nAnswer in French."
    assert system_prompt("Only this.", "And this.") == "Only this.\n\nAnd this."
    # Nothing volatile may sit in the cached prefix.
    today = datetime.date.today().isoformat()
    assert today not in BASE_SYSTEM_PROMPT and "/" not in BASE_SYSTEM_PROMPT


def test_tool_schemas_are_byte_stable():
    a, b = tool_schemas(builtin_tools()), tool_schemas(builtin_tools())
    assert a == b and [s["function"]["name"] for s in a] == [
        "Read", "Write", "Edit", "MultiEdit", "Bash", "BashOutput", "KillShell", "Grep", "Glob", "LS", "TodoWrite", "WebFetch"]


def test_tool_signature():
    sigs = {t.name: tool_signature(t) for t in builtin_tools()}
    assert sigs["Read"] == "Read(file_path: string, offset?: integer, limit?: integer)"
    assert sigs["Edit"] == "Edit(file_path: string, old_string: string, new_string: string, replace_all?: boolean)"


def test_environment_facts_in_a_git_repo(tmp_path):
    subprocess.run(["git", "init", "-q", "-b", "main"], cwd=tmp_path, check=True)
    (tmp_path / "new.txt").write_text("x")
    facts = environment_facts(tmp_path, datetime.datetime(2025, 3, 4, 5, 6))
    assert facts == (f"Working directory: {tmp_path}\nPlatform: {platform.system().lower()} {platform.release()}\n"
                     "Today's date: 2025-03-04\nGit: branch main, 0 changed, 1 untracked")
    assert environment_facts(tmp_path / "..", datetime.datetime(2025, 3, 4)).endswith("Git: not a git repository")
    # For small models the project's files instead of the working directory: relative paths to copy into file_path
    (tmp_path / "src" / "pkg").mkdir(parents=True)
    (tmp_path / "src" / "pkg" / "mod.py").write_text("x")
    (tmp_path / ".agent").mkdir()
    (tmp_path / ".agent" / "settings.json").write_text("{}")
    (tmp_path / ".gitignore").write_text("build/\n")
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "out.o").write_text("x")
    small = environment_facts(tmp_path, datetime.datetime(2025, 3, 4, 5, 6), list_files=True)
    assert small.startswith("Files: .gitignore, new.txt, src/pkg/mod.py\nPlatform: ") and str(tmp_path) not in small
    for i in range(45):
        (tmp_path / f"f{i:02d}.txt").write_text("x")
    many = environment_facts(tmp_path, list_files=True).splitlines()[0]
    assert many.count(", ") == 39 and many.endswith(" and 8 more")


def test_first_message_carries_memory_and_env_later_ones_only_what_changed(tmp_path):
    (tmp_path / "AGENTS.md").write_text("Use tabs.\n")
    b = ContextBuilder(tmp_path, tmp_path, tmp_path / "nohome", tmp_path / "noclaude")
    first = b.user_content("fix it", first=True, todos=[])
    head, env, prompt = first.split("\n\n<env>\n")[0], first.split("<env>\n")[1].split("\n</env>")[0], first.rsplit("\n\n", 1)[1]
    assert head == f"<memory>\nContents of {tmp_path / 'AGENTS.md'} (instructions from the user or project; follow them):\n\nUse tabs.\n</memory>"
    assert env.startswith(f"Working directory: {tmp_path}\n") and prompt == "fix it"
    todos = [{"content": "write test", "status": "in_progress"}, {"content": "fix bug", "status": "pending"}]
    assert b.user_content("next", first=False, todos=todos) == "<todos>\n[>] write test\n[ ] fix bug\n</todos>\n\nnext"
    assert b.user_content("again", first=False, todos=todos) == "again"  # unchanged list: not repeated
    assert b.user_content("more", first=False, todos=[], extra="hook says hi") == "<context>\nhook says hi\n</context>\n\nmore"


def test_render_todos():
    assert render_todos([{"content": "a", "status": "completed"}, {"content": "b", "status": "weird"}]) == "[x] a\n[ ] b"
