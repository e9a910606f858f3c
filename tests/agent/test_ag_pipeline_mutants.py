"""One-expression repairs: the changes offered in the functions a failing test runs, and the harness checking them
after the model's rounds failed. Real files, real pytest runs (the call trace too), the scripted engine."""
from pathlib import Path

import pytest

from agent.core.permissions import Permissions
from agent.core.profile import ProfileError, choose_profile
from agent.pipeline import tries
from agent.pipeline.mutants import Mutant
from agent.pipeline.mutations import function_mutants
from hooks.settings import PermissionSettings, SourcedRule

LOADER = ('"""Station readings."""\nimport csv\n\n\ndef load_readings(path):\n    """(station, celsius) rows."""\n'
          '    with open(path, newline="") as f:\n        reader = csv.reader(f)\n        next(reader)\n'
          '        rows = list(reader)\n    return [(s, float(c)) for s, c in rows[1:]]\n')
STATS = ("from loader import load_readings\n\n\ndef mean_celsius(path):\n    readings = load_readings(path)\n"
         "    return round(sum(c for _, c in readings) / len(readings), 2)\n")
TESTS = ("from pathlib import Path\n\nfrom stats import mean_celsius\n\n\ndef test_mean(tmp_path):\n"
         "    p = tmp_path / 'r.csv'\n    p.write_text('station,celsius\\na,10\\nb,20\\nc,60\\n')\n"
         "    assert mean_celsius(p) == 30\n")
WRONG = LOADER.replace("rows[1:]", "rows[2:]")
REQUEST = "test_stats.py fails: the mean is off. Fix the bug in loader.py without changing the tests."


def block(text):
    return {"text": f"```python\n{text}```"}


@pytest.fixture
def proj(pipeline_proj):
    (pipeline_proj / "loader.py").write_text(LOADER)
    (pipeline_proj / "stats.py").write_text(STATS)
    (pipeline_proj / "test_stats.py").write_text(TESTS)
    return pipeline_proj


def changes(source, names):
    return [(line, before, after) for line, before, after, _ in function_mutants(source, names)]


def test_the_changes_offered_keep_the_rest_of_the_file_as_it_was_spelled():
    source = ('def f(xs, n, ok=True):\n    """Docs 1."""\n    if not (n > 0 and ok) or n is not None:\n'
              '        n -= 1\n    return [x for x in xs[n - 1:len(xs)] if x not in (1, -2)] + [f"{n + 1}"]\n')
    found = changes(source, ["f"])
    for want in [(3, "n > 0 and ok", "n > 0 or ok"), (3, "n > 0", "n >= 0"), (3, "n is not None", "n is None"),
                 (3, "not (n > 0 and ok)", "(n > 0 and ok)"), (4, "n -= 1", "n += 1"), (5, "xs[n - 1:len(xs)]", "xs"),
                 (5, "xs[n - 1:len(xs)]", "xs[:len(xs)]"), (5, "len(xs)", "len(xs) - 1"), (5, "-2", "-3"),
                 (5, "x not in (1, -2)", "x in (1, -2)"), (5, "n - 1", "n + 1")]:
        assert want in found
    assert (5, "n - 1", "n - 1 + 1") not in found  # its 1 changes by itself
    assert not any(before in ("1", "n + 1") and line == 5 and "f\"" in after for line, before, after in found)
    assert not any("Docs" in before for _, before, _ in found)  # not the docstring
    assert not any(after == "0" and before == "1" and line == 2 for line, before, after in found)
    for _, _, _, content in function_mutants(source, ["f"]):
        compile(content, "f.py", "exec")
        assert sum(a != b for a, b in zip(content.splitlines(), source.splitlines())) == 1


def test_methods_are_found_by_qualified_name_and_min_max_and_range_bounds_change():
    source = ("class Plan:\n    def waits(self, base, attempts, cap):\n"
              "        return [min(base * 2 ** i, cap) for i in range(1, attempts)]\n\n\n"
              "def other():\n    return 1\n")
    found = changes(source, ["Plan.waits", "missing", "Plan"])
    assert (3, "min", "max") in found and (3, "1", "0") in found and (3, "attempts", "attempts + 1") in found
    assert all(line == 3 for line, _, _ in found)  # only the named method; a class or a missing name offers none
    assert changes("def broken(:\n", ["broken"]) == []


