"""Slash commands and input completion, shared by the TUI and plain mode.

`/name args` runs a built-in, or turns a user command (`.agent/commands/*.md`) or a skill
(`SKILL.md`) into a prompt for the model. Built-ins answer with markdown text for the user;
`immediate` ones run at once even while the agent is busy, the others wait in the prompt
queue like prompts (they change the session). Commands whose feature does not exist yet say
so in one line. Completion offers command names after `/` and project files after `@`.
"""
from __future__ import annotations

import os
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from agent.session.core import SessionCore
from agent.ui.bashes import bashes
from agent.services.compaction import CompactionError
from agent.services.checkpoint_recorder import WHAT, format_list
from agent.services.checkpoints import CheckpointError
from agent.engines import EngineError, make_engine
from skills.discovery import discover_skills, render_skill_body
from skills.agent_defs import discover_agents
from agent.core.transcript import SessionError
from skills.commands import discover_commands, render
from agent.session.status import format_status, time_ago

INIT_PROMPT = """\
Write an AGENTS.md file at the root of this repository: a short contributor guide for coding agents.
Look at the layout (LS, Glob), the build and packaging files, the README and the tests first. Include:
what the project is (one paragraph); the commands to install, build, lint and run the tests (a single \
test too); a map of the top-level directories, one line each; code-style and testing conventions you \
can see in the code. Keep it under 80 lines and state only what you verified. If AGENTS.md already \
exists, Read it and improve it instead of replacing what is still true."""


@dataclass
class SlashResult:
    text: str = ""  # markdown for the user
    prompt: str | None = None  # sent to the model as the user's prompt
    exit: bool = False
    new_transcript: bool = False  # the conversation was replaced (/clear, /resume): redraw it


@dataclass
class SlashCommand:
    name: str
    description: str
    run: Callable[[SessionCore, str], SlashResult]
    argument_hint: str = ""
    immediate: bool = True  # False: queued behind a running prompt
    source: str = "builtin"  # "builtin" | "project" | "user" | "builtin skill" ...


def _help(c: SessionCore, args: str, registry: "SlashRegistry") -> SlashResult:
    lines = ["**Commands**", ""]
    for cmd in registry.commands():
        hint = f" {cmd.argument_hint}" if cmd.argument_hint else ""
        where = "" if cmd.source == "builtin" else f" _({cmd.source})_"
        lines.append(f"- `/{cmd.name}{hint}` {cmd.description}{where}")
    lines += ["", "**Keys**: Enter send · Shift+Enter or Ctrl+J newline · Up/Down history · Tab complete · "
                  "`@path` attach a file · Shift+Tab cycle mode · Esc interrupt · Ctrl+C twice quit"]
    return SlashResult("\n".join(lines))


def _clear(c: SessionCore, args: str) -> SlashResult:
    c.clear()
    return SlashResult("Started a new conversation.", new_transcript=True)


def _compact(c: SessionCore, args: str) -> SlashResult:
    try:
        report = c.compact(args.strip())
    except CompactionError as e:
        return SlashResult(f"Cannot compact: {e}.")
    return SlashResult(report.describe())


def _rewind(c: SessionCore, args: str) -> SlashResult:
    words = [w.lstrip("-") for w in args.split()]
    if not words:
        return SlashResult(format_list(c.checkpoints()))
    if len(words) > 2 or (len(words) == 2 and words[1] not in WHAT):
        return SlashResult("Usage: `/rewind` to list, `/rewind ID [both|code|conversation]` to restore.")
    try:
        outcome = c.rewind(words[0], words[1] if len(words) == 2 else "both")
    except CheckpointError as e:
        return SlashResult(f"Cannot rewind: {e}.")
    return SlashResult(outcome.describe(), new_transcript=outcome.messages_after is not None)


