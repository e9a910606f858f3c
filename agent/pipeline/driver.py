"""The task pipeline for small models: the harness keeps control flow, the model makes one decision a step.

A request that asks for a change to files goes: localize (the files it names, the files where the identifiers and
strings it mentions occur; each attached after the Read permission check) -> ruff's own fix of a bug pattern, kept
only if the failing check then passes (lint_fix.py) -> one edit step per target file (a short file is rewritten whole
from a fenced block, decoded as text; a long one gets a single Edit call under a grammar bound to its lines) -> the
check (the parse guard in Write/Edit, then the tests or script the request names, or the tests that import the file)
-> on failure, back to a clean prefix (the file restored, the conversation cut before the attempt, the failure
added) and another try -> a short answer written by the harness. Other requests: the files attached, the free loop.

Every change and check is a real tool call in the history (Write, Edit, Bash): permission rules, hooks,
checkpoints, transcripts and resume see what happened.
"""
from __future__ import annotations

import dataclasses
import re
import threading
from pathlib import Path

from agent.core import events as ev
from agent.core import model_text as mt
from agent.core.loop import Agent
from agent.core.run_types import PendingCall, RunState, RunStop
from agent.pipeline import attach, characterize, focus, lint_fix, members, mutants, origin, refactor, steps, windows
from agent.pipeline.checks import (check_commands, expected_output, first_line, is_test_file, kept_lines,
                                   not_fixed, output_drifts, output_misses, reports_failure, rewrite_problem,
                                   written, wrong_line)
from agent.pipeline.config import PipelineConfig
from agent.pipeline.config_diff import collateral_changes
from agent.pipeline.imports import broken_imports
from agent.pipeline.lint import bug_findings
from agent.pipeline.localize import Localization, localize, result_rows
from agent.pipeline.mismatch import assertion_mismatch
from agent.pipeline.route import SHELL, Plan, appends, plan_request, wants_edit
from agent.pipeline.tries import OutOfTime, fresh_messages, sample_and_check
from runtime import api
from tools._files import atomic_write, remember

UNCHANGED = "it repeated the file unchanged"
TESTS = re.compile(r"\b(tests?|unittests?)\b", re.IGNORECASE)
RETRY_TEMPERATURE = 0.3  # small models lose the file's format at higher temperatures