def test_brackets_undo_a_precedence_slip_and_a_bucket_counts_from_one():
    source = ("def to_c(f):\n    return f - 32 * 5 / 9\n\n\ndef cost(a, b, c):\n    return a * b + c\n\n\n"
              "def week(day):\n    return day.day // 7 + 1\n\n\ndef kept(x):\n    return x - (2 * 3)\n")
    found = changes(source, ["to_c", "cost", "week", "kept"])
    for want in [(2, "f - 32 * 5 / 9", "(f - 32) * 5 / 9"), (6, "a * b + c", "a * (b + c)"),
                 (10, "day.day", "(day.day - 1)"), (10, "day.day", "(day.day + 1)")]:
        assert want in found, want
    assert not any(line == 14 and "(x - " in after for line, _, after in found)  # bracketed already: kept
    fixed = next(c for line, _, after, c in function_mutants(source, ["week"]) if after == "(day.day - 1)")
    namespace = {}
    exec(fixed, namespace)
    assert [namespace["week"](type("D", (), {"day": d})) for d in (1, 7, 8, 14, 29)] == [1, 1, 2, 2, 5]


def test_a_cut_makes_room_for_what_it_appends_and_a_heap_priority_is_negated():
    source = ("import heapq\n\n\ndef cut(text, width, marker='...'):\n    return text[:width] + marker\n\n\n"
              "def push(heap, item, priority, order):\n    heapq.heappush(heap, (priority, order, item))\n"
              "    heapq.heappush(heap, priority)\n\n\ndef styled(text, n):\n    return text[:n] + f'{n}'\n")
    found = changes(source, ["cut", "push", "styled"])
    for want in [(5, "width", "width - len(marker)"), (9, "priority", "-priority"), (10, "priority", "-priority")]:
        assert want in found, want
    assert not any(line == 14 and "len(" in after for line, _, after in found)  # an f-string is no marker
    clock = "def split(t):\n    return t // 3600, t % 3600 // 60, t % 3600\n"
    found = changes(clock, ["split"])
    assert (2, "3600", "60") in found and (2, "60", "3600") in found
    negated = changes("import heapq\n\n\ndef push(h, n, w):\n    heapq.heappush(h, (-n, w))\n", ["push"])
    assert (5, "-n", "n") in negated and not any("-(-n)" in after for _, _, after in negated)
    many = "def cut(text, width, marker):\n    return text[:width] + marker + str(3 * 7 % 60)\n"
    order = [after for _, _, after in changes(many, ["cut"])]
    made_room = order.index("width - len(marker)")
    assert all(made_room < order.index(n) for n in ("7", "60") if n in order) and "60" in order  # swaps come last
    fixed = next(c for line, _, after, c in function_mutants(source, ["cut"]) if "len(marker)" in after)
    namespace = {}
    exec(fixed, namespace)
    assert namespace["cut"]("hello world", 8) == "hello..." and namespace["cut"]("abcdefgh", 5, "~") == "abcd~"


def test_a_form_feed_line_leaves_the_changes_on_the_lines_ast_gives():
    source = "def f(xs):\n    return xs[1:]\n\f\n\ndef g(n):\n    return n + 1\n"
    found = function_mutants(source, ["g"])
    assert (6, "n + 1", "n - 1") in [(line, b, a) for line, b, a, _ in found]
    assert all(c.count("\f") == 1 and c.startswith("def f(xs):\n    return xs[1:]\n") for *_, c in found)
    assert next(c for line, b, a, c in found if a == "n - 1").endswith("return n - 1\n")


def test_arguments_swap_orders_reverse_indexes_move_and_a_repeated_action_is_deleted():
    source = ("import csv\n\n\ndef load(path, xs, i):\n    with open(path) as f:\n        reader = csv.reader(f)\n"
              "        next(reader)\n        rows = list(reader)\n    parts = divmod(len(rows), 3)\n"
              "    xs.sort(key=len)\n    return sorted(rows), xs[i], parts\n\n\ndef one(f):\n    next(f)\n")
    found = changes(source, ["load", "one"])
    for want in [(9, "divmod(len(rows), 3)", "divmod(3, len(rows))"), (11, "i", "i + 1"),
                 (10, "xs.sort(key=len)", "xs.sort(key=len, reverse=True)"),
                 (11, "sorted(rows)", "sorted(rows, reverse=True)"),
                 (7, "next(reader)", "(the line deleted)"), (10, "xs.sort(key=len)", "(the line deleted)")]:
        assert want in found, want
    # not a binding, and not a block's only statement
    assert not any(after == "(the line deleted)" and line in (6, 8, 15) for line, _, after in found)
    deleted = next(c for line, _, after, c in function_mutants(source, ["load"]) if line == 7 and after.startswith("("))
    assert "next(reader)" not in deleted and deleted.count("\n") == source.count("\n") - 1


