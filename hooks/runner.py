"""The command-hook runner: matches hooks to an event, runs them in parallel, merges their verdicts.

Semantics follow Claude Code (see FORMATS.md, Hooks). Every hook is `bash -c COMMAND` in its own
process group with the project root as cwd and one JSON object on stdin. A hook never raises into
the caller and never hangs it: a timeout kills the whole group; crashes, odd exit codes and bad
JSON become `HookOutcome.errors` (non-blocking, shown to the user).

Aggregation across the hooks that ran (they are merged in config order, not finishing order):
- PreToolUse: the permission decision is deny > ask > allow; exit 2 and the older top-level
  `decision: "block"` count as deny, `decision: "approve"` as allow. `blocked` is true exactly when
  the decision is deny, and `reason` is then the deny reasons joined.
- PostToolUse, UserPromptSubmit, Stop, SubagentStop: any exit 2 or `decision: "block"` blocks;
  the reasons are joined in config order. Other events cannot block: exit 2 there is an error.
- updated_input: from the last hook in config order that returned one without denying; none when
  the final decision is deny (a denied call never runs, so no rewrite applies).
- additional_context: every hook's context joined with newlines in config order (for
  UserPromptSubmit and SessionStart plain, non-JSON stdout is context too).
- continue_session: false if any hook says `continue: false`; stop_reason joins their reasons.
- Identical commands matched by several groups run once (as Claude Code does).
"""
from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tools.shells import signal_group

EVENTS = ("SessionStart", "UserPromptSubmit", "PreToolUse", "PostToolUse", "Notification",
          "Stop", "SubagentStop", "PreCompact", "SessionEnd")
# Events whose groups are filtered by matcher, and the payload field matched when no value is given.
MATCHER_FIELDS = {"PreToolUse": "tool_name", "PostToolUse": "tool_name",
                  "PreCompact": "trigger", "SessionStart": "source"}
BLOCKING_EVENTS = {"PreToolUse", "PostToolUse", "UserPromptSubmit", "Stop", "SubagentStop"}
STDOUT_IS_CONTEXT = {"UserPromptSubmit", "SessionStart"}
DEFAULT_TIMEOUT_S = 60.0
_PERMISSION_RANK = {"allow": 0, "ask": 1, "deny": 2}
_PLAIN_MATCHER = re.compile(r"[A-Za-z0-9_|]+")


@dataclass(frozen=True)
class HookError:
    command: str
    message: str  # one line

    def __str__(self) -> str:
        return f"hook `{self.command}`: {self.message}"


@dataclass
class HookOutcome:
    blocked: bool = False
    reason: str | None = None  # why it blocked; shown to the model (PreToolUse/PostToolUse/Stop) or user
    permission_decision: str | None = None  # PreToolUse: "allow" | "ask" | "deny" | None (no opinion)
    permission_reason: str | None = None
    updated_input: dict | None = None  # PreToolUse: replaces the tool input
    additional_context: str | None = None
    continue_session: bool = True  # False: stop the session (takes precedence over everything else)
    stop_reason: str | None = None
    system_messages: list[str] = field(default_factory=list)
    errors: list[HookError] = field(default_factory=list)
    suppress_output: bool = False
    ran: list[tuple[str, int | None, float]] = field(default_factory=list)  # (command, exit code, seconds)
    output: list[str] = field(default_factory=list)  # plain stdout that is not context (transcript view)


@dataclass(frozen=True)
class HookSpec:
    event: str
    matcher: str
    command: str
    timeout_s: float
    source: Path | None


@dataclass
class _Verdict:
    """What one hook said, before merging."""
    block_reason: str | None = None
    permission: str | None = None
    permission_reason: str | None = None
    updated_input: dict | None = None
    context: str | None = None
    stop: bool = False
    stop_reason: str | None = None
    system_message: str | None = None
    suppress: bool = False
    output: str | None = None
    errors: list[str] = field(default_factory=list)


