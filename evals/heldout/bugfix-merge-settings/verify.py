EXPECTED = ("cache.ttl = 300\ndb.host = db.internal\ndb.name = shop\ndb.port = 5432\ndebug = True\n"
            "workers = 4\n")


def verify(run):
    r = run.python("app.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"app.py printed {(r.stdout + r.stderr)[-400:]!r}"
    for name in ("defaults.json", "local.json"):
        assert run.text(name) == run.original(name), f"{name} was changed"
    # merge() itself, where the bug is: overrides win at every depth.
    r = run.python("-c", "import json; from config_loader import merge; print(json.dumps(merge("
                   "{'a': 1, 'n': {'x': 1, 'y': 2, 'm': {'p': 0}}}, {'n': {'y': 3, 'm': {'p': 9}}, 'b': 5}), "
                   "sort_keys=True))")
    assert r.stdout == '{"a": 1, "b": 5, "n": {"m": {"p": 9}, "x": 1, "y": 3}}\n', \
        f"merge() gave {(r.stdout + r.stderr)[-300:]!r}"