def _model(c: SessionCore, args: str) -> SlashResult:
    name = args.strip()
    if name:
        o = c.options
        try:
            engine = make_engine(o.engine, model=name, script=o.script, base_url=o.base_url,
                                 api_key=c.environment.api_key)
        except EngineError as e:
            return SlashResult(f"Cannot switch model: {e}")
        c.engine = c.agent.engine = engine
        c.last_usage = None
        return SlashResult(f"Model: **{engine.name}** (the conversation continues; its prompt is prefilled "
                           f"again on the next turn).")
    window = getattr(c.engine, "context_window", None)
    return SlashResult(f"Model: **{c.engine.name}** (engine {c.options.engine}"
                       + (f", context window {window} tokens" if window else "") + "). Switch with `/model NAME`.")


def _status(c: SessionCore, args: str) -> SlashResult:
    s = c.status()
    sources = ", ".join(str(p) for p in c.settings.sources) or "none"
    return SlashResult("\n".join([
        f"- Session: `{c.session.session_id}`", f"- Transcript: `{c.session.transcript_path}`",
        f"- Model: {s.model} (engine {c.options.engine})", f"- Mode: {s.mode}",
        f"- Directory: {s.cwd}" + (f" (branch {s.branch})" if s.branch else ""),
        f"- Settings: {sources}", f"- Status: {format_status(s)}"]))


def _cost(c: SessionCore, args: str) -> SlashResult:
    t = c.totals
    spec = (f", speculation accepted {t.accepted_tokens}/{t.drafted_tokens} drafted tokens "
            f"({100 * t.accepted_tokens / t.drafted_tokens:.0f}%)" if t.drafted_tokens else "")
    reuse = f" ({100 * t.reused_tokens / t.prompt_tokens:.0f}% reused)" if t.prompt_tokens else ""
    return SlashResult(f"This session: {c.turns} engine calls; prompt tokens {t.prompt_tokens}{reuse}: "
                       f"{t.reused_tokens} from the KV cache, {t.prefilled_tokens} prefilled; "
                       f"{t.generated_tokens} generated{spec}. Cost: $0 (the model runs locally).")


def _permissions(c: SessionCore, args: str) -> SlashResult:
    lines = [f"Mode: **{c.mode}** (Shift+Tab cycles {' → '.join(c.modes)})"]
    for behavior in ("allow", "ask", "deny"):
        rules = c.permissions.rules[behavior]
        lines += ["", f"**{behavior}**" + ("" if rules else ": none")]
        lines += [f"- `{r.text}` ({r.source})" for r in rules]
    lines += ["", "Always-allow answers are stored in `.agent/settings.local.json`."]
    return SlashResult("\n".join(lines))


def _hooks(c: SessionCore, args: str) -> SlashResult:
    if c.hooks is None or not c.hooks.describe():
        return SlashResult("No hooks are configured (settings `hooks`, see FORMATS.md).")
    lines = ["**Hooks**"]
    for event, matcher, command, source in c.hooks.describe():
        lines.append(f"- {event}" + (f" [{matcher}]" if matcher else "") + f": `{command}`"
                     + (f" ({source})" if source else ""))
    return SlashResult("\n".join(lines))


def _mcp(c: SessionCore, args: str) -> SlashResult:
    if c.mcp is None:
        return SlashResult("No MCP servers configured. Add one with `agent mcp add NAME COMMAND [ARGS...]` "
                           "or a `.mcp.json` in the project.")
    return SlashResult(c.mcp.command(args.strip()))


def _skills(c: SessionCore, args: str) -> SlashResult:
    found, warnings = discover_skills(c.project)
    lines = ["**Skills**"] + [f"- `{s.name}` ({s.source}): {s.description}" for s in found]
    return SlashResult("\n".join(lines + [f"- warning: {w}" for w in warnings]) if found or warnings
                       else "No skills found.")


def _agents(c: SessionCore, args: str) -> SlashResult:
    found, warnings = discover_agents(c.project)
    lines = ["**Subagents**"] + [f"- `{a.name}` ({a.source}): {a.description}" for a in found]
    return SlashResult("\n".join(lines + [f"- warning: {w}" for w in warnings]))


