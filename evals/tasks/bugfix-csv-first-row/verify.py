def verify(run):
    for name in ("test_stats.py", "readings.csv"):
        assert run.text(name) == run.original(name), f"{name} was changed"
    r = run.python("-m", "unittest", "-q", "test_stats")
    assert r.returncode == 0, f"the tests in test_stats.py still fail: {(r.stdout + r.stderr)[-800:]}"
    r = run.python("-c", "from loader import load_readings as l; print(l('readings.csv')[0], len(l('readings.csv')))")
    assert r.stdout.strip() == "('north', 12.5) 5", f"loader.load_readings gives: {(r.stdout + r.stderr)[-400:]}"
