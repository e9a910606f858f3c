"""The small-model task pipeline (agent/pipeline) with the scripted engine, real files, real pytest runs."""
import json
import subprocess
from pathlib import Path

import pytest

from agent.core import events as ev
from agent.core.loop import Agent, LoopConfig
from agent.core.model_text import fenced_block
from agent.core.permissions import Permissions
from agent.core.profile import ProfileError, choose_profile
from agent.core.transcript import Session
from agent.engines.scripted import ScriptedEngine
from agent.pipeline.checks import check_commands, related_tests
from agent.pipeline.driver import PipelineDriver
from agent.pipeline.localize import localize
from agent.pipeline.route import plan_request
from hooks.settings import PermissionSettings, SourcedRule
from tools import builtin_tools
from tools.base import ToolContext

BUGGY = "def add(a, b):\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n"
FIXED = BUGGY.replace("a - b", "a + b")
TESTS = "from calc import add, mul\n\n\ndef test_add():\n    assert add(2, 3) == 5\n\n\ndef test_mul():\n    assert mul(2, 3) == 6\n"


@pytest.fixture
def proj(tmp_path, monkeypatch):
    monkeypatch.setenv("AGENT_DATA_DIR", str(tmp_path / "data"))
    p = tmp_path / "proj"
    p.mkdir()
    (p / "calc.py").write_text(BUGGY)
    (p / "test_calc.py").write_text(TESTS)
    return p


def make(proj, turns, allow=("Bash",), mode="acceptEdits"):
    engine = ScriptedEngine(turns)
    settings = PermissionSettings(allow=[SourcedRule(r, "test") for r in allow])
    profile = choose_profile(None, "small")
    agent = Agent(engine, builtin_tools(), Session.create(proj), ToolContext(cwd=proj, read_window=200),
                  system_prompt="s", permissions=Permissions(settings, mode, proj), profile=profile,
                  config=LoopConfig(max_turns=8))
    agent.driver = PipelineDriver(proj)
    steps = []
    agent.bus.subscribe(lambda e: steps.append((e.step, e.detail)) if isinstance(e, ev.PipelineStep) else None)
    return agent, engine, steps


def block(text, lang="python"):
    return {"text": f"```{lang}\n{text}```"}


def test_localize_finds_named_files_missing_ones_and_where_terms_occur(proj):
    (proj / "pkg").mkdir()
    (proj / "pkg" / "util.py").write_text("def get_usr():\n    return 'quota exceeded'\n")
    loc = localize(proj, "Rename get_usr in pkg/util.py and calc.py; create notes.md. Why 'quota exceeded'?")
    assert loc.named == [proj / "pkg/util.py", proj / "calc.py"]
    assert (loc.missing, loc.terms) == (["notes.md"], ["quota exceeded", "get_usr"])
    assert loc.hits == {proj / "pkg/util.py": [1, 2]}


def test_dotfiles_and_conventional_names_are_files_and_making_one_is_an_edit(proj):
    plan = lambda prompt: plan_request(prompt, localize(proj, prompt), proj)  # noqa: E731
    for prompt, name in (("Create a .gitignore for this Python project.", ".gitignore"),
                         ("Write a Dockerfile for this project.", "Dockerfile"),
                         ("Add a .editorconfig file with 4-space indents.", ".editorconfig"),
                         ("Add a Makefile with a test target.", "Makefile")):
        assert localize(proj, prompt).missing == [name]
        assert (plan(prompt).kind, plan(prompt).targets) == ("edit", [proj / name])
    # The files a new file's request names are what it reads, unless it also asks to change them.
    made = plan("Write a Dockerfile for this project that runs calc.py.")
    assert (made.targets, made.context) == ([proj / "Dockerfile"], [proj / "calc.py"])
    assert plan("Fix calc.py and create notes.md.").targets == [proj / "calc.py", proj / "notes.md"]
    # An extension alone is not a file; a file the request only mentions is not made.
    assert localize(proj, "How many .py files are there?").missing == []
    assert plan("What should a Dockerfile for this project contain?").targets == []


def test_plans_route_edits_answers_and_free_work(proj):
    plan = lambda prompt, **kw: plan_request(prompt, localize(proj, prompt), proj, **kw)  # noqa: E731
    edit = plan("The test test_add fails. Fix the bug in calc.py.")
    assert (edit.kind, edit.targets, edit.context) == ("edit", [proj / "calc.py"], [proj / "calc.py", proj / "test_calc.py"])
    # Only the failing test is named: the module it imports is where the bug is.
    assert plan("test_calc.py fails; fix it, don't change the tests.").targets == [proj / "calc.py"]
    assert plan("Add a test for mul to test_calc.py").targets == [proj / "test_calc.py"]
    assert plan("Create hello.txt that says hi").targets == [proj / "hello.txt"]
    assert (plan("What does add in calc.py return?").kind, plan("Run python calc.py").kind) == ("answer", "shell")
    assert plan("Fix calc.py", mode="plan").kind == "plan"
    assert plan("Use the commit skill", offered={"Skill"}).kind == "react"  # a skill not offered: the free loop
    # A failure stated without a verb for the fix is a request for it; asked about, it wants an answer.
    (proj / "main.py").write_text("from calc import add\nprint(add(2, 3))\n")
    for report, target in (("python main.py crashes with a ValueError. It should print the sum; main.py is right "
                            "as it is.", "calc.py"), ("test_calc.py fails.", "calc.py"),
                           ("python main.py doesn't work since the last change.", "main.py"),
                           ("test_calc.py is failing. Please take a look.", "calc.py"),
                           ("When I run python main.py I get KeyError 'x'.", "main.py"),
                           ('python main.py shows "5" but it needs two decimals, like "5.00".', "main.py"),
                           ("python main.py lists them Z to A; it should list them A to Z.", "main.py")):
        assert (plan(report).kind, plan(report).targets[:1]) == ("edit", [proj / target]), report
    for ask in ("Why does python main.py crash?", "Run the tests and tell me how many fail.",
                "Does test_calc.py fail?", "Run pytest and list the tests that fail", "When does main.py fail?",
                "The build is failing; explain why.", "What should python main.py print?"):
        assert plan(ask).kind in ("shell", "answer", "react"), ask  # not an edit


def test_checks_are_the_named_or_related_tests_and_named_scripts(proj):
    (proj / "main.py").write_text("import calc\nprint(calc.add(1, 2))\n")
    loc = localize(proj, "Fix calc.py")
    assert related_tests(proj, [proj / "calc.py"]) == [proj / "test_calc.py"]
    assert check_commands(proj, "Fix calc.py", loc, [proj / "calc.py"]) == ["python -m pytest -q -x test_calc.py"]
    prompt = "Running python main.py prints -1; fix calc.py so that it prints 3."
    assert check_commands(proj, prompt, localize(proj, prompt), [proj / "calc.py"]) == [
        "python -m pytest -q -x test_calc.py", "python main.py"]


def test_a_whole_file_edit_is_a_write_in_the_history_and_its_check_passes(proj):
    agent, engine, steps = make(proj, [block(FIXED)])
    result = agent.run("The test test_add fails. Fix the bug in calc.py.")
    assert (result.stop_reason, result.text) == ("end_turn", "Changed calc.py; `python -m pytest -q -x test_calc.py` passed.")
    assert (proj / "calc.py").read_text() == FIXED
    # The request reports a failing test: it runs first, so the model sees the failure before it edits.
    assert [s for s, _ in steps] == ["localize", "reproduce", "edit", "check", "answer"]
    first = engine.requests[0]
    assert (first.tool_choice, first.reply_prefix, first.stop) == ("none", "```python\n", ["\n```"])
    assert "assert -1 == 5" in first.messages[-2]["content"]  # the reproduced failure, a Bash result
    # The failing assertion in one sentence, then the request for the fixed file.
    assert first.messages[-1]["content"].startswith("In short: `add(2, 3)` returns -1, but the test expects 5.\n"
                                                    "`python -m pytest -q -x test_calc.py` fails as shown above.")
    user = agent.session.messages[1]["content"]
    assert f"calc.py\n```python\n{BUGGY}```" in user and f"test_calc.py\n```python\n{TESTS}```" in user
    calls = [c["function"] for m in agent.session.messages for c in m.get("tool_calls") or []]
    assert calls == [{"name": "Bash", "arguments": {"command": "python -m pytest -q -x test_calc.py"}},
                     {"name": "Write", "arguments": {"file_path": "calc.py", "content": FIXED}},
                     {"name": "Bash", "arguments": {"command": "python -m pytest -q -x test_calc.py"}}]


def test_a_new_file_cut_off_at_the_token_limit_is_not_written(proj):
    looping = "*.pyc\n__pycache__/\n" + "*.tgz\n" * 40 + "*."
    agent, engine, steps = make(proj, [{"text": looping, "stop_reason": "max_tokens"},
                                       {"text": "*.pyc\n__pycache__/\n```"}])
    result = agent.run("Create a .gitignore for this Python project.")
    assert engine.requests[0].sampling.max_tokens == 768  # room for a new file
    assert ("retry", "the reply failed; .gitignore restored") in steps
    assert (proj / ".gitignore").read_text() == "*.pyc\n__pycache__/\n" and result.text == "Changed .gitignore."


