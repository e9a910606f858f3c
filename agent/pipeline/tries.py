"""Verified tries: N candidate rewrites of a file decoded together, each checked against the real files, one kept.

A candidate is applied in place, checked (it parses, it keeps the file's definitions, the check commands pass
when the permission rules allow them without asking) and the file restored; the winner is the passing candidate
most others agree with, then the smallest change, then the highest mean log-probability. Only the winner enters
the conversation, as the model's Write.
"""
from __future__ import annotations

import ast
import dataclasses
import difflib
import re
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from agent.core import events as ev
from agent.core import model_text as mt
from agent.core.loop import Agent
from agent.core.run_types import PendingCall, RunState, RunStop
from agent.pipeline import splice
from agent.pipeline.checks import (adds_no_test, check_commands, doubled_lines, expected_output, ignored_own_files,
                                   kept_lines, lost_definitions,
                                   not_fixed, output_drifts, output_misses, unread_variables,
                                   wrong_line)
from agent.pipeline.config_diff import collateral_changes
from agent.pipeline.imports import broken_imports
from agent.pipeline.localize import Localization
from agent.pipeline.route import Plan
from agent.pipeline.shell_runs import CHECK_TIMEOUT_S, as_bash_runs, run_command
from agent.pipeline.windows import CUT_OFF, Shape, reply_content
from runtime import api
from tools._files import atomic_write, forget_bytecode, remember
from tools._parse_guard import parse_problem

CHECK_SLOWEST_TIMES = 5
CHECK_FLOOR_S = 10
PYTEST_FIRST_FAILURE = re.compile(r"(?<=pytest)((?: -\w+)*?) -x\b")
PYTEST_PASSED = re.compile(r"\b(\d+) passed\b")
PYTEST_FAILED = re.compile(r"\b(\d+) (?:failed|errors?)\b")
UNITTEST_RAN = re.compile(r"^Ran (\d+) tests? in ", re.MULTILINE)
UNITTEST_BROKE = re.compile(r"(?<!expected )\b(?:failures|errors)=(\d+)")
UNITTEST_SKIPPED = re.compile(r"\bskipped=(\d+)")  # counted in Ran N, not passed (pytest counts neither)
TRIES_TEMPERATURE = 0.6  # several candidates: more spread, and the check filters
SPREAD_TEMPERATURE = 0.9  # the next batch, when a batch's candidates were all one text that failed
CLOCK_RESERVE_S = 15.0  # a batch must end this long before the run's wall-clock limit (the answer follows)
CHECKS_RESERVE_S = 5.0  # and any check of a candidate this long: the chosen file's Write, its check and the answer
FRESH_FILE_MAX_LINES = 400  # a longer file is left out of the fresh look, as the pipeline attaches only its region


@dataclass
class Tried:
    index: int
    content: str
    mean_logprob: float
    passed: bool
    problem: str = ""  # why it failed, for the notes
    score: int = -1  # tests that passed (-1: it did not parse or run): which failing candidate comes nearest
    failures: int = 0  # tests that failed or errored


