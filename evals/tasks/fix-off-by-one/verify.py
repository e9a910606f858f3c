def verify(run):
    r = run.python("-c", "import util; print(util.last([1, 2, 3]), util.last(['a']), util.first([4, 5]), util.middle([1, 2, 3]))")
    assert r.stdout.split() == ["3", "a", "4", "2"], f"util.py still wrong: {(r.stdout + r.stderr)[-300:]}"
