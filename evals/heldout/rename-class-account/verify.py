EXPECTED = "Account: ada <ada@example.com>\nAccount: cy <cy@example.com>\n"


def verify(run):
    for name in ("models.py", "store.py", "cli.py"):
        assert "UserRecord" not in run.text(name), f"{name} still says UserRecord"
    assert "class Account:" in run.text("models.py"), "models.py does not define class Account"
    r = run.python("cli.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"cli.py printed {(r.stdout + r.stderr)[-400:]!r}"
