"""Problems reported the way users write them: a crash with no verb for the fix routed to an edit, the command
the report names run without the prose after it, the value an error quotes traced to the data file's line it came
from, and the other files left alone once the reported failure is gone (the scripted engine, real files, the real
script run as the check)."""
from agent.pipeline.origin import value_origin
from agent.pipeline.quoted_runs import written_commands

SALES = "region,rep,amount\nnorth,ana,120.50\nsouth,bo,80.00\nnorth,cy,30.25\n"
TOTALS = ("import csv\nfrom collections import defaultdict\n\n\ndef main():\n    totals = defaultdict(float)\n"
          "    with open('sales.csv', newline='') as f:\n        for region, _rep, amount in csv.reader(f):\n"
          "            totals[region] += float(amount)\n    for region, total in sorted(totals.items()):\n"
          "        print(f'{region}: {total:.2f}')\n\n\nmain()\n")
FIXED = TOTALS.replace("        for region, _rep, amount in csv.reader(f):\n",
                       "        rows = csv.reader(f)\n        next(rows)\n        for region, _rep, amount in rows:\n")
REPORT = "python totals.py crashes with a ValueError. It should print the total of each region; sales.csv is right."


def test_the_quoted_value_is_found_as_a_whole_field_of_a_data_file(tmp_path):
    (tmp_path / "sales.csv").write_text(SALES)
    (tmp_path / "totals.py").write_text(TOTALS)
    files = [tmp_path / "totals.py", tmp_path / "sales.csv", tmp_path / "missing.csv"]
    crash = "Traceback (most recent call last):\n  ...\nValueError: could not convert string to float: 'amount'\n"
    assert value_origin(crash, files, tmp_path) == (
        "The value 'amount' in the ValueError comes from line 1 of sales.csv, its header row: `region,rep,amount`.")
    assert value_origin("E   KeyError: 'bo'", files, tmp_path) == (
        "The value 'bo' in the KeyError comes from line 3 of sales.csv: `south,bo,80.00`.")
    # Part of a field, a value only the code holds, or no exception line: nothing said.
    assert value_origin("KeyError: 'amo'", files, tmp_path) == ""
    assert value_origin("NameError: name 'defaultdict' is not defined", files, tmp_path) == ""
    assert value_origin("it printed 'amount'", files, tmp_path) == ""