def matches(matcher: str | None, value: str | None) -> bool:
    """Claude Code's matcher: empty or `*` = all; `A|B` = exact names; anything else a full-match regex."""
    if matcher is None or matcher.strip() in ("", "*"):
        return True
    if value is None:
        return False
    matcher = matcher.strip()
    if _PLAIN_MATCHER.fullmatch(matcher):
        return value in matcher.split("|")
    try:
        return re.fullmatch(matcher, value) is not None
    except re.error:
        return matcher == value


class HookRunner:
    def __init__(self, hooks_config: dict[str, list], project_dir: Path, session_id: str,
                 transcript_path: str, env: dict | None = None):
        """hooks_config: event -> matcher groups, each a dict {"matcher", "hooks", "source"} or an
        object with those attributes (hooks.settings.HookGroup)."""
        self.project_dir = Path(project_dir)
        self.session_id = session_id
        self.transcript_path = str(transcript_path)
        self.cwd = self.project_dir  # the `cwd` hooks are told; the loop may update it as Bash moves
        self.env = {str(k): str(v) for k, v in (env or {}).items()}
        self.warnings: list[str] = []
        self._hooks: dict[str, list[HookSpec]] = {e: [] for e in EVENTS}
        for event, groups in (hooks_config or {}).items():
            self._add_groups(event, groups)

    def _add_groups(self, event: str, groups) -> None:
        if event not in self._hooks:
            self.warnings.append(f"hooks: unknown event {event!r} ignored")
            return
        if not isinstance(groups, list):
            self.warnings.append(f"hooks: {event} must be a list of matcher groups")
            return
        for group in groups:
            if not isinstance(group, dict) and hasattr(group, "hooks"):  # hooks.settings.HookGroup
                group = {"matcher": getattr(group, "matcher", ""), "hooks": group.hooks,
                         "source": getattr(group, "source", None)}
            source = group.get("source") if isinstance(group, dict) else None
            where = f" ({source})" if source else ""
            if not isinstance(group, dict) or not isinstance(group.get("hooks"), list):
                self.warnings.append(f"hooks: {event} group without a `hooks` list ignored{where}")
                continue
            matcher = group.get("matcher") or ""
            if not isinstance(matcher, str):
                self.warnings.append(f"hooks: {event} matcher must be a string, got {matcher!r}{where}")
                continue
            if not _PLAIN_MATCHER.fullmatch(matcher.strip() or "x") and matcher.strip() != "*":
                try:
                    re.compile(matcher)
                except re.error as e:
                    self.warnings.append(f"hooks: {event} matcher {matcher!r} is not a valid regex ({e}); "
                                         f"matching it as a plain name{where}")
            for hook in group["hooks"]:
                spec = self._spec(event, matcher, hook, source)
                if spec is not None:
                    self._hooks[event].append(spec)

    def _spec(self, event: str, matcher: str, hook, source) -> HookSpec | None:
        where = f" ({source})" if source else ""
        if not isinstance(hook, dict):
            self.warnings.append(f"hooks: {event} entry {hook!r} is not an object{where}")
            return None
        kind = hook.get("type", "command")
        if kind != "command":
            self.warnings.append(f"hooks: {event} hook type {kind!r} is not supported (only `command`){where}")
            return None
        command = hook.get("command")
        if not isinstance(command, str) or not command.strip():
            self.warnings.append(f"hooks: {event} hook without a command ignored{where}")
            return None
        timeout = hook.get("timeout", DEFAULT_TIMEOUT_S)
        if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or timeout <= 0:
            self.warnings.append(f"hooks: {event} timeout {timeout!r} is not a positive number; "
                                 f"using {DEFAULT_TIMEOUT_S:g}s{where}")
            timeout = DEFAULT_TIMEOUT_S
        return HookSpec(event, matcher, command, float(timeout), Path(source) if source else None)

    def describe(self) -> list[tuple[str, str, str, Path | None]]:
        """(event, matcher, command, source file) for every configured hook, for `/hooks`."""
        return [(h.event, h.matcher, h.command, h.source) for e in EVENTS for h in self._hooks[e]]

    def has_hooks(self, event: str) -> bool:
        return bool(self._hooks.get(event))

    def matching(self, event: str, match_value: str | None) -> list[HookSpec]:
        """The hooks that run for this event and value, in config order, identical commands once."""
        seen: set[str] = set()
        out = []
        for h in self._hooks[event]:
            if event in MATCHER_FIELDS and not matches(h.matcher, match_value):
                continue
            if h.command not in seen:
                seen.add(h.command)
                out.append(h)
        return out

    def run(self, event: str, payload: dict, match_value: str | None = None,
            permission_mode: str = "default") -> HookOutcome:
        if event not in self._hooks:
            raise ValueError(f"unknown hook event {event!r}")
        if match_value is None and event in MATCHER_FIELDS:
            match_value = payload.get(MATCHER_FIELDS[event])
        hooks = self.matching(event, match_value)
        if not hooks:
            return HookOutcome()
        stdin = {**payload, "session_id": self.session_id, "transcript_path": self.transcript_path,
                 "cwd": str(self.cwd), "permission_mode": permission_mode, "hook_event_name": event}
        data = json.dumps(stdin, ensure_ascii=False, default=str).encode()
        env = {**os.environ, **self.env,
               "CLAUDE_PROJECT_DIR": str(self.project_dir), "AGENT_PROJECT_DIR": str(self.project_dir)}
        if len(hooks) == 1:
            results = [_execute(hooks[0], data, env, self.project_dir)]
        else:
            with ThreadPoolExecutor(max_workers=len(hooks)) as pool:
                results = list(pool.map(lambda h: _execute(h, data, env, self.project_dir), hooks))
        verdicts = [_interpret(event, h, r) for h, r in zip(hooks, results)]
        outcome = _merge(event, verdicts)
        outcome.ran = [(h.command, r.exit_code, r.duration_s) for h, r in zip(hooks, results)]
        outcome.errors = [HookError(h.command, msg) for h, v in zip(hooks, verdicts) for msg in v.errors]
        return outcome


