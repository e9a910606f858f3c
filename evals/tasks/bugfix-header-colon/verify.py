EXPECTED = """\
POST /api/orders (query: source=app)
  accept: application/json
  accept-language: en-GB,en;q=0.9
  authorization: Bearer tok_3f9a81
  connection: keep-alive
  content-length: 25
  content-type: application/json
  cookie: session=7d2e; theme=dark
  host: shop.example.com:8443
  if-modified-since: Fri, 15 Mar 2024 09:00:00 GMT
  referer: https://shop.example.com/cart
  user-agent: curl/8.5.0
  x-request-start: 2024-03-15T10:42:07Z
  x-trace-id: b7e1c2
body: 25 bytes, Content-Length 25
"""

LINES = ["Location: http://a.example:81/x", "ETag:abc", "X-Odd: : colon first", "Date: Sat, 16 Mar 2024 08:00:00 GMT"]


def verify(run):
    assert run.text("request.txt") == run.original("request.txt"), "request.txt was changed; it is right as it is"
    r = run.python("show_request.py")
    assert r.returncode == 0 and r.stdout == EXPECTED, f"python show_request.py prints: {(r.stdout + r.stderr)[-600:]}"
    r = run.python("-c", f"from httpmsg import parse_headers; print(sorted(parse_headers({LINES!r}).items()))")
    want = str([("date", "Sat, 16 Mar 2024 08:00:00 GMT"), ("etag", "abc"), ("location", "http://a.example:81/x"),
                ("x-odd", ": colon first")])
    assert r.stdout.strip() == want, f"httpmsg.parse_headers gives {(r.stdout + r.stderr)[-400:]}, expected {want}"
