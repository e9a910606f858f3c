"""The pipeline's one-tool routes (plan mode, skills, subagents, file listings) with the scripted engine, real
files and the real harness (skills discovered from disk, a real child agent for Task)."""
import pytest

from agent.core import events as ev
from agent.core.loop import Agent, LoopConfig
from agent.core.permissions import Permissions
from agent.core.profile import choose_profile
from agent.core.results import headless_approver
from agent.core.transcript import Session
from agent.engines.scripted import ScriptedEngine
from agent.harness.harness import Harness, attach_harness
from agent.harness.tools import harness_tools, offered_order
from agent.pipeline.driver import PipelineDriver
from agent.pipeline.localize import localize
from agent.pipeline.route import plan_request
from hooks.settings import PermissionSettings, SourcedRule
from tools import builtin_tools
from tools.base import ToolContext

BUGGY = "def add(a, b):\n    return a - b\n"
CHANGELOG_SKILL = ("---\nname: changelog\ndescription: Creates CHANGELOG.md for this project.\n---\n"
                   "Create the file CHANGELOG.md with exactly these two lines:\n# Changelog\n- r17: first release\n")
CODEWORD_SKILL = ("---\nname: release-checklist\ndescription: The release checklist.\n---\n"
                  "1. Run the tests.\n2. Tag the commit.\nThe release code word is PLUM-7731.\n")


@pytest.fixture
def proj(tmp_path, monkeypatch):
    for name in ("AGENT_DATA_DIR", "HOME", "AGENT_HOME", "CLAUDE_CONFIG_DIR"):
        monkeypatch.setenv(name, str(tmp_path / name.lower()))
    p = tmp_path / "proj"
    p.mkdir()
    (p / "calc.py").write_text(BUGGY)
    (p / "README.md").write_text("# Calc\nMissing: tests, CI.\n")
    for name, body in (("changelog", CHANGELOG_SKILL), ("release-checklist", CODEWORD_SKILL)):
        (p / ".agent" / "skills" / name).mkdir(parents=True)
        (p / ".agent" / "skills" / name / "SKILL.md").write_text(body)
    return p


def make(proj, turns, mode="acceptEdits"):
    engine = ScriptedEngine(turns)
    settings = PermissionSettings(allow=[SourcedRule("Bash", "test")])
    agent = Agent(engine, offered_order(builtin_tools() + harness_tools()), Session.create(proj),
                  ToolContext(cwd=proj, read_window=200), system_prompt="s", approver=headless_approver,
                  permissions=Permissions(settings, mode, proj), profile=choose_profile(None, "small"),
                  config=LoopConfig(max_turns=8))
    agent.driver = PipelineDriver(proj)
    attach_harness(agent, Harness.discover(proj))
    steps = []
    agent.bus.subscribe(lambda e: steps.append((e.step, e.detail)) if isinstance(e, ev.PipelineStep) else None)
    return agent, engine, steps


def calls(agent):
    return [(c["function"]["name"], c["function"]["arguments"])
            for m in agent.session.messages for c in m.get("tool_calls") or []]


def test_routes_for_plan_mode_skills_subagents_and_listings(proj):
    (proj / "src").mkdir()
    offered = {"Read", "Glob", "Skill", "Task", "Write", "Edit", "Bash"}

    def plan(prompt, **kw):
        return plan_request(prompt, localize(proj, prompt), proj, **{"offered": offered, **kw})

    assert plan("Fix calc.py", mode="plan").kind == "plan"
    skill = plan("Use the release-checklist skill and tell me its code word.", skills=("release-checklist", "commit"))
    assert (skill.kind, skill.call) == ("skill", {"skill": "release-checklist"})
    assert plan("Use the commit skill").kind == "react"  # no such skill offered: the free loop
    task = plan("Use the Task tool to have a subagent find which file defines Ledger, then tell me its path.")
    assert (task.kind, task.call) == ("delegate", {"description": "Find which file defines Ledger.",
                                                   "prompt": "Find which file defines Ledger. Report what you find.",
                                                   "subagent_type": "Explore"})
    assert plan("Ask a subagent to fix calc.py").call["subagent_type"] == "general-purpose"
    assert plan("Ask a subagent to read calc.py", offered=offered - {"Task"}).kind == "answer"  # a child's view
    listing = plan("How many .py files are there under src/, including subdirectories?")
    assert (listing.kind, listing.call) == ("list", {"pattern": "**/*.py", "path": "src"})
    assert plan("Fix the .py files under src").kind != "list"  # a change, not a question about files