def test_a_failure_the_models_rounds_left_is_fixed_by_one_checked_change_in_the_traced_callee(proj, pipeline_agent):
    agent, engine, steps = pipeline_agent(proj, [block(WRONG)] * 3, mutants=True)
    result = agent.run(REQUEST)
    assert len(engine.requests) == 3  # the model's rounds ran first
    assert result.text == ("Changed loader.py (line 11: `rows[1:]` -> `rows`); "
                           "`python -m pytest -q -x test_stats.py` passed.")
    assert (proj / "loader.py").read_text() == LOADER.replace("rows[1:]", "rows")
    shown = [d for s, d in steps if s == "mutants"]
    assert len(shown) == 1 and shown[0].endswith("passed: loader.py:11 `rows[1:]` -> `rows`")
    writes = [m for m in agent.session.messages if m.get("tool_calls") and
              m["tool_calls"][0]["function"]["name"] == "Write"]
    assert writes[-1]["tool_calls"][0]["function"]["arguments"]["content"] == (proj / "loader.py").read_text()


def test_when_no_change_passes_every_file_is_left_as_it_was(proj, pipeline_agent):
    (proj / "test_stats.py").write_text(TESTS.replace("== 30", "== 31.5"))  # no one-expression change makes 31.5
    agent, _, steps = pipeline_agent(proj, [block(WRONG)] * 3, mutants=True)
    result = agent.run(REQUEST)
    assert result.text.startswith("loader.py: not changed; ")
    assert (proj / "loader.py").read_text() == LOADER and (proj / "stats.py").read_text() == STATS
    assert [d for s, d in steps if s == "mutants"][0].endswith("none passed")


def test_no_change_is_checked_past_the_runs_deadline_for_checks(proj, pipeline_agent, monkeypatch):
    agent, _, steps = pipeline_agent(proj, [block(WRONG)] * 3, mutants=True)
    monkeypatch.setattr(tries, "CHECKS_RESERVE_S", 100.0)  # the checks' deadline passes in the model's rounds
    agent.config.max_wall_s = 100.5
    result = agent.run(REQUEST)
    assert result.stop_reason == "end_turn" and result.text.startswith("loader.py: not changed; ")
    assert [d for s, d in steps if s == "mutants"] == ["0 one-expression changes checked, none passed"]
    assert (proj / "loader.py").read_text() == LOADER


def test_no_change_is_tried_without_a_runnable_check_or_when_the_model_fixed_it(proj, pipeline_agent):
    agent, _, steps = pipeline_agent(proj, [block(WRONG)] * 3, mutants=True)
    agent.permissions.rules["allow"].clear()  # Bash needs asking: nothing reproduced, nothing to check against
    agent.run(REQUEST)
    assert not any(s == "mutants" for s, _ in steps)
    fixed = LOADER.replace("rows[1:]", "rows")
    agent, _, steps = pipeline_agent(proj, [block(fixed)], mutants=True)
    assert agent.run(REQUEST).text.startswith("Changed loader.py;")
    assert not any(s == "mutants" for s, _ in steps)


def test_the_small_profile_tries_one_expression_changes_and_settings_may_turn_them_off():
    assert choose_profile(None, "small").mutants is True and choose_profile(None, "default").mutants is False
    assert choose_profile(None, {"name": "small", "mutants": False}).mutants is False
    with pytest.raises(ProfileError, match="mutants must be true or false"):
        choose_profile(None, {"name": "small", "mutants": "yes"})


STUB = ('def clamp(x, lo, hi):\n    raise NotImplementedError\n\n\ndef last(xs, n):\n    """The last n items."""\n'
        '    raise NotImplementedError\n')
NEAR = ('def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n\n\ndef last(xs, n):\n    """The last n items."""\n'
        '    return xs[-n + 1:]\n')
STUB_TESTS = ("from tools import clamp, last\n\n\ndef test_low():\n    assert clamp(-3, 0, 5) == 0\n\n\n"
              "def test_high():\n    assert clamp(9, 0, 5) == 5\n\n\ndef test_last():\n"
              "    assert last([1, 2, 3, 4], 2) == [3, 4]\n")


def test_a_candidate_that_came_near_has_its_one_expression_changes_checked_once(pipeline_proj, pipeline_agent):
    (pipeline_proj / "tools.py").write_text(STUB)
    (pipeline_proj / "test_tools.py").write_text(STUB_TESTS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"candidates": [f"{NEAR}```", "x = (```"]}], tries=2,
                                          mutants=True)
    agent.driver.config.repairs = 0
    result = agent.run("Implement the stubs in tools.py so that the tests in test_tools.py pass.")
    assert result.text == ("Changed tools.py (line 7: `1` -> `0`); "
                           "`python -m pytest -q -x test_tools.py` passed.")
    assert (pipeline_proj / "tools.py").read_text() == NEAR.replace("-n + 1", "-n + 0")
    assert ("tries", "2 candidates, 0 passed (the nearest passed 2 tests), applied #1") in steps
    assert len(engine.requests) == 1