@dataclass
class _Exec:
    exit_code: int | None  # None: timed out or could not start
    stdout: str
    stderr: str
    duration_s: float
    error: str | None = None


def _execute(hook: HookSpec, data: bytes, env: dict, cwd: Path) -> _Exec:
    """Run one hook; never raises. A timeout kills the hook's whole process group."""
    start = time.monotonic()
    try:
        proc = subprocess.Popen(["bash", "-c", hook.command], cwd=cwd, env=env, start_new_session=True,
                                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        return _Exec(None, "", "", time.monotonic() - start, f"could not start: {e}")
    try:
        out, err = proc.communicate(data, timeout=hook.timeout_s)
    except subprocess.TimeoutExpired:
        signal_group(proc.pid, signal.SIGKILL)
        try:
            out, err = proc.communicate(timeout=2)
        except subprocess.TimeoutExpired:
            # Something escaped the group (setsid) and holds our pipes; stop reading.
            for f in (proc.stdout, proc.stderr):
                f.close()
            proc.wait()
            out, err = b"", b""
        return _Exec(None, _text(out), _text(err), time.monotonic() - start,
                     f"timed out after {hook.timeout_s:g}s (killed)")
    # Background children that let go of our pipes are left alone: fire-and-forget hooks are common.
    return _Exec(proc.returncode, _text(out), _text(err), time.monotonic() - start)


def _text(b: bytes | None) -> str:
    return (b or b"").decode("utf-8", errors="replace")


def _one_line(text: str, limit: int = 200) -> str:
    line = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _interpret(event: str, hook: HookSpec, r: _Exec) -> _Verdict:
    """Exit code and stdout of one hook -> its verdict."""
    v = _Verdict()
    if r.error:
        v.errors.append(r.error)
        return v
    if r.exit_code == 2:
        reason = r.stderr.strip() or f"blocked by hook `{hook.command}` (no reason given)"
        if event == "PreToolUse":
            v.permission, v.permission_reason = "deny", reason
        elif event in BLOCKING_EVENTS:
            v.block_reason = reason
        else:
            v.errors.append(f"exit 2 cannot block {event}: {_one_line(r.stderr) or 'no stderr'}")
        return v
    if r.exit_code != 0:
        detail = _one_line(r.stderr) or _one_line(r.stdout)
        what = f"killed by signal {-r.exit_code}" if r.exit_code < 0 else f"exit {r.exit_code}"
        v.errors.append(f"{what}: {detail}" if detail else what)
        return v
    text = r.stdout.strip()
    if not text:
        return v
    if text[0] in "{[":
        try:
            obj = json.loads(text)
        except json.JSONDecodeError as e:
            v.errors.append(f"invalid JSON output ({e.msg} at line {e.lineno} column {e.colno})")
            return v
        if not isinstance(obj, dict):
            v.errors.append(f"JSON output must be an object, got {type(obj).__name__}")
            return v
        _read_json(event, obj, v)
    elif event in STDOUT_IS_CONTEXT:
        v.context = text
    else:
        v.output = text
    return v


def _read_json(event: str, obj: dict, v: _Verdict) -> None:
    """The JSON output fields (unknown fields ignored)."""
    if obj.get("continue") is False:
        v.stop = True
        v.stop_reason = _str_or_none(obj.get("stopReason"))
    v.suppress = obj.get("suppressOutput") is True
    v.system_message = _str_or_none(obj.get("systemMessage"))
    decision, reason = obj.get("decision"), _str_or_none(obj.get("reason"))
    if event == "PreToolUse" and decision in ("approve", "block"):  # the older PreToolUse form
        v.permission = "allow" if decision == "approve" else "deny"
        v.permission_reason = reason
    elif decision == "block" and event in BLOCKING_EVENTS:
        v.block_reason = reason or "blocked by hook (no reason given)"
    elif decision not in (None, "approve", "block"):
        v.errors.append(f"unknown decision {decision!r} ignored")

    specific = obj.get("hookSpecificOutput")
    if specific is None:
        return
    if not isinstance(specific, dict):
        v.errors.append("hookSpecificOutput must be an object")
        return
    named = specific.get("hookEventName")
    if named is not None and named != event:
        v.errors.append(f"hookSpecificOutput is for {named}, not {event}; ignored")
        return
    if event == "PreToolUse":
        perm = specific.get("permissionDecision")
        if perm in _PERMISSION_RANK:  # the newer field wins over the older top-level decision
            v.permission = perm
            v.permission_reason = _str_or_none(specific.get("permissionDecisionReason"))
        elif perm is not None:
            v.errors.append(f"permissionDecision must be allow, deny or ask (got {perm!r})")
        updated = specific.get("updatedInput")
        if isinstance(updated, dict):
            v.updated_input = updated
        elif updated is not None:
            v.errors.append("updatedInput must be an object; ignored")
    context = specific.get("additionalContext")
    if isinstance(context, str) and context.strip():
        v.context = context


def _str_or_none(x) -> str | None:
    return x if isinstance(x, str) and x else None


def _merge(event: str, verdicts: list[_Verdict]) -> HookOutcome:
    """Merge verdicts in config order (see the module docstring)."""
    o = HookOutcome()
    decided = [v for v in verdicts if v.permission]
    if decided:
        o.permission_decision = max((v.permission for v in decided), key=_PERMISSION_RANK.__getitem__)
        reasons = [v.permission_reason for v in decided if v.permission == o.permission_decision]
        o.permission_reason = "\n".join(r for r in reasons if r) or None
    if o.permission_decision == "deny":
        o.blocked = True
        o.reason = o.permission_reason or "denied by a PreToolUse hook"
    else:
        for v in verdicts:
            if v.updated_input is not None and v.permission != "deny":
                o.updated_input = v.updated_input
        blocks = [v.block_reason for v in verdicts if v.block_reason]
        if blocks:
            o.blocked, o.reason = True, "\n".join(blocks)
    contexts = [v.context for v in verdicts if v.context]
    o.additional_context = "\n".join(contexts) or None
    stops = [v for v in verdicts if v.stop]
    if stops:
        o.continue_session = False
        o.stop_reason = "\n".join(v.stop_reason for v in stops if v.stop_reason) or None
    o.system_messages = [v.system_message for v in verdicts if v.system_message]
    o.suppress_output = any(v.suppress for v in verdicts)
    o.output = [v.output for v in verdicts if v.output]
    return o
