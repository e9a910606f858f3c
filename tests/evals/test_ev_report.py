"""Summaries (pass rate, pass^k), the table and the atomic JSON write."""
import json

from evals.report import build_report, format_table, summarize, write_report
from evals.runner import EvalOptions
from evals.task import Task


def tri(passed, **kw):
    base = {"passed": passed, "reason": "" if passed else "nope", "turns": 2, "tool_calls": 1, "malformed_calls": 0,
            "text_calls": 0, "reused_tokens": 10, "prefilled_tokens": 5, "drafted_tokens": 0, "accepted_tokens": 0,
            "output_tokens": 3, "wall_s": 1.0}
    return {**base, **kw}


def test_pass_rate_and_pass_k_differ_when_tries_disagree(tmp_path):
    tasks = [Task(name=n, dir=tmp_path, prompt="p") for n in ("a", "b", "c")]
    records = {"a": [tri(True), tri(True), tri(True)],
               "b": [tri(True), tri(False, malformed_calls=2), tri(True)],
               "c": [tri(False), tri(False, prompts=[{"exit": "exit 1", "stop_reason": "timeout"}]),
                     tri(False, text_calls=1, prompts=[{"exit": "killed after 390s", "stop_reason": None}])]}
    report = build_report(EvalOptions(repeat=3), tasks, records, [{"name": "d", "reason": "why"}], 0.0, tmp_path)
    s = report["summary"]
    assert (s["tasks"], s["tries"], s["passed_tries"], s["pass_rate"], s["pass_all_tasks"], s["pass^3"]) == \
        (3, 9, 5, 0.5556, 1, 0.3333)
    assert (s["total_malformed_calls"], s["total_text_calls"], s["total_wall_s"]) == (2, 1, 9.0)
    assert s["timed_out_tries"] == 2
    b = report["tasks"][1]
    assert (b["passed"], b["all_passed"], b["mean_malformed_calls"]) == (2, False, 0.67)
    assert report["meta"]["out_dir"] == str(tmp_path) and report["meta"]["repeat"] == 3


def test_empty_summary_has_zero_rates():
    s = summarize([], 1)
    assert (s["tasks"], s["pass_rate"], s["pass^1"]) == (0, 0.0, 0.0)


def test_table_has_one_row_per_task_then_skips_and_summary(tmp_path):
    tasks = [Task(name="read-x", dir=tmp_path, prompt="p")]
    report = build_report(EvalOptions(), tasks, {"read-x": [tri(True, wall_s=12.5)]},
                          [{"name": "bad", "reason": "the verifier passes"}], 0.0, tmp_path)
    assert format_table(report).splitlines() == [
        "task    pass  turns  calls  bad  txt  reused  prefill  drafted  accept  cands  wall_s",
        "-" * 85,
        "read-x   1/1      2      1    0    0      10        5        0       0      -    12.5",
        "skipped bad: the verifier passes",
        "pass rate 1/1 tries (100.0%); pass^1 1/1 tasks (100.0%); malformed calls 0, calls written as text 0; "
        "timed out 0; wall 12s",
    ]


def test_first_round_candidates_are_summed_per_task_and_in_the_summary(tmp_path):
    tasks = [Task(name=n, dir=tmp_path, prompt="p") for n in ("stub-a", "read-b")]
    records = {"stub-a": [tri(True, first_candidates=4, first_passed=1), tri(False, first_candidates=4, first_passed=0)],
               "read-b": [tri(True), tri(True)]}
    report = build_report(EvalOptions(repeat=2), tasks, records, [], 0.0, tmp_path)
    rows = format_table(report).splitlines()
    assert rows[0].split()[-2:] == ["cands", "wall_s"]
    assert rows[2].split()[-2] == "1/8" and rows[3].split()[-2] == "-"
    assert rows[-1].endswith("; first-round candidates passed 1/8")
    assert (report["summary"]["total_first_candidates"], report["summary"]["total_first_passed"]) == (8, 1)


def test_write_report_is_atomic_and_leaves_no_temp_file(tmp_path):
    path = tmp_path / "out" / "report.json"
    write_report({"a": 1}, path)
    write_report({"a": 2}, path)
    assert json.loads(path.read_text()) == {"a": 2}
    assert sorted(p.name for p in path.parent.iterdir()) == ["report.json"]


def test_categories_are_counted_and_shown_before_the_summary(tmp_path):
    tasks = [Task(name="s1", dir=tmp_path, prompt="p", tags=["stub", "test"]),
             Task(name="s2", dir=tmp_path, prompt="p", tags=["stub"]),
             Task(name="c1", dir=tmp_path, prompt="p", tags=["config"]),
             Task(name="r1", dir=tmp_path, prompt="p", tags=["read"])]
    records = {"s1": [tri(True)], "s2": [tri(False)], "c1": [tri(True)], "r1": [tri(True)]}
    report = build_report(EvalOptions(), tasks, records, [], 0.0, tmp_path)
    assert report["categories"] == {"stub": {"tasks": 2, "tries": 2, "passed_tries": 1},
                                    "config": {"tasks": 1, "tries": 1, "passed_tries": 1}}
    assert [r["category"] for r in report["tasks"]] == ["stub", "stub", "config", None]
    assert format_table(report).splitlines()[-2] == "by category: stub 1/2, config 1/1"
