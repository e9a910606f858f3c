def verify(run):
    assert run.text("summary.py") == run.original("summary.py"), "summary.py was changed; the bug is not in it"
    r = run.python("summary.py")
    assert r.returncode == 0 and r.stdout == "lint: 1m\nbuild: 2h 02m\ntest: 1h 13m\ndeploy: 10m\n", \
        f"python summary.py prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-c", "from timefmt import format_duration as f; print(f(59), f(3600), f(3661))")
    assert r.stdout.strip() == "0m 1h 00m 1h 01m", f"timefmt.format_duration gives: {(r.stdout + r.stderr)[-400:]}"
