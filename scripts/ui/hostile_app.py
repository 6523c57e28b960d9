#!/usr/bin/env python3
"""A debugged program whose values are hostile markup, for the web UI's browser tests.

What it does
    It speaks the same wire protocol as scripts/demo_app.py (it reuses that file's client)
    and wraps one function whose name, positional arguments, keyword name and result are
    strings of HTML and script. Its one call pauses before it runs and, once resumed with
    continue, after it returns: a page that escapes every value shows these strings as text.
    Each line of stdout is what the call did, as the demo prints it.

How to run it
    CIDELDILL_SERVER_URL=http://127.0.0.1:<port> python3 scripts/ui/hostile_app.py

What it needs
    Python 3.8 or newer and scripts/demo_app.py next to its parent folder.
"""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import demo_app  # noqa: E402

# The strings the browser tests look for; scripts/ui_test.mjs holds the same list.
NAME = "<img src=x onerror=alert(5)>"
ARGS = (
    "</script><img src=x onerror=alert(1)>",
    "\"><svg onload=alert(2)>",
    "'><iframe srcdoc=\"<script>alert(3)</script>\"></iframe>",
)
KEYWORD = "<b onmouseover=alert(6)>key</b>"
KEYWORD_VALUE = "<a href=\"javascript:alert(4)\">click</a>"
RESULT = "<script>alert(7)</script><style>body{display:none}</style>"


def echo(*args, **kwargs):
    return RESULT


echo.__name__ = NAME


def main() -> int:
    url = demo_app.resolve_server_url(None)
    client = demo_app.DebugClient(url, demo_app.Serializer())
    client.check_connection()
    proxy = demo_app.with_debug(client, echo)
    ok = demo_app.run_call(proxy, NAME, ARGS, {KEYWORD: KEYWORD_VALUE})
    return 0 if ok else 3


if __name__ == "__main__":
    sys.exit(main())
