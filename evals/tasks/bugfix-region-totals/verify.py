def verify(run):
    assert run.text("sales.csv") == run.original("sales.csv"), "sales.csv was changed"
    r = run.python("totals.py")
    assert r.returncode == 0 and r.stdout == "north: 150.75\nsouth: 100.00\neast: 99.99\n", \
        f"python totals.py prints: {(r.stdout + r.stderr)[-400:]}"