def test_a_crash_report_is_fixed_with_the_row_it_came_from_in_the_request(pipeline_proj, pipeline_agent):
    (pipeline_proj / "sales.csv").write_text(SALES)
    (pipeline_proj / "totals.py").write_text(TOTALS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{FIXED}```"}])
    result = agent.run(REPORT)
    assert result.text == "Changed totals.py; `python totals.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce", "edit", "check", "answer"]
    asked = engine.requests[0].messages[-1]["content"]
    assert asked.startswith("The value 'amount' in the ValueError comes from line 1 of sales.csv, its header row")
    assert (pipeline_proj / "sales.csv").read_text() == SALES


def test_the_named_command_ends_where_the_prose_starts(tmp_path):
    (tmp_path / "fetch.py").write_text("print(1)\n")
    assert written_commands(tmp_path, "When I run python fetch.py I get KeyError 'timeout'.") == ["python fetch.py"]
    assert written_commands(tmp_path, "python fetch.py lists them Z to A") == ["python fetch.py"]
    assert written_commands(tmp_path, "python fetch.py --name Bob --limit 3 data.txt prints 2") == [
        "python fetch.py --name Bob --limit 3 data.txt"]


def test_once_the_reported_failure_is_gone_the_other_named_files_stay(pipeline_proj, pipeline_agent):
    settings = '{"url": "u"}\n'
    (pipeline_proj / "settings.json").write_text(settings)
    (pipeline_proj / "fetch.py").write_text("import json\n\ns = json.load(open('settings.json'))\n"
                                            "print(s['url'], s['timeout'])\n")
    fixed = "import json\n\ns = json.load(open('settings.json'))\nprint(s['url'], s.get('timeout', 30))\n"
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{fixed}```"},
                                                          {"text": '```json\n{"url": "u", "timeout": 30}\n```'}])
    result = agent.run("When I run python fetch.py I get KeyError 'timeout'; look at fetch.py and settings.json.")
    assert result.text == "Changed fetch.py; `python fetch.py` passed."
    assert len(engine.requests) == 1 and (pipeline_proj / "settings.json").read_text() == settings
    assert [s for s, _ in steps] == ["localize", "reproduce", "edit", "check", "answer"]


ROSTER = ('NAMES = ["Mia Okafor", "Leo Brandt", "Ben Adeyemi"]\n\n\ndef by_surname(names):\n'
          '    return sorted(names, key=lambda n: n.split()[-1], reverse=True)\n\n\n'
          'for n in by_surname(NAMES):\n    print(n)\n')


def test_the_output_a_request_calls_wrong_printed_again_is_no_fix(pipeline_proj, pipeline_agent):
    from agent.pipeline.checks import not_fixed
    report = "python roster.py lists them Z to A; it should list them A to Z by surname."
    before = "Mia Okafor\nLeo Brandt\nBen Adeyemi\n"
    assert not_fixed("python roster.py", before, "python roster.py", before, report).startswith("The output is the same")
    assert not_fixed("python roster.py", "Ben Adeyemi\n", "python roster.py", before, report) == ""
    assert not_fixed("python -m pytest -q", before, "python -m pytest -q", before, report) == ""  # tests judge
    assert not_fixed("python roster.py", before, "python roster.py", before, "Add a docstring to roster.py.") == ""
    (pipeline_proj / "roster.py").write_text(ROSTER)
    restyled = ROSTER.replace("for n in", "# the roster\nfor n in")
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{restyled}```"},
                                                          {"text": f"```python\n{ROSTER.replace('True', 'False')}```"}])
    result = agent.run(report)
    assert result.text == "Changed roster.py; `python roster.py` passed."
    assert [s for s, _ in steps] == ["localize", "reproduce", "edit", "check", "retry", "edit", "check", "answer"]
    assert "The output is the same as before the change" in engine.requests[1].messages[-1]["content"]
    assert "reverse=False" in (pipeline_proj / "roster.py").read_text()


def test_should_alone_runs_a_named_script_first_but_not_the_tests(pipeline_proj, pipeline_agent):
    (pipeline_proj / "calc.py").write_text("def add(a, b):\n    raise NotImplementedError\n")
    (pipeline_proj / "test_calc.py").write_text("from calc import add\n\n\ndef test_add():\n    assert add(2, 3) == 5\n")
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": "```python\ndef add(a, b):\n    return a + b\n```"}])
    result = agent.run("Write add in calc.py; it should return the sum. test_calc.py has the tests.")
    assert result.text == "Changed calc.py; `python -m pytest -q -x test_calc.py` passed."
    assert [s for s, _ in steps] == ["localize", "edit", "check", "answer"]


STORE = ("import json\nfrom dataclasses import dataclass\n\n\n@dataclass\nclass Note:\n    title: str\n"
         "    pinned: bool = False\n\n\ndef load():\n    return [n for n in json.load(open('notes.json'))]\n")
RENDER = "def render(notes):\n    return '\\n'.join(('* ' if n.pinned else '- ') + n.title for n in notes)\n"
MAIN = "from render import render\nfrom store import load\n\nprint(render(load()))\n"


