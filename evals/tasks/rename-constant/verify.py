def verify(run):
    for name in ("config.py", "client.py"):
        assert "TIMEOUT_SEC" not in run.text(name).replace("TIMEOUT_SECONDS", ""), f"{name} still has TIMEOUT_SEC"
    assert "TIMEOUT_SECONDS = 45" in run.text("config.py"), "config.py does not define TIMEOUT_SECONDS = 45"
    r = run.python("client.py")
    assert r.stdout == "db.internal (timeout 45s)\n", f"client.py: {(r.stdout + r.stderr)[-300:]}"
