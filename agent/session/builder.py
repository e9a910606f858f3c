"""build_session: the one place a session is assembled, for headless runs, the TUI and plain mode.

From typed options, settings and environment: the engine, the model profile, the offered tools,
permissions, the transcript (new, --continue or --resume), the Agent, hooks, the harness (Task,
Skill, ExitPlanMode), services (compaction, checkpoints, watchers) and a warm KV start.
"""
from __future__ import annotations

import shutil
import tempfile
import weakref
from pathlib import Path
from typing import Any, Callable

from agent.core.context import ContextBuilder, system_prompt, tools_for_profile
from agent.core.loop import Agent, LoopConfig
from agent.core.permissions import PERMISSION_MODES
from agent.core.profile import ProfileError, choose_profile, model_parameters
from agent.core.results import headless_approver
from agent.core.transcript import Session, SessionError, find_session, latest_session
from agent.engines import make_engine
from agent.harness.harness import Harness, attach_harness
from agent.harness.plan import interactive_exit_plan
from agent.harness.subagents import SubagentConfig
from agent.mcp.hub import McpHub
from agent.paths import repo_root
from agent.pipeline.config import PipelineConfig
from agent.pipeline.driver import PipelineDriver
from agent.services.attach import attach_services
from agent.services.watch import config_roots
from agent.session.assembly import attach_hooks, make_permissions, make_sandbox, offered_tools
from agent.session.core import MODE_CYCLE, OUTPUT_RULE_SOURCE, SessionCore
from agent.session.options import BuildError, SessionOptions
from agent.settings import Environment, Settings
from tools.base import ToolContext


