"""The ReAct loop: query the engine, check and run its tool calls, append the results, repeat.

Per call: validate (parse error, unknown tool, schema) -> repeat check -> permission check ->
PreToolUse -> run -> PostToolUse -> append. Consecutive read-only calls run concurrently;
results are appended in call order. A reply without tool calls ends the run unless a Stop
decision sends the model back (bounded). Limits live here, in code: max turns, repeated
identical calls (a warning once, then a stop), wall-clock time. Every tool call in the history
gets a result, even when the run stops early, so the history stays valid for --continue.
"""
from __future__ import annotations

import dataclasses
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable

from agent.core import events as ev
from agent.core import model_text as mt
from agent.core.bindings import bound_overrides
from agent.core.context import ContextBuilder, tool_schemas, tool_signature
from agent.core.intent import asks_to_rewrite
from agent.core.profile import ModelProfile
from agent.core.repeats import check_repeat
from agent.core.run_types import Approval, Approver, LoopConfig, PendingCall, RunResult, RunStop, RunState
from agent.core.schema_check import validate
from agent.core.text_safety import scrub
from agent.core.transcript import Session
from runtime import api
from tools.base import Tool, ToolContext, ToolResult


class Agent:
    def __init__(self, engine: api.Engine, tools: list[Tool], session: Session, ctx: ToolContext, *,
                 system_prompt: str, context: ContextBuilder | None = None, bus: ev.EventBus | None = None,
                 permissions: Any = None, approver: Approver | None = None,
                 config: LoopConfig | None = None, profile: ModelProfile | None = None) -> None:
        self.engine, self.session, self.ctx = engine, session, ctx
        self.tools = {t.name: t for t in tools}
        self.schemas = tool_schemas(tools)
        self.system_prompt = system_prompt
        self.context = context
        self.bus = bus or ev.EventBus()
        self.permissions = permissions  # .check(name, args, read_only) -> .behavior "allow"|"ask"|"deny", .reason
        self.approver = approver
        self.config = config or LoopConfig()
        self.profile = profile or ModelProfile()
        remind = self.config.request_reminder
        self.request_reminder = self.profile.request_reminder if remind is None else remind
        self.turn = 0  # engine calls in this session so far (this process)
        self.pending_context = ""  # e.g. SessionStart hook output; goes into the next user message
        # Run before each engine call with (agent, cancel): context budget, stale-file notices (agent.wiring).
        self.before_query: list[Callable[["Agent", threading.Event], None]] = []
        # Runs a prompt instead of the free loop (a small model's task pipeline, agent.pipeline); None: react.
        self.driver: Any = None
        # (agent, cancel) -> True when it made room after the engine refused the prompt as too long.
        self.on_context_full: Callable[["Agent", threading.Event], bool] | None = None

    def withdraw_tool(self, name: str) -> None:
        """Stop offering a tool (before the first request: the tool list is part of the KV prefix)."""
        self.tools.pop(name, None)
        self.schemas = [s for s in self.schemas if s["function"]["name"] != name]

    def emit(self, event: ev.Event) -> ev.Decision:
        event.session_id = self.session.session_id
        return self.bus.emit(event)

    def run(self, prompt: str, cancel: threading.Event | None = None) -> RunResult:
        """One user prompt to a final answer (or a stop); the history is appended in place."""
        cancel = cancel or threading.Event()
        self.ctx.cancel = cancel
        self.ctx.allow_shrink = asks_to_rewrite(prompt)  # a Write may drop most of a file only when asked to
        state = RunState()  # its clock (started) is the run's
        timed_out = threading.Event()
        timer = None
        if self.config.max_wall_s:
            timer = threading.Timer(self.config.max_wall_s, lambda: (timed_out.set(), cancel.set()))
            timer.daemon = True
            timer.start()
        try:
            self._run(prompt, cancel, state)
            reason, error = "end_turn", None
        except RunStop as s:
            reason, error = s.reason, s.error
        finally:
            if timer:
                timer.cancel()
        if reason == "cancelled" and timed_out.is_set():
            reason, error = "timeout", f"stopped after the {self.config.max_wall_s:g}s wall-clock limit"
        total = api.Usage()
        for u in state.usages:
            total = total.add(u)
        return RunResult(reason, state.last_text, state.turns, total, state.usages,
                         time.monotonic() - state.started, error)

    def _run(self, prompt: str, cancel: threading.Event, st: "RunState") -> None:
        if self.driver is not None:
            self.driver.drive(self, prompt, cancel, st)
        else:
            self.open_prompt(prompt, st)
            self.react(cancel, st)

    def open_prompt(self, prompt: str, st: "RunState", attachments: str = "") -> None:
        """UserPromptSubmit, then the user message (with the first message's context and `attachments`)."""
        prompt = scrub(prompt)
        d = self.emit(ev.UserPromptSubmit(prompt=prompt))
        if d.behavior == "block":
            raise RunStop("prompt_blocked", d.reason or "the prompt was blocked by a hook")
        if d.stop_session:
            raise RunStop("hook_stopped", d.stop_reason or "a hook stopped the session")
        if not self.session.messages:
            self.session.append({"role": "system", "content": self.system_prompt})
        first = not any(m["role"] == "user" for m in self.session.messages)
        extra = "\n".join(x for x in (self.pending_context, d.additional_context) if x)
        self.pending_context = ""
        content = f"{extra}\n\n{prompt}" if extra else prompt
        if self.context is not None:
            content = self.context.user_content(prompt, first=first, todos=self.ctx.todos, extra=extra,
                                                resumed=self.session.resumed)
            self.session.resumed = False
        self.session.append({"role": "user", "content": f"{content}\n\n{attachments}" if attachments else content})
        st.prompt = prompt

    def react(self, cancel: threading.Event, st: "RunState") -> None:
        """The free loop: the model chooses each call until it answers in text (or a limit stops it)."""
        prompt = st.prompt
        continuations = 0
        while True:
            if cancel.is_set():
                raise RunStop("cancelled", "interrupted")
            if st.turns >= self.config.max_turns:
                raise RunStop("max_turns", f"stopped after {self.config.max_turns} turns (--max-turns)")
            bound = bound_overrides(self.schemas, self.ctx) if self.profile.bind_arguments and \
                self.config.constrained_tools else None
            text, calls, done = self.query(cancel, st, tool_overrides=bound or None)
            if done.stop_reason == "cancelled" or cancel.is_set():
                self.close_calls(calls, "Not run: the user interrupted the session.")
                raise RunStop("cancelled", "interrupted")
            if done.stop_reason == "context_full" and not calls and self.on_context_full \
                    and self.on_context_full(self, cancel):
                continue  # room was made (compaction): ask again
            if done.stop_reason in ("error", "context_full"):
                self.close_calls(calls, f"Not run: the engine failed ({done.error}).")
                raise RunStop(done.stop_reason, done.error or done.stop_reason)
            if not calls:
                if done.stop_reason == "max_tokens":
                    raise RunStop("max_tokens", "the reply was cut at the max_tokens limit")
                if done.stop_reason == "runaway":
                    raise RunStop("runaway", f"{done.error or 'the reply looped'}, so it was stopped")
                d = self.emit(ev.Stop(stop_hook_active=continuations > 0, last_message=text))
                if d.behavior == "block" and continuations < self.config.max_stop_continuations:
                    continuations += 1
                    self.session.append({"role": "user", "content": mt.stop_hook_feedback(d.reason)})
                    continue
                return
            self.run_calls(calls, cancel, st)
            ended = [c.result.data["end_run"] for c in calls if c.result is not None and "end_run" in c.result.data]
            if ended:  # a tool ended the run with its answer (ExitPlanMode in headless mode: the plan)
                st.last_text = ended[-1]
                return
            if st.repeated is not None:  # a read-only call repeated after the warning: time to answer
                self._final_answer(cancel, st, st.repeated)
                return
            if self.request_reminder:
                failed = all(c.result is not None and c.result.is_error for c in calls)
                self.session.append({"role": "user", "content": mt.request_reminder(prompt, after_errors=failed)})

    def query(self, cancel: threading.Event, st: "RunState", tool_choice: str = "auto", *,
               allowed_tools: list[str] | None = None, tool_overrides: dict | None = None,
               max_tokens: int | None = None, record: bool = True,
               sampling: api.Sampling | None = None, reply_prefix: str = "",
               stop: list[str] | None = None) -> tuple[str, list[PendingCall], api.Done]:
        """One engine call; the assistant message is appended with what really arrived (record=False: the
        caller appends what the reply becomes, e.g. a pipeline's Write of a whole file)."""
        for fn in list(self.before_query):
            fn(self, cancel)
        if sampling is None:
            sampling = self.config.sampling if max_tokens is None else dataclasses.replace(
                self.config.sampling, max_tokens=max_tokens)
        request = api.Request(self.session.session_id, self.session.messages, self.schemas, sampling,
                              speculation=self.config.speculation, constrained_tools=self.config.constrained_tools,
                              tool_choice=tool_choice, allowed_tools=allowed_tools, tool_overrides=tool_overrides,
                              reply_prefix=reply_prefix, stop=list(stop or []))
        parts: list[str] = []
        calls: list[PendingCall] = []
        done = None
        try:
            for e in self.engine.stream(request, cancel=cancel):
                if isinstance(e, api.TextDelta):
                    parts.append(e.text)
                    self.emit(ev.TextDelta(text=e.text))
                elif isinstance(e, api.ToolCall):
                    calls.append(self.to_call(e))
                elif isinstance(e, api.Progress):
                    self.emit(ev.EngineProgress(what=e.what, done=e.done, total=e.total))
                elif isinstance(e, api.Done):
                    done = e  # the last event; the stream is still drained so the engine ends normally
        except Exception as e:  # an engine bug must end the run with a message, not a traceback
            done = api.Done(api.Usage(), "error", f"{type(e).__name__}: {e}")
        if done is None:
            done = api.Done(api.Usage(), "cancelled" if cancel.is_set() else "error",
                            None if cancel.is_set() else "the engine ended its stream without a Done event")
        st.turns += 1
        self.turn += 1
        text = scrub("".join(parts))
        if len(calls) == 1 and calls[0].raw_text.strip() and text.strip() == calls[0].raw_text.strip():
            # A small model wrote the call as bare JSON; it streamed as text before it was recognized as a call.
            # The history keeps it once, as the call, so later turns see the proper format.
            text = ""
        if (text or calls) and record:
            msg: dict = {"role": "assistant", "content": text}
            if calls:
                msg["tool_calls"] = [{"id": c.id, "type": "function",
                                      "function": {"name": c.name, "arguments": c.raw_args}} for c in calls]
            self.session.append(msg)
            self.emit(ev.AssistantTurn(message=msg, turn=self.turn, stop_reason=done.stop_reason, usage=done.usage))
            st.last_text = text
        st.usages.append(done.usage)
        self.emit(ev.TurnUsage(turn=self.turn, usage=done.usage))
        return text, calls, done

    def _final_answer(self, cancel: threading.Event, st: "RunState", stop: RunStop) -> None:
        """One engine call that may not call a tool; its text ends the run, anything else re-raises `stop`."""
        if self.request_reminder:
            self.session.append({"role": "user", "content": mt.request_reminder(st.prompt)})
        text, calls, done = self.query(cancel, st, tool_choice="none")
        if not calls and text.strip() and done.stop_reason == "end_turn":
            self.emit(ev.Stop(stop_hook_active=False, last_message=text))  # the run ends here whatever it says
            return
        self.close_calls(calls, f"Not run: the session stopped ({stop.error}).")
        if done.stop_reason == "cancelled" or cancel.is_set():
            raise RunStop("cancelled", "interrupted")
        raise stop

    def to_call(self, e: api.ToolCall) -> PendingCall:
        """Checks that need nothing but the call itself; failures become the call's result."""
        arguments = scrub(e.arguments)  # a lone surrogate in JSON would crash the tool, the transcript or stdout
        call = PendingCall(self.session.new_tool_id(), e.name, dict(arguments), arguments, raw_text=e.raw)
        tool = self.tools.get(e.name)
        if e.error:
            shape = f" {tool_signature(tool)} takes" if tool else ""
            call.result = _error(f"Error: your tool call could not be parsed: {e.error}. Emit one JSON object "
                                 f'{{"name": "<tool>", "arguments": {{...}}}};{shape or " see the tool list for"} '
                                 f"the arguments.")
        elif tool is None:
            call.result = _error(f"Error: there is no tool named {e.name!r}. Available tools: "
                                 f"{', '.join(self.tools)}.")
        else:
            call.tool = tool
            problem = validate(e.arguments, tool.input_schema)
            if problem:
                call.result = _error(f"Error: invalid arguments for {tool.name}: {problem}. "
                                     f"Expected: {tool_signature(tool)}.")
        return call

    def run_calls(self, calls: list[PendingCall], cancel: threading.Event, st: "RunState") -> None:
        group: list[PendingCall] = []  # admitted read-only calls waiting to run together
        try:
            for call in calls:
                if cancel.is_set():
                    raise RunStop("cancelled", "interrupted")
                if call.result is None:
                    self._admit(call, st)
                if call.result is None and call.tool.read_only:
                    group.append(call)
                    continue
                self._execute(group, cancel, st)
                group = []
                if call.result is None:
                    self._execute([call], cancel, st)
                self._append_finished(calls, st)
            self._execute(group, cancel, st)
            self._append_finished(calls, st)
        except RunStop as s:
            note = ("Not run: the user interrupted the session." if s.reason == "cancelled"
                    else f"Not run: the session stopped ({s.error}).")
            self.close_calls(calls, note)
            raise

    def _admit(self, call: PendingCall, st: "RunState") -> None:
        """Repeat check, permission, PreToolUse; a refusal becomes the call's result."""
        key = call.key = (call.name, json.dumps(call.args, sort_keys=True))
        if key in st.seen and not call.harness and check_repeat(self, call, key, st):
            return
        st.seen.add(key)
        perm = (self.permissions.check(call.name, call.args, call.tool.read_only, cwd=self.ctx.shell_cwd or self.ctx.cwd)
                if self.permissions else None)
        behavior, why = (perm.behavior, perm.reason) if perm else ("allow", "")
        if behavior == "deny":
            call.result = _error(f"Error: permission to use {call.name} was denied: {why}")
            return
        d = self.emit(ev.PreToolUse(tool_name=call.name, tool_input=call.args, tool_use_id=call.id))
        if d.stop_session:
            raise RunStop("hook_stopped", d.stop_reason or "a hook stopped the session")
        if d.behavior == "deny":
            call.result = _error(f"Error: a PreToolUse hook blocked this {call.name} call: {d.reason}")
            return
        if d.updated_input is not None:
            problem = validate(d.updated_input, call.tool.input_schema)
            if problem:
                call.result = _error(f"Error: a hook rewrote the input into something invalid: {problem}")
                return
            call.args = d.updated_input
        if d.behavior == "ask" or (behavior == "ask" and d.behavior != "allow"):
            reason = d.reason if d.behavior == "ask" else why
            approval = self.approver(call.name, call.args, reason) if self.approver else Approval(False, "no one can approve it")
            if not approval.allow:
                call.result = _error(f"Error: permission to use {call.name} was denied: {approval.reason}")

    def _execute(self, calls: list[PendingCall], cancel: threading.Event, st: "RunState") -> None:
        """Run admitted calls (concurrently when more than one), then PostToolUse in call order."""
        if not calls:
            return
        if len(calls) == 1:
            calls[0].result = self._run_tool(calls[0])
        else:
            with ThreadPoolExecutor(max_workers=self.config.max_parallel) as pool:
                for call, result in zip(calls, pool.map(self._run_tool, calls)):
                    call.result = result
        for call in calls:
            if not call.tool.read_only and not call.result.is_error:
                # The world changed, so an identical call may now give a new answer.
                st.seen = {(call.name, json.dumps(call.args, sort_keys=True))}
            d = self.emit(ev.PostToolUse(tool_name=call.name, tool_input=call.args, tool_use_id=call.id,
                                         tool_response=call.result))
            notes = [f"PostToolUse hook feedback: {d.reason}" if d.behavior == "block" else "", d.additional_context]
            notes = [n for n in notes if n]
            if notes:
                call.result = ToolResult("\n\n".join([call.result.content, *notes]), call.result.is_error,
                                         call.result.data)
            if d.stop_session:
                raise RunStop("hook_stopped", d.stop_reason or "a hook stopped the session")
        if cancel.is_set():
            raise RunStop("cancelled", "interrupted")

    def _run_tool(self, call: PendingCall) -> ToolResult:
        try:
            result = call.tool.run(call.args, self.ctx)
        except Exception as e:  # a tool bug is reported to the model, not fatal
            return _error(f"Error: {call.name} failed unexpectedly: {type(e).__name__}: {e}")
        if not isinstance(result, ToolResult):
            return _error(f"Error: {call.name} returned {type(result).__name__}, not a ToolResult")
        return result

    def _append_finished(self, calls: list[PendingCall], st: "RunState") -> None:
        """Append results of the finished prefix of `calls`, in call order."""
        for call in calls:
            if call.result is None:
                return
            if not call.appended:
                self._append_result(call)
                if call.key is not None:
                    # A failed or refused call may be retried once anything has succeeded since (a Read
                    # after "Read the file first", a fixed path); back-to-back identical failures still count.
                    if call.result.data.get("retry"):  # a refusal that itself made an identical call new
                        st.seen.discard(call.key)    # (Write refused unread: the file came with it, as a Read)
                    elif call.result.is_error:
                        st.failed.add(call.key)
                    else:
                        st.seen -= st.failed - {call.key}
                        st.failed.clear()
                        if call.name == "Read" and "total_lines" in call.result.data:  # a file's text was shown
                            st.file_reads[call.key] = call.result.data

    def _append_result(self, call: PendingCall) -> None:
        call.appended = True
        if scrub(call.result.content) is not call.result.content:  # e.g. a file name undecodable in the locale
            call.result = ToolResult(scrub(call.result.content), call.result.is_error, call.result.data)
        self.session.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                             "content": call.result.content})
        self.emit(ev.ToolResultEvent(tool_use_id=call.id, tool_name=call.name, tool_input=call.args,
                                     result=call.result))

    def close_calls(self, calls: list[PendingCall], note: str) -> None:
        """Answer every call not yet answered, so each tool call in the history has a result."""
        for call in calls:
            if not call.appended:
                # A result computed before the stop is what really happened; otherwise the call never ran.
                if call.result is None:
                    call.result = _error(note)
                self._append_result(call)


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


