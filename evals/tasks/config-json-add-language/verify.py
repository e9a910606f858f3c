import json


def verify(run):
    try:
        new = json.loads(run.text("site.json"))
    except ValueError as e:
        raise AssertionError(f"site.json is not valid JSON any more: {e}")
    old = json.loads(run.original("site.json"))
    assert new["i18n"]["languages"] == ["en", "de", "fr", "es"], f"languages: {new['i18n']['languages']}"
    new["i18n"]["languages"] = old["i18n"]["languages"]
    assert new == old, "site.json changed in other places too"
    assert run.text("build.py") == run.original("build.py"), "build.py was changed"