def test_a_gitignore_that_ignores_the_projects_own_files_is_refused(proj):
    subprocess.run(["git", "init", "-q"], cwd=proj, check=True)
    subprocess.run(["git", "add", "calc.py", "test_calc.py"], cwd=proj, check=True)
    agent, engine, steps = make(proj, [block("calc.py\ntest_calc.py\n__pycache__/\n", "gitignore"),
                                       block("__pycache__/\n*.pyc\n", "gitignore")])
    agent.driver.config.tries = 1
    agent.run("Create a .gitignore for this Python project.")
    assert ("retry", "the rewrite failed; .gitignore restored") in steps
    assert "it ignores the project's own files (calc.py, test_calc.py)" in engine.requests[1].messages[-1]["content"]
    assert (proj / ".gitignore").read_text() == "__pycache__/\n*.pyc\n"


def test_a_failed_check_restores_the_file_and_retries_from_a_clean_prefix(proj):
    wrong = BUGGY.replace("a - b", "a * b")
    agent, engine, steps = make(proj, [block(wrong), {"text": "no code here"}, block(FIXED)])
    result = agent.run("Fix the bug in calc.py so that test_add passes.")
    assert result.text == "Changed calc.py; `python -m pytest -q -x test_calc.py` passed."
    assert [s for s, _ in steps] == ["localize", "edit", "check", "retry", "edit", "retry", "edit", "check", "answer"]
    # The second request is the first one cut back to before the failed attempt, plus the failure.
    first, second = engine.requests[0].messages, engine.requests[1].messages
    assert second[:2] == first[:2] and len(second) == 3
    note = second[2]["content"]
    assert "-    return a - b\n+    return a * b" in note and "assert 6 == 5" in note
    assert (engine.requests[1].sampling.temperature, engine.requests[1].sampling.seed) == (0.3, 1)
    assert (proj / "calc.py").read_text() == FIXED
    records = [json.loads(line) for line in agent.session.transcript_path.read_text().splitlines()]
    assert [r["attempt"] for r in records if r.get("type") == "retry"] == [1, 2]


def test_when_every_try_fails_the_file_is_left_as_it_was(proj):
    wrong = BUGGY.replace("a - b", "a * b")
    agent, _, _ = make(proj, [block(wrong)] * 3)
    result = agent.run("Fix the bug in calc.py so that test_add passes.")
    assert result.text.startswith("calc.py: not changed; `python -m pytest -q -x test_calc.py` failed (")
    assert (proj / "calc.py").read_text() == BUGGY


def test_an_edit_that_breaks_the_syntax_is_refused_and_retried(proj):
    agent, _, steps = make(proj, [block("def add(a, b)\n    return a + b\n"), block(FIXED)])
    assert agent.run("Fix add in calc.py.").text.startswith("Changed calc.py")
    assert [d for s, d in steps if s == "retry"] == ["the edit failed; calc.py restored"]


def test_without_permission_to_run_tests_the_change_stays_unchecked(proj):
    agent, _, steps = make(proj, [block(FIXED)], allow=())
    assert agent.run("test_add fails. Fix add in calc.py.").text == "Changed calc.py."
    assert "reproduce" not in [s for s, _ in steps]  # not run first either: that would need asking
    assert "check" in [s for s, _ in steps] and (proj / "calc.py").read_text() == FIXED


def test_a_denied_write_is_not_retried(proj):
    engine_turns = [block(FIXED)]
    agent, engine, _ = make(proj, engine_turns, mode="default", allow=())
    result = agent.run("Fix add in calc.py.")
    assert result.text.startswith("calc.py: not changed (Error: permission to use Write was denied")
    assert len(engine.requests) == 1 and (proj / "calc.py").read_text() == BUGGY


def test_a_question_about_a_named_file_is_answered_from_it_in_one_text_turn(proj):
    agent, engine, steps = make(proj, [{"text": "add subtracts: it returns a - b."}])
    result = agent.run("What does add in calc.py return?")
    assert result.text == "add subtracts: it returns a - b."
    assert [r.tool_choice for r in engine.requests] == ["none"]
    assert '<attached-file path="calc.py">\n     1\tdef add(a, b):' in agent.session.messages[1]["content"]
    assert str(proj / "calc.py") in agent.ctx.read_files  # it counts as read


def test_a_how_many_question_is_answered_by_counting_the_models_list(proj):
    agent, engine, steps = make(proj, [{"text": "`add`\n- mul\n- add\n"}])
    result = agent.run("How many functions does calc.py define? Answer with the number.")
    assert result.text == "2: add, mul."  # listed once each, counted by the harness
    asked = engine.requests[0]
    assert asked.reply_prefix == "- " and asked.messages[-1]["content"].startswith("Which functions does calc.py define?\nAnswer with a list")
    assert ("count", "2 listed") in steps and len(engine.requests) == 1
    # A list cut off at the limit is not counted: the model answers as before
    agent, engine, steps = make(proj, [{"text": "add\n- mul", "stop_reason": "max_tokens"}, {"text": "Two."}])
    assert agent.run("How many functions does calc.py define?").text == "Two."
    assert not any(s == "count" for s, _ in steps)
    agent, engine, _ = make(proj, [{"text": "It has 6 lines."}])
    assert agent.run("How many lines does calc.py have?").text == "It has 6 lines."  # not listed
    assert engine.requests[0].reply_prefix == ""


def test_fenced_block_parsing():
    assert fenced_block("Sure:\n```python\nx = 1\n```\nDone.") == "x = 1\n"
    assert fenced_block("x = 1\n```") is None and fenced_block("```\nx = 1\n") == "x = 1\n"


def test_the_suite_reference_runs_show_the_pipeline_in_stream_json(tmp_path, proj):
    """`agent -p` on the scripted engine with a small profile forced by settings: steps are stream-json lines."""
    import os
    import sys
    from pathlib import Path
    (proj / ".agent").mkdir()
    (proj / ".agent/settings.json").write_text(json.dumps({"modelProfile": "small"}))
    script = tmp_path / "s.json"
    script.write_text(json.dumps([block(FIXED)]))
    env = {**os.environ, "AGENT_DATA_DIR": str(tmp_path / "data"), "AGENT_HOME": str(tmp_path / "home"),
           "HOME": str(tmp_path), "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    r = subprocess.run([sys.executable, "-m", "agent", "-p", "Fix add in calc.py.", "--engine", "scripted", "--script",
                        str(script), "--output-format", "stream-json", "--permission-mode", "acceptEdits",
                        "--allowedTools", "Bash"], cwd=proj, env=env, capture_output=True, text=True, timeout=120)
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["step"] for x in lines if x.get("subtype") == "pipeline_step"] == ["localize", "edit", "check", "answer"]
    assert lines[-1]["result"] == "Changed calc.py; `python -m pytest -q -x test_calc.py` passed."


def test_a_rewrite_that_drops_a_definition_is_undone_and_retried(proj):
    (proj / "strutils.py").write_text("def shout(s):\n    return s.upper()\n")
    only_new = "def is_palindrome(s):\n    return s == s[::-1]\n"
    both = "def shout(s):\n    return s.upper()\n\n\n" + only_new
    agent, engine, steps = make(proj, [block(only_new), block(both)])
    result = agent.run("Implement is_palindrome(s) in strutils.py.")  # a whole-file rewrite (not "add a function")
    assert result.text == "Changed strutils.py." and (proj / "strutils.py").read_text() == both
    assert "It was undone because the rewrite failed:\nit dropped shout, which strutils.py defined; keep them" in \
        engine.requests[1].messages[-1]["content"]


def test_a_retry_samples_candidates_checks_each_and_keeps_the_one_that_passes(proj):
    wrong, broken = BUGGY.replace("a - b", "a * b"), "def add(a, b)\n"
    agent, engine, steps = make(proj, [block(wrong), {"candidates": [
        f"```python\n{wrong}```", broken + "```", FIXED + "```", f"{FIXED}```"]}])
    agent.driver.config.tries = 4
    result = agent.run("Fix the bug in calc.py so that test_add passes.")
    assert result.text == "Changed calc.py; `python -m pytest -q -x test_calc.py` passed."
    assert ("tries", "4 candidates, 2 passed, applied #3") in steps and (proj / "calc.py").read_text() == FIXED
    sampled = engine.requests[1]
    assert (sampled.sampling.temperature, sampled.reply_prefix, sampled.messages[:2]) == (
        0.6, "```python\n", engine.requests[0].messages[:2])
    writes = [c["function"]["arguments"]["content"] for m in agent.session.messages for c in m.get("tool_calls") or []
              if c["function"]["name"] == "Write"]
    assert writes == [FIXED]  # only the winner entered the conversation (the failed greedy try was cut away)


