"""Repeated identical calls: a note, a warning, a forced answer or a stop, as the profile and the run's state say."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.core import model_text as mt
from agent.core.run_types import PendingCall, RunState, RunStop
from tools._files import stamp_of
from tools.base import ToolContext, ToolResult


def check_repeat(agent: Any, call: PendingCall, key: tuple, st: RunState) -> bool:
    """Whether the repeat check settled `call` (its result set, or the run to end after it); False: run it."""
    if getattr(call.tool, "polls", False):
        return False  # BashOutput: the same call gives new output as time passes; max_turns bounds a loop
    if key in st.seen and key in st.file_reads and _changed_since_read(agent.ctx, st.file_reads[key]):
        st.seen.discard(key)  # the file changed on disk since that Read: this one is new
    if key in st.seen and agent.profile.repeated_read_note and agent.config.answer_on_repeat \
            and key in st.file_reads and key not in st.noted:
        # The model re-reads a file instead of changing it; the text-only turn would end a run that still
        # needs its edit. Point at the content it has; a further identical Read gets the text-only turn.
        st.noted.add(key)
        call.result = ToolResult(mt.repeated_read_note(st.file_reads[key]))
        return True
    if key in st.seen:
        # A repeated read instead of an answer: the result again, and the next turn must answer.
        answer_now = agent.config.answer_on_repeat and call.tool.read_only and (
            st.warned or agent.profile.answer_on_first_repeat)
        if answer_now and st.turns < agent.config.max_turns:
            after = " after a warning" if st.warned else ""
            st.repeated = RunStop("repeated_calls", f"the model repeated an identical {call.name} call{after}")
        elif st.warned:
            raise RunStop("repeated_calls", f"the model repeated an identical {call.name} call after a warning")
        else:
            st.warned = True
            call.result = ToolResult(f"Error: you already made this exact {call.name} call and its result has not "
                              "changed. Do something different (other arguments, another tool) or give "
                              "your final answer. Repeating it again ends the session.", is_error=True)
            return True
    return False


def _changed_since_read(ctx: ToolContext, data: dict) -> bool:
    path = data.get("file_path")
    known = ctx.read_files.get(path) if path else None
    try:
        return known is None or known != stamp_of(Path(path))
    except OSError:
        return True