def test_a_crash_in_deeper_code_than_the_script_named_edits_the_traceback_files_innermost_first(
        pipeline_proj, pipeline_agent):
    (pipeline_proj / "notes.json").write_text('[{"title": "tea", "pinned": true}, {"title": "rice"}]\n')
    (pipeline_proj / "store.py").write_text(STORE)
    (pipeline_proj / "render.py").write_text(RENDER)
    (pipeline_proj / "main.py").write_text(MAIN)
    fixed = RENDER.replace("n.pinned", "n.get('pinned')").replace("n.title", "n['title']")
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{fixed}```"}])
    result = agent.run("python main.py crashes: AttributeError: 'dict' object has no attribute 'pinned'")
    assert result.text == "Changed render.py; `python main.py` passed."
    assert ("locate", "render.py, store.py (from the traceback)") in steps  # then what the script imports
    assert [d for s, d in steps if s == "edit"] == ["render.py (whole file)"] and (pipeline_proj / "main.py").read_text() == MAIN


def test_library_frames_vanished_files_and_odd_names_are_no_suspects(tmp_path):
    from agent.pipeline.call_trace import traceback_files
    (tmp_path / "main.py").write_text(MAIN)
    (tmp_path / "render.py").write_text(RENDER)
    venv = tmp_path / ".venv" / "lib" / "python3.11" / "site-packages"
    venv.mkdir(parents=True)
    (venv / "x.py").write_text("")
    out = (f'Traceback (most recent call last):\n  File "{tmp_path}/main.py", line 4, in <module>\n'
           '  File "render.py", line 2, in render\n  File "/usr/lib/python3.12/json/__init__.py", line 1, in loads\n'
           f'  File "{venv}/x.py", line 1, in f\n  File "{"a" * 300}.py", line 1, in g\n'
           '  File "bad\x00name.py", line 1, in h\n'
           f'  File "{tmp_path}/gone.py", line 3, in f\nAttributeError: x\n')
    assert traceback_files(out, tmp_path) == [tmp_path / "render.py", tmp_path / "main.py"]


def test_tests_said_to_fail_with_none_named_make_the_modules_they_import_the_suspects(tmp_path):
    from agent.pipeline.localize import localize
    from agent.pipeline.route import plan_request
    (tmp_path / "report").mkdir()
    (tmp_path / "report" / "durations.py").write_text("def fmt(s):\n    return str(s % 3600)\n")
    (tmp_path / "report" / "table.py").write_text("from report.durations import fmt\n")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_durations.py").write_text("from report.durations import fmt\n\n\ndef test_fmt():\n"
                                                          "    assert fmt(65) == '5'\n")
    request = "The tests under tests/ fail. The bug is somewhere in the report package; the tests are right."
    plan = plan_request(request, localize(tmp_path, request), tmp_path)
    assert plan.kind == "edit" and plan.targets == [(tmp_path / "report" / "durations.py").resolve()]
    asked = "Do the tests under tests/ fail?"
    assert plan_request(asked, localize(tmp_path, asked), tmp_path).kind != "edit"


def test_fail_alone_is_a_failure_stated_after_its_subject_not_a_condition_or_a_run():
    from agent.pipeline.route import wants_edit
    for stated in ("The tests fail.", "My tests fail after the upgrade.", "The tests under tests/ fail."):
        assert wants_edit(stated), stated
    for asked in ("Run the tests and see if any fail.", "Run pytest; some tests fail.",
                  "Commit the changes even if the hooks fail.", "Run the linter; let me know if checks fail.",
                  "Make sure the deploy does not fail silently.", "Check that the build does not fail on CI.",
                  "Run git bisect to find the commit where the tests started to fail.",
                  "Find out which tests fail.", "Report which of the tests still fail."):
        assert not wants_edit(asked), asked


def test_a_crash_in_the_targeted_module_called_by_a_test_adds_no_suspects(pipeline_proj, pipeline_agent):
    (pipeline_proj / "stats.py").write_text("from fmt import pct\n\n\ndef mean(xs):\n    return sum(xs) / len(xs)\n")
    (pipeline_proj / "fmt.py").write_text("def pct(x):\n    return f'{x:.0%}'\n")
    (pipeline_proj / "test_stats.py").write_text("import unittest\n\nfrom stats import mean\n\n\n"
                                                 "class T(unittest.TestCase):\n    def test_empty(self):\n"
                                                 "        self.assertEqual(mean([]), 0)\n")
    fixed = "from fmt import pct\n\n\ndef mean(xs):\n    return sum(xs) / len(xs) if xs else 0\n"
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{fixed}```"}])
    from agent.pipeline.quoted_runs import run_files
    assert run_files(pipeline_proj, "python -m unittest -v test_stats.T.test_empty fmt crashes in stats") == [
        pipeline_proj / "test_stats.py", pipeline_proj / "fmt.py"]  # a test module named, not a path; prose ends it
    for asked in ("run `python -m unittest --verbose test_stats` please", "python -m unittest -k empty test_stats"):
        assert run_files(pipeline_proj, asked) == [pipeline_proj / "test_stats.py"], asked  # options and their values
    result = agent.run("`python -m unittest test_stats` crashes with ZeroDivisionError. Fix stats.py.")
    assert result.text.startswith("Changed stats.py") and not any(s == "locate" for s, _ in steps)  # fmt.py is no suspect