def test_a_cancel_during_the_candidates_checks_ends_the_run_with_the_file_as_it_was(proj):
    import threading
    import time
    slow = "import pathlib, time\npathlib.Path('started').touch()\ntime.sleep(60)\n" + FIXED  # a minute's check
    agent, engine, steps = make(proj, [block(BUGGY.replace("a - b", "a * b")), {"candidates": [
        slow + "```", FIXED + "```"]}])
    agent.driver.config.tries = 2
    cancel = threading.Event()

    def interrupt():  # Ctrl-C or SIGTERM once the first candidate's check runs
        while not (proj / "started").exists():
            time.sleep(0.05)
        cancel.set()
    threading.Thread(target=interrupt, daemon=True).start()
    start = time.monotonic()
    result = agent.run("Fix the bug in calc.py so that test_add passes.", cancel=cancel)
    assert time.monotonic() - start < 15 and result.stop_reason == "cancelled"
    assert (proj / "calc.py").read_text() == BUGGY and not [d for s, d in steps if s == "tries"]


def test_a_long_file_has_only_the_window_around_the_hit_rewritten(proj):
    rows = [f"def handler_{i}():\n    return {i} * 2\n\n\n" for i in range(1, 200)]
    (proj / "handlers.py").write_text("".join(rows))
    agent, engine, steps = make(proj, [])
    lines = "".join(rows).splitlines(keepends=True)
    hit = next(i for i, line in enumerate(lines, start=1) if "handler_137" in line)
    first, last = hit, hit + 1  # the function that holds the hit
    window = "".join(lines[first - 1:last])
    engine.turns.append(block(window.replace("return 137 * 2", "return 137 * 3")))
    result = agent.run("In handlers.py, change handler_137 so that it returns 137 * 3 instead of 137 * 2.")
    assert result.text == "Changed handlers.py."
    assert (proj / "handlers.py").read_text() == "".join(rows).replace("return 137 * 2", "return 137 * 3")
    assert ("edit", f"handlers.py (lines {first}-{last})") in steps
    assert f"these are its lines {first}-{last}:\n```python\n{window}```" in engine.requests[0].messages[-1]["content"]


def test_a_shell_request_gets_one_required_bash_call_then_an_answer_from_its_output(proj):
    (proj / "compute.py").write_text("print(6 * 7)\n")
    agent, engine, steps = make(proj, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "python compute.py"}}]},
                                       {"text": "It prints 42."}])
    result = agent.run("Run python compute.py and tell me the number it prints.")
    # The answer starts with what the command printed, written by the harness; the model continues it.
    assert result.text == "`python compute.py` printed:\n```\n42\n```\nIt prints 42."
    assert engine.requests[1].reply_prefix == "`python compute.py` printed:\n```\n42\n```\n"
    assert agent.session.messages[-1] == {"role": "assistant", "content": result.text}
    assert [(r.tool_choice, r.allowed_tools) for r in engine.requests] == [("required", ["Bash"]), ("none", None)]
    # The call runs in the foreground: the answer needs its output (the 0.5B once sent wc -l to the background).
    bash = engine.requests[0].tool_overrides["Bash"]
    assert "command" in bash["properties"] and "run_in_background" not in bash["properties"]
    assert "run_in_background" in next(t for t in agent.schemas if t["function"]["name"] == "Bash")["function"][
        "parameters"]["properties"]
    assert "42\n" in [m for m in agent.session.messages if m["role"] == "tool"][0]["content"]
    assert [s for s, _ in steps] == ["localize", "command", "answer"]


def test_a_command_rejected_as_written_gets_one_corrected_call_and_a_failing_run_does_not(proj):
    (proj / "compute.py").write_text("print(6 * 7)\n")
    agent, engine, steps = make(proj, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "ls --no-such-flag"}}]},
                                       {"tool_calls": [{"name": "Bash", "arguments": {"command": "python compute.py"}}]},
                                       {"text": "It prints 42."}])
    assert agent.run("Run python compute.py and tell me the number it prints.").text.endswith("```\nIt prints 42.")
    assert [s for s, _ in steps] == ["localize", "command", "command", "answer"]
    assert "did not succeed" in engine.requests[1].messages[-1]["content"]
    # A command that runs and fails (a test run, a grep without matches) is the result to report.
    (proj / "fails.py").write_text("raise SystemExit(1)\n")
    agent, engine, steps = make(proj, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "python fails.py"}}]},
                                       {"text": "It exits with status 1."}])
    assert agent.run("Run python fails.py and tell me its exit status.").text == (
        "`python fails.py` printed nothing (exit status 1).\n\nIt exits with status 1.")
    assert [s for s, _ in steps] == ["localize", "command", "answer"]


def test_a_question_about_what_code_does_asks_for_each_part_and_a_fact_for_a_sentence(proj):
    agent, engine, steps = make(proj, [{"text": "add() subtracts; mul() multiplies."}])
    assert agent.run("Explain what calc.py does.").text == "add() subtracts; mul() multiplies."
    assert engine.requests[0].messages[-1]["content"].endswith("name each function or part and say what it does.")
    agent, engine, _ = make(proj, [{"text": "It returns a - b."}])
    agent.run("What does add in calc.py return?")
    assert engine.requests[0].messages[-1]["content"].endswith("in a sentence or two.")
    assert [s for s, _ in steps] == ["localize", "answer"]


def test_a_command_the_rules_refuse_is_answered_by_the_harness_with_the_rule_that_allows_it(proj):
    (proj / "report.py").write_text("print('n=4 mean=10.50')\n")
    agent, engine, steps = make(proj, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "python report.py"}}]},
                                       {"text": "It prints the number of values and their mean."}], allow=())
    result = agent.run("What does report.py print? Run it and tell me.")
    assert result.text.startswith("I did not run `python report.py`: permission to use Bash was denied")
    assert "Allowing `Bash(python report.py)` (--allowedTools" in result.text
    assert len(engine.requests) == 1  # no answer made up from a run that never happened
    assert [s for s, _ in steps] == ["localize", "command", "answer"]


def test_a_request_to_run_the_tests_is_told_how_they_run_and_a_long_output_is_shown_by_its_ends(proj):
    (proj / "test_calc.py").write_text(TESTS)
    (proj / "many.py").write_text("for i in range(40):\n    print(i)\n")
    agent, engine, steps = make(proj, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "python many.py"}}]},
                                       {"text": "It counts."}])
    result = agent.run("Run the tests and tell me which fail.")
    assert engine.requests[0].messages[-1]["content"] == "This project's tests run with `python -m pytest -q`."
    shown = result.text.split("```")[1].strip().splitlines()
    assert shown[:6] == [str(i) for i in range(6)] and shown[-6:] == [str(i) for i in range(34, 40)]
    assert shown[6] == "... (28 lines left out)"
    agent, engine, _ = make(proj, [{"tool_calls": [{"name": "Bash", "arguments": {"command": "true"}}]},
                                   {"text": "Done."}])
    agent.run("Run the tests in test_calc.py.")
    assert engine.requests[0].messages[-1]["content"] == "This project's tests run with `python -m pytest -q test_calc.py`."


def test_the_modules_a_target_imports_are_attached_too(proj):
    (proj / "helpers.py").write_text("def format_name(first, last):\n    return f'{first} {last}'\n")
    (proj / "main.py").write_text("from helpers import formatname\nprint(formatname('a', 'b'))\n")
    prompt = "Running python main.py fails with an ImportError. Fix main.py so it runs."
    assert plan_request(prompt, localize(proj, prompt), proj).context == [proj / "main.py", proj / "helpers.py"]


def test_search_results_put_definitions_first_and_name_the_enclosing_function(proj):
    (proj / "quota.py").write_text("class QuotaError(Exception):\n    pass\n\n\ndef enforce_quota(n):\n"
                                   "    if n > 3:\n        raise QuotaError('quota exceeded for tenant')\n")
    (proj / "app.py").write_text("from quota import enforce_quota\n\n\ndef run():\n    enforce_quota(5)\n")
    from agent.pipeline.localize import result_rows
    loc = localize(proj, "Which function raises 'quota exceeded for tenant'? And where is enforce_quota used?")
    assert result_rows(proj, loc) == ["quota.py:5: def enforce_quota(n):", "app.py:1: from quota import enforce_quota",
                                      "app.py:5: (in run) enforce_quota(5)",
                                      "quota.py:7: (in enforce_quota) raise QuotaError('quota exceeded for tenant')"]


