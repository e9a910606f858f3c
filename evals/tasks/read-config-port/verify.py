"""The port appears only in config.ini."""


def verify(run):
    assert "48213" in run.answer, f"the answer does not give the port 48213: {run.answer[:200]!r}"
