"""The UI-neutral pieces: prompt history, slash commands, the interactive core, and the bridge's coalescing."""
import json
import threading
import time

from agent.core import events as ev
from agent.engines.scripted import ScriptedEngine
from agent.ui.history import HistoryCursor, PromptHistory, history_path
from agent.core.approval import PermissionAnswer
from agent.session.builder import build_session
from agent.session.options import SessionOptions
from agent.core.model_text import user_text
from agent.session.core import SessionCore
from agent.session.status import StatusInfo, format_status
from agent.ui.slash import SlashRegistry
from agent.ui.tui import messages as m
from agent.ui.tui.bridge import Bridge
from runtime.api import Usage


def core(proj, turns=(), **options) -> SessionCore:
    return build_session(SessionOptions(project=proj, engine="scripted", **options), engine=ScriptedEngine(list(turns)))


def test_history_persists_per_project_and_skips_repeats(proj, tmp_path):
    h = PromptHistory.for_project(proj)
    for p in ["one", "two", "two", "  ", "three\nlines"]:
        h.add(p)
    assert history_path(proj).parent == tmp_path / "data" / "history"
    assert json.loads(history_path(proj).read_text()) == ["one", "two", "three\nlines"]
    assert PromptHistory.for_project(proj).entries == ["one", "two", "three\nlines"]
    assert PromptHistory.for_project(tmp_path).entries == []  # another project, another history

    cursor = HistoryCursor(PromptHistory.for_project(proj))
    assert [cursor.older("draft"), cursor.older(""), cursor.older(""), cursor.older("")] == \
        ["three\nlines", "two", "one", None]
    assert [cursor.newer(), cursor.newer(), cursor.newer(), cursor.newer()] == ["two", "three\nlines", "draft", None]


def test_a_broken_history_file_reads_as_empty_with_a_note(proj):
    path = history_path(proj)
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    h = PromptHistory.for_project(proj)
    assert h.entries == [] and h.error == f"prompt history {path} is unreadable (JSONDecodeError); starting empty"
    h.add("fresh")
    assert json.loads(path.read_text()) == ["fresh"]


def test_slash_registry_builtins_user_commands_and_skills(proj):
    (proj / ".agent" / "commands").mkdir(parents=True)
    (proj / ".agent" / "commands" / "greet.md").write_text(
        "---\ndescription: Say hello\nargument-hint: NAME\n---\nSay hello to $1 in $ARGUMENTS.\n")
    skill = proj / ".agent" / "skills" / "deploy"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it\n---\nDeploy to $ARGUMENTS now.\n")
    registry = SlashRegistry(proj)
    c = core(proj)
    names = [cmd.name for cmd in registry.commands()]
    assert names[:16] == ["help", "clear", "compact", "rewind", "model", "status", "cost", "permissions", "hooks",
                          "mcp", "skills", "agents", "resume", "init", "bashes", "exit"]
    assert {"greet", "deploy", "review", "commit", "fix-tests"} <= set(names[15:])
    assert registry.run(c, "/greet Ada prod").prompt == "Say hello to Ada in Ada prod."
    assert registry.run(c, "/deploy staging").prompt == \
        f"Base directory for this skill: {skill}\n\nDeploy to staging now.\n"
    assert registry.run(c, "/compact").text == "Cannot compact: there is nothing to compact yet."
    assert registry.run(c, "/quit").exit
    assert registry.run(c, "/init").prompt.startswith("Write an AGENTS.md file at the root of this repository")
    assert [SlashRegistry.is_command(x) for x in ["/help", "/usr/bin/env is odd", "/", "plain"]] == \
        [True, False, False, False]


def test_cost_status_and_permissions_commands_report_the_session(proj):
    c = core(proj, [{"text": "Hi."}], allowed=["Read"])
    c.run("hello", threading.Event())
    registry = SlashRegistry(proj)
    t = c.totals
    assert registry.run(c, "/cost").text == (
        f"This session: 1 engine calls; prompt tokens {t.prompt_tokens} (0% reused): 0 from the KV cache, "
        f"{t.prompt_tokens} prefilled; {t.generated_tokens} generated. Cost: $0 (the model runs locally).")
    status = registry.run(c, "/status").text
    assert f"- Session: `{c.session.session_id}`" in status and "- Directory: ~/proj (branch main)" in status
    assert registry.run(c, "/permissions").text.splitlines()[:4] == [
        "Mode: **default** (Shift+Tab cycles default → acceptEdits → plan)", "", "**allow**", "- `Read` (--allowedTools)"]


def test_resume_lists_and_reopens_a_session(proj):
    first = core(proj, [{"text": "Earlier answer."}])
    first.run("the earlier question", threading.Event())
    old_id = first.session.session_id
    first.close()
    c = core(proj)
    registry = SlashRegistry(proj)
    listing = registry.run(c, "/resume").text.splitlines()
    assert listing[0] == "Recent sessions (resume one with `/resume ID`):"
    assert listing[1].startswith(f"- `{old_id}` ") and listing[1].endswith(": the earlier question")
    res = registry.run(c, f"/resume {old_id}")
    assert res.new_transcript and c.session.session_id == old_id
    assert [user_text(x["content"]) for x in c.session.messages if x["role"] == "user"] == ["the earlier question"]
    assert registry.run(c, "/resume nope").text.startswith("Cannot resume: no session nope")