def test_new_functions_and_tests_are_written_alone_and_appended(proj):
    (proj / "calc.py").write_text(FIXED)
    clamp = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
    test = "from calc import clamp\n\n\ndef test_clamp():\n    assert clamp(9, 0, 5) == 5\n"
    agent, engine, steps = make(proj, [block(clamp), block(test)])
    result = agent.run("Add a function clamp(x, lo, hi) to calc.py and add a test for it to test_calc.py.")
    assert result.text == ("Changed calc.py; `python -m pytest -q -x test_calc.py` passed. "
                           "Changed test_calc.py; `python -m pytest -q -x test_calc.py` passed.")
    assert (proj / "calc.py").read_text() == FIXED + "\n\n" + clamp
    assert (proj / "test_calc.py").read_text() == TESTS.replace(
        "from calc import add, mul\n", "from calc import add, mul\nfrom calc import clamp\n") + \
        "\n\ndef test_clamp():\n    assert clamp(9, 0, 5) == 5\n"
    assert [d for s, d in steps if s == "edit"] == ["calc.py (addition)", "test_calc.py (addition)"]
    assert "Write only the new code to add at the end of calc.py" in engine.requests[0].messages[-1]["content"]


def test_a_candidate_that_changes_nothing_does_not_pass(proj):
    agent, engine, steps = make(proj, [block(BUGGY.replace("a - b", "a * b")), {"candidates": [
        f"{BUGGY}```", f"{BUGGY}```", f"{FIXED}```", f"{BUGGY}```"]}])
    agent.driver.config.tries = 4
    assert agent.run("Fix the bug in calc.py so that test_add passes.").text.startswith("Changed calc.py")
    assert ("tries", "4 candidates, 1 passed, applied #3") in steps


def test_a_config_rewrite_that_changes_keys_the_request_does_not_name_is_retried(proj):
    before = '{"name": "app", "debug": true, "db": {"host": "db.internal"}}\n'  # one line: nothing to undo apart
    (proj / "config.json").write_text(before)
    careless = before.replace("true", "false").replace("db.internal", "localhost")
    careful = before.replace("true", "false")
    agent, engine, steps = make(proj, [block(careless, "json"), block(careful, "json")])
    assert agent.run("Set debug to false in config.json.").text == "Changed config.json."
    assert (proj / "config.json").read_text() == careful
    assert "it changed db.host, which the request does not ask for" in engine.requests[1].messages[-1]["content"]


def test_the_same_failing_rewrite_each_try_ends_in_the_harness_answer_not_a_repeat_stop(proj):
    before = '{"name": "app", "debug": true}\n'
    (proj / "config.json").write_text(before)
    careless = '{"name": "other", "debug": false}\n'  # the harness writes it, checks it, restores the file: 3 times
    agent, engine, steps = make(proj, [block(careless, "json")] * 3)
    result = agent.run("Set debug to false in config.json.")
    assert result.text.startswith("config.json: not changed; the rewrite failed (it changed name"), result.text
    assert (proj / "config.json").read_text() == before and len(engine.requests) == 3


def test_the_lines_of_a_config_rewrite_that_the_request_does_not_ask_for_are_undone(proj):
    before = '{\n  "name": "app",\n  "debug": true,\n  "db": {"host": "db.internal", "pool_size": 5}\n}\n'
    (proj / "config.json").write_text(before)
    careless = before.replace("true", "false").replace("db.internal", "localhost")
    agent, engine, steps = make(proj, [block(careless, "json")])
    assert agent.run("Set debug to false in config.json.").text == "Changed config.json."
    assert (proj / "config.json").read_text() == before.replace("true", "false")
    assert len(engine.requests) == 1
    (proj / "s.ini").write_text("; billing\n[database]\nurl = pg://x\n\n[logging]\n# how\nlevel = info\n")
    appended = "; billing\n[database]\nurl = pg://x\n\n[logging]\nlevel = debug\n\ntimeout = 15\n"
    agent, engine, steps = make(proj, [block(appended, "ini")])
    assert agent.run("In s.ini, add `timeout = 15` to the [database] section.").text == "Changed s.ini."
    assert (proj / "s.ini").read_text() == \
        "; billing\n[database]\nurl = pg://x\ntimeout = 15\n\n[logging]\n# how\nlevel = info\n"


def test_collateral_changes_by_format():
    from pathlib import Path

    from agent.pipeline.config_diff import collateral_changes as changes
    doc = '{"debug": true, "port": 8080, "db": {"pool_size": 5}}'
    assert changes("Set the pool size to 20", Path("c.json"), doc, doc.replace("5", "20")) == []
    assert changes("Set debug off", Path("c.json"), doc, '{"debug": false, "db": {"pool_size": 5}}') == ["port"]
    assert changes("Remove the port", Path("c.json"), doc, '{"debug": true, "db": {"pool_size": 5}}') == []
    assert changes("Set replicas to 3", Path("d.yaml"), "a: 1\nspec:\n  replicas: 2\n", "a: 2\nspec:\n  replicas: 3\n") == ["a"]
    assert changes("Set port to 9000", Path("s.ini"), "[web]\nport = 80\nhost = a\n", "[web]\nport = 9000\n") == ["web.host"]
    assert changes("Set x", Path("s.py"), "x = 1\n", "x = 2\ny = 3\n") == []  # Python has its own check
    assert changes("Rewrite c.json with port 1", Path("c.json"), doc, '{"port": 1}') == []


def test_collateral_changes_twins_sections_and_comments():
    from pathlib import Path

    from agent.pipeline.config_diff import collateral_changes as changes
    compose = "# stack\nservices:\n  web:\n    image: shop:2.7\n  worker:\n    image: shop:2.7  # same\n"
    ask = "In compose.yaml, move the worker service to image tag 2.8. The web service stays on 2.7."
    both = compose.replace("2.7", "2.8")
    assert changes(ask, Path("compose.yaml"), compose, both) == ["services.web.image"]  # "move" drops nothing here
    assert changes(ask, Path("compose.yaml"), compose, compose.replace("shop:2.7  #", "shop:2.8  #")) == []
    assert changes(ask, Path("compose.yaml"), compose, compose.replace("# stack\n", "").replace("shop:2.7  #", "shop:2.8  #")) \
        == ["the comment line '# stack'"]
    ini = "; billing\n[database]\n# url\nurl = pg://x\n\n[logging]\nlevel = info\n"
    add = "In service.ini, add a setting `connect_timeout = 15` to the [database] section. Keep the comments."
    assert changes(add, Path("s.ini"), ini, ini + "connect_timeout = 15\n") == \
        ["logging.connect_timeout (added under logging, not where the request puts it)"]
    right = ini.replace("url = pg://x\n", "url = pg://x\nconnect_timeout = 15\n")
    assert changes(add, Path("s.ini"), ini, right) == []
    assert changes(add, Path("s.ini"), ini, right.replace("# url\n", "")) == ["the comment line '# url'"]
    scripts = '{"scripts": {"build": "tsc"}, "dependencies": {}}'
    assert changes('Add a script named "test" to package.json', Path("package.json"), scripts,
                   '{"scripts": {"build": "tsc", "test": "jest"}, "dependencies": {}}') == []
    assert changes("Rename the key port to listen_port", Path("c.json"), '{"port": 1, "debug": true}',
                   '{"listen_port": 1, "debug": true}') == []


def test_undoing_a_config_rewrite_leaves_one_it_cannot_mend_as_it_was():
    from pathlib import Path

    from agent.pipeline.config_diff import undo_collateral
    ini = "[database]\nhost = a\n\n[logging]\nlevel = info\n"
    ask = "In s.ini, add `timeout = 15` to the [database] section."
    renamed = "[db]\nhost = a\n\n[logging]\nlevel = info\ntimeout = 15\n"  # no [database] to move the key to
    assert undo_collateral(ask, Path("s.ini"), ini, renamed) == renamed
    misplaced = ini + "timeout = 15\n"
    assert undo_collateral(ask, Path("s.ini"), ini, misplaced) == \
        "[database]\nhost = a\ntimeout = 15\n\n[logging]\nlevel = info\n"
    assert undo_collateral(ask, Path("s.txt"), ini, misplaced) == misplaced  # not a config format


def test_a_long_python_files_window_is_the_definition_that_holds_the_hits():
    from agent.pipeline import windows
    text = "".join(f"def f_{i}(x):\n    return x < {i}\n\n\n" for i in range(100))
    line = text.splitlines().index("def f_50(x):") + 1
    assert windows.window(text, [line], python=True) == (line, line + 1)
    assert windows.window(text, [line]) == (line - 15, line + 15)  # other files: lines around the hits
    decorated = "import functools\n\n\n@functools.cache\ndef g(x):\n    return x\n"
    assert windows.window(decorated, [5], python=True) == (4, 6)
    assert windows.window("def broken(:\n", [1], python=True) == (1, 1)  # no parse: lines around the hits


def test_a_test_that_forgets_to_import_the_new_function_gets_the_import(proj):
    (proj / "calc.py").write_text(FIXED)
    clamp = "def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n"
    forgot = "def test_clamp():\n    assert clamp(9, 0, 5) == 5\n"
    agent, _, _ = make(proj, [block(clamp), block(forgot)])
    result = agent.run("Add a function clamp(x, lo, hi) to calc.py and add a test for it to test_calc.py.")
    assert result.text.endswith("Changed test_calc.py; `python -m pytest -q -x test_calc.py` passed.")
    assert (proj / "test_calc.py").read_text().startswith("from calc import add, mul\nfrom calc import clamp\n")


