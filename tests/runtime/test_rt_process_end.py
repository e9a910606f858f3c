"""How the `agent` and `python -m runtime` processes end (runtime/process_end.py), in real subprocesses: a
daemon thread inside a torch op at exit no longer aborts the process (with a plain sys.exit it does: "terminate
called without an active exception", exit -6, seen in CI after the result was printed), while non-daemon threads,
atexit handlers and buffered output still finish."""
import subprocess
import sys
import textwrap
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_script(tmp_path: Path, body: str) -> subprocess.CompletedProcess:
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(body))
    return subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"})


def test_a_daemon_thread_inside_torch_does_not_abort_the_exit(tmp_path):
    r = run_script(tmp_path, """
        import threading, time, torch
        from runtime.process_end import run_and_exit
        a = torch.randn(1200, 1200)
        busy = threading.Event()
        def spin():
            while True:
                busy.set()
                a @ a  # releases the GIL inside C++, as an abandoned generation's forward does
        threading.Thread(target=spin, daemon=True).start()
        busy.wait()
        time.sleep(0.3)
        print("result", end="")  # buffered: a pipe, no newline
        run_and_exit(lambda: 3)
    """)
    assert (r.returncode, r.stdout) == (3, "result"), r.stderr
    assert "terminate called" not in r.stderr


def test_non_daemon_threads_and_atexit_handlers_finish_first(tmp_path):
    done, hook = tmp_path / "written", tmp_path / "hook"
    r = run_script(tmp_path, f"""
        import atexit, threading, time
        from concurrent.futures import ThreadPoolExecutor
        from pathlib import Path
        from runtime.process_end import run_and_exit
        pool = ThreadPoolExecutor(max_workers=1)
        pool.submit(lambda: None).result()  # an idle pool worker must not hold the exit
        def write():
            time.sleep(0.5)
            Path({str(done)!r}).write_text("ok")  # a prefix-store write still in flight at the end
        threading.Thread(target=write).start()
        atexit.register(lambda: Path({str(hook)!r}).write_text("ran"))
        run_and_exit(lambda: 0)
    """)
    assert r.returncode == 0, r.stderr
    assert done.read_text() == "ok" and hook.read_text() == "ran"


def test_system_exit_statuses(tmp_path):
    r = run_script(tmp_path, """
        import sys
        from runtime.process_end import run_and_exit
        run_and_exit(lambda: sys.exit("agent: a usage problem"))
    """)
    assert (r.returncode, r.stderr.strip()) == (1, "agent: a usage problem")
    r = run_script(tmp_path, """
        from runtime.process_end import run_and_exit
        run_and_exit(lambda: None)
    """)
    assert r.returncode == 0, r.stderr


def test_agent_help_exits_cleanly_through_the_entry_point(tmp_path):
    r = subprocess.run([sys.executable, "-m", "agent", "--help"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert r.returncode == 0 and "usage" in r.stdout.lower(), r.stderr
