"""The runner end to end with the scripted engine: real `python -m agent` subprocesses in temp copies."""
import json
import subprocess
import sys
from pathlib import Path

import yaml

from evals.runner import EvalOptions, _run_agent, run_suite, select

REPO = Path(__file__).resolve().parents[2]
FAILS_UNLESS_DONE = "def verify(run):\n    assert run.text('done.txt') == 'yes\\n', 'done.txt is not yes'\n"


def make_task(root: Path, name: str, spec: dict, verify: str, files: dict | None = None) -> None:
    d = root / name
    (d / "fixture").mkdir(parents=True)
    (d / "task.yaml").write_text(yaml.safe_dump(spec))
    (d / "verify.py").write_text(verify)
    for rel, text in (files or {"README.md": "x\n"}).items():
        (d / "fixture" / rel).write_text(text)


def write_call(path, content):
    return {"name": "Write", "arguments": {"file_path": path, "content": content}}


def test_select_skips_verifiers_that_pass_or_crash_untouched(tmp_path):
    make_task(tmp_path, "good", {"prompt": "p", "script": []}, FAILS_UNLESS_DONE)
    make_task(tmp_path, "lazy", {"prompt": "p", "script": []}, "def verify(run):\n    pass\n")
    make_task(tmp_path, "crashy", {"prompt": "p", "script": []}, "def verify(run):\n    {}['x']\n")
    make_task(tmp_path, "unscripted", {"prompt": "p"}, FAILS_UNLESS_DONE)
    shown = []
    runnable, skipped = select(EvalOptions(engine="scripted", tasks_dir=tmp_path), shown.append)
    assert [t.name for t in runnable] == ["good"]
    assert skipped == [
        {"name": "crashy", "reason": "the verifier crashed on the untouched fixture: KeyError: 'x'"},
        {"name": "lazy", "reason": "the verifier passes on the untouched fixture, so it cannot tell success from "
                                   "doing nothing"},
        {"name": "unscripted", "reason": "no `script` for the scripted engine"}]
    assert len(shown) == 3
    assert [t.name for t in select(EvalOptions(engine="local", tasks_dir=tmp_path), shown.append)[0]] == \
        ["good", "unscripted"]


def test_suite_run_passes_fails_resumes_and_counts_malformed_calls(tmp_path):
    tasks = tmp_path / "tasks"
    make_task(tasks, "writes", {"prompt": "write it", "permission_mode": "acceptEdits",
                                "script": [{"tool_calls": [write_call("done.txt", "yes\n")]}, {"text": "Done."}]},
              FAILS_UNLESS_DONE)
    make_task(tasks, "claims", {"prompt": "write it", "permission_mode": "acceptEdits",
                                "script": [{"text": "I wrote done.txt."}]}, FAILS_UNLESS_DONE)
    make_task(tasks, "bad-call", {"prompt": "write it", "permission_mode": "acceptEdits", "script": [
        {"tool_calls": [{"name": "Write", "arguments": '{"file_path": "done.txt", '}]},
        {"tool_calls": [write_call("done.txt", "yes\n")]}, {"text": "Done."}]}, FAILS_UNLESS_DONE)
    make_task(tasks, "resumes", {
        "prompt": "read it", "between": ["rm secret.txt"], "follow_up": "what was it?",
        "script": [{"tool_calls": [{"name": "Read", "arguments": {"file_path": "secret.txt"}}]}, {"text": "ok"}],
        "follow_up_script": [{"text": "It was K-42."}]},
        "def verify(run):\n    assert len(run.results) == 2 and 'K-42' in run.answer\n"
        "    assert run.results[0]['session_id'] == run.results[1]['session_id']\n"
        "    assert not run.exists('secret.txt')\n", files={"secret.txt": "K-42\n"})
    out = tmp_path / "out"
    report = run_suite(EvalOptions(engine="scripted", tasks_dir=tasks, out_dir=out, repeat=2), echo=lambda s: None)
    rows = {r["name"]: r for r in report["tasks"]}
    assert {n: r["passed"] for n, r in rows.items()} == {"bad-call": 2, "claims": 0, "resumes": 2, "writes": 2}
    assert rows["claims"]["tries"][0]["reason"] == "done.txt is not yes"
    assert rows["claims"]["tries"][0]["answer"] == "I wrote done.txt."
    assert [t["malformed_calls"] for t in rows["bad-call"]["tries"]] == [1, 1]
    assert rows["writes"]["tries"][0]["turns"] == 2 and rows["writes"]["tries"][0]["tool_calls"] == 1
    assert rows["resumes"]["tries"][0]["turns"] == 3 and len(rows["resumes"]["tries"][0]["prompts"]) == 2
    assert rows["writes"]["tries"][0]["prompts"][0]["exit"] == "exit 0"
    s = report["summary"]
    assert (s["tries"], s["passed_tries"], s["pass^2"]) == (8, 6, 0.75)
    saved = json.loads((out / "report.json").read_text())
    assert saved["summary"] == s and saved["meta"]["complete"] is True
    try_dir = out / "writes" / "try-1"
    assert sorted(p.name for p in try_dir.iterdir()) == ["record.json", "stderr-1.txt", "stream.jsonl",
                                                         "transcript.jsonl"]
    assert json.loads((try_dir / "record.json").read_text())["passed"] is True


