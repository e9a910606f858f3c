"""The pipeline's routes that end in a text answer: from attached files, after one command, after one harness
call of Skill, Task or Glob, and plan mode's read-then-plan; the failing check run before a fix (and its call
trace), and the one-line decision of which file a fix goes in. Each call is a real tool call in the history (the
permission rules, hooks and transcripts see it); the model writes only the answer (or the one Bash command).
"""
from __future__ import annotations

import importlib.util
import re
import threading
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core import model_text as mt
from agent.core.loop import Agent
from agent.core.run_types import RunState
from agent.pipeline import oracle
from agent.pipeline.call_trace import traceback_files, trace_failing_test
from agent.pipeline.checks import (STATED_WRONG, check_commands, expected_output, is_test_file, output_misses,
                                   reports_failure, stated_wrong, test_command)
from agent.pipeline.localize import project_files
from agent.pipeline.project_imports import covered_imports, imported_modules
from agent.pipeline.quoted_runs import asked_command
from agent.pipeline.route import MAX_TARGETS, kept_files
from agent.pipeline.shell_runs import as_bash_runs

README_NAMES = ("README.md", "README.rst", "README.txt", "README")
PLAN_READS = 4  # files read before a plan is written


ANSWER_TOKENS = 512
PLAN_TOKENS = 768  # a plan is a numbered list, longer than an answer


def answer(driver: Any, agent: Agent, note: str, step: str, cancel: threading.Event, st: RunState, *,
           max_tokens: int = ANSWER_TOKENS, prefix: str = "") -> None:
    """One text-only turn after `note` (a user message); the run's answer. prefix: the answer's start, written by
    the harness (the model continues it)."""
    agent.session.append({"role": "user", "content": note})
    text, calls, done = agent.query(cancel, st, tool_choice="none", max_tokens=max_tokens, reply_prefix=prefix,
                                    record=not prefix)
    agent.close_calls(calls, "Not run: this step answers in text.")
    driver.stopped(done, cancel)
    if prefix:
        text = prefix + text
        msg = {"role": "assistant", "content": text}
        agent.session.append(msg)
        agent.emit(ev.AssistantTurn(message=msg, turn=agent.turn, stop_reason=done.stop_reason, usage=done.usage))
        st.last_text = text
    agent.emit(ev.Stop(stop_hook_active=False, last_message=text))
    agent.emit(ev.PipelineStep(step="answer", detail=step))


def from_files(driver: Any, agent: Agent, prompt: str, cancel: threading.Event, st: RunState) -> None:
    """The files the question is about are attached: one text-only turn answers it (the request restated: after
    the files, the 1.5B described a search call instead of answering). A "how many" question is answered by the
    harness counting the model's list of the things it counts."""
    if HOW_MANY.search(prompt) and (items := listed(driver, agent, prompt, cancel, st)):
        return driver.answer(agent, [f"{len(items)}: {', '.join(items)}"], st)
    answer(driver, agent, mt.restate(prompt) + "\n" + mt.answer_from_files(bool(EXPLAIN.search(prompt))),
           "from the attached files", cancel, st)


# Asked how many routes a file registers, the 1.5B named a number (10 for 6); listing them is copying, which it
# does well. Lines, words and characters are counted by commands (the shell route), not listed.
HOW_MANY = re.compile(r"^\s*how\s+many\s+(?!(?:lines|words|characters|chars|bytes)\b)", re.IGNORECASE)
ITEM = re.compile(r"^\s*[-*]\s+(.+?)\s*$")
NUMBER = re.compile(r"\d+\.?")
LIST_TOKENS = 384
LIST_MAX_ITEMS = 40


def listed(driver: Any, agent: Agent, prompt: str, cancel: threading.Event, st: RunState) -> list[str]:
    """The things a "how many" question counts, as the model lists them one per line (duplicates once); [] when
    the list was cut off, looped or is longer than one would count by eye (the plain answer follows)."""
    which = HOW_MANY.sub("Which ", prompt.strip().split("?")[0], count=1) + "?"
    agent.session.append({"role": "user", "content": mt.list_before_counting(which)})
    start = "- "
    text, calls, done = agent.query(cancel, st, tool_choice="none", max_tokens=LIST_TOKENS, reply_prefix=start,
                                    record=False)
    agent.close_calls(calls, "Not run: this step answers in text.")
    driver.stopped(done, cancel)
    msg = {"role": "assistant", "content": start + text}
    agent.session.append(msg)
    agent.emit(ev.AssistantTurn(message=msg, turn=agent.turn, stop_reason=done.stop_reason, usage=done.usage))
    items = list(dict.fromkeys(m[1].strip("`") for line in msg["content"].splitlines() if (m := ITEM.match(line))))
    if done.stop_reason != "end_turn" or not items or len(items) > LIST_MAX_ITEMS or \
            all(NUMBER.fullmatch(i) for i in items):  # a count, not a list
        return []
    agent.emit(ev.PipelineStep(step="count", detail=f"{len(items)} listed"))
    return items