def test_a_candidate_far_from_passing_gets_no_changes_checked(pipeline_proj, pipeline_agent):
    (pipeline_proj / "tools.py").write_text(STUB)
    (pipeline_proj / "test_tools.py").write_text(STUB_TESTS)
    far = NEAR.replace("max(lo, min(x, hi))", "max(lo, x)")  # passes one test of three
    agent, _, steps = pipeline_agent(pipeline_proj, [{"candidates": [f"{far}```"]}], tries=2, mutants=True)
    agent.driver.config.repairs = 0
    result = agent.run("Implement the stubs in tools.py so that the tests in test_tools.py pass.")
    assert result.text.startswith("tools.py: not changed") and (pipeline_proj / "tools.py").read_text() == STUB
    assert not any(s == "mutants" for s, _ in steps)


def test_a_test_file_is_never_changed_until_it_passes(pipeline_proj, pipeline_agent):
    (pipeline_proj / "tools.py").write_text(NEAR.replace("-n + 1", "-n"))
    (pipeline_proj / "test_tools.py").write_text(STUB_TESTS)
    wrong = STUB_TESTS + "\n\ndef test_clamp_inside():\n    assert clamp(3, 0, 5) == 4\n"  # `4` -> `3` would pass
    agent, _, steps = pipeline_agent(pipeline_proj, [{"candidates": [f"{wrong}```"]}], tries=2, mutants=True)
    agent.driver.config.repairs = 0
    result = agent.run("Add a test for clamp inside the bounds to test_tools.py.")
    assert not any(s == "mutants" for s, _ in steps)
    # characterize.py, not a one-expression change: the new test's expected value is the one the code gives
    assert result.text.startswith("Changed test_tools.py (line 17 expects 3, the values the code gives)")


def test_the_changes_come_before_the_next_suspect_and_reach_every_file_the_test_runs(proj, pipeline_agent):
    wrong_stats = STATS.replace(", 2)", ", 1)")
    agent, engine, steps = pipeline_agent(proj, [{"text": "The bug is in `stats.py`."}] + [block(wrong_stats)] * 3,
                                          mutants=True)
    result = agent.run("test_stats.py fails: the mean is off. Find the bug and fix it.")
    # the model's pick gets one round (repairs are on), then the changes
    assert ("locate", "stats.py (of stats.py, loader.py)") in steps and len(engine.requests) == 2
    assert [d for s, d in steps if s == "edit"] == ["stats.py (whole file)"]
    assert result.text.startswith("Changed loader.py (line 11: `rows[1:]` -> `rows`)")
    assert not any(detail.endswith("(next suspect)") for _, detail in steps)
    assert (proj / "stats.py").read_text() == STATS


def test_a_file_the_rules_keep_from_edits_is_never_changed_even_to_check(proj, pipeline_agent):
    # The request's file is stats.py; the failing test also runs loader.py, which a deny rule keeps from edits
    agent, _, steps = pipeline_agent(proj, [block(STATS.replace(", 2)", ", 1)"))] * 3, mutants=True)
    agent.permissions = Permissions(PermissionSettings(allow=[SourcedRule("Bash", "test")],
                                                       deny=[SourcedRule("Edit(loader.py)", "test")]),
                                    "acceptEdits", proj)
    result = agent.run("test_stats.py fails: the mean is off. Fix the bug in stats.py.")
    assert result.text.startswith("stats.py: not changed")
    assert [d for s, d in steps if s == "mutants"][0].endswith("none passed")  # stats.py's changes only
    assert (proj / "loader.py").read_text() == LOADER and (proj / "stats.py").read_text() == STATS


def test_a_script_s_wrong_output_gets_changes_in_the_modules_it_imports_too(proj, pipeline_agent):
    report = ('"""Print the mean of r.csv."""\nfrom loader import load_readings\n\n\ndef main():\n'
              '    readings = load_readings("r.csv")\n'
              '    print(f"mean {sum(c for _, c in readings) / len(readings):.1f}")\n\n\nmain()\n')
    (proj / "report.py").write_text(report)
    (proj / "r.csv").write_text("station,celsius\na,10\nb,20\nc,60\n")
    miss = report.replace(":.1f}", ":.2f}")  # the model's rounds change the script; the bug is in loader.py
    agent, _, steps = pipeline_agent(proj, [block(miss)] * 4, mutants=True)
    result = agent.run('python report.py prints "mean 40.0" but it should print "mean 30.0". Fix it.')
    assert result.text.startswith("Changed loader.py (line 11: `rows[1:]` -> `rows`)"), steps
    assert (proj / "report.py").read_text() == report
    assert (proj / "loader.py").read_text() == LOADER.replace("rows[1:]", "rows")


