"""Candidate checks in verified tries (agent/pipeline/tries.py): real subprocesses, real files."""
import subprocess
import sys
import threading
import time
import uuid

from agent.pipeline import tries


def _running(marker: str) -> bool:
    return subprocess.run(["pgrep", "-f", marker], capture_output=True).returncode == 0


def test_a_check_past_its_limit_is_killed_with_everything_it_started(tmp_path):
    marker = f"m{uuid.uuid4().hex}"
    command = f"sleep 300 {marker} & {sys.executable} -c 'while True: pass' {marker}"
    start = time.monotonic()
    assert tries._run(command, tmp_path, {"PATH": "/usr/bin:/bin"}, limit_s=1.5) == (False, 0, 0, 1.5)
    assert time.monotonic() - start < 10
    time.sleep(0.2)
    assert not _running(marker)


def test_a_check_that_ends_leaves_nothing_behind_and_counts_its_passes(tmp_path):
    marker = f"m{uuid.uuid4().hex}"
    ok, passed, failed, took = tries._run(f"(sleep 300 {marker} &) ; echo '3 passed in 0.1s'", tmp_path,
                                          {"PATH": "/usr/bin:/bin"})
    assert (ok, passed, failed) == (True, 3, 0) and took < 10
    assert tries._run("echo '=== 2 failed, 1 error, 4 passed in 0.2s ==='; exit 1", tmp_path,
                      {"PATH": "/usr/bin:/bin"})[:3] == (False, 4, 3)
    time.sleep(0.2)
    assert not _running(marker)


def test_after_a_check_ends_a_looping_candidate_gets_a_few_times_the_slowest(tmp_path, monkeypatch):
    monkeypatch.setattr(tries, "CHECK_FLOOR_S", 1)
    target = tmp_path / "calc.py"
    target.write_text("def f():\n    return 0\n")
    (tmp_path / "check.py").write_text("from calc import f\nassert f() == 1\n")
    done = "def f():\n    return 1\n"
    loops = "def f():\n    while True:\n        pass\n"
    start = time.monotonic()
    tried = tries.evaluate([(done, -0.1), (loops, -0.2)], target, target.read_text(), "Fix calc.py.",
                           [f"{sys.executable} check.py"], tmp_path, {"PATH": "/usr/bin:/bin"})
    assert [t.passed for t in tried] == [True, False] and time.monotonic() - start < 15  # not CHECK_TIMEOUT_S
    assert target.read_text() == "def f():\n    return 0\n"


class _Marking:
    """A sandbox seam that runs the command under `env` with a variable set (what bubblewrap's wrap does to argv)."""

    def wrap(self, command, argv, cwd, keep=()):
        return ["env", "INSIDE_SANDBOX=1", *argv]


def test_candidates_run_through_the_sessions_sandbox(tmp_path):
    ok, *_ = tries._run('test "$INSIDE_SANDBOX" = 1', tmp_path, {"PATH": "/usr/bin:/bin"}, sandbox=_Marking())
    assert ok and not tries._run('test "$INSIDE_SANDBOX" = 1', tmp_path, {"PATH": "/usr/bin:/bin"})[0]


def test_a_cancel_stops_the_running_check_and_skips_the_other_candidates(tmp_path):
    marker = f"m{uuid.uuid4().hex}"
    target = tmp_path / "calc.py"
    target.write_text("def f():\n    return 0\n")
    candidates = [(f"def f():\n    return {i}\n", -0.1) for i in (1, 2, 3)]
    cancel = threading.Event()
    threading.Timer(0.5, cancel.set).start()  # Ctrl-C or SIGTERM half a second into the first check
    start = time.monotonic()
    waits = f"{sys.executable} -c 'import time; time.sleep(60)' {marker}"
    tried = tries.evaluate(candidates, target, target.read_text(), "Fix calc.py.", [waits], tmp_path,
                           {"PATH": "/usr/bin:/bin"}, cancel=cancel)
    assert time.monotonic() - start < 5 and [t.passed for t in tried] == [False]
    assert target.read_text() == "def f():\n    return 0\n"
    time.sleep(0.2)
    assert not _running(marker)