# A request for what code does, not a fact from it: "explain calc.py", "what does report.py do?"
EXPLAIN = re.compile(r"\b(?:explain|describe|summari[sz]e|walk me through|overview)\b|\bwhat\s+(?:does|do)\s+\S+"
                     r"(?:\s+\S+)?\s+do\b|\bhow\s+does\s+\S+(?:\s+\S+)?\s+work\b", re.IGNORECASE)


def one_command(driver: Any, agent: Agent, prompt: str, cancel: threading.Event, st: RunState) -> None:
    """One Bash call (the only tool allowed), then a text-only answer from its output; a command the shell or the
    program rejected as written (an unknown option, a missing command) gets one corrected call first."""
    if TESTS_RUN.search(prompt) and (runner := project_test_command(driver.root, prompt)):
        agent.session.append({"role": "user", "content": mt.test_runner(runner)})
    if (quoted := asked_command(prompt)) is not None:  # the user wrote the command: it runs as written
        agent.emit(ev.PipelineStep(step="command", detail=quoted))
        call = driver.harness_call(agent, "Bash", {"command": quoted}, cancel, st)
        if (denied := not_run(agent, call)) is not None:
            return driver.answer(agent, [denied], st)
        return answer(driver, agent, mt.request_reminder(prompt), "from the command's output", cancel, st,
                      prefix=output_shown(call))
    for attempt in range(2):
        agent.emit(ev.PipelineStep(step="command", detail="one Bash call" + (", again" if attempt else "")))
        if attempt:
            agent.session.append({"role": "user", "content": mt.request_reminder(prompt, after_errors=True)})
        _, calls, done = agent.query(cancel, st, tool_choice="required", allowed_tools=["Bash"],
                                     tool_overrides={"Bash": foreground_bash(agent)})
        driver.stopped(done, cancel)
        if not calls:
            break
        agent.run_calls(calls, cancel, st)
        if (denied := not_run(agent, calls[-1])) is not None:
            return driver.answer(agent, [denied], st)  # the model would answer as if it had seen the output
        if not misused(calls[-1]):
            break
    shown = output_shown(calls[-1]) if calls else ""
    answer(driver, agent, mt.request_reminder(prompt), "from the command's output", cancel, st, prefix=shown)


TESTS_RUN = re.compile(r"\btests?\b|\btest suite\b", re.IGNORECASE)
SHOWN_LINES = 15  # a longer output is shown as its first and last lines
SHOWN_END = 6
EXIT_TRAILER = re.compile(r"\n?\[exit code (\d+), [\d.]+s\]\s*\Z")


def output_shown(call: Any) -> str:
    """The answer's start: the command and what it printed, so the user reads the real output whatever the model's
    sentence says (the 1.5B answered "The tests fail. Run them." to a run of 0 tests)."""
    result = call.result
    if result is None or result.is_error or call.name != "Bash":
        return ""
    out = EXIT_TRAILER.sub("", result.content).rstrip()
    out = "" if out == "(no output)" else out  # the Bash tool's word for nothing
    code = result.data.get("exit_code") or 0
    lines = out.splitlines()
    if len(lines) > SHOWN_LINES:
        lines = lines[:SHOWN_END] + [f"... ({len(lines) - 2 * SHOWN_END} lines left out)"] + lines[-SHOWN_END:]
    status = f" (exit status {code})" if code else ""
    command = " ".join(str(call.args.get("command") or "").split())
    if not lines:
        return f"`{command}` printed nothing{status}.\n\n"
    body = "\n".join(lines).replace("```", "` ` `")
    return f"`{command}` printed{status}:\n```\n{body}\n```\n"


def project_test_command(root: Path, prompt: str) -> str:
    """How this project's tests run (the test files the request names, else all), or "" when it has none."""
    loc_tests = [root / t for t in re.findall(r"[\w./-]*test[\w./-]*\.py", prompt) if (root / t).is_file()]
    if not loc_tests and not any(is_test_file(p) for p in project_files(root)):
        return ""
    if loc_tests:
        return test_command(root, loc_tests).replace(" -x", "")  # every failure, not the first
    return "python -m pytest -q" if importlib.util.find_spec("pytest") is not None else "python -m unittest discover"


