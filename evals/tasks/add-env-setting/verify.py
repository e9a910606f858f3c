import os
import subprocess
import sys


def _greet(run, *args, name=None):
    env = {k: v for k, v in os.environ.items() if k != "GREETING_NAME"}
    if name is not None:
        env["GREETING_NAME"] = name
    return subprocess.run([sys.executable, "greet.py", *args], cwd=run.dir, env=env, capture_output=True, text=True)


def verify(run):
    r = _greet(run, "15", name="Ada")
    assert r.returncode == 0 and r.stdout == "Good afternoon, Ada!\n", \
        f"GREETING_NAME=Ada python greet.py 15 prints: {(r.stdout + r.stderr)[-300:]}"
    r = _greet(run)
    assert r.returncode == 0 and r.stdout == "Good morning, world!\n", \
        f"python greet.py (GREETING_NAME not set) prints: {(r.stdout + r.stderr)[-300:]}"
    r = run.python("-c", "from greet import greeting; print(greeting('Bo', 20))")
    assert r.stdout.strip() == "Good evening, Bo!", f"greeting('Bo', 20): {(r.stdout + r.stderr)[-300:]}"
