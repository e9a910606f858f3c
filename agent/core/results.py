"""A run's result as headless output and transcripts record it (Claude Code's result object), and the
approver for sessions nobody can answer."""
from __future__ import annotations

import dataclasses

from agent.core.loop import Approval, RunResult
from runtime.api import Usage


def headless_approver(tool_name: str, tool_input: dict, reason: str) -> Approval:
    """Nobody can answer a prompt in headless mode: deny, and say how the user could allow it."""
    why = f" ({reason})" if reason else ""
    return Approval(False, f"it needs the user's approval{why}, and this is a non-interactive (headless) "
                           f"session. Do the task without it if you can, or tell the user which permission "
                           f"is needed (--allowedTools or a settings allow rule).")


def usage_block(u: Usage) -> dict:
    """Claude Code's usage keys plus our KV and speculation counters."""
    return {"input_tokens": u.prompt_tokens, "cached_input_tokens": u.reused_tokens,
            "output_tokens": u.generated_tokens, "reused_tokens": u.reused_tokens,
            "prefilled_tokens": u.prefilled_tokens, "drafted_tokens": u.drafted_tokens,
            "accepted_tokens": u.accepted_tokens}


def result_object(r: RunResult, session_id: str) -> dict:
    subtype = {"end_turn": "success", "max_turns": "error_max_turns"}.get(r.stop_reason, "error_during_execution")
    return {"type": "result", "subtype": subtype, "is_error": r.is_error, "num_turns": r.num_turns,
            "result": r.text if not r.is_error else (r.error or r.stop_reason),
            "duration_ms": int(r.duration_s * 1000), "session_id": session_id, "usage": usage_block(r.usage),
            "total_cost_usd": 0, "stop_reason": r.stop_reason,
            "turn_usage": [dataclasses.asdict(u) for u in r.turn_usage]}
