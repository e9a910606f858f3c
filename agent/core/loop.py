"""The ReAct loop: query the engine, check and run its tool calls, append the results, repeat.

Per call: validate (parse error, unknown tool, schema) -> repeat check -> permission check ->
PreToolUse -> run -> PostToolUse -> append. Consecutive read-only calls run concurrently;
results are appended in call order. A reply without tool calls ends the run unless a Stop
decision sends the model back (bounded). Limits live here, in code: max turns, repeated
identical calls (a warning once, then a stop), wall-clock time. Every tool call in the history
gets a result, even when the run stops early, so the history stays valid for --continue.
"""
from __future__ import annotations

import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Callable

from agent.core import events as ev
from agent.core import model_text as mt
from agent.core.context import ContextBuilder, tool_schemas, tool_signature
from agent.core.intent import asks_to_rewrite
from agent.core.profile import ModelProfile
from agent.core.run_types import Approval, Approver, LoopConfig, PendingCall, RunResult, RunStop, RunState
from agent.core.schema_check import validate
from agent.core.transcript import Session
from runtime import api
from tools._files import stamp_of
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
        t0 = time.monotonic()
        timed_out = threading.Event()
        timer = None
        if self.config.max_wall_s:
            timer = threading.Timer(self.config.max_wall_s, lambda: (timed_out.set(), cancel.set()))
            timer.daemon = True
            timer.start()
        state = RunState()
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
        return RunResult(reason, state.last_text, state.turns, total, state.usages, time.monotonic() - t0, error)

    def _run(self, prompt: str, cancel: threading.Event, st: "RunState") -> None:
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
        self.session.append({"role": "user", "content": content})
        st.prompt = prompt
        continuations = 0
        while True:
            if cancel.is_set():
                raise RunStop("cancelled", "interrupted")
            if st.turns >= self.config.max_turns:
                raise RunStop("max_turns", f"stopped after {self.config.max_turns} turns (--max-turns)")
            text, calls, done = self._query(cancel, st)
            if done.stop_reason == "cancelled" or cancel.is_set():
                self._close_calls(calls, "Not run: the user interrupted the session.")
                raise RunStop("cancelled", "interrupted")
            if done.stop_reason == "context_full" and not calls and self.on_context_full \
                    and self.on_context_full(self, cancel):
                continue  # room was made (compaction): ask again
            if done.stop_reason in ("error", "context_full"):
                self._close_calls(calls, f"Not run: the engine failed ({done.error}).")
                raise RunStop(done.stop_reason, done.error or done.stop_reason)
            if not calls:
                if done.stop_reason == "max_tokens":
                    raise RunStop("max_tokens", "the reply was cut at the max_tokens limit")
                d = self.emit(ev.Stop(stop_hook_active=continuations > 0, last_message=text))
                if d.behavior == "block" and continuations < self.config.max_stop_continuations:
                    continuations += 1
                    self.session.append({"role": "user", "content": mt.stop_hook_feedback(d.reason)})
                    continue
                return
            self._run_calls(calls, cancel, st)
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

    def _query(self, cancel: threading.Event, st: "RunState",
               tool_choice: str = "auto") -> tuple[str, list[PendingCall], api.Done]:
        """One engine call; the assistant message is appended with what really arrived."""
        for fn in list(self.before_query):
            fn(self, cancel)
        request = api.Request(self.session.session_id, self.session.messages, self.schemas,
                              self.config.sampling, speculation=self.config.speculation,
                              constrained_tools=self.config.constrained_tools, tool_choice=tool_choice)
        parts: list[str] = []
        calls: list[PendingCall] = []
        done = None
        try:
            for e in self.engine.stream(request, cancel=cancel):
                if isinstance(e, api.TextDelta):
                    parts.append(e.text)
                    self.emit(ev.TextDelta(text=e.text))
                elif isinstance(e, api.ToolCall):
                    calls.append(self._to_call(e))
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
        text = "".join(parts)
        if len(calls) == 1 and calls[0].raw_text.strip() and text.strip() == calls[0].raw_text.strip():
            # A small model wrote the call as bare JSON; it streamed as text before it was recognized as a call.
            # The history keeps it once, as the call, so later turns see the proper format.
            text = ""
        if text or calls:
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
        text, calls, done = self._query(cancel, st, tool_choice="none")
        if not calls and text.strip() and done.stop_reason == "end_turn":
            self.emit(ev.Stop(stop_hook_active=False, last_message=text))  # the run ends here whatever it says
            return
        self._close_calls(calls, f"Not run: the session stopped ({stop.error}).")
        if done.stop_reason == "cancelled" or cancel.is_set():
            raise RunStop("cancelled", "interrupted")
        raise stop

    def _to_call(self, e: api.ToolCall) -> PendingCall:
        """Checks that need nothing but the call itself; failures become the call's result."""
        call = PendingCall(self.session.new_tool_id(), e.name, dict(e.arguments), e.arguments, raw_text=e.raw)
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

    def _run_calls(self, calls: list[PendingCall], cancel: threading.Event, st: "RunState") -> None:
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
            self._close_calls(calls, note)
            raise

    def _admit(self, call: PendingCall, st: "RunState") -> None:
        """Repeat check, permission, PreToolUse; a refusal becomes the call's result."""
        key = call.key = (call.name, json.dumps(call.args, sort_keys=True))
        if key in st.seen and key in st.file_reads and _changed_since_read(self.ctx, st.file_reads[key]):
            st.seen.discard(key)  # the file changed on disk since that Read: this one is new
        if key in st.seen and self.profile.repeated_read_note and self.config.answer_on_repeat \
                and key in st.file_reads and key not in st.noted:
            # The model re-reads a file instead of changing it; the text-only turn would end a run that still
            # needs its edit. Point at the content it has; a further identical Read gets the text-only turn.
            st.noted.add(key)
            call.result = ToolResult(mt.repeated_read_note(st.file_reads[key]))
            return
        if key in st.seen:
            # A repeated read instead of an answer: the result again, and the next turn must answer.
            answer_now = self.config.answer_on_repeat and call.tool.read_only and (
                st.warned or self.profile.answer_on_first_repeat)
            if answer_now and st.turns < self.config.max_turns:
                after = " after a warning" if st.warned else ""
                st.repeated = RunStop("repeated_calls", f"the model repeated an identical {call.name} call{after}")
            elif st.warned:
                raise RunStop("repeated_calls", f"the model repeated an identical {call.name} call after a warning")
            else:
                st.warned = True
                call.result = _error(f"Error: you already made this exact {call.name} call and its result has not "
                                     "changed. Do something different (other arguments, another tool) or give "
                                     "your final answer. Repeating it again ends the session.")
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
        self.session.append({"role": "tool", "tool_call_id": call.id, "name": call.name,
                             "content": call.result.content})
        self.emit(ev.ToolResultEvent(tool_use_id=call.id, tool_name=call.name, tool_input=call.args,
                                     result=call.result))

    def _close_calls(self, calls: list[PendingCall], note: str) -> None:
        """Answer every call not yet answered, so each tool call in the history has a result."""
        for call in calls:
            if not call.appended:
                # A result computed before the stop is what really happened; otherwise the call never ran.
                if call.result is None:
                    call.result = _error(note)
                self._append_result(call)


def _changed_since_read(ctx: ToolContext, data: dict) -> bool:
    path = data.get("file_path")
    known = ctx.read_files.get(path) if path else None
    try:
        return known is None or known != stamp_of(Path(path))
    except OSError:
        return True


def _error(text: str) -> ToolResult:
    return ToolResult(text, is_error=True)