def evaluate(candidates: list[tuple[str, float]], target: Path, original: str | None, request: str,
             commands: list[str], root: Path, env: dict[str, str], sandbox: Any = None,
             cancel: threading.Event | None = None, failing: bool = False,
             kept: dict[str, tuple[str, ...]] | None = None, crashed: str = "", before: str = "",
             strict: bool = False, deadline: float | None = None) -> list[Tried]:
    """Check each (content, mean log-probability) in place; the file is left as it was. Once a check has ended,
    the limit for the rest is a few times the slowest that ended (a loop that never ends costs seconds). A cancel
    stops the running check and skips the rest. failing: the check failed on the original, so a candidate that
    only restyles its code (the same Python syntax tree) is unchanged too; kept: per command, the failing run's output
    lines a script's fix must leave alone (checks.kept_lines); crashed: the command that failed before the edit, and
    before: its output then (an error line in its clean exit, or the output the request calls wrong printed again,
    is not a fix: checks.not_fixed); strict: checks.output_drifts's. deadline (time.monotonic()): no check starts
    after it and none runs past it; the candidates left are not returned."""
    out, expected, wrong, limit = [], expected_output(request), wrong_line(request), float(CHECK_TIMEOUT_S)
    slowest = 0.0
    seen: dict[str, Tried] = {}  # a copy of a candidate checked already (peaked replies repeat) is not run again
    try:
        for i, (content, logprob) in enumerate(candidates):
            if (cancel is not None and cancel.is_set()) or (deadline is not None and time.monotonic() >= deadline):
                break
            if content in seen:
                out.append(dataclasses.replace(seen[content], index=i, mean_logprob=logprob))
                continue
            problem = parse_problem(target, original, content)
            lost = lost_definitions(request, target, original, content) + \
                collateral_changes(request, target, original, content)
            undefined = [f"it never reads the {n} environment variable"
                         for n in unread_variables(request, target, original, content)]
            undefined += [b for b in broken_imports(content, target, root, original) if "never defined" in b]
            undefined += [f"it ignores the project's own files ({', '.join(own[:4])})"
                          for own in [ignored_own_files(target, content)] if own]
            undefined += ["it adds no test function"] * adds_no_test(request, target, original, content)
            undefined += [f"it wrote lines {d} twice in a row" for d in [doubled_lines(original, content)] if d]
            if original is not None and (_normal(content) == _normal(original) or
                                         (failing and same_code(target, original, content))):
                out.append(Tried(i, content, logprob, False, "unchanged"))  # passes any check, changes nothing
                continue
            if problem is not None or lost or undefined:
                why = problem.reason if problem is not None else \
                    f"dropped or changed {', '.join(lost)}" if lost else "; ".join(undefined)
                out.append(Tried(i, content, logprob, False, why))
                continue
            atomic_write(target, content.encode("utf-8"))  # and drops the .pyc the last candidate's check left
            failed, score, failures = None, 0, 0
            for command in commands:
                left = limit if deadline is None else min(limit, max(1.0, deadline - time.monotonic()))
                ok, passed, broke, took = _run(command, root, env, expected, sandbox, left, cancel,
                                               (kept or {}).get(command, ()), wrong, crashed, request, before, strict)
                if took < limit:
                    slowest = max(slowest, took)
                    limit = min(CHECK_TIMEOUT_S, max(CHECK_FLOOR_S, CHECK_SLOWEST_TIMES * slowest))
                score, failures = score + passed, failures + broke
                failed = failed or (None if ok else command)
            out.append(Tried(i, content, logprob, failed is None, f"`{failed}` failed" if failed else "", score,
                             failures))
            seen[content] = out[-1]
    finally:
        if original is None:
            target.unlink(missing_ok=True)
            forget_bytecode(target)
        else:
            atomic_write(target, original.encode("utf-8"))
    return out


def choose(tried: list[Tried], original: str | None) -> Tried | None:
    """The passing candidate by agreement, then smallest change, then mean log-probability; None if none passed."""
    passing = [t for t in tried if t.passed]
    if not passing:
        return None
    votes = {}
    for t in passing:
        votes[_normal(t.content)] = votes.get(_normal(t.content), 0) + 1

    def change(t: Tried) -> float:
        return 1.0 - difflib.SequenceMatcher(None, original or "", t.content).ratio()
    return min(passing, key=lambda t: (-votes[_normal(t.content)], change(t), -t.mean_logprob))


def same_code(target: Path, original: str, content: str) -> bool:
    """A Python rewrite that differs from the original only in style (quotes, spacing, comments): the same
    syntax tree, so it behaves as the original did."""
    if target.suffix != ".py":
        return False
    try:
        return ast.dump(ast.parse(original)) == ast.dump(ast.parse(content))
    except (SyntaxError, ValueError):
        return False


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip().splitlines())


def nearest(tried: list[Tried]) -> Tried | None:
    """When none passed: the candidate that passed the most tests, then the most likely."""
    return max(tried, key=lambda t: (t.score, t.mean_logprob), default=None)


