"""A pytest plugin the pipeline loads into a failing test run (`-p agent.pipeline.call_trace_plugin`); nothing
in the agent imports it. It records the calls the first failing test makes into the project's own functions
(not tests, not installed packages): arguments at the call, the value returned, the nesting; call_trace.py reads
them from one marked line of the run's output."""
from __future__ import annotations

import inspect
import json
import os
import reprlib
import sys
from pathlib import Path

import pytest

ON_VAR = "AGENT_CALL_TRACE"  # unset: the plugin idles
MARK = "AGENT_CALL_TRACE "  # the line of the run's output that carries the first failing test's calls as JSON
MAX_CALLS = 200
SKIP_DIRS = {"site-packages", "dist-packages", "node_modules", "__pycache__"}
NOT_PLAIN = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR  # resumed, not called once

_short = reprlib.Repr()
_short.maxstring = _short.maxother = 60
_short.maxlist = _short.maxtuple = _short.maxset = 6
_short.maxdict = 4
_short.maxlevel = 3


def project_code(filename: str, root: Path) -> bool:
    """A file of the project under test that is not itself a test."""
    path = Path(filename)
    if not path.is_absolute() or not path.is_relative_to(root):
        return False
    parts = path.relative_to(root).parts
    if any(p in SKIP_DIRS or p.startswith(".") or "venv" in p for p in parts[:-1]):
        return False
    name = path.name
    return name.endswith(".py") and not (name.startswith("test_") or name.endswith("_test.py") or
                                         name == "conftest.py")


def _arguments(frame) -> str:
    code = frame.f_code
    count = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & inspect.CO_VARARGS) + \
        bool(code.co_flags & inspect.CO_VARKEYWORDS)
    names = [n for n in code.co_varnames[:count] if n not in ("self", "cls")]
    return ", ".join(_short.repr(frame.f_locals.get(n)) for n in names)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    if not os.environ.get(ON_VAR):
        yield
        return
    root = Path(str(item.config.rootpath)).resolve()
    calls, open_calls, ours = [], {}, {}

    def profile(frame, event, arg):
        if event not in ("call", "return"):
            return
        code = frame.f_code
        if code.co_name.startswith("<") or code.co_flags & NOT_PLAIN:
            return
        mine = ours.get(code.co_filename)
        if mine is None:
            mine = ours[code.co_filename] = project_code(code.co_filename, root)
        if not mine:
            return
        if event == "call":
            if len(calls) < MAX_CALLS:
                open_calls[id(frame)] = len(calls)
                calls.append({"name": getattr(code, "co_qualname", code.co_name), "args": _arguments(frame),
                              "depth": len(open_calls) - 1, "returned": None,
                              "file": Path(code.co_filename).relative_to(root).as_posix()})
        elif (at := open_calls.pop(id(frame), None)) is not None:
            calls[at]["returned"] = _short.repr(arg)

    before = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield
    finally:
        sys.setprofile(before)
        item.agent_calls = calls


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    config = item.config
    if report.when == "call" and report.failed and not hasattr(config, "agent_first_failure"):
        config.agent_first_failure = {"test": item.nodeid, "calls": getattr(item, "agent_calls", [])}


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    # Printed, not written to a file: a sandboxed run has a private /tmp
    if os.environ.get(ON_VAR) and hasattr(config, "agent_first_failure"):
        terminalreporter.write_line(MARK + json.dumps(config.agent_first_failure))