def test_plan_mode_reads_the_files_and_writes_a_plan_without_changing_anything(proj):
    agent, engine, steps = make(proj, [{"text": "1. In calc.py, change `a - b` to `a + b` in add()."}], mode="plan")
    result = agent.run("calc.py's add() subtracts instead of adding. Fix it.")
    assert result.text.startswith("1. In calc.py") and (proj / "calc.py").read_text() == BUGGY
    assert calls(agent) == [("Read", {"file_path": "calc.py"}), ("Read", {"file_path": "README.md"})]
    tool_results = [m["content"] for m in agent.session.messages if m["role"] == "tool"]
    assert "return a - b" in tool_results[0] and "Missing: tests" in tool_results[1]
    assert [r.tool_choice for r in engine.requests] == ["none"]
    assert "Plan mode is on" in engine.requests[0].messages[-1]["content"]
    assert steps[-1] == ("answer", "plan")


def test_a_skill_that_asks_for_a_file_is_loaded_then_the_file_is_written(proj):
    agent, engine, steps = make(proj, [{"text": "```markdown\n# Changelog\n- r17: first release\n```"}])
    result = agent.run("Use the changelog skill to create this project's changelog.")
    assert (proj / "CHANGELOG.md").read_text() == "# Changelog\n- r17: first release\n"
    assert [c for c in calls(agent)][0] == ("Skill", {"skill": "changelog"})
    assert result.text == "Changed CHANGELOG.md."
    assert engine.requests[0].reply_prefix == "```markdown\n"  # the new file, written whole


def test_a_skill_that_answers_a_question_is_loaded_then_answered_in_text(proj):
    agent, engine, _ = make(proj, [{"text": "The release code word is PLUM-7731."}])
    result = agent.run("Use the release-checklist skill and tell me the release code word it gives.")
    assert result.text == "The release code word is PLUM-7731."
    assert calls(agent) == [("Skill", {"skill": "release-checklist"})]
    assert [r.tool_choice for r in engine.requests] == ["none"]
    assert "PLUM-7731" in engine.requests[0].messages[-2]["content"]  # the skill body, a tool result


def test_a_subagent_request_runs_a_child_pipeline_and_answers_from_its_report(proj):
    (proj / "services").mkdir()
    (proj / "services" / "db.conf").write_text("[db]\nhost = db.internal\nport = 55432\n")
    agent, engine, _ = make(proj, [{"text": "The database port is 55432."}, {"text": "The port is 55432."}])
    result = agent.run("Ask a subagent (Task tool) to read services/db.conf and report the database port, "
                       "then tell me the port.")
    assert result.text == "The port is 55432."
    (name, args), = calls(agent)
    assert (name, args["subagent_type"], args["prompt"]) == (
        "Task", "Explore", "Read services/db.conf and report the database port. Report what you find.")
    child, parent = engine.requests
    assert child.tool_choice == "none" and "port = 55432" in child.messages[-2]["content"]  # attached to the child
    assert "The database port is 55432." in parent.messages[-2]["content"]  # the child's report


def test_a_question_about_files_of_a_kind_is_a_glob_call_and_a_counted_answer(proj):
    for rel in ("src/a.py", "src/pkg/b.py", "src/pkg/deep/c.py", "src/notes.txt", "top.py"):
        (proj / rel).parent.mkdir(parents=True, exist_ok=True)
        (proj / rel).write_text("x = 1\n")
    agent, engine, _ = make(proj, [{"text": "There are 3 .py files under src/."}])
    result = agent.run("How many .py files are there under src/, including its subdirectories?")
    assert result.text == "There are 3 .py files under src/."
    assert calls(agent) == [("Glob", {"pattern": "**/*.py", "path": "src"})]
    assert "Glob found 3 files matching **/*.py." in engine.requests[0].messages[-1]["content"]