def _run(command: str, root: Path, env: dict[str, str], expected: str = "", sandbox: Any = None,
         limit_s: float = CHECK_TIMEOUT_S, cancel: threading.Event | None = None,
         kept: tuple[str, ...] = (), wrong: str = "", crashed: str = "",
         request: str = "", before: str = "", strict: bool = False) -> tuple[bool, int, int, float]:
    """(it passed, how many tests passed, how many failed, seconds): pytest runs every test (no -x), so a near miss counts its
    passes; a script passes when its output has the line the request expects and its other lines as they were."""
    code, out, took = run_command(PYTEST_FIRST_FAILURE.sub(r"\1", command), root, env, sandbox, limit_s, cancel)
    summary, failures = PYTEST_PASSED.findall(out[-2000:]), PYTEST_FAILED.findall(out[-300:])
    if not summary and (ran := UNITTEST_RAN.findall(out[-2000:])):  # unittest counts what ran and what broke
        failures = UNITTEST_BROKE.findall(out[-300:])
        skipped = sum(int(n) for n in UNITTEST_SKIPPED.findall(out[-300:]))
        summary = [str(int(ran[-1]) - sum(int(n) for n in failures) - skipped)]
    passed = code == 0 and not output_misses(command, out, expected) and \
        not output_drifts(out, expected, kept, wrong, strict) and not not_fixed(command, out, crashed, before, request)
    return passed, int(summary[-1]) if summary else 0, sum(int(n) for n in failures), took


def fresh_messages(driver: Any, agent: Agent, prompt: str, target: Path, name: str, original: str,
                   plan: Plan) -> list[dict]:
    """A round from outside the session after a first round of candidates that all failed: the bare model's
    whole-file shape, with the target and the other files the request was shown with. Its candidates differ from
    the session's repairs, which copied the nearest miss (docs/EVALS.md, stops 25 and 31)."""
    files = [(name, original)]
    for path in dict.fromkeys(plan.targets + plan.context):
        if path == target or not path.is_file() or not driver._may_read(agent, path):
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.count("\n") <= FRESH_FILE_MAX_LINES:
            files.append((driver.rel(path), text))
    return mt.fresh_look(files, prompt, name)


def runnable_checks(driver: Any, agent: Agent, prompt: str, loc: Localization, plan: Plan) -> list[str]:
    """The check commands a candidate runs: those the permission rules allow without asking."""
    return [c for c in check_commands(driver.root, prompt, loc, plan.targets) if driver.may_run(agent, c)]


def check_in_place(driver: Any, agent: Agent, prompt: str, target: Path, original: str | None,
                   contents: list[tuple[str, float]], commands: list[str], plan: Plan,
                   cancel: threading.Event, deadline: float | None = None) -> list[Tried]:
    """evaluate() as the Bash tool would run the checks (the session's env and sandbox); the file is back as it was
    read after, so a Write of the chosen one may follow. deadline: evaluate's (run_deadline)."""
    env, sandbox = as_bash_runs(agent)  # candidates run where the Bash tool would run them
    tried = evaluate(contents, target, original, prompt, commands, driver.root, env, sandbox, cancel,
                     failing=bool(plan.failing), kept={plan.failing: kept_lines(prompt, plan.failure)},
                     crashed=plan.failing, before=plan.failure, strict=plan.exact, deadline=deadline)
    if cancel.is_set():  # the file is back as it was; no candidate is applied
        raise RunStop("cancelled", "interrupted")
    if original is not None:
        remember(agent.ctx, target)  # restored to what was read: the Write that follows may change it
    return tried


def passed_in_place(driver: Any, agent: Agent, commands: list[str], cancel: threading.Event,
                    deadline: float | None = None) -> int:
    """The tests the checks pass with the files as they are, run as the Bash tool would run them."""
    limit = CHECK_TIMEOUT_S if deadline is None else min(CHECK_TIMEOUT_S, max(1.0, deadline - time.monotonic()))
    env, sandbox = as_bash_runs(agent)
    return sum(_run(c, driver.root, env, sandbox=sandbox, limit_s=limit, cancel=cancel)[1] for c in commands)