def _resume(c: SessionCore, args: str) -> SlashResult:
    sid = args.strip()
    if not sid:
        listed = [s for s in c.list_sessions() if s[0] != c.session.session_id]
        if not listed:
            return SlashResult("No earlier sessions in this project.")
        rows = [f"- `{i}` {time_ago(ts)}: {first or '(no prompt)'}" for i, ts, first in listed]
        return SlashResult("\n".join(["Recent sessions (resume one with `/resume ID`):", *rows]))
    try:
        c.resume(sid)
    except SessionError as e:
        return SlashResult(f"Cannot resume: {e}")
    return SlashResult(f"Resumed session `{c.session.session_id}`.", new_transcript=True)


def _init(c: SessionCore, args: str) -> SlashResult:
    return SlashResult(prompt=INIT_PROMPT + (f"\n\n{args.strip()}" if args.strip() else ""))


def _bashes(c: SessionCore, args: str) -> SlashResult:
    return SlashResult(bashes(c.ctx.shells, args))


def _exit(c: SessionCore, args: str) -> SlashResult:
    return SlashResult(exit=True)


FILES_TTL_S = 5.0  # how long a listing of the project's files is reused for completion
MAX_FILES = 20_000
SKIP_DIRS = frozenset({".git", "node_modules", "__pycache__", ".venv", "venv", ".mypy_cache", ".pytest_cache",
                       "dist", "build", ".tox"})


def project_files(project: Path) -> list[str]:
    """Files of the project relative to it: git's view (tracked + untracked, not ignored) in a repository."""
    try:
        out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"], cwd=project,
                             capture_output=True, timeout=10)
        if out.returncode == 0:
            return sorted(set(f for f in out.stdout.decode("utf-8", "replace").split("\0") if f))[:MAX_FILES]
    except (OSError, subprocess.TimeoutExpired):
        pass
    files: list[str] = []
    for root, dirs, names in os.walk(project):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("."))
        rel = Path(root).relative_to(project)
        files += [(rel / n).as_posix() for n in sorted(names)]
        if len(files) >= MAX_FILES:
            break
    return files[:MAX_FILES]