def test_a_read_denied_file_never_reaches_the_search_results_or_the_attachments(proj):
    (proj / "notes.txt").write_text("Project codename: BLUE-HERON\n")
    (proj / "secrets.env").write_text("API_KEY=sk-live-123\n")
    engine = ScriptedEngine([{"text": "The codename is BLUE-HERON; the key is not readable."}])
    settings = PermissionSettings(deny=[SourcedRule("Read(./secrets.env)", "test")])
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj), system_prompt="s",
                  permissions=Permissions(settings, "default", proj), profile=choose_profile(None, "small"),
                  config=LoopConfig(max_turns=4))
    agent.driver = PipelineDriver(proj)
    agent.run("Tell me the project codename from notes.txt, and the API key from secrets.env.")
    seen = "\n".join(str(m.get("content")) for m in engine.requests[0].messages)
    assert "BLUE-HERON" in seen and "sk-live" not in seen and "API_KEY" not in seen


def test_a_question_followed_by_an_order_to_change_is_an_edit(pipeline_proj):
    p = pipeline_proj.resolve()
    (p / "stats.py").write_text("def average(xs):\n    return sum(xs) / len(xs)\n")
    (p / "app.py").write_text("from stats import average\nprint(average([]))\n")
    plan = lambda prompt: plan_request(prompt, localize(p, prompt), p)  # noqa: E731
    fix = plan("Why does python app.py crash with a ZeroDivisionError? Fix it; app.py is right as it is.")
    assert (fix.kind, fix.targets) == ("edit", [p / "stats.py"])
    assert p / "stats.py" in plan("Why does python app.py crash? Please fix the bug in stats.py.").targets
    assert plan("Why does app.py import stats.py? I want to change it later.").kind == "answer"  # no order
    assert plan("What would fix app.py?").kind == "answer"


def test_a_failing_test_of_a_src_layout_points_at_its_package_module(pipeline_proj):
    p = pipeline_proj.resolve()
    (p / "src" / "kit").mkdir(parents=True)
    (p / "tests").mkdir()
    (p / "src" / "kit" / "__init__.py").write_text("")
    (p / "src" / "kit" / "wrap.py").write_text("from .util import clip\n\n\ndef cut(t, n):\n    return clip(t)[:n]\n")
    (p / "src" / "kit" / "util.py").write_text("def clip(t):\n    return t.strip()\n")
    (p / "tests" / "test_wrap.py").write_text("from kit.wrap import cut\n\n\ndef test_cut():\n"
                                              "    assert cut(' ab ', 1) == 'a'\n")
    plan = plan_request("tests/test_wrap.py fails. Fix the bug; the tests are right.",
                        localize(p, "tests/test_wrap.py fails."), p)
    # The module the test imports, then the one it imports relatively: two suspects.
    assert (plan.kind, plan.targets, plan.locate) == ("edit", [p / "src/kit/wrap.py", p / "src/kit/util.py"], True)


def test_a_function_named_without_its_file_is_changed_where_it_is_defined(proj):
    (proj / "report.py").write_text("from calc import add\n\n\nprint(add(2, 3))\n")
    (proj / "totals.py").write_text("import calc\n\n\ndef total(xs):\n    return calc.add(xs[0], xs[1])\n")
    prompt = "add() returns the wrong result. Make it return a + b."
    plan = plan_request(prompt, localize(proj, prompt), proj, offered={"Bash", "Edit", "Write"})
    assert plan.kind == "edit" and plan.targets == [proj / "calc.py"]  # not its callers
    prompt = "Rename the parameters of add() to x and y, and update every place that calls it."
    plan = plan_request(prompt, localize(proj, prompt), proj, offered={"Bash", "Edit", "Write"})
    assert set(plan.targets) == {proj / "calc.py", proj / "report.py", proj / "totals.py"}