def _check_batch(driver: Any, agent: Agent, prompt: str, target: Path, original: str | None, shape: Shape,
                 opening: str, candidates: list[Any], commands: list[str], plan: Plan,
                 cancel: threading.Event, deadline: float | None = None) -> list[Tried]:
    """The batch's complete replies as files, checked in place; each Tried numbered as its candidate was (those
    the deadline left unchecked are not returned)."""
    read = [(i, reply_content(opening, c.text, target, shape.shown(original) or None), c.mean_logprob)
            for i, c in enumerate(candidates) if c.finish_reason not in CUT_OFF]
    read = [(i, shape.compose(original, c), lp) for i, c, lp in read if c is not None]
    checked = check_in_place(driver, agent, prompt, target, original, [(c, lp) for _, c, lp in read], commands,
                             plan, cancel, deadline)
    for t in checked:
        t.index = read[t.index][0]
    return checked


class OutOfTime(Exception):
    """A round's first batch would end past the run's wall-clock limit: the file ends with an answer instead."""


def run_deadline(agent: Agent, st: RunState, reserve: float | None = None) -> float | None:
    """When the run's checks of candidates must have ended (time.monotonic()): the reserve (CHECKS_RESERVE_S)
    before its wall-clock limit, for the answer (a run stopped by the limit answers nothing); None without one."""
    limit = agent.config.max_wall_s
    return None if limit is None else st.started + limit - (CHECKS_RESERVE_S if reserve is None else reserve)


def _time_for(agent: Agent, st: RunState) -> bool:
    """Whether a batch as long as the run's longest so far would end before its wall-clock limit, with the
    batch's reserve."""
    deadline = run_deadline(agent, st, CLOCK_RESERVE_S)
    return deadline is None or time.monotonic() + st.batch_s < deadline