class SlashRegistry:
    """The built-ins, then the project's and user's commands, then user-invocable skills (first name wins)."""

    def __init__(self, project: Path) -> None:
        self.project = project
        self.builtins = [
            SlashCommand("help", "Show commands and keys", lambda c, a: _help(c, a, self)),
            SlashCommand("clear", "Start a new conversation", _clear, immediate=False),
            SlashCommand("compact", "Summarize the conversation to free context", _compact, "[FOCUS]",
                         immediate=False),
            SlashCommand("rewind", "List checkpoints, or restore code and/or conversation", _rewind,
                         "[ID [both|code|conversation]]", immediate=False),
            SlashCommand("model", "Show or switch the model", _model, "[NAME]", immediate=False),
            SlashCommand("status", "Session, model, mode, settings files", _status),
            SlashCommand("cost", "Tokens used, KV reuse and speculation in this session", _cost),
            SlashCommand("permissions", "Mode and allow/ask/deny rules", _permissions),
            SlashCommand("hooks", "Configured hooks", _hooks),
            SlashCommand("mcp", "MCP servers, their status and tools; approve, deny or reconnect one", _mcp,
                         "[approve|deny|reconnect NAME]"),
            SlashCommand("skills", "Available skills", _skills),
            SlashCommand("agents", "Available subagents", _agents),
            SlashCommand("resume", "List earlier sessions or resume one", _resume, "[ID]", immediate=False),
            SlashCommand("init", "Write an AGENTS.md for this repository", _init, immediate=False),
            SlashCommand("bashes", "Background shells: list, show one, kill one", _bashes, "[ID | kill ID]"),
            SlashCommand("exit", "Quit", _exit),
        ]
        self._files: list[str] = []
        self._files_at = float("-inf")
        self._generation = 0  # the controller's config_generation these commands were read at
        self.reload()

    def reload(self) -> None:
        """Discover the project's and user's commands and skills again (their files changed)."""
        commands, cw = discover_commands(self.project)
        skills, sw = discover_skills(self.project)
        self.warnings = cw + sw
        self.user = [SlashCommand(cmd.name, cmd.description, _user_command(cmd), cmd.argument_hint or "",
                                  immediate=False, source=cmd.source) for cmd in commands]
        self.user += [SlashCommand(s.name, s.description, _skill_command(s), s.argument_hint or "",
                                   immediate=False, source=f"{s.source} skill") for s in skills if s.user_invocable]

    def commands(self) -> list[SlashCommand]:
        seen: set[str] = set()
        out = []
        for cmd in self.builtins + self.user:
            if cmd.name not in seen:
                seen.add(cmd.name)
                out.append(cmd)
        return out

    def complete(self, text: str) -> list[SlashCommand]:
        """Commands whose name starts with what follows the slash (builtins first, then by name)."""
        word = text.lstrip("/").split(" ", 1)[0]
        return [c for c in self.commands() if c.name.startswith(word)]

    @staticmethod
    def is_command(line: str) -> bool:
        """`/name ...` is a command; `/usr/bin/x is broken` is a prompt."""
        word = line.split(maxsplit=1)[0] if line.strip() else ""
        return word.startswith("/") and len(word) > 1 and "/" not in word[1:]

    def parse(self, line: str) -> tuple[SlashCommand, str] | None:
        """(command, arguments) for `/name args`; None when it is not a known command."""
        if not line.startswith("/"):
            return None
        name, _, args = line[1:].partition(" ")
        name = name.strip()
        cmd = next((c for c in self.commands() if c.name == name), None)
        if cmd is None and name == "quit":
            cmd = next(c for c in self.builtins if c.name == "exit")
        return (cmd, args.strip()) if cmd else None

    def complete_file(self, word: str, limit: int = 12) -> list[str]:
        """Project files for `@word`: path prefix matches first, then name prefix, then substring."""
        if time.monotonic() - self._files_at > FILES_TTL_S:
            self._files, self._files_at = project_files(self.project), time.monotonic()
        word = word.lstrip("@").lower()
        ranked = []
        for f in self._files:
            low = f.lower()
            rank = 0 if low.startswith(word) else 1 if low.rsplit("/", 1)[-1].startswith(word) else \
                2 if word in low else None
            if rank is not None:
                ranked.append((rank, len(f), f))
        return [f for _, _, f in sorted(ranked)[:limit]]

    def run(self, controller: SessionCore, line: str) -> SlashResult:
        generation = getattr(controller, "config_generation", 0)
        if generation != self._generation:  # the configuration watcher saw commands or skills change
            self._generation = generation
            self.reload()
        found = self.parse(line)
        if found is None:
            name = line.split(" ", 1)[0]
            return SlashResult(f"Unknown command {name}. Type /help for the list.")
        cmd, args = found
        return cmd.run(controller, args)


def _user_command(cmd) -> Callable[[SessionCore, str], SlashResult]:
    from agent.harness.harness import armed  # the command's allowed-tools hold while its prompt runs
    return lambda c, args: SlashResult(prompt=armed(c.agent, cmd.allowed_tools, f"/{cmd.name}", render(cmd, args),
                                                    cmd.path, c.harness.baseline if c.harness else None))


def _skill_command(skill) -> Callable[[SessionCore, str], SlashResult]:
    from agent.harness.harness import armed  # the skill's allowed-tools hold while its prompt runs
    return lambda c, args: SlashResult(prompt=armed(c.agent, skill.allowed_tools, f"skill {skill.name}",
                                                    render_skill_body(skill, args), skill.path,
                                                    c.harness.baseline if c.harness else None))
