def verify(run):
    for name in ("weekly.py", "roster.csv"):
        assert run.text(name) == run.original(name), f"{name} was changed; the bug is not in it"
    r = run.python("weekly.py")
    assert r.returncode == 0 and r.stdout == "design: 20\ndev: 73\nops: 40\n", \
        f"python weekly.py prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.python("-c", "from loader import load_people; print(load_people('roster.csv')[1])")
    assert r.stdout.strip() == "{'name': 'Bo', 'role': 'ops', 'hours': 40}", \
        f"loader.load_people gives: {(r.stdout + r.stderr)[-400:]}"