def build_session(options: SessionOptions, environment: Environment | None = None, *, settings: Settings | None = None,
                  engine: Any = None, notify: Callable[[str], None] | None = None,
                  warn: Callable[[str], None] | None = None, progress: Callable | None = None) -> SessionCore:
    """notify: one-line messages for the user (headless: only with --verbose); warn: problems always shown;
    progress: model-load progress (local engine); engine: an already built engine (tests, /model)."""
    notify = notify or (lambda text: None)
    warn = warn or notify
    environment = environment or Environment.current()
    project = options.project
    locations = environment.locations
    settings = settings or Settings.load(project, locations, compact_at=options.auto_compact_threshold)
    if settings.broken and options.headless:
        # Nobody would see the rules go missing: a deny rule in that file must not silently stop applying.
        raise BuildError(f"{settings.broken[0].removeprefix('settings: ignoring ')}; fix the file (a run without "
                         "its rules could do what they forbid)")
    for w in settings.warnings:
        warn(w)
    mode = options.permission_mode or settings.permissions.default_mode or "default"
    if mode not in PERMISSION_MODES:
        raise BuildError(f"unknown permission mode {mode!r} in settings; use one of {', '.join(PERMISSION_MODES)}")
    tools = offered_tools(options.disallowed + [r.rule for r in settings.permissions.deny])
    # MCP servers start now, in parallel with loading the model; their tools join at a prompt's start.
    mcp = McpHub.create(project, settings.mcp, environment.variables | settings.env, notify=warn,
                        startup_timeout_s=environment.mcp_startup_timeout_s,
                        call_timeout_s=environment.mcp_tool_timeout_s)
    permissions = make_permissions(settings, mode, project, options.allowed, options.disallowed)
    if engine is None:
        local = {}
        if options.engine == "local":
            local = {"options": environment.runtime} | ({"progress": progress} if progress else {})
        engine = make_engine(options.engine, model=options.model or settings.model, script=options.script,
                             base_url=options.base_url, api_key=environment.api_key, **local)
    try:
        profile = choose_profile(model_parameters(engine), settings.model_profile)
    except ProfileError as e:
        raise BuildError(str(e)) from None
    # The tool list is part of the cached prefix and the mode may change in an interactive session, so
    # there ExitPlanMode stays offered (the harness refuses it outside plan mode).
    tools = tools_for_profile(tools, profile, mode if options.headless else "plan")
    try:
        if options.resume:
            session = Session.load(find_session(options.resume, project))
        elif options.continue_:
            session = Session.load(latest_session(project))
        else:
            session = Session.create(project, {"model": engine.name, "engine": options.engine})
    except SessionError as e:
        raise BuildError(str(e)) from None
    for w in session.warnings:
        warn(f"warning: {w}")
    make_sandbox(settings, options.sandbox, permissions, tools, warn)
    # Bash saves long outputs here; Read may open them (a session rule), and the session removes them at its end.
    output_dir = Path(tempfile.mkdtemp(prefix="agent-output-"))
    permissions.add_rule(f"Read(/{output_dir.as_posix()}/**)", "allow", OUTPUT_RULE_SOURCE)
    ctx = ToolContext(cwd=project, env=dict(settings.env), todos=session.last_todos(), read_window=profile.read_window,
                      output_dir=output_dir, read_denied=permissions.read_denied)
    # A session that is never closed (a failed build, an embedding that drops it) still removes it at exit.
    weakref.finalize(ctx, shutil.rmtree, output_dir, True)
    context = ContextBuilder(project, repo_root(project), locations.agent_home, locations.claude_home,
                             list_files=profile.env_project_files)
    config = LoopConfig(max_turns=options.max_turns, max_wall_s=options.max_time,
                        speculation=options.speculation and settings.speculation,
                        constrained_tools=options.constrained_tools and settings.constrained_tools)
    agent = Agent(engine, tools, session, ctx, system_prompt=system_prompt(options.system_prompt,
                                                                           options.append_system_prompt),
                  context=context, permissions=permissions, config=config, profile=profile)
    if profile.control == "pipeline":
        tries = options.tries or settings.tries or profile.tries
        agent.driver = PipelineDriver(project, PipelineConfig(repairs=profile.repairs, tries=tries,
                                                              batches=profile.batches, oracle=profile.oracle,
                                                              stub_batches=profile.stub_batches,
                                                              fresh=profile.fresh_look, focus=profile.focus,
                                                              mutants=profile.mutants))
    core = SessionCore(options, environment, settings, agent, notify=notify,
                       modes=MODE_CYCLE + (("bypassPermissions",) if mode == "bypassPermissions" else ()))
    core.mcp = mcp
    if mcp is not None and mcp.pending_approval:
        names = ", ".join(mcp.pending_approval)
        how = "agent mcp approve NAME" if options.headless else "/mcp approve NAME (or /mcp deny NAME)"
        warn(f"MCP servers from the repository need your approval before they start: {names}; use {how}")
    agent.approver = headless_approver if options.headless else core.approve
    context.approve_import = _refuse_import(warn) if options.headless else core.approve_import
    core.hooks, core.hook_bridge = attach_hooks(agent, settings, project, mode, warn if options.headless else notify)
    subagents = SubagentConfig(environment.subagent_max_depth, environment.subagent_max_concurrent)
    for w in environment.warnings:
        warn(w) if options.headless else notify(w)
    core.harness = Harness.discover(project, subagents=subagents,
                                    exit_plan=None if options.headless else interactive_exit_plan(core),
                                    user_home=locations.user_home, agent_home=locations.agent_home,
                                    claude_home=locations.claude_home)
    for w in core.harness.warnings:
        if options.headless:
            warn(w)
        elif w.startswith("agent skipped"):  # skill and command warnings are shown by the slash registry
            notify(w)
    if not options.headless:
        core.harness.generation = lambda: core.config_generation
    attach_harness(agent, core.harness)
    core.warm_start(session)
    core.services = attach_services(
        agent, project, settings, notify=notify, warn=warn,
        config_roots=config_roots(project, locations.agent_home, locations.claude_home),
        on_config_change=None if options.headless else core.config_changed)
    return core


def _refuse_import(warn: Callable[[str], None]) -> Callable[[Path], bool]:
    """Headless: nobody can approve a memory import from elsewhere; it is refused, and the user told."""
    def refuse(path: Path) -> bool:
        warn(f"memory import {path} refused: it is outside the project and the memory directories "
             "(approve it in an interactive session)")
        return False
    return refuse
