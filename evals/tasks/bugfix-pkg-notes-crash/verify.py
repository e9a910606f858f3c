def verify(run):
    assert run.text("notes.json") == run.original("notes.json"), "notes.json was changed"
    r = run.python("-m", "notes")
    assert r.returncode == 0, f"python -m notes fails: {(r.stdout + r.stderr)[-600:]}"
    want = "* wifi: guest / tea4two\n- groceries: eggs, rice\n- dentist: tue 9:30"
    assert r.stdout.strip() == want, f"python -m notes prints {r.stdout.strip()!r}"
