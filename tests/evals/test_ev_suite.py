"""The shipped suites: every task loads, covers the issue's list, and its verifier fails on the untouched fixture;
plus the CI smoke run of two real tasks with the scripted engine, and every held-out task's reference solution
replayed with the scripted engine."""
import json
import subprocess
import sys
from pathlib import Path

from evals.runner import untouched_problem
from evals.task import CATEGORIES, SUITES, TASKS_DIR, discover

REPO = Path(__file__).resolve().parents[2]
# The issue's list of what the suite must exercise, as task tags.
REQUIRED_TAGS = {"read", "grep", "fix", "rename", "add", "test", "config", "shell", "deny", "plan", "skill",
                 "subagent", "resume", "long"}
SMOKE = ["read-config-port", "json-set-flag"]
HELDOUT_DIR = SUITES["heldout"]


def test_every_task_loads_and_the_suite_covers_the_issue():
    tasks, errors = discover(TASKS_DIR)
    assert errors == []
    assert len(tasks) >= 30
    assert REQUIRED_TAGS <= {tag for t in tasks for tag in t.tags}
    assert all(t.tags for t in tasks)
    assert len({t.prompt for t in tasks}) == len(tasks)


def test_every_verifier_fails_on_its_untouched_fixture():
    tasks, _ = discover(TASKS_DIR)
    assert {t.name: untouched_problem(t) for t in tasks} == {t.name: None for t in tasks}


def test_heldout_set_loads_is_new_and_has_its_categories():
    tasks, errors = discover(HELDOUT_DIR)
    assert errors == []
    assert len(tasks) >= 20
    assert all(t.category in CATEGORIES for t in tasks)
    assert {t.category for t in tasks} == set(CATEGORIES)
    stubs = [t for t in tasks if t.category == "stub"]
    assert len(stubs) >= 10
    # One stdlib area per stub task (its third tag), no two the same.
    areas = [t.tags[2] for t in stubs]
    assert len(set(areas)) == len(areas)
    # Stub tasks: a module, its unittest file, and the prompt names both; the bare run rewrites the module.
    for t in stubs:
        module, test_file = t.bare_files
        assert (t.bare_target, test_file) == (module, f"test_{module}"), t.name
        assert module in t.prompt and test_file in t.prompt, t.name
        assert "raise NotImplementedError" in (t.fixture / module).read_text(), t.name
    # Held out means new: no prompt or task name shared with the tuning suite.
    suite, _ = discover(TASKS_DIR)
    assert not {t.prompt for t in tasks} & {t.prompt for t in suite}
    assert not {t.name for t in tasks} & {t.name for t in suite}
    assert len({t.prompt for t in tasks}) == len(tasks)


def test_every_heldout_verifier_fails_on_its_untouched_fixture():
    tasks, _ = discover(HELDOUT_DIR)
    assert {t.name: untouched_problem(t) for t in tasks} == {t.name: None for t in tasks}


def test_every_heldout_reference_solution_passes_with_the_scripted_engine(tmp_path):
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--engine", "scripted", "--suite", "heldout",
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                         # The shell tasks' scripts run `python ...`: this interpreter's folder comes first.
                         env={"PYTHONPATH": str(REPO), "PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin"},
                         timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    tasks, _ = discover(HELDOUT_DIR)
    assert {r["name"]: r["passed"] for r in report["tasks"]} == {t.name: 1 for t in tasks}
    assert report["skipped"] == []
    assert {c: g["passed_tries"] for c, g in report["categories"].items()} == \
        {c: sum(t.category == c for t in tasks) for c in CATEGORIES}


def test_smoke_two_tasks_with_the_scripted_engine(tmp_path):
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--engine", "scripted", "--tasks", ",".join(SMOKE),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=300)
    assert run.returncode == 0, run.stdout + run.stderr
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    assert {r["name"]: r["passed"] for r in report["tasks"]} == {name: 1 for name in SMOKE}
    assert report["summary"]["pass^1"] == 1.0 and report["skipped"] == []
    # A real agent process ran each task: the transcript shows the scripted calls and their results.
    transcript = (tmp_path / "out" / "json-set-flag" / "try-1" / "transcript.jsonl").read_text().splitlines()
    tools = [json.loads(ln)["message"]["name"] for ln in transcript
             if json.loads(ln).get("type") == "message" and json.loads(ln)["message"]["role"] == "tool"]
    assert tools == ["Read", "Edit"]


def _plan_view(tmp_path, tool_results, answer):
    """A finished plan-mode-no-create run: the fixture copied, these (name, content) tool results, this answer."""
    import shutil
    from evals.outcome import RunView
    task = next(t for t in discover(TASKS_DIR)[0] if t.name == "plan-mode-no-create")
    proj = tmp_path / "proj"
    shutil.copytree(task.fixture, proj)
    transcript = [{"type": "message", "message": {"role": "user", "content": task.prompt}}]
    for i, (name, content) in enumerate(tool_results):
        transcript.append({"type": "message", "message": {"role": "assistant", "content": "", "tool_calls": [
            {"id": f"t{i}", "type": "function", "function": {"name": name, "arguments": {}}}]}})
        transcript.append({"type": "message", "message": {"role": "tool", "tool_call_id": f"t{i}", "name": name,
                                                          "content": content}})
    return task, RunView(proj, task.fixture, [{"type": "result", "subtype": "success", "result": answer}], transcript)


def test_plan_mode_no_create_needs_the_project_looked_at(tmp_path):
    from evals.runner import verify_run
    # Recorded on the 0.5B (2c3aae2): a failed Task call, then the prompt echoed back; nothing was planned.
    task, echoed = _plan_view(tmp_path / "a", [("Task", "Error: there is no subagent type 'Task'.")],
                              "Create a file TODO.md that lists three next steps for this project.")
    assert not verify_run(task, echoed)["passed"]
    task, planned = _plan_view(tmp_path / "b", [("Read", "     1\t# tidewater\n     2\tA tiny service. Missing: "
                                                         "tests, CI, docs.")], "TODO.md would list: tests, CI, docs.")
    assert verify_run(task, planned)["passed"]


def test_grep_find_definition_rejects_an_echoed_file_list(tmp_path):
    from evals.outcome import RunView
    from evals.runner import verify_run
    task = next(t for t in discover(TASKS_DIR)[0] if t.name == "grep-find-definition")

    def verdict(answer):
        return verify_run(task, RunView(tmp_path, task.fixture, [{"subtype": "success", "result": answer}]))["passed"]
    assert not verdict("<tool_response>\nlib/integrity.py\nlib/transport.py\n</tool_response>")
    assert verdict("lib/integrity.py")
    assert verdict("compute_checksum is defined in lib/integrity.py; lib/transport.py calls it.")
