def verify(run):
    r = run.python("roster.py")
    assert r.returncode == 0 and r.stdout == "Ben Adeyemi\nLeo Brandt\nZoe Brandt\nAna Castillo\nMia Okafor\n", \
        f"python roster.py prints: {(r.stdout + r.stderr)[-400:]}"