BATCHES = ('def batched(rows, size):\n    """The rows in lists of `size` rows each; the last may be shorter."""\n'
           '    batches, current = [], []\n    for row in rows:\n        current.append(row)\n'
           '        if len(current) == size:\n            batches.append(current)\n            current.clear()\n'
           '    if current:\n        batches.append(current)\n    return batches\n')


def test_a_list_appended_and_then_cleared_is_appended_as_a_copy(pipeline_proj, pipeline_agent):
    assert (7, "current", "current.copy()") in changes(BATCHES, ["batched"])
    assert not any(after.endswith(".copy()") for _, _, after in changes("def f(xs):\n    xs.append(len(xs))\n", ["f"]))
    (pipeline_proj / "batches.py").write_text(BATCHES)
    (pipeline_proj / "test_batches.py").write_text("from batches import batched\n\n\ndef test_two():\n"
                                                   "    assert batched([1, 2, 3], 2) == [[1, 2], [3]]\n")
    miss = BATCHES.replace("current.clear()", "del current[:]")
    agent, _, steps = pipeline_agent(pipeline_proj, [block(miss)] * 4, mutants=True)
    result = agent.run("test_batches.py fails. Fix the bug; the tests are right.")
    assert result.text.startswith("Changed batches.py (line 7: `current` -> `current.copy()`)"), steps
    assert (pipeline_proj / "batches.py").read_text() == BATCHES.replace("append(current)\n            current.clear",
                                                                         "append(current.copy())\n            current.clear")


PARSE = ('def parse(lines):\n    """{name: value} for "name: value" lines."""\n    out = {}\n    for line in lines:\n'
         '        name, value = line.split(":")\n        out[name.strip()] = value.strip()\n    return out\n')
SHOW = ('from parse import parse\n\n\ndef main():\n    with open("data.txt") as f:\n'
        '        fields = parse(f.read().splitlines())\n    print(fields["host"])\n\n\nmain()\n')


def test_a_crash_gets_the_changes_before_the_next_target_and_a_split_stops_at_the_first_colon(pipeline_proj,
                                                                                               pipeline_agent):
    assert (5, 'line.split(":")', 'line.split(":", 1)') in changes(PARSE, ["parse"])
    (pipeline_proj / "parse.py").write_text(PARSE)
    (pipeline_proj / "show.py").write_text(SHOW)
    (pipeline_proj / "data.txt").write_text("host: example.org:8080\nuser: ann\n")
    miss = PARSE.replace("out[name.strip()]", "out[name.strip().lower()]")  # still splits at every colon
    agent, _, steps = pipeline_agent(pipeline_proj, [block(miss)] * 6, mutants=True)
    result = agent.run("python show.py crashes on data.txt. Fix the crash.")
    assert ("locate", "parse.py (from the traceback)") in steps
    assert result.text.startswith('Changed parse.py (line 5: `line.split(":")` -> `line.split(":", 1)`)'), steps
    assert not any(detail.startswith("show.py") for s, detail in steps if s == "edit")  # the next target: not needed
    assert (pipeline_proj / "show.py").read_text() == SHOW


SHOP = ('def is_open(hour):\n    return 9 <= hour <= 18\n\n\ndef hours_left(hour):\n'
        '    return 18 - hour if is_open(hour) else 0\n')
HOURS = ('from shop import hours_left, is_open\n\nfor hour in (8, 17, 18):\n'
         '    print(f"{hour}:00 open ({hours_left(hour)} h left)" if is_open(hour) else f"{hour}:00 closed")\n')


def test_a_wrong_line_with_the_line_it_should_be_tries_the_changes_before_the_model(proj, pipeline_agent):
    (proj / "shop.py").write_text(SHOP)
    (proj / "hours.py").write_text(HOURS)
    caller = HOURS.replace("if is_open(hour)", "if is_open(hour) and hours_left(hour)")  # a patch in the caller
    agent, engine, steps = pipeline_agent(proj, [block(caller)], mutants=True)
    result = agent.run('python hours.py prints "18:00 open (0 h left)", but we close at 18, so that line should '
                       'read "18:00 closed".')
    assert result.text == "Changed shop.py (line 2: `9 <= hour <= 18` -> `9 <= hour < 18`); `python hours.py` passed."
    assert engine.requests == [] and (proj / "hours.py").read_text() == HOURS
    assert [s for s, _ in steps] == ["localize", "reproduce", "mutants", "check", "answer"]