def test_unbound_names_and_the_imports_added_for_them(tmp_path):
    from agent.pipeline.imports import add_missing_imports, unbound_names
    assert unbound_names("import os\n\ndef f(x, *a):\n    y = [z for z in a]\n    return os.sep, x, y, g(len(a))\n") == {"g"}
    assert unbound_names("def f(:\n") == set()
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "shapes.py").write_text("class Box:\n    pass\n\n\ndef area(b):\n    return 0\n")
    uses = '"""Tests."""\n\ndef test_box():\n    assert area(Box()) == 0 and unknown\n'
    assert add_missing_imports(uses, tmp_path / "test_s.py", tmp_path, [tmp_path / "pkg" / "shapes.py"]) == \
        '"""Tests."""\nfrom pkg.shapes import Box, area\n\ndef test_box():\n    assert area(Box()) == 0 and unknown\n'
    assert add_missing_imports(uses, tmp_path / "notes.txt", tmp_path, [tmp_path / "pkg" / "shapes.py"]) == uses


def test_a_rewrite_that_copies_the_file_is_followed_by_one_edit_call(proj):
    edit = {"tool_calls": [{"name": "Edit", "arguments": {"file_path": "calc.py", "old_string": "    return a - b",
                                                          "new_string": "    return a + b"}}]}
    agent, engine, steps = make(proj, [block(BUGGY), edit])
    assert agent.run("Fix the bug in calc.py so that test_add passes.").text.startswith("Changed calc.py")
    assert (proj / "calc.py").read_text() == FIXED
    assert [d for s, d in steps if s == "edit"] == ["calc.py (whole file)", "calc.py (Edit, try 2)"]
    second = engine.requests[1]
    assert (second.tool_choice, second.allowed_tools, second.sampling.seed) == ("required", ["Edit"], 1)
    assert second.messages[-1]["content"].startswith("Your rewrite left calc.py as it was.")


def test_a_greedy_copy_is_followed_by_sampled_rewrites_when_the_engine_samples(proj):
    """Nothing checks the request (no tests named), so round 1 was one greedy reply; it copied the file. The
    retry samples rewrites of the whole file: those that copy it again are left out, the one that changes it is
    written, and no Edit round follows (the 1.5B's Edit after a copy never made a change that passed, 3 runs)."""
    (proj / "test_calc.py").unlink()
    changed = BUGGY.replace("a - b", "a + b")
    agent, engine, steps = make(proj, [block(BUGGY), {"candidates": [f"{BUGGY}```", f"{changed}```"]}])
    agent.driver.config.tries = 2
    assert agent.run("Make add in calc.py add its numbers.").text.startswith("Changed calc.py")
    assert (proj / "calc.py").read_text() == changed
    assert [d for s, d in steps if s == "edit"] == ["calc.py (whole file)", "calc.py (whole file, try 2)"]
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps
    assert engine.requests[1].messages[-1]["content"].startswith("Your rewrite left calc.py as it was; it must")


def test_sampled_rewrites_that_all_copy_the_file_are_followed_by_one_edit_call(proj):
    (proj / "test_calc.py").unlink()
    edit = {"tool_calls": [{"name": "Edit", "arguments": {"file_path": "calc.py", "old_string": "    return a - b",
                                                          "new_string": "    return a + b"}}]}
    agent, engine, steps = make(proj, [block(BUGGY), {"candidates": [f"{BUGGY}```"] * 2}, edit])
    agent.driver.config.tries = 2
    assert agent.run("Make add in calc.py add its numbers.").text.startswith("Changed calc.py")
    assert (proj / "calc.py").read_text() == FIXED
    assert [d for s, d in steps if s == "edit"] == ["calc.py (whole file)", "calc.py (whole file, try 2)",
                                                    "calc.py (Edit, try 3)"]
    assert engine.requests[2].messages[-1]["content"].startswith("Your rewrite left calc.py as it was.")


def test_an_import_of_a_name_the_module_lacks_is_found_before_and_checked_after_the_edit(proj):
    (proj / "helpers.py").write_text("def format_name(first, last):\n    return f'{first} {last}'.title()\n")
    (proj / "main.py").write_text("from helpers import formatname\n\nprint(formatname('ada', 'lovelace'))\n")
    still = "from helpers import formatname\n\nprint(formatname('Ada', 'Lovelace'))\n"
    fixed = "from helpers import format_name\n\nprint(format_name('ada', 'lovelace'))\n"
    agent, engine, steps = make(proj, [block(still), block(fixed)], allow=())
    result = agent.run("Running python main.py fails with an ImportError. Fix main.py so it runs.")
    assert result.text == "Changed main.py." and (proj / "main.py").read_text() == fixed
    assert engine.requests[0].messages[-1]["content"].startswith(
        "The harness found: helpers has no formatname (it has format_name).")
    assert "It was undone because the imports failed:\nhelpers has no formatname" in \
        engine.requests[1].messages[-1]["content"]


def test_a_rewrite_that_uses_a_name_nothing_defines_is_undone(proj):
    from agent.pipeline.imports import broken_imports
    greet = 'import sys\n\nprint("hi", sys.argv[1:])\n'
    (proj / "greet.py").write_text(greet)
    guessed = 'import sys\n\nprint("hi", GREETING_NAME or "world")\n'
    fixed = 'import os\n\nprint("hi", os.environ.get("GREETING_NAME", "world"))\n'
    assert broken_imports(guessed, proj / "greet.py", proj) == [
        "GREETING_NAME is used in greet.py but never defined or imported"]
    assert broken_imports(guessed, proj / "greet.py", proj, before=guessed) == []  # it was so already
    # Names only annotations use, and modules that fill globals() themselves, are not reported.
    assert broken_imports("from __future__ import annotations\n\n\ndef f(s: Screen) -> Widget:\n    return s\n",
                          proj / "w.py", proj) == []
    assert broken_imports("globals().update(A=1)\nprint(A)\n", proj / "g.py", proj) == []
    from agent.pipeline.tries import evaluate
    tried = evaluate([(guessed, -0.1), (fixed, -0.2)], proj / "greet.py", greet, "Greet the name.", [], proj, {})
    assert [(t.passed, t.problem) for t in tried] == [
        (False, "GREETING_NAME is used in greet.py but never defined or imported"), (True, "")]
    agent, engine, steps = make(proj, [block(guessed), block(fixed)], allow=())
    result = agent.run('Make greet.py greet the name GREETING_NAME gives, or "world".')
    assert result.text == "Changed greet.py." and (proj / "greet.py").read_text() == fixed
    assert "GREETING_NAME is used in greet.py but never defined or imported" in engine.requests[1].messages[-1]["content"]


def test_a_move_writes_the_destination_first_and_refuses_a_file_that_imports_from_itself(proj):
    # slug uses a constant of views.py: not a move the harness makes itself (the modules would import each other)
    (proj / "views.py").write_text("SEP = '-'\n\n\ndef slug(t):\n    return SEP.join(t.lower().split())\n\n\n"
                                   "def url(t):\n    return '/' + slug(t)\n")
    (proj / "text_utils.py").write_text("def words(t):\n    return t.split()\n")
    utils = "def words(t):\n    return t.split()\n\n\ndef slug(t):\n    return t.lower()\n"
    views = "from text_utils import slug\n\nSEP = '-'\n\n\ndef url(t):\n    return '/' + slug(t)\n"
    agent, engine, steps = make(proj, [block("from text_utils import slug\n\n\n" + utils.split("\n\n\n")[0] + "\n"),
                                       block(utils), block(views)], allow=())
    result = agent.run("Move the function slug from views.py to text_utils.py; views.py imports it from there.")
    assert result.text == "Changed text_utils.py. Changed views.py."
    assert [d for s, d in steps if s == "edit"][:2] == ["text_utils.py (whole file)", "text_utils.py (whole file, try 2)"]
    assert "text_utils.py imports from itself (text_utils)" in engine.requests[1].messages[-1]["content"]
    assert (proj / "text_utils.py").read_text() == utils and (proj / "views.py").read_text() == views


def test_a_rewrite_that_only_respaces_lines_keeps_the_original_spacing(proj):
    (proj / "greet.py").write_text('def greet(name):\n    return f"Helo, {name}!"\n\n\nprint(greet("x"))\n')
    respaced = 'def greet(name):\n    return f"Hello, {name}!"\n\nprint(greet("x"))  \n'
    agent, engine, _ = make(proj, [block(respaced)])
    agent.run("greet.py misspells Hello. Fix the typo.")  # (quoting both words, the harness makes the change)
    assert engine.requests
    assert (proj / "greet.py").read_text() == 'def greet(name):\n    return f"Hello, {name}!"\n\n\nprint(greet("x"))\n'


