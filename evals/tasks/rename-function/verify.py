def verify(run):
    for name in ("users.py", "app.py", "report.py"):
        assert "get_usr" not in run.text(name), f"{name} still says get_usr"
    assert "def get_user(uid):" in run.text("users.py"), "users.py does not define get_user"
    r = run.python("app.py")
    assert r.stdout == "ada\nada, grace\n", f"app.py: {(r.stdout + r.stderr)[-300:]}"
