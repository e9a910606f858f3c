import json


def verify(run):
    data = run.json("settings.json")
    assert data is not None, "settings.json is not valid JSON any more"
    expected = json.loads(run.original("settings.json"))
    expected["debug"] = True
    assert data == expected, f"settings.json is {data}"