FIND = ('import sys\n\nfrom search import search\n\nNOTES = [{"title": "Dentist", "body": "check-up"}]\n'
        'titles = search(NOTES, " ".join(sys.argv[1:]))\nprint("\\n".join(titles) or "no notes found")\n')
SEARCH = ('def matches(note, query):\n    haystack = (note["title"] + " " + note["body"]).lower()\n'
          '    return all(word in haystack for word in query.split())\n\n\n'
          'def search(notes, query):\n    return [n["title"] for n in notes if matches(n, query)]\n')
SEARCH_TESTS = ('from search import search\n\n\ndef test_any_case():\n'
                '    assert search([{"title": "Packing", "body": ""}], "Packing") == ["Packing"]\n')
SYMPTOM = 'python find.py Dentist says "no notes found", but python find.py dentist does find my Dentist note.'


def test_a_plain_word_before_a_verb_is_the_commands_argument(tmp_path):
    from agent.pipeline.checks import reports_failure
    (tmp_path / "find.py").write_text(FIND)
    assert written_commands(tmp_path, SYMPTOM) == ["python find.py Dentist", "python find.py dentist"]
    assert written_commands(tmp_path, "python find.py Dentist.") == ["python find.py"]  # no verb: prose ends it
    assert reports_failure(SYMPTOM) and reports_failure('python find.py prints "0", but I have 3 notes')
    assert not reports_failure('python find.py prints "Dentist" for me.')


def test_a_scripts_tests_are_those_of_what_it_imports_and_that_module_is_fixed_first(pipeline_proj, pipeline_agent):
    (pipeline_proj / "find.py").write_text(FIND)
    (pipeline_proj / "search.py").write_text(SEARCH)
    (pipeline_proj / "test_search.py").write_text(SEARCH_TESTS)
    fixed = SEARCH.replace("query.split()", "query.lower().split()")
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{fixed}```"}])
    result = agent.run(SYMPTOM)
    assert result.text == "Changed search.py; `python find.py dentist` passed."
    # The script runs cleanly (its output is no failure to go by); the tests of what it imports fail
    assert [d for s, d in steps if s == "reproduce"] == ["python find.py Dentist", "python -m pytest -q -x test_search.py"]
    assert ("locate", "search.py (what the failing tests test)") in steps
    assert [d for s, d in steps if s == "edit"] == ["search.py (whole file)"]
    # search.py a target now, its tests come first
    assert [d for s, d in steps if s == "check"] == ["python -m pytest -q -x test_search.py",
                                                     "python find.py Dentist", "python find.py dentist"]
    assert (pipeline_proj / "find.py").read_text() == FIND


def test_a_scripts_own_crash_is_reproduced_before_the_tests_of_what_it_imports(pipeline_proj, pipeline_agent):
    (pipeline_proj / "find.py").write_text(FIND.replace('" ".join(sys.argv[1:])', "sys.argv[1]"))
    (pipeline_proj / "search.py").write_text(SEARCH.replace("query.split()", "query.lower().split()"))
    (pipeline_proj / "test_search.py").write_text(SEARCH_TESTS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"text": f"```python\n{FIND}```"}])
    result = agent.run("python find.py crashes with an IndexError when I give it no words.")
    assert [d for s, d in steps if s == "reproduce"] == ["python find.py"]  # it failed: the tests are not run first
    assert result.text == "Changed find.py; `python -m pytest -q -x test_search.py` passed."
