"""The harness's move of a definition between modules (agent/pipeline/move.py): real files, real pytest runs, the
scripted engine where the model would write."""
import pytest

from agent.core.permissions import Permissions
from agent.pipeline.move import plan_move
from hooks.settings import PermissionSettings, SourcedRule

VIEWS = ('"""Page views."""\nimport re\nimport os\n\n\n# lowercase, dashes\ndef slugify(title):\n'
         '    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")\n\n\n'
         'def post_url(post):\n    return "/posts/" + slugify(post) + os.sep\n')
UTILS = '"""Text helpers."""\n\n\ndef excerpt(text):\n    return text[:10]\n'
PROMPT = "Move the function slugify from views.py to text_utils.py, and have views.py import it from there."


@pytest.fixture
def blog(pipeline_proj):
    (pipeline_proj / "views.py").write_text(VIEWS)
    (pipeline_proj / "text_utils.py").write_text(UTILS)
    return pipeline_proj.resolve()


def block(text):
    return {"text": f"```python\n{text}```"}


def test_the_definition_goes_with_its_comment_and_imports_and_comes_back_as_an_import(blog):
    move = plan_move(PROMPT, blog, [])
    assert list(move.texts) == [blog / "text_utils.py", blog / "views.py"]  # the destination first
    assert move.texts[blog / "text_utils.py"] == (
        '"""Text helpers."""\nimport re\n\n\ndef excerpt(text):\n    return text[:10]\n\n\n# lowercase, dashes\n'
        'def slugify(title):\n    return re.sub(r"[^a-z0-9]+", "-", title.lower()).strip("-")\n')
    # `re` only served slugify and goes; `os` stays; post_url still calls slugify, now imported.
    assert move.texts[blog / "views.py"] == (
        '"""Page views."""\nimport os\nfrom text_utils import slugify\n\n\n'
        'def post_url(post):\n    return "/posts/" + slugify(post) + os.sep\n')


def test_importers_of_the_name_import_it_from_its_new_module(blog):
    (blog / "feed.py").write_text("from views import slugify  # the feed's links\n\nprint(slugify('A B'))\n")
    (blog / "test_views.py").write_text("import views\nfrom views import slugify\n\n\ndef test_s():\n"
                                        "    assert views.slugify('A') == slugify('A')\n")
    (blog / "views.py").write_text(VIEWS.replace('+ slugify(post) +', '+ post +'))  # views no longer calls it
    move = plan_move("Move slugify to text_utils.py", blog, [blog / "views.py", blog / "text_utils.py"])
    assert move.source == blog / "views.py" and move.importers == [blog / "feed.py", blog / "test_views.py"]
    assert move.texts[blog / "feed.py"] == "from text_utils import slugify  # the feed's links\n\nprint(slugify('A B'))\n"
    # The test reaches it as views.slugify: the old module imports it back.
    assert "from text_utils import slugify\n" in move.texts[blog / "views.py"]
    kept = plan_move("Move slugify to text_utils.py; do not change the tests.", blog, [blog / "views.py"])
    assert kept.importers == [blog / "feed.py"]
    (blog / "test_views.py").unlink()
    assert "import slugify" not in plan_move("Move slugify to text_utils.py", blog, [blog / "views.py"]).texts[
        blog / "views.py"]  # nothing reaches it there any more


@pytest.mark.parametrize("prompt, change", [
    ("Rename slugify to slug in views.py", None),  # not a move
    ("Move slugify from views.py to text_utils.py", ("text_utils.py", UTILS + "\n\ndef slugify(t):\n    return t\n")),
    ("Move slugify from views.py to text_utils.py", ("views.py", VIEWS.replace("# lowercase", "SEP = '-'\n\n\n# lo")
                                                     .replace('"-", title', "SEP, title"))),  # uses views' own SEP
    ("Move slugify from views.py to lib/text_utils.py", ("lib/text_utils.py", UTILS)),  # another directory
    ("Move slugify to text_utils.py", ("blog.py", VIEWS)),  # two modules define it: which one is meant?
])
def test_moves_the_harness_leaves_to_the_model(blog, prompt, change):
    if change:
        (blog / change[0]).parent.mkdir(exist_ok=True)
        (blog / change[0]).write_text(change[1])
    candidates = [blog / "views.py", blog / "blog.py"] if (blog / "blog.py").exists() else [blog / "views.py"]
    assert plan_move(prompt, blog, candidates) is None


def test_the_move_is_written_and_checked_without_the_model(blog, pipeline_agent):
    (blog / "test_views.py").write_text("from views import post_url\n\n\ndef test_url():\n"
                                        "    assert post_url('A b').startswith('/posts/a-b')\n")
    agent, engine, steps = pipeline_agent(blog, [])
    result = agent.run(PROMPT)
    assert result.text == ("Moved slugify from views.py to text_utils.py; `python -m pytest -q -x test_views.py` "
                           "passed.")
    assert engine.requests == [] and ("move", "Moved slugify from views.py to text_utils.py") in steps
    assert "def slugify" in (blog / "text_utils.py").read_text() and "def slugify" not in (blog / "views.py").read_text()
    writes = [c["function"]["arguments"]["file_path"] for m in agent.session.messages for c in m.get("tool_calls") or []
              if c["function"]["name"] == "Write"]
    assert writes == ["text_utils.py", "views.py"]  # real Write calls: rules, hooks and checkpoints saw them


def test_a_move_its_check_fails_is_undone_and_the_model_edits(blog, pipeline_agent):
    (blog / "test_views.py").write_text("import views\n\n\ndef test_home():\n    assert views.slugify.__module__ == 'views'\n")
    agent, engine, steps = pipeline_agent(blog, [block(UTILS), block(VIEWS)])
    agent.run(PROMPT)
    assert [d for s, d in steps if s == "retry"][0].startswith("the move: `python -m pytest -q -x test_views.py` "
                                                                "failed (")
    assert (blog / "text_utils.py").read_text() == UTILS and (blog / "views.py").read_text() == VIEWS
    assert engine.requests  # the model's edit steps ran after it
    first = engine.requests[0].messages
    assert not any(c["function"]["name"] == "Write" for m in first for c in m.get("tool_calls") or [])


def test_a_refused_write_undoes_the_move(blog, pipeline_agent):
    agent, engine, steps = pipeline_agent(blog, [block(UTILS), block(VIEWS)])
    agent.permissions = Permissions(PermissionSettings(allow=[SourcedRule("Bash", "test")],
                                                       deny=[SourcedRule("Write(./views.py)", "test")]),
                                    "acceptEdits", blog)
    agent.run(PROMPT)
    assert any(s == "retry" and d.startswith("the move: ") for s, d in steps)
    assert (blog / "text_utils.py").read_text() == UTILS and (blog / "views.py").read_text() == VIEWS
