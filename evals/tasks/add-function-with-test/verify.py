import re


def verify(run):
    r = run.python("-c", "from mathutils import clamp, add; print(clamp(5, 0, 3), clamp(-1, 0, 3), clamp(2, 0, 3), add(1, 1))")
    assert r.stdout.split() == ["3", "0", "2", "2"], f"clamp is missing or wrong: {(r.stdout + r.stderr)[-300:]}"
    tests = run.text("test_mathutils.py")
    assert re.search(r"def test_\w*\(.*\):(\n[ \t]+.*)*clamp\(", tests), "no test function calls clamp()"
    assert "def test_add" in tests and "def test_sub" in tests, "the existing tests were removed"
    r = run.pytest("test_mathutils.py")
    assert r.returncode == 0, f"the tests fail: {r.stdout[-300:]}"
