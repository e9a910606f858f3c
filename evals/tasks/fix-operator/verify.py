def verify(run):
    r = run.python("-c", "import rect; print(rect.area(3, 4), rect.area(5, 6), rect.perimeter(3, 4))")
    assert r.stdout.split() == ["12", "30", "14"], f"rect.py still wrong: {(r.stdout + r.stderr)[-300:]}"
