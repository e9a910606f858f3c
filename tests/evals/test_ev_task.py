"""Task folders: loading, validation, selection and preparing a copy (settings, setup commands)."""
import json
import subprocess
from pathlib import Path

import pytest

from evals.task import Task, TaskError, discover, load_task, load_verifier, prepare


def make_task(root: Path, name: str, yaml_text: str, verify: str | None = "def verify(run):\n    assert False\n",
              files: dict | None = None) -> Path:
    d = root / name
    (d / "fixture").mkdir(parents=True)
    (d / "task.yaml").write_text(yaml_text)
    if verify is not None:
        (d / "verify.py").write_text(verify)
    for rel, text in (files or {}).items():
        (d / "fixture" / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / "fixture" / rel).write_text(text)
    return d


def test_load_task_reads_every_key(tmp_path):
    d = make_task(tmp_path, "t1", "prompt: do it\ntags: [read]\nmax_turns: 3\ntimeout: 20\npermission_mode: plan\n"
                                  "allowed_tools: [Bash]\nfollow_up: again\nresume: continue\nbetween: ['true']\n"
                                  "script: [{text: hi}]\nfollow_up_script: [{text: bye}]\n")
    t = load_task(d)
    assert t == Task(name="t1", dir=d.resolve(), prompt="do it", tags=["read"], max_turns=3, timeout=20,
                     permission_mode="plan", allowed_tools=["Bash"], follow_up="again", resume="continue",
                     between=["true"], script=[{"text": "hi"}], follow_up_script=[{"text": "bye"}])
    assert t.prompts == ["do it", "again"] and t.scripts() == [[{"text": "hi"}], [{"text": "bye"}]]


def test_bare_keys_and_the_category_tag(tmp_path):
    d = make_task(tmp_path, "t2", "prompt: p\ntags: [test, stub, bugfix]\nbare_files: [m.py, test_m.py]\n"
                                  "bare_target: m.py\n", files={"m.py": "", "test_m.py": ""})
    t = load_task(d)
    assert (t.bare_files, t.bare_target, t.category) == (["m.py", "test_m.py"], "m.py", "stub")
    assert load_task(make_task(tmp_path, "t3", "prompt: p\ntags: [read]\n")).category is None


@pytest.mark.parametrize("yaml_text, verify, problem", [
    ("tags: [x]\n", "def verify(run): pass\n", "needs a non-empty `prompt` string"),
    ("prompt: p\nmax_turn: 3\n", "def verify(run): pass\n", "unknown key(s) max_turn"),
    ("prompt: p\n", None, "verify.py is missing"),
    ("prompt: p\nmax_turns: 0\n", "def verify(run): pass\n", "max_turns must be a positive integer"),
    ("prompt: p\nallowed_tools: Bash\n", "def verify(run): pass\n", "allowed_tools must be a list of strings"),
    ("prompt: p\nbetween: ['rm x']\n", "def verify(run): pass\n", "between and follow_up_script need a follow_up"),
    ("prompt: p\nfollow_up: q\nresume: later\n", "def verify(run): pass\n", "resume must be `resume` or `continue`"),
    ("prompt: [unclosed\n", "def verify(run): pass\n", "not valid YAML"),
    ("prompt: p\nbare_files: [a.py]\n", "def verify(run): pass\n", "bare_files needs a bare_target"),
    ("prompt: p\nbare_target: a.py\n", "def verify(run): pass\n", "bare_target must be one of bare_files"),
    ("prompt: p\nbare_files: [a.py, b.py]\nbare_target: b.py\n", "def verify(run): pass\n",
     "bare_files not in fixture/: a.py, b.py"),
])
def test_bad_task_folders_give_one_line_errors(tmp_path, yaml_text, verify, problem):
    d = make_task(tmp_path, "bad", yaml_text, verify)
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert problem in str(e.value) and "\n" not in str(e.value)


def test_discover_selects_by_glob_sorted_and_reports_broken_tasks(tmp_path):
    for name in ("read-b", "read-a", "edit-a"):
        make_task(tmp_path, name, "prompt: p\n")
    make_task(tmp_path, "read-broken", "nope: 1\n")
    (tmp_path / "_shared").mkdir()  # helpers folders are not tasks
    tasks, errors = discover(tmp_path, ["read-*"])
    assert [t.name for t in tasks] == ["read-a", "read-b"]
    assert len(errors) == 1 and "read-broken" in errors[0] and "prompt" in errors[0]
    assert [t.name for t in discover(tmp_path)[0]] == ["edit-a", "read-a", "read-b"]


def test_prepare_copies_writes_settings_and_runs_setup(tmp_path):
    d = make_task(tmp_path / "tasks", "git-task", "prompt: p\nsettings: {permissions: {deny: ['Read(./x)']}}\n"
                  "setup: ['git init -q -b main', 'git add -A && git commit -q -m first']\n",
                  files={"a.txt": "A\n", "sub/b.txt": "B\n"})
    proj = prepare(load_task(d), tmp_path / "copy")
    assert (proj / "a.txt").read_text() == "A\n" and (proj / "sub" / "b.txt").read_text() == "B\n"
    assert json.loads((proj / ".agent" / "settings.json").read_text()) == {"permissions": {"deny": ["Read(./x)"]}}
    log = subprocess.run(["git", "log", "--format=%s|%an|%ad", "--date=iso"], cwd=proj, capture_output=True, text=True)
    assert log.stdout == "first|Eval Fixture|2024-01-02 03:04:05 +0000\n"
    assert not (d / "fixture" / ".agent").exists() and not (d / "fixture" / ".git").exists()


def test_failing_setup_command_names_the_command(tmp_path):
    d = make_task(tmp_path, "t", "prompt: p\nsetup: ['echo boom >&2; exit 3']\n")
    with pytest.raises(TaskError) as e:
        prepare(load_task(d), tmp_path / "copy")
    assert str(e.value) == "setup command 'echo boom >&2; exit 3' failed with exit code 3: boom"


def test_load_verifier_needs_a_verify_function(tmp_path):
    t = load_task(make_task(tmp_path, "t", "prompt: p\n", "def check(run):\n    pass\n"))
    with pytest.raises(TaskError, match="defines no verify"):
        load_verifier(t)
    (t.dir / "verify.py").write_text("def verify(run) oops\n")
    with pytest.raises(TaskError, match="cannot load it .SyntaxError"):
        load_verifier(t)
