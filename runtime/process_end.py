"""How the `agent` and `python -m runtime` processes end: Python's own shutdown up to the step that stops daemon
threads, then an exit.

The interpreter's finalization ends a daemon thread that wakes inside C++ (a torch op of an abandoned generation,
an xgrammar compile) with pthread_exit, and the forced unwind through C++ frames aborts the whole process
("terminate called without an active exception", exit -6) after the result was already printed. Everything
that must finish is a non-daemon thread or an atexit handler, so those run first, as the interpreter runs them.
"""
from __future__ import annotations

import atexit
import logging
import os
import sys
import threading
from typing import Callable, NoReturn


def exit_code(status: object) -> int:
    """The exit status SystemExit's argument means (None: 0, an int: itself, text: printed, 1)."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status
    print(status, file=sys.stderr)
    return 1


def run_and_exit(main: Callable[[], int | None]) -> NoReturn:
    """Run `main` and end the process with its status, never in the interpreter's finalization."""
    try:
        code = exit_code(main())
    except SystemExit as e:  # argparse's --help and usage errors
        code = exit_code(e.code)
    end_process(code)


def end_process(code: int) -> NoReturn:
    """Join the non-daemon threads (prefix-store writes; pools are told to stop first), run the atexit handlers,
    flush the standard streams, and exit without finalizing: daemon threads are dropped where they stand."""
    shutdown = getattr(threading, "_shutdown", None)  # what Py_FinalizeEx calls first; absent on other Pythons
    if shutdown is not None and threading.current_thread() is threading.main_thread():
        shutdown()
    else:
        for t in threading.enumerate():
            if t is not threading.current_thread() and not t.daemon:
                t.join()
    run_exit_functions = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_functions is not None:
        run_exit_functions()
    else:
        logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe (`agent -p ... | head`) or a closed stream
            pass
    os._exit(code)
