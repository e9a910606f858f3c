import ast


def _defines(source, name):
    return any(isinstance(n, ast.FunctionDef) and n.name == name for n in ast.parse(source).body)


def verify(run):
    views, utils = run.text("views.py"), run.text("text_utils.py")
    assert _defines(utils, "slugify"), "text_utils.py does not define slugify"
    assert not _defines(views, "slugify"), "views.py still defines slugify itself"
    assert _defines(utils, "excerpt"), "text_utils.py lost excerpt"
    r = run.python("-c", "import views, text_utils; print(views.slugify is text_utils.slugify, "
                         "views.post_url({'year': 2024, 'title': 'Hello, World!'}), views.tag_url('Py 3'), "
                         "text_utils.excerpt('a b c', 2))")
    assert r.stdout.strip() == "True /posts/2024/hello-world/ /tags/py-3/ a b ...", \
        f"views / text_utils now give: {(r.stdout + r.stderr)[-400:]}"