class PipelineDriver:
    def __init__(self, root: Path, config: PipelineConfig | None = None) -> None:
        self.root = Path(root).resolve()
        self.config = config or PipelineConfig()

    # ---- entry

    def drive(self, agent: Agent, prompt: str, cancel: threading.Event, st: RunState) -> None:
        job = mt.subagent_job(prompt)  # a child's definition is not part of what it was asked
        loc = self._localize(agent, job)
        skills = agent.ctx.services.get("skill_names", lambda: [])()
        mode = agent.permissions.mode if agent.permissions else "default"
        plan = plan_request(job, loc, self.root, mode=mode, offered=set(agent.tools), skills=tuple(skills))
        shown = [p for p in plan.context if self._may_read(agent, p)]
        agent.emit(ev.PipelineStep(step="localize", detail=plan.summary(self.root, loc, shown)))
        results = mt.search_results(found) + "\n\n" if (found := result_rows(self.root, loc)) else ""
        if plan.kind == "plan":
            agent.open_prompt(prompt, st, results)
            steps.plan_mode(self, agent, job, shown, cancel, st)
        elif plan.kind == "skill":
            agent.open_prompt(prompt, st, results)
            self._after_skill(agent, job, steps.load_skill(self, agent, plan.call["skill"], cancel, st), cancel, st)
        elif plan.kind in ("delegate", "list"):
            agent.open_prompt(prompt, st, results)
            name, source = ("Task", "subagent's report") if plan.kind == "delegate" else ("Glob", "Glob result")
            if not steps.tool_then_answer(self, agent, job, name, plan.call, source, cancel, st):
                agent.react(cancel, st)
        elif plan.kind != "edit":
            agent.open_prompt(prompt, st, results + attach.attachments(self, agent, shown, loc, raw=False))
            if plan.kind == "answer" and shown:
                steps.from_files(self, agent, job, cancel, st)
            elif plan.kind == "shell" and "Bash" in agent.tools:
                steps.one_command(self, agent, job, cancel, st)
            else:
                agent.react(cancel, st)
        else:
            agent.open_prompt(prompt, st, results + attach.attachments(self, agent, shown, loc, raw=True))
            self._edit_all(agent, job, loc, plan, cancel, st)

    def _edit_all(self, agent: Agent, prompt: str, loc: Localization, plan: Plan, cancel: threading.Event,
                  st: RunState) -> None:
        steps.reproduce(self, agent, prompt, loc, plan, cancel, st)
        if refactor.planned(self, agent, prompt, plan.targets + loc.named + loc.ranked(), loc, plan, cancel, st):
            return
        if (fixed := lint_fix.fix_first(self, agent, prompt, plan.targets, loc, plan, cancel, st)) or \
                (fixed := mutants.exact_first(self, agent, prompt, loc, plan, cancel, st)):
            return self.answer(agent, [fixed], st)
        others: list[Path] = []
        if plan.locate and len(plan.targets) > 1:
            chosen = steps.pick_target(self, agent, plan.targets, plan, cancel, st)
            others, plan.targets = [p for p in plan.targets if p != chosen], [chosen]
        outcomes = []
        for target in plan.targets:
            if cancel.is_set():
                raise RunStop("cancelled", "interrupted")
            outcomes.append(self._edit(agent, prompt, target, loc, plan, cancel, st,
                                       suspect=bool(others) and not plan.hint))  # the oracle's verdict: all rounds
            if plan.failing and plan.checked and outcomes[-1].startswith("Changed"):
                break  # the failure shown before the edit is gone: the other targets stay as they are
            # Before the next target or suspect, once: the changes in every file the failing test or script runs
            if len(outcomes) == 1 and self.config.mutants and plan.failing and not outcomes[0].startswith(
                    "Changed") and "permission" not in outcomes[0] and \
                    (fixed := mutants.repair(self, agent, prompt, loc, plan, cancel, st)):
                return self.answer(agent, [fixed], st)
        if others and not outcomes[-1].startswith("Changed") and "permission" not in outcomes[-1]:
            plan.targets = others[:1]  # no fix passed in the file the model named: the next suspect
            agent.emit(ev.PipelineStep(step="locate", detail=f"{self.rel(others[0])} (next suspect)"))
            outcomes.append(self._edit(agent, prompt, others[0], loc, plan, cancel, st))
        self.answer(agent, outcomes, st)

    def _after_skill(self, agent: Agent, prompt: str, body: str | None, cancel: threading.Event,
                     st: RunState) -> None:
        """A loaded skill's instructions join the request: a change is localized again over both; a question
        is answered from them."""
        if body is None:
            agent.react(cancel, st)
        elif wants_edit(prompt):
            job = f"{prompt}\n\n{body}"
            loc = self._localize(agent, job)
            offered = set(agent.tools) - {"Skill", "Task"}
            plan = plan_request(job, loc, self.root, offered=offered)
            if plan.kind != "edit":
                agent.react(cancel, st)
                return
            shown = [p for p in plan.context if self._may_read(agent, p)]
            if shown:
                agent.session.append({"role": "user", "content": attach.attachments(self, agent, shown, loc, raw=True)})
            self._edit_all(agent, job, loc, plan, cancel, st)
        elif SHELL.search(prompt) and "Bash" in agent.tools:
            steps.one_command(self, agent, prompt, cancel, st)
        else:
            steps.answer(self, agent, mt.restate(prompt) + "\n" + mt.answer_from("skill's instructions"),
                         "from the skill", cancel, st)

    # ---- one file

    def _edit(self, agent: Agent, prompt: str, target: Path, loc: Localization, plan: Plan,
              cancel: threading.Event, st: RunState, suspect: bool = False) -> str:
        """suspect: one of several files the bug may be in: one round, then the next suspect (the model's pick)."""
        name = self.rel(target)
        new = not target.exists()
        original = None if new else target.read_text(encoding="utf-8", errors="replace")
        into = members.target_class(prompt, original) if target.suffix == ".py" else ""
        append = appends(prompt, target) or bool(into)
        long = not new and not append and original.count("\n") > self.config.whole_file_max_lines
        traced = [] if new or append else plan.focus.get(target, [])  # the definition the oracle found wrong
        window = windows.window(original, traced or loc.hits.get(target, []), python=target.suffix == ".py") \
            if long or traced else None
        whole = not long or window is not None
        opener = windows.opening_line(original, target) if window is None and not append else ""  # from round 1
        head = (windows.stub_head(original, prompt, target) if window is None and not append else "") or opener
        shape = windows.Shape(window, append, target, self.root,
                              tuple(p for p in plan.targets + plan.context if p != target), opener, prompt, into)
        if window is not None:
            again = mt.region_request(name, window[0], window[1], windows.lines(original, window), long=long)
        elif append:
            again = mt.member_request(name, into) if into else mt.append_request(name)
        else:
            again = mt.whole_file_request(name, new=new, failing=plan.failing if target in plan.targets[:1] else "")
        note = again if whole else mt.edit_region_request(
            name, windows.region(original, loc.hits.get(target, []), attach.REGION_CONTEXT))
        known = broken_imports(original, target, self.root) if original is not None else []
        found = known + bug_findings(original, target, name) if reports_failure(prompt) else []
        if found:  # found without running anything: say it up front
            note = mt.harness_found(found) + "\n" + note
        note = (plan.hint + "\n" if plan.hint and target in plan.targets[:1] else "") + note
        if plan.failing and target in plan.targets[:1] and (short := assertion_mismatch(plan.failure) or
                                                             origin.note(self, agent, plan)):
            note = short + "\n" + note
        last_round = None  # the applied change and what failed, of the last sampled round
        first = None  # tests the nearest candidate of a sampled first round passed
        mutated = False  # a near miss had its one-expression changes checked (once a file)
        # A file with stubs (asked for in any words): rounds' candidates stay donors to later splices, a fresh look
        # draws more
        stub = window is None and not append and bool(windows.stub_starts(original, target))
        pool: list | None = [] if stub else None
        for attempt in range(1 + self.config.repairs):
            if st.turns >= agent.config.max_turns:
                raise RunStop("max_turns", f"stopped after {agent.config.max_turns} turns (--max-turns)")
            mark = len(agent.session.messages)
            agent.session.append({"role": "user", "content": note})
            sampled = whole and self._can_sample(agent) and bool(attempt or self._tested(agent, prompt, loc, plan))
            fresh = fresh_messages(self, agent, prompt, target, name, original, plan) if (
                self.config.fresh and sampled and attempt == 1 and first is not None and window is None
                and not append and original is not None) else None
            how = "Edit" if not whole else ("addition" if append else "whole file" if window is None
                                            else f"lines {window[0]}-{window[1]}")
            agent.emit(ev.PipelineStep(step="edit", detail=f"{name} ({how}"
                                                            f"{', try ' + str(attempt + 1) if attempt else ''}"
                                                            f"{', a fresh look' if fresh else ''})"))
            # The first round writes the file as the model would (its imports first); retries start after the head.
            shape = dataclasses.replace(shape, head=head) if attempt == 1 else shape
            near = None
            if sampled:
                try:
                    call, near = sample_and_check(self, agent, prompt, target, name, original, shape, attempt, loc,
                                                  plan, cancel, st, fresh=fresh, pool=pool,
                                                  batches=self.config.stub_batches if stub and fresh else 0)
                except OutOfTime:  # an answer before the wall-clock limit, not a run stopped by it
                    self.restore(agent, target, original)
                    return f"{name}: not changed; " + (f"{failure[0]} failed ({first_line(failure[1])}); " if
                                                       attempt else "") + "no time was left for another round"
                first = (near.score if near else -1) if attempt == 0 else first
            else:
                call = self.whole_file(agent, name, original, shape, attempt, cancel, st) if whole else \
                    self._one_edit(agent, name, original, attempt, cancel, st)
            if call is None:
                failure = ("the reply", "it had no complete code block with the file's content")
            elif call.result is None:
                failure = ("the reply", UNCHANGED)
            elif call.result.is_error and call.result.content.startswith("Error: permission"):
                return f"{name}: not changed ({first_line(call.result.content)})"
            elif call.result.is_error:
                failure = ("the edit", call.result.content)
            elif why := rewrite_problem(prompt, target, name, original, written(call, whole, target)):
                failure = ("the rewrite" if whole else "the edit", why)
            elif whole and (keys := collateral_changes(prompt, target, original, call.args.get("content", ""))):
                failure = ("the rewrite", f"it changed {', '.join(keys)}, which the request does not ask for; "
                                          "keep everything else as it was")
            elif (broken := [b for b in broken_imports(written(call, whole, target), target, self.root, original)
                             if b not in known or reports_failure(prompt)]):
                failure = ("the imports", "; ".join(broken))
            else:
                failure = self.check(agent, prompt, loc, plan, cancel, st)
                if failure is None:
                    return f"Changed {name}" + (f"; {plan.checked}" if plan.checked else "")
                if (fixed := characterize.repair(self, agent, prompt, target, name, original, loc, plan, failure[1],
                                                 cancel, st)) or sampled and self.config.focus and near and (fixed := \
                        focus.repair(self, agent, prompt, target, name, loc, plan, failure[1], near, mark, cancel, st)):
                    return fixed
                if sampled and self.config.mutants and near and not mutated and \
                        near.score > near.failures and near.failures <= mutants.NEAR_FAILURES:
                    mutated = True  # the candidate on disk came near: one of its expressions may be all it misses
                    if fixed := mutants.repair(self, agent, prompt, loc, plan, cancel, st, within=target,
                                               budget_s=mutants.NEAR_BUDGET_S, better_than=near.score):
                        return fixed
            tried = call.result.data.get("diff", "") if call is not None and call.result is not None else ""
            # The round's nearest candidate is the one the last note showed: the next note would only repeat it
            copied = sampled and tried and (tried, failure[0]) == last_round
            last_round = (tried, failure[0]) if sampled else None
            # A fresh look that came no nearer than the first round: a repair would start from the same miss
            stale = fresh is not None and (near.score if near else -1) <= first
            if attempt == self.config.repairs or suspect or copied or stale:
                self.restore(agent, target, original)  # a change that failed its check is not kept
                return f"{name}: not changed; {failure[0]} failed ({first_line(failure[1])})"
            agent.emit(ev.PipelineStep(step="retry", detail=f"{failure[0]} failed; {name} restored"))
            self.restore(agent, target, original)
            note = mt.check_failed(name, *failure, tried, again, assertion_mismatch(failure[1])) if whole else note
            if failure[1] == UNCHANGED and window is None and not append and original is not None:
                if attempt == 0 and not sampled and self._can_sample(agent):
                    note = mt.rewrite_unchanged(name, again)  # a greedy copy: sampled rewrites may differ
                else:
                    whole, note = False, mt.edit_after_unchanged(name)  # the rewrite copies: ask for the one change
            agent.session.replace_messages(agent.session.messages[:mark], {"type": "retry", "file": name,
                                                                           "attempt": attempt + 1})
        return f"{name}: not changed"

    def whole_file(self, agent: Agent, name: str, original: str | None, shape: windows.Shape,
                    attempt: int, cancel: threading.Event, st: RunState) -> PendingCall | None:
        """The model writes the file (or a long one's window) in a fenced block; it becomes a Write in the history."""
        budget = shape.budget(agent.engine.count_tokens, original)
        # A retry samples (a different seed each time); greedy would write the same file again.
        sampling = None if attempt == 0 else dataclasses.replace(agent.config.sampling, temperature=RETRY_TEMPERATURE,
                                                                 seed=attempt, max_tokens=budget)
        opening = shape.opening(name)
        text, _, done = agent.query(cancel, st, tool_choice="none", max_tokens=budget, record=False,
                                    sampling=sampling, reply_prefix=opening, stop=[mt.FENCE_CLOSE])
        self.stopped(done, cancel)
        content = None if done.stop_reason in windows.CUT_OFF else \
            windows.reply_content(opening, text, shape.path or Path(name), shape.shown(original) or None)  # cut off
        if content is not None:
            content = shape.compose(original, content)
        if content is None:
            agent.session.append({"role": "assistant", "content": text})
            agent.emit(ev.AssistantTurn(message=agent.session.messages[-1], turn=agent.turn,
                                        stop_reason=done.stop_reason, usage=done.usage))
            return None
        if original is not None and content.strip() == original.strip():
            return PendingCall(id="", name="Write", args={"content": content}, raw_args={})  # result None: unchanged
        return self.harness_call(agent, "Write", {"file_path": name, "content": content}, cancel, st, usage=done)

    def may_write(self, agent: Agent, path: Path) -> bool:
        """A file the harness may change without asking (the rules, or the mode, allow Edit outright)."""
        return _allows(agent, "Edit", {"file_path": str(path)})

    def may_run(self, agent: Agent, command: str) -> bool:
        """Candidates are checked without asking: only commands the rules allow outright."""
        return _allows(agent, "Bash", {"command": command})

    def _one_edit(self, agent: Agent, name: str, original: str, attempt: int, cancel: threading.Event,
                  st: RunState) -> PendingCall | None:
        """One Edit call, the only tool allowed: file_path bound to this file, old_string to whole lines of it. A
        retry samples (greedy repeats the call it made before)."""
        schema = next(s["function"]["parameters"] for s in agent.schemas if s["function"]["name"] == "Edit")
        bound = {**schema, "properties": {**schema["properties"], "file_path": {"type": "string", "enum": [name]},
                                          "old_string": {"type": "string", "x-substring-of": original}}}
        sampling = None if attempt == 0 else dataclasses.replace(agent.config.sampling, temperature=RETRY_TEMPERATURE,
                                                                 seed=attempt)
        _, calls, done = agent.query(cancel, st, tool_choice="required", allowed_tools=["Edit"],
                                     tool_overrides={"Edit": bound}, sampling=sampling)
        self.stopped(done, cancel)
        if not calls:
            return None
        agent.run_calls(calls, cancel, st)
        return calls[-1]

    def _can_sample(self, agent: Agent) -> bool:
        return self.config.tries > 1 and callable(getattr(agent.engine, "sample", None))

    def _tested(self, agent: Agent, prompt: str, loc: Localization, plan: Plan) -> bool:
        """The request is about tests or reports a failure, and its check may run: round 1 samples N candidates."""
        about_tests = TESTS.search(prompt) or any(is_test_file(p) for p in loc.named) or reports_failure(prompt)
        return bool(about_tests) and any(
            self.may_run(agent, c) for c in check_commands(self.root, prompt, loc, plan.targets))

    def check(self, agent: Agent, prompt: str, loc: Localization, plan: Plan, cancel: threading.Event,
               st: RunState) -> tuple[str, str] | None:
        """(what failed, its output) or None; a check that may not run (permissions) counts as not failed."""
        plan.checked = ""
        for command in check_commands(self.root, prompt, loc, plan.targets):
            agent.emit(ev.PipelineStep(step="check", detail=command))
            call = self.harness_call(agent, "Bash", {"command": command}, cancel, st)
            if (code := call.result.data.get("exit_code")) is None:  # refused or not run: nothing learned
                continue
            if code != 0:
                return f"`{command}`", call.result.content
            if output_misses(command, call.result.content, expect := expected_output(prompt)):
                return f"`{command}`", f"{call.result.content}\n{mt.output_lacks(expect)}"
            if why := not_fixed(command, call.result.content, plan.failing, plan.failure, prompt):
                return f"`{command}`", f"{call.result.content}\n{why}"
            if command == plan.failing and output_drifts(call.result.content, expect, kept_lines(prompt, plan.failure),
                                                            wrong_line(prompt), plan.exact):
                return f"`{command}`", f"{call.result.content}\n{mt.output_changed(expect)}"
            plan.checked = f"`{command}` passed"
        return None

    # ---- pieces

    def harness_call(self, agent: Agent, name: str, args: dict, cancel: threading.Event, st: RunState,
                      usage: api.Done | None = None) -> PendingCall:
        """A call the harness makes on the model's behalf, through the same checks as the model's own."""
        call = agent.to_call(api.ToolCall(id="", name=name, arguments=args))
        call.harness = True
        msg = {"role": "assistant", "content": "",
               "tool_calls": [{"id": call.id, "type": "function", "function": {"name": name, "arguments": args}}]}
        agent.session.append(msg)
        agent.emit(ev.AssistantTurn(message=msg, turn=agent.turn, stop_reason=usage.stop_reason if usage else "tool_use",
                                    usage=usage.usage if usage else api.Usage()))
        agent.run_calls([call], cancel, st)
        return call

    def answer(self, agent: Agent, outcomes: list[str], st: RunState) -> None:
        ordered = sorted(outcomes, key=lambda o: not o.startswith("Changed"))  # the fix leads, the misses follow
        text = ". ".join(ordered) + "." if outcomes else "Nothing was changed."
        agent.session.append(msg := {"role": "assistant", "content": text})
        agent.emit(ev.AssistantTurn(message=msg, turn=agent.turn, stop_reason="end_turn", usage=api.Usage()))
        agent.emit(ev.PipelineStep(step="answer", detail=text))
        agent.emit(ev.Stop(stop_hook_active=False, last_message=text))
        st.last_text = text

    def restore(self, agent: Agent, target: Path, original: str | None) -> None:
        if original is None:
            target.unlink(missing_ok=True)
            agent.ctx.read_files.pop(str(target), None)
        else:
            atomic_write(target, original.encode("utf-8"))
            remember(agent.ctx, target)

    def _localize(self, agent: Agent, request: str) -> Localization:
        """Localization limited to what the Read rules let the model see: a denied file's lines never reach the
        search results (a secrets.env under a Read deny rule leaked its key through them)."""
        loc = localize(self.root, request)
        loc.hits = {p: lines for p, lines in loc.hits.items() if self._may_read(agent, p)}
        loc.named = [p for p in loc.named if self._may_read(agent, p)]
        return loc

    def _may_read(self, agent: Agent, path: Path) -> bool:
        return _allows(agent, "Read", {"file_path": str(path)}, read_only=True)

    def stopped(self, done: api.Done, cancel: threading.Event) -> None:
        if done.stop_reason == "cancelled" or cancel.is_set():
            raise RunStop("cancelled", "interrupted")
        if done.stop_reason in ("error", "context_full"):
            raise RunStop(done.stop_reason, done.error or done.stop_reason)

    def rel(self, path: Path) -> str:
        full = path.resolve()
        return full.relative_to(self.root).as_posix() if full.is_relative_to(self.root) else str(path)


def _allows(agent: Agent, tool: str, args: dict, read_only: bool = False) -> bool:
    """The permission rules (or the mode) allow the call outright, without asking."""
    if agent.permissions is None:
        return True
    return agent.permissions.check(tool, args, read_only, cwd=agent.ctx.cwd).behavior == "allow"