def sample_and_check(driver: Any, agent: Agent, prompt: str, target: Path, name: str, original: str | None,
           shape: Shape, attempt: int, loc: Localization, plan: Plan, cancel: threading.Event,
           st: RunState, fresh: list[dict] | None = None,
           better_than: int = -2, batches: int = 0,
           pool: list[Tried] | None = None) -> tuple[PendingCall | None, Tried | None]:
    """N sampled rewrites from one prefill, checked in place; the chosen one becomes the model's Write, returned
    with its Tried (None: none was applied). A first attempt's first candidate is the greedy reply (what a single
    try would have written). fresh: sample from these messages instead of the session's (a session of its own,
    dropped after), the first candidate greedy. better_than: when none passes, the nearest is applied only if it
    passed more tests than this. batches: how many batches the round may draw while none passed (0: the profile's);
    each only while it would end before the run's wall-clock limit (OutOfTime: not even the first). pool: the checked
    candidates of earlier rounds at this file (the same original and checks), donors to the splice too; this round's
    are added to it."""
    budget = shape.budget(agent.engine.count_tokens, original)
    opening = shape.opening(name)
    session_id = agent.session.session_id + ("~fresh" if fresh else "")
    commands = runnable_checks(driver, agent, prompt, loc, plan)
    deadline = run_deadline(agent, st)  # checks end before it, the splice's too (it follows the last batch)
    tried: list[Tried] = []
    count = 0
    hot = False  # a batch's candidates were all one text: the later batches are drawn hotter
    drawn_hot = 0  # candidates drawn at SPREAD_TEMPERATURE
    try:
        for batch in range(batches or driver.config.batches):
            if not _time_for(agent, st):
                if batch:
                    break
                agent.emit(ev.PipelineStep(step="tries", detail="none: a batch would end past --max-time"))
                raise OutOfTime()
            batch_start = time.monotonic()
            # A batch with no passing candidate is followed by another from the same cached prompt (new seeds):
            # the cost of more candidates is paid only where the first ones all failed. Copies of one text say
            # the distribution is peaked there: the same temperature would draw that text again.
            sampling = dataclasses.replace(agent.config.sampling, seed=1000 * attempt + 100 * batch, max_tokens=budget,
                                           temperature=SPREAD_TEMPERATURE if hot else TRIES_TEMPERATURE)
            request = api.Request(session_id, fresh or agent.session.messages, [] if fresh else agent.schemas,
                                  sampling, speculation=False, constrained_tools=agent.config.constrained_tools,
                                  tool_choice="none", reply_prefix=opening, stop=[mt.FENCE_CLOSE])
            try:
                candidates, usage = agent.engine.sample(request, driver.config.tries, cancel=cancel,
                                                        greedy=int(batch == 0 and (attempt == 0 or bool(fresh))))
            except Exception as e:  # a model without batched branches (the CUDA path): one try as before
                if batch:
                    break
                agent.emit(ev.PipelineStep(step="tries", detail=f"unavailable ({type(e).__name__}: {e}); one try"))
                return driver.whole_file(agent, name, original, shape, attempt, cancel, st), None
            if not batch:
                st.turns += 1
                agent.turn += 1
            st.usages.append(usage)
            agent.emit(ev.TurnUsage(turn=agent.turn, usage=usage))
            if cancel.is_set():
                raise RunStop("cancelled", "interrupted")
            drawn_hot += len(candidates) if hot else 0
            hot = hot or (len(candidates) > 1 and len({c.text for c in candidates}) == 1)
            checked = _check_batch(driver, agent, prompt, target, original, shape, opening, candidates, commands,
                                   plan, cancel, deadline)
            for t in checked:
                t.index += count  # numbered as sampled, across batches
            tried += checked
            count += len(candidates)
            st.batch_s = max(st.batch_s, time.monotonic() - batch_start)
            if any(t.passed for t in checked) or not commands:
                break
    finally:
        if fresh and callable(drop := getattr(agent.engine, "drop_session", None)):
            drop(session_id)  # its KV is not needed again; the session's own cache was left alone
    earlier = list(pool or [])
    if pool is not None:
        pool.extend(tried)
    if commands and tried and not any(t.passed for t in tried):
        joined, checks = splice.best_splice(tried + earlier, original, lambda pairs: check_in_place(
            driver, agent, prompt, target, original, pairs, commands, plan, cancel, deadline), deadline)
        if checks:
            agent.emit(ev.PipelineStep(step="splice", detail=f"{checks} files spliced from the candidates checked, " + (
                "none passed more tests" if joined is None else "one passed" if joined.passed else
                f"the best passed {joined.score} test{'s' * (joined.score != 1)}")))
        if joined is not None:
            tried.append(dataclasses.replace(joined, index=-1))
    best = choose(tried, original)
    passed = sum(t.passed for t in tried if t.index >= 0)  # the candidates sampled; a spliced file is not one
    closest = nearest(tried)
    chosen = best or (closest if closest is not None and closest.score > better_than else None)
    near = f" (the nearest passed {chosen.score} test{'s' * (chosen.score != 1)})" if chosen and not chosen.passed and chosen.score > 0 else ""
    stays = f", none passed more than {better_than} tests" if closest is not None and chosen is None else ""
    hotter = f" (then {drawn_hot} at temperature {SPREAD_TEMPERATURE}: the first were one text)" if drawn_hot else ""
    agent.emit(ev.PipelineStep(step="tries", detail=f"{count} candidates{hotter}, {passed} passed{near}{stays}"
                               + (f", applied #{chosen.index + 1}" if chosen and chosen.index >= 0 else
                                  ", applied the spliced file" if chosen else "")))
    if chosen is None:
        return None, None
    if original is not None and (chosen.problem == "unchanged" or chosen.content.strip() == original.strip()):
        return PendingCall(id="", name="Write", args={"content": chosen.content}, raw_args={}), chosen
    # A candidate whose checks ran kept every definition and ran the tests: Write's guard against a rewrite that
    # keeps under half the lines (a truncated file) would refuse a checked fix of a short file.
    shrink = agent.ctx.allow_shrink
    agent.ctx.allow_shrink = shrink or (bool(commands) and chosen.score >= 0)
    try:
        return driver.harness_call(agent, "Write", {"file_path": name, "content": chosen.content}, cancel,
                                   st), chosen
    finally:
        agent.ctx.allow_shrink = shrink