TIMEFMT = ('def format_duration(seconds):\n    hours = seconds // 3600\n    minutes = seconds // 60\n'
           '    return f"{hours}h {minutes:02d}m" if hours else f"{minutes}m"\n')
SUMMARY = ('from timefmt import format_duration\n\nfor name, s in [("lint", 95), ("build", 7325), ("test", 4380)]:\n'
           '    print(f"{name}: {format_duration(s)}")\n')


def test_changes_tried_first_keep_the_other_lines_exactly_or_the_model_writes_the_fix(proj, pipeline_agent):
    from agent.pipeline.checks import output_drifts
    kept, wrong, want = ("lint: 1m", "test: 1h 73m"), "build: 2h 122m", "build: 2h 02m"
    # `// 60` -> `// 3600` prints the wanted line, and moves the others the same way: enough later, not first
    assert not output_drifts("lint: 0m\nbuild: 2h 02m\ntest: 1h 01m\n", want, kept, wrong)
    assert output_drifts("lint: 0m\nbuild: 2h 02m\ntest: 1h 01m\n", want, kept, wrong, strict=True)
    assert not output_drifts("Fri 18:00 closed\nSat 14:00 closed\n", "Fri 18:00 closed", ("Sat 14:00 open (0 min left)",),
                             "Fri 18:00 open (0 min left)", strict=True)
    (proj / "timefmt.py").write_text(TIMEFMT)
    (proj / "summary.py").write_text(SUMMARY)
    fixed = TIMEFMT.replace("seconds // 60", "seconds % 3600 // 60")
    agent, engine, steps = pipeline_agent(proj, [block(fixed)], mutants=True)
    result = agent.run('python summary.py prints "build: 2h 122m" but it should print "build: 2h 02m". Fix the bug; '
                       'summary.py is right as it is.')
    assert result.text == "Changed timefmt.py; `python summary.py` passed."
    assert [s for s, _ in steps][:4] == ["localize", "reproduce", "mutants", "edit"] and len(engine.requests) == 1


def test_what_a_function_does_to_one_value_is_done_to_a_parameter_it_left_bare():
    source = ('def normalize(text):\n    return " ".join(text.lower().split())\n\n\ndef matches(note, query):\n'
              '    haystack = normalize(note)\n    return all(w in haystack for w in query.split())\n\n\n'
              'def same(a, b):\n    return a.strip() == b\n')
    changed = {(before, after) for _, before, after, _ in function_mutants(source, ["matches", "same"])}
    assert ("query", "normalize(query)") in changed and ("b", "b.strip()") in changed
    assert ("note", "normalize(note)") not in changed and ("a", "a.strip()") not in changed  # already done


SHAPES = ('"""Shapes."""\n\n\nclass Rect:\n    def __init__(self, width, height):\n        self.width = width\n'
          '        self.height = height\n\n    def area(self):\n        return self.width * self.width\n\n\n'
          'def clamp(value, low, high):\n    return max(low, min(value, low))\n')
SHAPE_TESTS = ("from shapes import Rect, clamp\n\n\ndef test_area():\n    assert Rect(2, 3).area() == 6\n\n\n"
               "def test_clamp():\n    assert clamp(5, 0, 3) == 3 and clamp(-1, 0, 3) == 0 and clamp(2, 0, 3) == 2\n")


def test_another_variable_or_field_is_read_in_place_of_one_after_every_other_change():
    found = changes(SHAPES, ["Rect.area", "clamp"])
    assert (10, "self.width", "self.height") in found and (14, "low", "high") in found
    renames = [i for i, (_, before, after) in enumerate(found) if after in ("self.height", "high", "value", "low")
               and before in ("self.width", "low", "value", "high")]
    assert renames and min(renames) > max(i for i, (_, _, after) in enumerate(found) if after in ("min", "max"))
    # a call's method is no field, and names the function never binds are not offered
    assert not any(after.startswith("self.") and before == "self.area" for _, before, after in found)
    assert not any(after in ("Rect", "max", "min") and before in ("low", "high", "value") for _, before, after in found)


def test_a_called_name_s_mirror_image_is_tried_after_the_other_changes():
    source = ("import math\n\n\ndef pages(names, suffix, size):\n"
              "    return any(n.startswith(suffix) for n in names), math.floor(len(names) / size)\n")
    found = changes(source, ["pages"])
    for want in [(5, "n.startswith", "n.endswith"), (5, "any", "all"), (5, "math.floor", "math.ceil")]:
        assert want in found, want
    first = min(i for i, (_, _, after) in enumerate(found) if after in ("n.endswith", "all", "math.ceil"))
    assert first > max(i for i, (_, _, after) in enumerate(found) if after == "len(names) // size")
    assert not any(after.endswith("len") for _, _, after in found)  # len has no mirror image
    # the generator's `n` exists only inside it
    assert (5, "suffix", "n") in found and (5, "size", "n") not in found


