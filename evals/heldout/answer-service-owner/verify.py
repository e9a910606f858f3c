"""The owner appears only in services.yaml; billing-reports' owner is the near miss."""


def verify(run):
    assert "tomas.herrera@example.com" in run.answer, \
        f"the answer does not give tomas.herrera@example.com: {run.answer[:200]!r}"
    assert "priya.raman" not in run.answer, "the answer names billing-reports' owner"