def test_the_reading_of_a_reply_that_parses_is_the_one_written():
    from pathlib import Path

    from agent.pipeline.windows import reply_content
    orig = '{\n  "a": 1,\n  "b": 2\n}\n'
    assert reply_content("```json\n", '{\n  "a": 1,\n  "b": 3\n}', Path("x.json"), orig) == '{\n  "a": 1,\n  "b": 3\n}\n'
    # A block inside the reply: the reading that parses wins over the first one.
    assert reply_content("```python\n", "Here:\n```python\nx = 1\n", Path("x.py"), "x = 0\n") == "x = 1\n"
    assert reply_content("```python\n", "", Path("x.py"), "x = 0\n") == "\n"
    # A new file's diff, copied from a retry note as the file: the lines without their "+" (a list stays a list).
    copied = "# ignore\n+__pycache__/\n+*.pyc\n+.venv/\n+dist/\n"
    assert reply_content("```gitignore\n", copied, Path(".gitignore"), None) == "# ignore\n__pycache__/\n*.pyc\n.venv/\ndist/\n"
    assert reply_content("```markdown\n", "+ one\n+ two\n", Path("a.md"), None) == "+ one\n+ two\n"
    assert reply_content("```python\n", "x = 1\n+y\n", Path("x.py"), None) == "x = 1\n+y\n"


def test_routes_read_edit_verbs_tests_as_the_goal_and_files_to_leave_alone(proj):
    plan = lambda prompt: plan_request(prompt, localize(proj, prompt), proj)  # noqa: E731
    assert plan("Bump the mul factor in calc.py").kind == "edit"
    assert plan("Complete calc.py so test_calc.py passes.").targets == [proj / "calc.py"]
    assert plan("Fill in the missing body in calc.py; test_calc.py has the tests.").targets == [proj / "calc.py"]
    # Tests are the goal here, not something to write.
    assert plan("Write them so the unit tests in test_calc.py pass.").targets == [proj / "calc.py"]
    assert plan("Add a test for mul to test_calc.py").targets == [proj / "test_calc.py"]
    assert plan("Fix add in calc.py and add a test for it to test_calc.py").targets == [
        proj / "calc.py", proj / "test_calc.py"]
    (proj / "main.py").write_text("from calc import add\nprint(add(2, 3))\n")
    # The named script only shows the problem: the module it imports is what changes.
    shown = plan("python main.py should print 5 but prints -1. Fix the bug; do not change main.py.")
    assert (shown.kind, shown.targets) == ("edit", [proj / "calc.py"])
    (proj / "data.json").write_text('{"n": 3}\n')
    # Every file of a list to leave alone (data.json was once the only target of such a request).
    for keep in ("do not change main.py or data.json.", "don't touch `main.py`, data.json.",
                 "leave main.py and data.json as they are.", "main.py and data.json are right as they are.",
                 "the bug is not in main.py or data.json."):
        shown = plan(f"python main.py should print 5 but prints -1; main.py reads data.json. Fix the bug; {keep}")
        assert (shown.kind, shown.targets) == ("edit", [proj / "calc.py"]), keep
    # The tests first in the list (data.json was once the only target: the list had to start at a file name).
    assert plan("test_calc.py fails. Fix the bug without changing the tests or data.json.").targets == [proj / "calc.py"]
    assert plan("Fix calc.py and make sure calc.py is right.").targets == [proj / "calc.py"]  # the goal, not a keep
    assert plan("Tell me the release code word.").kind != "edit"
    # "plan" the noun is not a request to plan (the free loop): it once sent a failing test's fix there.
    assert plan("test_calc.py fails; the pricing plan comes out wrong. Fix the bug.").targets == [proj / "calc.py"]
    assert plan("Make a plan for the change to calc.py, then fix it.").kind == "react"
    # The files that use a renamed name are targets when the request asks for its callers too.
    (proj / "prices.py").write_text("def net_total(xs):\n    return sum(xs)\n")
    (proj / "shop.py").write_text("from prices import net_total\n\nprint(net_total([1, 2]))\n")
    for callers in ("and update every place that calls it", "and its callers", "everywhere"):
        renamed = plan(f"Rename net_total to subtotal in prices.py {callers}.")
        assert renamed.targets == [proj / "prices.py", proj / "shop.py"], callers
    assert plan("Rename net_total to subtotal in prices.py.").targets == [proj / "prices.py"]
    # A file the request reads the facts from is attached, not changed (unless it is the only one named).
    (proj / "notes.md").write_text("add returns the sum.\n")
    assert plan("Fix add in calc.py; what it returns is as written in notes.md.").targets == [proj / "calc.py"]
    assert plan("Update notes.md according to calc.py.").targets == [proj / "notes.md"]
    assert plan("Fix the wording as in notes.md.").targets == [proj / "notes.md"]


def test_a_request_about_tests_starts_with_checked_candidates_greedy_first(proj):
    agent, engine, steps = make(proj, [{"candidates": [f"{BUGGY}```", f"{FIXED}```", f"{FIXED}```", "x```"]}])
    agent.driver.config.tries = 4
    result = agent.run("The tests in test_calc.py fail. Fix calc.py.")
    assert result.text.startswith("Changed calc.py") and (proj / "calc.py").read_text() == FIXED
    assert ("tries", "4 candidates, 2 passed, applied #2") in steps
    assert engine.requests[-1].sampling.temperature == 0.6 and len(engine.requests) == 1


def test_when_no_candidate_passes_the_retry_shows_the_one_that_passed_most_tests(proj):
    nothing = BUGGY.replace("a * b", "a + b")  # add still wrong and mul broken: no test passes
    half = BUGGY.replace("a - b", "a * b")  # add still wrong, mul right: one test passes
    agent, engine, steps = make(proj, [{"candidates": [f"{nothing}```", f"{half}```"]},
                                       {"candidates": [f"{FIXED}```"]}])
    agent.driver.config.tries = 2
    assert agent.run("The tests in test_calc.py fail. Fix calc.py.").text.startswith("Changed calc.py")
    assert ("tries", "2 candidates, 0 passed (the nearest passed 1 test), applied #2") in steps
    retry = engine.requests[1].messages[-1]["content"]
    assert "+    return a * b" in retry and "+    return a + b" not in retry


def test_a_batch_that_all_failed_is_followed_by_another_from_the_same_prompt(proj):
    nothing = BUGGY.replace("a * b", "a + b")
    agent, engine, steps = make(proj, [{"candidates": [f"{nothing}```", f"{BUGGY}```"]},
                                       {"candidates": [f"{nothing}```", f"{FIXED}```"]}])
    agent.driver.config.tries, agent.driver.config.batches = 2, 2
    result = agent.run("The tests in test_calc.py fail. Fix calc.py.")
    assert result.text.startswith("Changed calc.py") and (proj / "calc.py").read_text() == FIXED
    assert ("tries", "4 candidates, 1 passed, applied #4") in steps  # one round: no retry between the batches
    assert [s for s, _ in steps].count("edit") == 1 and "retry" not in [s for s, _ in steps]
    first, second = engine.requests
    assert first.messages == second.messages and first.sampling.seed != second.sampling.seed


def test_a_batch_of_one_failing_text_is_followed_by_a_hotter_one(proj):
    nothing = BUGGY.replace("a * b", "a + b")
    agent, engine, steps = make(proj, [{"candidates": [f"{nothing}```", f"{nothing}```"]},
                                       {"candidates": [f"{nothing}```", f"{FIXED}```"]}])
    agent.driver.config.tries, agent.driver.config.batches = 2, 2
    assert agent.run("The tests in test_calc.py fail. Fix calc.py.").text.startswith("Changed calc.py")
    assert ("tries", "4 candidates (then 2 at temperature 0.9: the first were one text), 1 passed, applied #4") in steps
    first, second = engine.requests
    assert (first.sampling.temperature, second.sampling.temperature) == (0.6, 0.9)
    # two texts that both fail: the next batch keeps the temperature (the test above)
    (proj / "calc.py").write_text(BUGGY)
    agent, engine, steps = make(proj, [{"candidates": [f"{nothing}```", f"{BUGGY}```"]},
                                       {"candidates": [f"{nothing}```", f"{FIXED}```"]}])
    agent.driver.config.tries, agent.driver.config.batches = 2, 2
    agent.run("The tests in test_calc.py fail. Fix calc.py.")
    assert [r.sampling.temperature for r in engine.requests] == [0.6, 0.6]
    # once peaked, every later batch is drawn hotter, though the first hot one gave two texts
    (proj / "calc.py").write_text(BUGGY)
    agent, engine, steps = make(proj, [{"candidates": [f"{nothing}```", f"{nothing}```"]},
                                       {"candidates": [f"{nothing}```", f"{BUGGY}```"]},
                                       {"candidates": [f"{FIXED}```", f"{nothing}```"]}])
    agent.driver.config.tries, agent.driver.config.batches = 2, 3
    assert agent.run("The tests in test_calc.py fail. Fix calc.py.").text.startswith("Changed calc.py")
    assert [r.sampling.temperature for r in engine.requests] == [0.6, 0.9, 0.9]
    assert ("tries", "6 candidates (then 4 at temperature 0.9: the first were one text), 1 passed, applied #5") in steps


