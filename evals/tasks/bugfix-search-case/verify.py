def verify(run):
    for name in ("test_search.py", "notes.json"):
        assert run.text(name) == run.original(name), f"{name} was changed"
    for words, want in [(["Dentist"], "Dentist\nCar\n"), (["dentist"], "Dentist\nCar\n"),
                        (["GARAGE", "Door"], "Garage door code\n"), (["piranesi", "Memory"], "Reading list\n"),
                        (["Dentist", "lemons"], "no notes found\n")]:
        r = run.python("find.py", *words)
        assert r.returncode == 0 and r.stdout == want, \
            f"python find.py {' '.join(words)} prints: {(r.stdout + r.stderr)[-400:]}"
    r = run.pytest("test_search.py")
    assert r.returncode == 0, f"the tests in test_search.py fail: {(r.stdout + r.stderr)[-800:]}"