def not_run(agent: Agent, call: Any) -> str | None:
    """The answer when the permission rules refused the command: which command, why, and the rule that would allow
    it. The 1.5B, refused in a headless run, described what the script prints instead of saying it had not run it."""
    result = call.result
    if result is None or not result.is_error or not result.content.startswith("Error: permission"):
        return None
    command = str(call.args.get("command") or "")
    reason = result.content.removeprefix("Error: ").split(" Do the task without it")[0].strip().rstrip(".")
    rules = agent.permissions.suggest_rule("Bash", call.args, cwd=agent.ctx.cwd) if agent.permissions else []
    allow = f". Allowing {' and '.join(f'`{r}`' for r in rules)} (--allowedTools, or an allow rule in settings) lets it run" \
        if rules else ""
    return f"I did not run `{command}`: {reason}{allow}"


# The shell or the program refused the command as written: a wrong option or name, not a result to report
# (a test run that fails, a grep that finds nothing).
MISUSED = re.compile(r"unrecognized (?:argument|option)|unknown option|invalid option|illegal option|"
                     r"command not found|usage:|No such file or directory|syntax error", re.IGNORECASE)


def misused(call: Any) -> bool:
    """A Bash call whose command failed because of how it was written."""
    result = call.result
    if result is None or result.is_error or not result.data.get("exit_code"):
        return False
    return result.data["exit_code"] in (2, 126, 127, 128) and bool(MISUSED.search(result.content[-2000:]))


def foreground_bash(agent: Agent) -> dict:
    """Bash's parameters without run_in_background: the answer needs the command's output (the 0.5B once sent
    `wc -l` to the background and answered with a count it made up)."""
    schema = next(s["function"]["parameters"] for s in agent.schemas if s["function"]["name"] == "Bash")
    props = {k: v for k, v in schema.get("properties", {}).items() if k != "run_in_background"}
    return {**schema, "properties": props, "required": [r for r in schema.get("required", []) if r in props]}


def plan_mode(driver: Any, agent: Agent, prompt: str, files: list[Path], cancel: threading.Event,
              st: RunState) -> None:
    """Plan mode: Read the files the request concerns (the project's README when it names none), then the plan."""
    readme = next((driver.root / n for n in README_NAMES if (driver.root / n).is_file()), None)
    reads = list(dict.fromkeys(files + ([readme] if readme is not None else [])))[:PLAN_READS]
    agent.emit(ev.PipelineStep(step="plan", detail="read " + (", ".join(driver.rel(p) for p in reads) or "nothing")))
    for path in reads:
        driver.harness_call(agent, "Read", {"file_path": driver.rel(path)}, cancel, st)
    answer(driver, agent, mt.restate(prompt) + "\n" + mt.plan_request(), "plan", cancel, st, max_tokens=PLAN_TOKENS)


def tool_then_answer(driver: Any, agent: Agent, prompt: str, name: str, args: dict, source: str,
                     cancel: threading.Event, st: RunState) -> bool:
    """One harness call of `name` (Task or Glob), then the answer from its result; False when the call failed
    (the caller falls back to the free loop)."""
    agent.emit(ev.PipelineStep(step="call", detail=f"{name} {args}"))
    call = driver.harness_call(agent, name, args, cancel, st)
    if call.result is None or call.result.is_error:
        return False
    note = mt.restate(prompt)
    if name == "Glob" and "num_files" in call.result.data:
        note += "\n" + mt.files_found(call.result.data["num_files"], args["pattern"])
    answer(driver, agent, note + "\n" + mt.answer_from(source), f"from the {source}", cancel, st)
    return True


def load_skill(driver: Any, agent: Agent, name: str, cancel: threading.Event, st: RunState) -> str | None:
    """The Skill call the request asks for; its instructions, or None when it could not be loaded."""
    agent.emit(ev.PipelineStep(step="call", detail=f"Skill {name}"))
    call = driver.harness_call(agent, "Skill", {"skill": name}, cancel, st)
    if call.result is None or call.result.is_error:
        return None
    return call.result.content


PICK_TOKENS = 24