def test_subagent_transcripts_are_kept_beside_the_parents(tmp_path):
    # A Task child writes its own transcript inside the temporary data dir, deleted after the try; without a
    # copy, a failure inside a subagent (1.5B: 3 of 5 tries timed out in one) could not be read afterwards.
    out = tmp_path / "out"
    report = run_suite(EvalOptions(engine="scripted", patterns=["subagent-find-class"], out_dir=out),
                       echo=lambda s: None)
    assert report["tasks"][0]["passed"] == 1
    children = sorted((out / "subagent-find-class" / "try-1" / "subagents").glob("*.jsonl"))
    assert len(children) == 1
    lines = [json.loads(ln) for ln in children[0].read_text().splitlines()]
    calls = [c["function"]["name"] for ln in lines if ln.get("type") == "message"
             for c in ln["message"].get("tool_calls") or []]
    assert calls == ["Grep"]


def test_agent_process_past_its_limit_is_killed(tmp_path):
    info, lines, err = _run_agent([sys.executable, "-c", "import time; print('{\"type\": \"x\"}', flush=True); "
                                                         "time.sleep(30)"], tmp_path, None, 1.0)
    assert info["exit"] == "killed after 1s" and lines == [{"type": "x"}] and info["wall_s"] < 10


def test_agent_eval_command_prints_table_and_exit_code(tmp_path):
    tasks = tmp_path / "tasks"
    make_task(tasks, "claims", {"prompt": "p", "script": [{"text": "done"}]}, FAILS_UNLESS_DONE)
    make_task(tasks, "lazy", {"prompt": "p", "script": [{"text": "done"}]}, "def verify(run):\n    pass\n")
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--engine", "scripted", "--tasks-dir", str(tasks),
                          "--out", str(tmp_path / "out")], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=120)
    assert run.returncode == 1, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].split() == ["task", "pass", "turns", "calls", "bad", "txt", "reused", "prefill", "drafted",
                                "accept", "cands", "wall_s"]
    assert lines[2].split()[:4] == ["claims", "0/1", "1", "0"]
    assert lines[3].startswith("skipped lazy: the verifier passes on the untouched fixture")
    assert lines[4].startswith("pass rate 0/1 tries (0.0%); pass^1 0/1 tasks (0.0%)")
    assert lines[5] == f"report: {tmp_path / 'out'}/report.json"
    assert "FAIL claims [1/1]" in run.stderr and "done.txt is not yes" in run.stderr


def test_agent_eval_usage_errors_are_one_line(tmp_path):
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--repeat", "0"], capture_output=True, text=True,
                         cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (1, "", "agent eval: --repeat must be at least 1 and "
                                                                 "--timeout positive\n")
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--engine", "scripted", "--tasks", "no-such-*",
                          "--out", str(tmp_path / "o")], capture_output=True, text=True, cwd=tmp_path,
                         env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert (run.returncode, run.stdout, run.stderr) == (1, "", "agent eval: no task to run matches no-such-*\n")


def test_agent_eval_suite_heldout_lists_the_heldout_tasks(tmp_path):
    from evals.task import SUITES, discover
    run = subprocess.run([sys.executable, "-m", "agent", "eval", "--suite", "heldout", "--list"], capture_output=True,
                         text=True, cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert (run.returncode, run.stderr) == (0, "")
    assert [ln.split()[0] for ln in run.stdout.splitlines()] == [t.name for t in discover(SUITES["heldout"])[0]]
    default = subprocess.run([sys.executable, "-m", "agent", "eval", "--list"], capture_output=True, text=True,
                             cwd=tmp_path, env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"}, timeout=60)
    assert [ln.split()[0] for ln in default.stdout.splitlines()] == [t.name for t in discover(SUITES["tasks"])[0]]
