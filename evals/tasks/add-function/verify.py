def verify(run):
    r = run.python("-c", "from strutils import is_palindrome as p, shout; print(p('level'), p('abba'), p('abc'), p(''), shout('hi'))")
    assert r.stdout.split() == ["True", "True", "False", "True", "HI!"], f"is_palindrome: {(r.stdout + r.stderr)[-300:]}"
