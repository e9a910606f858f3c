"""The bare whole-file path (evals/bare.py): the prompt, reading the code block back, one shot through an engine
(the scripted engine stands in for the model), and the comparison table; plus bench/bare_vs_agent.py's CLI."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from agent.engines.scripted import ScriptedEngine
from evals.bare import bare_messages, comparison_table, extract_code, run_bare
from evals.task import SUITES, Task, discover, load_task

REPO = Path(__file__).resolve().parents[2]
HELDOUT = discover(SUITES["heldout"])[0]
BARE_TASKS = [t for t in HELDOUT if t.bare_target]


def reference_content(task: Task, tmp_path: Path) -> str:
    """The bare target after the task's reference script: its Edit and Write calls applied to the fixture."""
    proj = tmp_path / "ref"
    shutil.copytree(task.fixture, proj)
    for turn in task.script:
        for call in turn.get("tool_calls") or []:
            args = call["arguments"]
            path = proj / args.get("file_path", "")
            if call["name"] == "Write":
                path.write_text(args["content"])
            elif call["name"] == "Edit":
                text = path.read_text()
                path.write_text(text.replace(args["old_string"], args["new_string"],
                                             -1 if args.get("replace_all") else 1))
    return (proj / task.bare_target).read_text()


def test_bare_messages_show_every_bare_file_then_the_request(tmp_path):
    task = next(t for t in HELDOUT if t.name == "config-yaml-image-tag")
    messages = bare_messages(task, task.fixture)
    compose = (task.fixture / "compose.yaml").read_text()
    assert messages == [
        {"role": "system", "content": "Act as an expert software developer. Follow the user's request exactly."},
        {"role": "user", "content": f"Here are the files of my project.\n\ncompose.yaml\n```yaml\n{compose}```\n\n"
                                    f"{task.prompt}\n\nChange only compose.yaml. Reply with the complete new content "
                                    "of compose.yaml in one fenced code block: every line of the file, from the first "
                                    "to the last, with nothing left out."}]


@pytest.mark.parametrize("reply, expected", [
    ("```python\ndef f():\n    return 1\n```", "def f():\n    return 1\n"),
    ("Here it is:\n\n```\nx = 1\n\ny = 2\n```\nDone.", "x = 1\n\ny = 2\n"),
    # Aider's whole-file shape: the file named on the line before its block wins over an earlier block.
    ("test_a.py\n```python\nimport a\n```\n\na.py\n```python\nA = 1\n```\n", "A = 1\n"),
    ("**a.py**:\n```py\nA = 2\n```", "A = 2\n"),
    ("```python\nfirst = 1\n```\n```python\nsecond = 2\n```", "first = 1\n"),
    ("No code here.", None),
    ("```python\ndef f():\n    return", None),  # cut off before the closing fence
])
def test_extract_code(reply, expected):
    assert extract_code(reply, "a.py") == expected


@pytest.mark.parametrize("task", BARE_TASKS, ids=[t.name for t in BARE_TASKS])
def test_every_bare_task_passes_with_its_reference_file_and_fails_with_the_fixture(task, tmp_path):
    solved = reference_content(task, tmp_path)
    ok = run_bare(task, ScriptedEngine([f"Here is {task.bare_target}:\n\n```\n{solved}```\n"]))
    assert (ok["passed"], ok["reason"], ok["stop_reason"]) == (True, "", "end_turn")
    unchanged = (task.fixture / task.bare_target).read_text()
    failed = run_bare(task, ScriptedEngine([f"```\n{unchanged}```"]))
    assert failed["passed"] is False and failed["verifier_error"] is False and failed["reason"]


def test_a_reply_without_a_block_fails_and_the_reply_is_kept(tmp_path):
    task = next(t for t in BARE_TASKS if t.name == "stub-combos-sum")
    engine = ScriptedEngine(["I would use itertools.combinations."])
    record = run_bare(task, engine, keep_dir=tmp_path / "kept")
    assert (record["passed"], record["reason"]) == (False, "no fenced code block in the reply (stop: end_turn)")
    assert (tmp_path / "kept" / "reply.md").read_text() == "I would use itertools.combinations."
    assert (tmp_path / "kept" / "proj" / "combos.py").read_text() == (task.fixture / "combos.py").read_text()
    # One request, no tools, greedy.
    (request,) = engine.requests
    assert (request.tools, request.sampling.temperature, len(request.messages)) == ([], 0.0, 2)


def test_comparison_table_per_category_and_in_all(tmp_path):
    def task(name, tags):
        d = tmp_path / name
        (d / "fixture").mkdir(parents=True)
        (d / "task.yaml").write_text(f"prompt: {name}\ntags: {tags}\n")
        (d / "verify.py").write_text("def verify(run):\n    assert False\n")
        return load_task(d)
    tasks = [task("s1", "[stub]"), task("s2", "[stub, test]"), task("a1", "[answer]"), task("x1", "[read]")]
    bare = {"s1": {"passed": True}, "s2": {"passed": False}}
    agent = {"s1": [{"passed": True}], "s2": [{"passed": True}], "a1": [{"passed": False}]}
    assert comparison_table(tasks, bare, agent).splitlines() == [
        "category  tasks        bare       agent",
        "---------------------------------------",
        "stub          2  1/2  50.0%  2/2 100.0%",
        "answer        1           -  0/1   0.0%",
        "other         1           -           -",
        "---------------------------------------",
        "all           4  1/2  50.0%  2/3  66.7%",
    ]


def test_bench_script_lists_no_task_for_an_unknown_glob(tmp_path):
    run = subprocess.run([sys.executable, str(REPO / "bench" / "bare_vs_agent.py"), "--tasks", "no-such-*",
                          "--out", str(tmp_path)], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert (run.returncode, run.stdout, run.stderr) == (1, "", "bare_vs_agent: no task to run\n")