def test_a_batch_with_a_passing_candidate_draws_no_other(proj):
    agent, engine, steps = make(proj, [{"candidates": [f"{FIXED}```", f"{BUGGY}```"]},
                                       {"candidates": [f"{FIXED}```"]}])
    agent.driver.config.tries, agent.driver.config.batches = 2, 2
    assert agent.run("The tests in test_calc.py fail. Fix calc.py.").text.startswith("Changed calc.py")
    assert ("tries", "2 candidates, 1 passed, applied #1") in steps and len(engine.requests) == 1


def test_the_small_profile_draws_a_second_batch_and_focuses_and_settings_may_change_it():
    assert choose_profile(None, "small").batches == 2 and choose_profile(None, "default").batches == 1
    assert choose_profile(None, {"name": "small", "batches": 1}).batches == 1
    for bad in (0, 9, "2"):
        with pytest.raises(ProfileError, match="batches must be a whole number from 1 to 8"):
            choose_profile(None, {"name": "small", "batches": bad})
    assert choose_profile(None, "small").stub_batches == 6 and choose_profile(None, "default").stub_batches == 1
    with pytest.raises(ProfileError, match="stub_batches must be a whole number from 1 to 8"):
        choose_profile(None, {"name": "small", "stub_batches": 0})
    assert choose_profile(None, "small").focus is True and choose_profile(None, "default").focus is False
    with pytest.raises(ProfileError, match="focus must be true or false"):
        choose_profile(None, {"name": "small", "focus": 1})


def test_a_bug_one_import_further_is_located_by_the_model_then_fixed_there(proj):
    (proj / "ops.py").write_text("def combine(a, b):\n    return a - b\n")
    (proj / "calc.py").write_text("from ops import combine\n\n\ndef add(a, b):\n    return combine(a, b)\n\n\n"
                                  "def mul(a, b):\n    return a * b\n")
    agent, engine, steps = make(proj, [{"text": "The bug is in `ops.py`."},
                                       block("def combine(a, b):\n    return a + b\n")])
    result = agent.run("test_calc.py fails. Find the bug and fix it.")
    assert result.text == "Changed ops.py; `python -m pytest -q -x test_calc.py` passed."
    assert ("locate", "ops.py (of calc.py, ops.py)") in steps
    assert [s for s, _ in steps] == ["localize", "reproduce", "locate", "edit", "check", "answer"]
    asked = engine.requests[0].messages[-1]["content"]
    assert "calc.py, ops.py" in asked and "AssertionError" in engine.requests[0].messages[-2]["content"]


def test_a_script_that_runs_cleanly_but_prints_the_wrong_line_fails_its_check(proj):
    (proj / "main.py").write_text("from calc import add\nprint(add(2, 3))\n")
    (proj / "test_calc.py").unlink()  # the script is the only check
    agent, engine, steps = make(proj, [block(BUGGY.replace("a - b", "a * b")), block(FIXED)])
    result = agent.run("python main.py should print 5 but prints -1. Fix the bug; do not change main.py.")
    assert result.text == "Changed calc.py; `python main.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce", "edit", "check", "retry", "edit", "check", "answer"]
    assert "The output does not have the line `5` that the request expects." in engine.requests[1].messages[-1]["content"]
    assert (proj / "main.py").read_text() == "from calc import add\nprint(add(2, 3))\n"


def test_a_rewrite_that_drops_a_definition_or_the_main_block_is_lost_unless_the_request_spares_it():
    from agent.pipeline.checks import lost_definitions
    script = Path("stats.py")
    before = "def count(xs):\n    return len(xs)\n\n\ndef last(xs):\n    return xs[-1]\n\n\nif __name__ == '__main__':\n    print(count([1]))\n"
    no_main = before.split("if __name__")[0]
    assert lost_definitions("Fix the bug in stats.py", script, before, no_main) == ['the `if __name__ == "__main__":` block']
    assert lost_definitions("Fix the bug", script, before, before.replace("def last", "def final")) == ["last"]
    # A rename spares the names it mentions, not the rest; a removal or rewrite spares everything.
    renamed = before.replace("count", "size")
    assert lost_definitions("Rename count to size", script, before, renamed) == []
    assert lost_definitions("Rename count to size", script, before, renamed.split("if __name__")[0]) == [
        'the `if __name__ == "__main__":` block']
    assert lost_definitions("Remove last and the main block", script, before, "def count(xs):\n    return len(xs)\n") == []
    assert lost_definitions("Fix the bug", Path("notes.txt"), before, "") == []


def test_a_rewrite_that_never_reads_the_environment_variable_the_request_names_is_refused(proj):
    from agent.pipeline.checks import unread_variables
    before = 'import sys\n\nprint("hello", sys.argv[1:])\n'
    const = 'import sys\n\nGREETING_NAME = "world"\nprint("hello", GREETING_NAME)\n'
    reads = 'import os\n\nprint("hello", os.environ.get("GREETING_NAME", "world"))\n'
    ask = "Make greet.py take the name from the GREETING_NAME environment variable; use world when it is not set."
    assert unread_variables(ask, Path("greet.py"), before, const) == ["GREETING_NAME"]
    assert unread_variables(ask, Path("greet.py"), before, reads) == []
    assert unread_variables("In a.py read $PORT and the env var `API_URL`.", Path("a.py"), "", "x = 1\n") == [
        "PORT", "API_URL"]
    assert unread_variables(ask, Path("greet.py"), reads, const.replace("world", "x")) == []  # read before: not ours
    assert unread_variables(ask, Path("notes.md"), before, const) == []
    # Where several files change (or none is named), another one may be the file that reads it.
    assert unread_variables(ask.replace("greet.py", "greet.py and main.py"), Path("greet.py"), before, const) == []
    assert unread_variables(ask.replace("greet.py ", ""), Path("greet.py"), before, const) == []
    (proj / "greet.py").write_text(before)
    agent, engine, steps = make(proj, [block(const), block(reads)])
    result = agent.run(ask)
    assert result.text.startswith("Changed greet.py") and "os.environ" in (proj / "greet.py").read_text()
    assert "never reads the GREETING_NAME environment variable" in engine.requests[1].messages[-1]["content"]


def test_a_wrong_line_quoted_now_and_after_should_is_the_output_the_check_wants(proj):
    from agent.pipeline.checks import expected_output, reports_failure
    report = 'python invoice.py prints "A-17 total 100.00", but an order of 100 should get the discount ("A-17 total 90.00").'
    assert reports_failure(report) and expected_output(report) == "A-17 total 90.00"
    assert expected_output("report.py prints 'total 3' but it should say 'total 4'.") == "total 4"
    # What the output is about is not a line of it; a line written out, quoted or not, is.
    assert expected_output("python totals.py crashes. It should print the total of each region.") == ""
    assert expected_output('It should print "the end" but prints nothing.') == "the end"
    assert expected_output("It should print TOTAL 100 units, but prints 90.") == "TOTAL 100 units"
    assert reports_failure("It returns 3.5, but should return 4 for x=2.5")
    assert not reports_failure("Add a --limit option, but it should default to 10")
    (proj / "main.py").write_text("from calc import add, mul\nprint(f'sum {add(2, 3)}')\nprint(f'product {mul(2, 3)}')\n")
    (proj / "test_calc.py").unlink()
    # The first fix prints the wanted line and breaks the product line: the other lines must print as before.
    agent, engine, steps = make(proj, [block(BUGGY.replace("a - b", "a * b")), block(FIXED.replace("a * b", "a + b")),
                                       block(FIXED)])
    result = agent.run('python main.py prints "sum -1", but adding 2 and 3 should give 5 ("sum 5"). Fix the bug; '
                       "main.py is right as it is.")
    assert result.text == "Changed calc.py; `python main.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce"] + ["edit", "check", "retry"] * 2 + ["edit", "check",
                                                                                                  "answer"]
    assert "does not have the line `sum 5`" in engine.requests[1].messages[-1]["content"]
    assert "The output has `sum 5`, but its other lines changed" in engine.requests[2].messages[-1]["content"]


def test_a_candidate_that_changes_the_other_output_lines_does_not_pass(proj):
    (proj / "main.py").write_text("from calc import add, mul\nprint(f'sum {add(2, 3)}')\nprint(f'product {mul(2, 3)}')\n")
    (proj / "test_calc.py").unlink()
    agent, engine, steps = make(proj, [{"candidates": [f"{FIXED.replace('a * b', 'a + b')}```", f"{FIXED}```"]}])
    agent.driver.config.tries = 2
    result = agent.run('python main.py prints "sum -1", but 2 and 3 should give "sum 5". Fix the bug; '
                       'main.py is right as it is.')
    assert result.text == "Changed calc.py; `python main.py` passed." and len(engine.requests) == 1
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps


def test_other_output_lines_may_change_the_way_the_wanted_line_does(proj):
    from agent.pipeline.checks import output_drifts
    kept, want, wrong = ("lint: 1m", "test: 1h 73m", "deploy: 10m"), "build: 2h 02m", "build: 2h 122m"
    fixed = "lint: 1m\nbuild: 2h 02m\ntest: 1h 13m\ndeploy: 10m\n[exit code 0, 0.1s]"
    assert not output_drifts(fixed, want, kept, wrong)
    assert output_drifts(fixed, want, kept)  # without the wrong line nothing shows which way is right
    assert output_drifts(fixed.replace("lint: 1m", "lint: 2m"), want, kept, wrong)  # moved the other way
    assert output_drifts(fixed.replace("deploy: 10m\n", ""), want, kept, wrong)  # a line lost
    assert output_drifts(fixed.replace("test: 1h 13m", "test: 13m"), want, kept, wrong)  # another shape
    # A flipped comparison: one total falls as the wanted one does, another rises.
    kept, want, wrong = ("A-18 total 99.00", "A-19 total 112.50"), "A-17 total 90.00", "A-17 total 100.00"
    assert output_drifts("A-17 total 90.00\nA-18 total 89.10\nA-19 total 125.00", want, kept, wrong)
    assert not output_drifts("Hello ann\nHello bo", "Hello ann", ("Helo bo",), "Helo ann")  # words replaced alike
    assert output_drifts("Hello ann\nHi bo", "Hello ann", ("Helo bo",), "Helo ann")
    # Words rewritten as other words (another shape): the same rewrite on another line is the same fix.
    kept, want, wrong = ("Mon 09:00 open (540 min left)", "Sat 14:00 open (0 min left)"), "Fri 18:00 closed", \
        "Fri 18:00 open (0 min left)"
    assert not output_drifts(f"{kept[0]}\nFri 18:00 closed\nSat 14:00 closed", want, kept, wrong)
    assert output_drifts(f"{kept[0]}\nFri 18:00 closed\nSat 14:00 shut", want, kept, wrong)
    assert output_drifts("Mon 09:00 closed\nFri 18:00 closed\nSat 14:00 closed", want, kept, wrong)
    # In the pipeline: the fix changes a second line the way it changes the quoted one, and passes.
    (proj / "main.py").write_text("from calc import add\nprint(f'sum {add(2, 3)}')\nprint(f'total {add(10, 20)}')\n")
    (proj / "test_calc.py").unlink()
    agent, engine, steps = make(proj, [block(FIXED)])
    result = agent.run('python main.py prints "sum -1", but 2 and 3 should give "sum 5". Fix the bug; '
                       'main.py is right as it is.')
    assert result.text == "Changed calc.py; `python main.py` passed." and len(engine.requests) == 1


def test_a_script_reported_wrong_starts_with_checked_candidates_when_tries_are_on(proj):
    (proj / "main.py").write_text("from calc import add\nprint(add(2, 3))\n")
    (proj / "test_calc.py").unlink()
    wrong = BUGGY.replace("a - b", "a * b")
    agent, engine, steps = make(proj, [{"candidates": [f"{wrong}```", f"{FIXED}```"]}])
    agent.driver.config.tries = 2
    result = agent.run("python main.py should print 5 but prints -1. Fix the bug; do not change main.py.")
    assert result.text == "Changed calc.py; `python main.py` passed." and len(engine.requests) == 1
    assert ("tries", "2 candidates, 1 passed, applied #2") in steps


def test_when_no_fix_passes_in_the_named_suspect_the_next_one_is_edited(proj):
    (proj / "ops.py").write_text("def combine(a, b):\n    return a - b\n")
    calc = "from ops import combine\n\n\ndef add(a, b):\n    return combine(a, b)\n\n\ndef mul(a, b):\n    return a * b\n"
    (proj / "calc.py").write_text(calc)
    agent, engine, steps = make(proj, [{"text": "calc.py"}, block(calc.replace("a * b", "b * a")),
                                       block("def combine(a, b):\n    return a + b\n")])
    agent.driver.config.repairs = 0
    result = agent.run("test_calc.py fails. Find the bug and fix it.")
    # the fix leads the answer; the suspect left alone follows
    assert result.text.startswith("Changed ops.py; `python -m pytest -q -x test_calc.py` passed. calc.py: not changed")
    assert (proj / "calc.py").read_text() == calc and ("locate", "ops.py (next suspect)") in steps


def test_a_suspect_the_model_copies_unchanged_hands_over_to_the_next_at_once(proj):
    (proj / "ops.py").write_text("def combine(a, b):\n    return a - b\n")
    calc = "from ops import combine\n\n\ndef add(a, b):\n    return combine(a, b)\n\n\ndef mul(a, b):\n    return a * b\n"
    (proj / "calc.py").write_text(calc)
    agent, engine, steps = make(proj, [{"text": "calc.py"}, block(calc), block("def combine(a, b):\n    return a + b\n")])
    result = agent.run("test_calc.py fails. Find the bug and fix it.")
    assert result.text.startswith("Changed ops.py; `python -m pytest -q -x test_calc.py` passed.")
    assert [d for s, d in steps if s == "edit"] == ["calc.py (whole file)", "ops.py (whole file)"]


def test_a_checked_candidate_that_rewrites_most_of_a_short_file_is_written(proj):
    """Write refuses a rewrite keeping under half a file's lines; a candidate that kept every definition and passed
    the tests is not the truncated file that guard is for (a passing fix was once refused by it and lost)."""
    old = 'def add(a, b):\n    """Add.\n\n    Two numbers.\n    """\n    return a - b\n\n\ndef mul(a, b):\n    return a * b\n'
    new = "def add(a, b):\n    total = a + b\n    return total\n\n\ndef mul(a, b):\n    return a * b\n"
    (proj / "calc.py").write_text(old)
    agent, engine, steps = make(proj, [{"candidates": [f"{old}```", f"{new}```"]}])
    agent.driver.config.tries = 2
    result = agent.run("The tests in test_calc.py fail. Fix calc.py.")
    assert result.text.startswith("Changed calc.py") and (proj / "calc.py").read_text() == new
    assert agent.ctx.allow_shrink is False  # only that Write: a later Write of the model's keeps the guard


def test_a_round_of_restyled_copies_counts_as_unchanged_and_asks_for_one_edit(proj):
    """Every candidate only changes quotes or spacing of code the reproduced check failed on: the round is a copy
    (nothing applied, no diff of quote marks in the next note) and the retry asks for the one change as an Edit."""
    restyled = BUGGY.replace("a - b", "a-b")
    agent, engine, steps = make(proj, [{"candidates": [f"{restyled}```", f"{restyled}  # same\n```"]},
                                       {"text": "", "tool_calls": [{"name": "Edit", "arguments": {
                                           "file_path": "calc.py", "old_string": "    return a - b\n",
                                           "new_string": "    return a + b\n"}}]}])
    agent.driver.config.tries = 2
    result = agent.run("The tests in test_calc.py fail. Fix calc.py.")
    assert result.text.startswith("Changed calc.py") and (proj / "calc.py").read_text() == FIXED
    assert ("tries", "2 candidates, 0 passed, applied #1") in steps
    assert [d for s, d in steps if s == "edit"] == ["calc.py (whole file)", "calc.py (Edit, try 2)"]
    assert engine.requests[1].messages[-1]["content"].startswith("Your rewrite left calc.py as it was.")
    writes = [c for m in agent.session.messages for c in m.get("tool_calls") or [] if c["function"]["name"] == "Write"]
    assert writes == []


def test_a_json_rewrite_starts_after_the_files_opening_bracket(proj):
    """The reply is given a JSON file's lone "{" line (the 1.5B's greedy rewrite dropped it every time); a reply
    that writes the bracket again still makes the file."""
    before = '{\n  "name": "app",\n  "debug": true\n}\n'
    (proj / "config.json").write_text(before)
    after = before.replace("true", "false")
    agent, engine, steps = make(proj, [{"text": after[2:] + "```"}])
    assert agent.run("Set debug to false in config.json.").text == "Changed config.json."
    assert (proj / "config.json").read_text() == after
    assert engine.requests[0].reply_prefix == "```json\n{\n"
    (proj / "config.json").write_text(before)
    agent, engine, steps = make(proj, [{"text": after + "```"}])
    assert agent.run("Set debug to false in config.json.").text == "Changed config.json."
    assert (proj / "config.json").read_text() == after and len(engine.requests) == 1


def test_only_a_lone_opening_bracket_of_a_json_file_is_given():
    from pathlib import Path

    from agent.pipeline.windows import opening_line
    assert [opening_line(text, Path("a.json")) for text in ("{\n}\n", "[\n]\n", '{"a": 1}\n', "{", None)] == \
        ["{\n", "[\n", "", "", ""]
    assert opening_line("{\n}\n", Path("a.yaml")) == ""