def test_a_condition_is_negated_or_loosened_and_a_sum_kept_as_its_last_term_accumulates():
    source = ("def owed(items, strict):\n    total = 0\n    for item in items:\n"
              "        if item.open and item.due > 0 or strict:\n            total = item.due\n"
              "        total += 1\n    return total if items else None\n")
    found = changes(source, ["owed"])
    for want in [(4, "item.open and item.due > 0 or strict", "not (item.open and item.due > 0 or strict)"),
                 (4, "item.open and item.due > 0 or strict", "strict"),
                 (4, "item.open and item.due > 0", "item.due > 0"), (4, "item.open and item.due > 0", "item.open"),
                 (7, "items", "not items"), (6, "total += 1", "total = 1"),
                 (5, "total = item.due", "total += item.due")]:
        assert want in found, want
    # `total = 0` before the loop is no sum's last term
    assert (2, "total = 0", "total += 0") not in found


def test_a_field_read_twice_where_two_were_meant_is_fixed_by_reading_the_other(pipeline_proj, pipeline_agent):
    (pipeline_proj / "shapes.py").write_text(SHAPES)
    (pipeline_proj / "test_shapes.py").write_text(SHAPE_TESTS.split("\n\n\ndef test_clamp")[0] + "\n")
    agent, _, steps = pipeline_agent(pipeline_proj, [block(SHAPES)] * 3, mutants=True)
    result = agent.run("test_shapes.py fails. Fix the bug in shapes.py.")
    assert result.text.startswith("Changed shapes.py (line 10: `self.width` -> `self.height`)"), steps
    assert (pipeline_proj / "shapes.py").read_text() == SHAPES.replace("self.width * self.width",
                                                                       "self.height * self.width")


def test_a_csv_writer_is_told_newline_line_ends_and_a_dict_writer_to_ignore_extra_keys():
    source = ('import csv\nfrom csv import DictWriter\n\n\ndef save(out, rows, fields):\n'
              '    csv.DictWriter(out, fieldnames=fields,).writerows(rows)\n    DictWriter(out, fields)\n'
              '    csv.writer(out, lineterminator="\\n").writerows(rows)\n    w = writer(out)\n')
    found = changes(source, ["save"])
    for want in [(6, "csv.DictWriter(out, fieldnames=fields,)",
                  'csv.DictWriter(out, fieldnames=fields, lineterminator="\\n")'),
                 (6, "csv.DictWriter(out, fieldnames=fields,)",
                  'csv.DictWriter(out, fieldnames=fields, extrasaction="ignore")'),
                 (7, "DictWriter(out, fields)", 'DictWriter(out, fields, extrasaction="ignore")')]:
        assert want in found, want
    # told already, or a `writer` that is not csv's: left alone
    assert not any("lineterminator" in after for line, _, after in found if line in (8, 9))


BULLETS = ('import textwrap\n\n\ndef bullets(items, width):\n    """Each item as "- " and its words, wrapped with a '
           'hanging indent."""\n    out = []\n    for item in items:\n'
           '        out.append(f"- {textwrap.fill(item, width - 2)}")\n    return "\\n".join(out)\n')
BULLET_TESTS = ("from notes import bullets\n\n\ndef test_short():\n    assert bullets(['a', 'b'], 20) == '- a\\n- b'\n\n\n"
                "def test_none():\n    assert bullets([], 20) == ''\n\n\ndef test_hanging():\n    assert bullets(['one two three four'], 11) == '- one two\\n  three\\n  four'\n")


def test_a_textwrap_call_in_an_f_string_gets_a_hanging_indent_as_wide_as_the_text_before_it():
    found = changes(BULLETS + "\n\ndef more(item):\n    return textwrap.wrap(item, 9, initial_indent='-> ')\n",
                    ["bullets", "more"])
    assert (8, 'f"- {textwrap.fill(item, width - 2)}"',
            "f\"- {textwrap.fill(item, width - 2, subsequent_indent='  ')}\"") in found
    assert (13, "textwrap.wrap(item, 9, initial_indent='-> ')",
            "textwrap.wrap(item, 9, initial_indent='-> ', subsequent_indent=\"   \")") in found