def test_mode_cycle_includes_bypass_only_when_started_in_it(proj):
    c = core(proj)
    assert [c.cycle_mode() for _ in range(4)] == ["acceptEdits", "plan", "default", "acceptEdits"]
    b = core(proj, permission_mode="bypassPermissions")
    assert [b.cycle_mode() for _ in range(4)] == ["default", "acceptEdits", "plan", "bypassPermissions"]


def test_permission_answers_become_approvals_and_rules(proj):
    c = core(proj)
    answers = iter([PermissionAnswer("always"), PermissionAnswer("deny", " try make test ")])
    asked = []
    c.ask = lambda req: asked.append(req) or next(answers)
    assert c.approve("Bash", {"command": "npm run build && rm -rf dist"}, "needs approval").allow
    assert [(r.tool_name, r.rules, r.preview) for r in asked] == \
        [("Bash", ["Bash(npm run build:*)", "Bash(rm -rf dist)"], None)]
    assert json.loads((proj / ".agent" / "settings.local.json").read_text()) == \
        {"permissions": {"allow": ["Bash(npm run build:*)", "Bash(rm -rf dist)"]}}
    assert c.permissions.check("Bash", {"command": "npm run build -- --prod"}, False).behavior == "allow"
    denied = c.approve("Write", {"file_path": "calc.py", "content": "x = 1\n"}, "")
    assert (denied.allow, denied.reason) == (False, "the user declined it. The user says: try make test")
    assert asked[1].preview == ("--- a/calc.py\n+++ b/calc.py\n@@ -1,2 +1 @@\n-def add(a, b):\n-    return a - b\n"
                                "+x = 1\n")


def test_status_line_and_user_text():
    info = StatusInfo(model="qwen", mode="plan", context_used=1234, context_limit=32768, reuse_pct=97.4,
                      ttft_s=0.31, decode_tps=21.04, spec_accept_pct=62.5, cwd="~/proj", branch="main")
    assert format_status(info) == ("plan · qwen · ctx 1.2k/32.8k (4%) · KV reuse 97% · TTFT 0.31s · 21.0 tok/s · "
                                   "spec 62% · ~/proj (main)")
    content = "<memory>\nbe nice\n</memory>\n\n<env>\nWorking directory: /x\n</env>\n\nfix it\n\nplease"
    assert user_text(content) == "fix it\n\nplease"
    assert user_text('look @a.py\n\n<attached-file path="a.py">\n1\tx\n</attached-file>') == "look @a.py"


def test_bridge_coalesces_a_token_flood_and_keeps_order():
    posted = []
    bridge = Bridge(posted.append)
    t0 = time.monotonic()
    for i in range(5000):
        bridge(ev.TextDelta(text=f"{i} "))
    elapsed = time.monotonic() - t0
    bridge(ev.AssistantTurn(message={"role": "assistant", "content": "..."}, turn=1, stop_reason="end_turn",
                            usage=Usage()))
    chunks = [p.text for p in posted if isinstance(p, m.TextChunk)]
    assert "".join(chunks) == "".join(f"{i} " for i in range(5000))
    assert len(chunks) <= 2 + elapsed / 0.05  # at most one post per 50 ms, plus the flush before the turn
    assert isinstance(posted[-1], m.AssistantDone) and isinstance(posted[-2], m.TextChunk)


def test_bridge_permission_wait_ends_on_interrupt():
    posted = []
    bridge = Bridge(posted.append)
    bridge.cancel = threading.Event()
    threading.Timer(0.1, bridge.cancel.set).start()
    from agent.core.approval import PermissionRequest
    answer = bridge.ask(PermissionRequest("Bash", {"command": "ls"}, "", []))
    assert answer == PermissionAnswer("deny", "the user interrupted the session")
    assert isinstance(posted[0], m.PermissionAsked) and posted[0].future.cancelled()


def test_mentions_attach_existing_files_only(proj):
    c = core(proj)
    text = c.attach_mentions("compare @calc.py with @missing.py, mail me@example.com")
    assert text == ('compare @calc.py with @missing.py, mail me@example.com\n\n<attached-file path="calc.py">\n'
                    '     1\tdef add(a, b):\n     2\t    return a - b\n</attached-file>')
    assert str(proj / "calc.py") in c.ctx.read_files
    assert c.attach_mentions("no mentions") == "no mentions"


def test_file_completion_ranks_prefix_then_name_then_substring(proj):
    for rel in ["src/calc_test.py", "docs/calculus.md", "lib/mycalc.py"]:
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text("x\n")
    registry = SlashRegistry(proj)
    assert registry.complete_file("calc") == ["calc.py", "docs/calculus.md", "src/calc_test.py", "lib/mycalc.py"]
    assert registry.complete_file("src/") == ["src/calc_test.py"]


def test_messages_post_in_the_order_events_arrive():
    posted = []
    bridge = Bridge(posted.append)
    bridge(ev.PreToolUse(tool_name="Read", tool_input={"file_path": "a"}, tool_use_id="toolu_1"))
    bridge(ev.EngineProgress(what="prefill", done=1, total=4))
    bridge(ev.TurnUsage(turn=1, usage=Usage()))
    assert [type(p).__name__ for p in posted] == ["ToolStarted", "EngineProgressed", "UsageUpdated"]