def test_candidates_of_one_length_checked_within_a_second_each_run_their_own_code(tmp_path):
    """Python reuses a .pyc whose source has the same size and mtime second as the one it was compiled from."""
    target = tmp_path / "calc.py"
    target.write_text("def f():\n    return 0\n")
    check = [f"{sys.executable} -c 'from calc import f; assert f() == 2'"]
    env = {"PATH": "/usr/bin:/bin"}
    tried = tries.evaluate([("def f():\n    return 1\n", -0.1), ("def f():\n    return 2\n", -0.2)], target,
                           target.read_text(), "Fix calc.py.", check, tmp_path, env)
    assert [t.passed for t in tried] == [False, True]


def test_a_restyled_copy_of_code_that_fails_its_check_is_unchanged_and_not_run(tmp_path):
    """Quotes and spacing changed, the same syntax tree: when the check failed on the original, the candidate
    cannot pass it (a round of such copies once led the retry note with a quote-style diff)."""
    target = tmp_path / "calc.py"
    target.write_text('def f():\n    return "-".join(["a"])\n')
    marker = tmp_path / "ran"
    check = [f"touch {marker}; {sys.executable} -c 'from calc import f; assert f() == \"b\"'"]
    restyled = ("def f():\n    return '-'.join( ['a'] )  # joined\n", -0.1)
    env = {"PATH": "/usr/bin:/bin"}
    (tried,) = tries.evaluate([restyled], target, target.read_text(), "Fix calc.py.", check, tmp_path, env,
                              failing=True)
    assert (tried.passed, tried.problem, marker.exists()) == (False, "unchanged", False)
    (tried,) = tries.evaluate([restyled], target, target.read_text(), "Fix calc.py.", check, tmp_path, env)
    assert (tried.passed, tried.problem, marker.exists()) == (False, "`%s` failed" % check[0], True)
    assert tries.same_code(target, "x = 1\n", "x = (1)  # one\n") and not tries.same_code(target, "x = 1\n", "x = 2\n")
    assert not tries.same_code(tmp_path / "a.json", "{}", "{ }")


def test_a_restyled_copy_counts_as_unchanged_after_any_candidate_ran_its_check(tmp_path):
    target = tmp_path / "calc.py"
    target.write_text("def f():\n    return 0\n")
    (tmp_path / "check.py").write_text("from calc import f\nassert f() == 1\n")
    restyled = "def f():\n    return 0  # the same code\n"
    tried = tries.evaluate([("def f():\n    return 1\n", -0.1), (restyled, -0.2)], target, target.read_text(),
                           "Fix calc.py.", [f"{sys.executable} check.py"], tmp_path, {"PATH": "/usr/bin:/bin"},
                           failing=True)
    assert [(t.passed, t.problem) for t in tried] == [(True, ""), (False, "unchanged")]


def test_a_copy_of_a_candidate_checked_already_is_not_run_again(tmp_path):
    target = tmp_path / "calc.py"
    target.write_text("def f():\n    return 0\n")
    runs = tmp_path / "runs.log"
    check = [f"echo run >> {runs}; {sys.executable} -c 'from calc import f; assert f() == 2'"]
    one, two = "def f():\n    return 1\n", "def f():\n    return 2\n"
    tried = tries.evaluate([(one, -0.1), (two, -0.2), (one, -0.3), (two, -0.4)], target, target.read_text(),
                           "Fix calc.py.", check, tmp_path, {"PATH": "/usr/bin:/bin"})
    assert runs.read_text().count("run") == 2
    assert [(t.index, t.passed, t.mean_logprob) for t in tried] == [(0, False, -0.1), (1, True, -0.2),
                                                                     (2, False, -0.3), (3, True, -0.4)]
    assert tries.choose(tried, target.read_text()).content == two  # a copy is a candidate that choose() sees