def pick_target(driver: Any, agent: Agent, suspects: list[Path], plan: Any, cancel: threading.Event,
                st: RunState) -> Path:
    """Which of the files a failing test reaches holds the bug: with a trace, the file of the deepest call whose
    value the model says is wrong (oracle.py); else one short text turn naming it (the first file when the reply
    names none)."""
    names = [driver.rel(p) for p in suspects]

    def ask(text: str, tokens: int = PICK_TOKENS, start: str = "") -> str:
        """start: the reply's given beginning, inside a backtick; it ends at the closing one."""
        agent.session.append({"role": "user", "content": text})
        reply, made, done = agent.query(cancel, st, tool_choice="none", max_tokens=tokens, record=not start,
                                        reply_prefix=start, stop=["`", "\n"] if start else None)
        agent.close_calls(made, "Not run: this step is answered in text.")
        driver.stopped(done, cancel)
        if start:  # the history holds the reply as the model's context had it
            msg = {"role": "assistant", "content": f"{start}{reply}`"}
            agent.session.append(msg)
            agent.emit(ev.AssistantTurn(message=msg, turn=agent.turn, stop_reason=done.stop_reason, usage=done.usage))
        return reply

    # The trace itself is never shown: given the values calls returned, the 1.5B took them as right and copied
    # the file unchanged (docs/EVALS.md, stop 30).
    found = oracle.find_wrong_call(plan.trace.calls if plan.trace else [],
                                   lambda q, call: ask(q, PICK_TOKENS + len(call.returned) // 2,
                                                       oracle.answer_start(call)))
    path = (driver.root / found[0].file).resolve() if found else None
    if found and path in suspects:
        plan.hint = oracle.sentence(*found)
        plan.focus = {path: oracle.definition_lines(path, found[0])}
        why = plan.hint.removeprefix("In short: ")
        agent.emit(ev.PipelineStep(step="locate", detail=f"{driver.rel(path)} ({why})"))
        return path
    text = ask(mt.which_file(names))
    at = {i: text.find(n) for i, n in enumerate(names) if n in text} or \
        {i: text.find(Path(n).name) for i, n in enumerate(names) if Path(n).name in text}
    chosen = min(at, key=at.get) if at else 0
    agent.emit(ev.PipelineStep(step="locate", detail=f"{names[chosen]} (of {', '.join(names)})"))
    return suspects[chosen]


def reproduce(driver: Any, agent: Agent, prompt: str, loc: Any, plan: Any, cancel: threading.Event,
              st: RunState) -> None:
    """A request that reports a failure: its check runs before the edit (where the rules allow it without
    asking), so the model sees the failing assertion or traceback instead of guessing; when the bug may be in one
    of several files, a failing pytest run is traced once more for what the project's functions returned."""
    if not reports_failure(prompt) and not STATED_WRONG.search(prompt):
        return
    commands = check_commands(driver.root, prompt, loc, plan.targets)
    # the first check; when it shows nothing wrong, the tests of what the targeted script imports
    for command in commands[:1] + [c for c in commands[1:] if covered_imports(driver.root, c, plan.targets)][:1]:
        if plan.failing:
            break
        # "should" alone calls a script's output wrong, not a test run's: tests run first only for a failure
        if driver.may_run(agent, command) and (reports_failure(prompt) or stated_wrong(command, prompt)):
            agent.emit(ev.PipelineStep(step="reproduce", detail=command))
            call = driver.harness_call(agent, "Bash", {"command": command}, cancel, st)
            out = call.result.content if call.result is not None else ""
            wrong = call.result is not None and (call.result.data.get("exit_code") or
                                                 output_misses(command, out, expected_output(prompt)) or
                                                 stated_wrong(command, prompt))
            plan.failing, plan.failure = (command, out) if wrong else ("", "")
            # A crash that passes through a named script into deeper project code: the files it passes through,
            # innermost first, then the modules they import (where a wrong value may come from) are suspects first
            frames = traceback_files(out, driver.root) if wrong and plan.targets else []
            cut = next((i for i, p in enumerate(frames) if p in plan.targets), 0)  # frames deeper than a target
            if cut:  # not a crash in the targeted script itself, nor in code that a test calls
                kept = kept_files(prompt, driver.root) + plan.targets
                deeper = [p for p in dict.fromkeys(frames[:cut] + imported_modules(driver.root, frames[:cut + 1]))
                          if p not in kept and not is_test_file(p) and driver.may_write(agent, p)]
                plan.targets = (deeper + plan.targets)[:MAX_TARGETS]
                if deeper:
                    agent.emit(ev.PipelineStep(step="locate", detail=", ".join(driver.rel(p) for p in deeper) +
                                               " (from the traceback)"))
            elif wrong and (tested := [p for p in covered_imports(driver.root, command, plan.targets)
                                        if p not in kept_files(prompt, driver.root) and driver.may_write(agent, p)]):
                plan.targets = (tested + plan.targets)[:MAX_TARGETS]  # what the failing tests test, first
                agent.emit(ev.PipelineStep(step="locate", detail=", ".join(driver.rel(p) for p in tested) +
                                           " (what the failing tests test)"))
            if wrong and driver.config.oracle and plan.locate and len(plan.targets) > 1:  # the oracle's material
                plan.trace = trace_failing_test(command, driver.root, *as_bash_runs(agent))
                if plan.trace:
                    agent.emit(ev.PipelineStep(step="trace", detail=plan.trace.text()))
