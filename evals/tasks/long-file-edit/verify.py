def verify(run):
    before, after = run.original("handlers.py").splitlines(), run.text("handlers.py").splitlines()
    changed = [(i + 1, a) for i, (b, a) in enumerate(zip(before, after)) if a != b]
    assert len(after) == len(before), f"handlers.py has {len(after)} lines, not {len(before)}"
    assert len(changed) == 1 and changed[0][1].strip() in ("return 137 * 3", "return 411"), f"changed lines: {changed[:5]}"
    r = run.python("-c", "import handlers as h; print(h.handler_137(), h.handler_136(), h.handler_138())")
    assert r.stdout.split() == ["411", "272", "276"], f"handlers: {(r.stdout + r.stderr)[-200:]}"