def test_a_near_miss_wrapped_without_its_hanging_indent_is_fixed_in_a_real_run(pipeline_proj, pipeline_agent):
    (pipeline_proj / "notes.py").write_text(BULLETS.split("    out = []")[0] + "    raise NotImplementedError\n")
    (pipeline_proj / "test_notes.py").write_text(BULLET_TESTS)
    agent, _, steps = pipeline_agent(pipeline_proj, [{"candidates": [f"{BULLETS}```", "x = (```"]}], tries=2,
                                     mutants=True)
    agent.driver.config.repairs = 0
    result = agent.run("Implement the stub in notes.py so that the tests in test_notes.py pass.")
    assert result.text.startswith("Changed notes.py (line 8: "), steps
    assert "subsequent_indent='  '" in (pipeline_proj / "notes.py").read_text()


TWO_SLIPS = ('def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n\n\ndef last(xs, n):\n'
             '    """The last n items."""\n    return xs[-n + 1:]\n\n\ndef first(xs, n):\n    return xs[:n + 1]\n')
TWO_SLIPS_TESTS = ("from tools import clamp, first, last\n\n\ndef test_low():\n    assert clamp(-3, 0, 5) == 0\n\n\n"
                   "def test_high():\n    assert clamp(9, 0, 5) == 5\n\n\ndef test_inside():\n"
                   "    assert clamp(2, 0, 5) == 2\n\n\ndef test_last():\n"
                   "    assert last([1, 2, 3, 4], 2) == [3, 4]\n\n\n"
                   "def test_first():\n    assert first([1, 2, 3, 4], 2) == [1, 2]\n")


def test_two_slips_are_fixed_by_a_change_that_passed_more_tests_then_one_after_it(pipeline_proj, pipeline_agent):
    (pipeline_proj / "tools.py").write_text(STUB + "\n\ndef first(xs, n):\n    raise NotImplementedError\n")
    (pipeline_proj / "test_tools.py").write_text(TWO_SLIPS_TESTS)
    agent, engine, steps = pipeline_agent(pipeline_proj, [{"candidates": [f"{TWO_SLIPS}```"]}], tries=2,
                                          mutants=True)
    agent.driver.config.repairs = 0
    result = agent.run("Implement the stubs in tools.py so that the tests in test_tools.py pass.")
    assert result.text == ("Changed tools.py (lines 7 and 11: `1` -> `0`, `1` -> `0`); "
                           "`python -m pytest -q -x test_tools.py` passed.")
    assert (pipeline_proj / "tools.py").read_text() == TWO_SLIPS.replace("-n + 1", "-n + 0").replace("n + 1]",
                                                                                                       "n + 0]")
    shown = [d for s, d in steps if s == "mutants"]
    assert len(shown) == 1 and ", then " in shown[0] and \
        "after tools.py:7 `1` -> `0` (it passed 4 tests), passed: tools.py:7 `1` -> `0` and tools.py:11" in shown[0]
    assert len(engine.requests) == 1


def test_a_bug_fix_counts_what_the_files_pass_first_and_takes_two_steps_from_there(proj, pipeline_agent):
    loader = LOADER + ("\n\ndef stations(path):\n"
                       "    return sorted({s for s, _ in load_readings(path)}, reverse=True)\n")
    (proj / "loader.py").write_text(loader)
    tests = TESTS.replace("from stats import", "from loader import stations\nfrom stats import")
    (proj / "test_stats.py").write_text(tests + "\n\ndef test_stations(tmp_path):\n    p = tmp_path / 'r.csv'\n"
                                          "    p.write_text('station,celsius\\na,10\\nb,20\\nc,60\\n')\n"
                                          "    assert stations(p) == ['a', 'b', 'c']\n")
    agent, _, steps = pipeline_agent(proj, [block(loader)] * 3, mutants=True)
    result = agent.run(REQUEST)
    assert result.text == ("Changed loader.py (lines 11 and 15: `rows[1:]` -> `rows`, `True` -> `False`); "
                           "`python -m pytest -q -x test_stats.py` passed.")
    assert (proj / "loader.py").read_text() == loader.replace("rows[1:]", "rows").replace("=True", "=False")
    assert [d for s, d in steps if s == "mutants"][0].endswith(
        "after loader.py:11 `rows[1:]` -> `rows` (it passed 1 test), passed: loader.py:11 `rows[1:]` -> `rows` "
        "and loader.py:15 `True` -> `False`")


def test_two_steps_on_one_line_name_the_line_once():
    first = Mutant(Path("dedupe.py"), "", 25, "csv.writer(out)", 'csv.writer(out, lineterminator="\\n")')
    both = Mutant(Path("dedupe.py"), "", 25, "rows", "rows[1:]", first=first)
    assert both.described() == ('line 25: `csv.writer(out)` -> `csv.writer(out, lineterminator="\\n")`, '
                                '`rows` -> `rows[1:]`')
    assert Mutant(Path("dedupe.py"), "", 30, "1", "0", first=first).described().startswith("lines 25 and 30: ")
