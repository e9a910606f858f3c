"""agent/pipeline/calltrace.py: a failing check run again, the calls into the project's functions printed (real
subprocesses, real pytest)."""
import os
import subprocess
import sys

import pytest

from agent.core.sandbox_policy import SandboxPolicy, SandboxSettings
from agent.pipeline import calltrace
from agent.pipeline.tries import run_command

MONEY = ('def parse_price(text):\n    whole, frac = text.split(".")\n    return int(whole) * 100 + int(frac)\n\n\n'
         'def safe(text):\n    try:\n        return parse_price(text)\n    except ValueError:\n        return 0\n\n\n'
         'def strict(text):\n    if "." not in text:\n        raise ValueError(f"no cents in {text!r}")\n    return 1\n')
TEST = ('from money import parse_price, safe, strict\n\n\ndef test_price():\n    assert safe("x.y") == 0\n'
        '    assert strict("1.5") == 1\n    assert parse_price("4.5") == 450\n')


def run(tmp_path, command):
    line = calltrace.traced(command, str(tmp_path))
    out = subprocess.run(["bash", "-c", line.replace("python", sys.executable, 1)], cwd=tmp_path,
                         capture_output=True, text=True, timeout=60)
    return out.returncode, out.stdout.splitlines()


def test_a_failing_pytest_run_shows_the_project_calls_with_arguments_and_results(tmp_path):
    (tmp_path / "money.py").write_text(MONEY)
    (tmp_path / "test_money.py").write_text(TEST)
    code, lines = run(tmp_path, "python -m pytest -q -x test_money.py")
    assert code == 0, lines
    assert lines == ["money.safe(text='x.y') -> 0",
                     "  money.parse_price(text='x.y') -> raised ValueError: invalid literal for int() with base 10: 'x'",
                     "money.strict(text='1.5') -> 1",
                     "money.parse_price(text='4.5') -> 405"]  # the test file's own frames are not listed


def test_a_script_is_traced_and_other_commands_are_not(tmp_path):
    (tmp_path / "money.py").write_text(MONEY)
    (tmp_path / "report.py").write_text("import money\n\nprint(money.strict('12'))\n")
    code, lines = run(tmp_path, "python report.py")
    assert (code, lines) == (0, ["money.strict(text='12') -> raised ValueError: no cents in '12'"])
    assert calltrace.traced("npm test", str(tmp_path)) is None
    assert calltrace.traced("python report.py | tail -1", str(tmp_path)) is None
    assert calltrace.traced("python -c 'print(1)'", str(tmp_path)) is None
    (tmp_path / "quiet.py").write_text("print('nothing of ours runs')\n")
    assert run(tmp_path, "python quiet.py")[0] != 0  # nothing traced: nothing to show


def test_the_trace_runs_inside_the_bash_tools_sandbox(tmp_path):
    policy = SandboxPolicy(SandboxSettings(mode="auto"), tmp_path, dirs=(tmp_path,))
    if policy.start() is not None:
        pytest.skip("bubblewrap cannot run on this machine")
    (tmp_path / "money.py").write_text(MONEY)
    (tmp_path / "test_money.py").write_text(TEST)
    line = calltrace.traced("python -m pytest -q -x test_money.py", str(tmp_path)).replace("python", sys.executable, 1)
    code, out, _ = run_command(line, tmp_path, dict(os.environ), policy, 60)
    assert code == 0 and out.splitlines()[-1] == "money.parse_price(text='4.5') -> 405", out
