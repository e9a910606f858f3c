def verify(run):
    for name in ("coverage_report.py", "coverage.json"):
        assert run.text(name) == run.original(name), f"{name} was changed; the bug is not in it"
    r = run.python("coverage_report.py")
    assert r.returncode == 0 and r.stdout.strip() == "Coverage: 25.6% (64 of 250 lines)", \
        f"python coverage_report.py prints: {(r.stdout + r.stderr)[-400:]}"
    # The bug is in stats.percent; ratio and the rounding stay as they were.
    r = run.python("-c", "from stats import percent, ratio; "
                         "print(percent(1, 3), percent(1, 3, 3), percent(5, 0), ratio(1, 4))")
    assert r.stdout.strip() == "33.3 33.333 0.0 0.25", f"stats.percent is still wrong: {(r.stdout + r.stderr)[-400:]}"
