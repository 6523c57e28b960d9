#!/usr/bin/env python3
"""Rewrites README.md's generated reference blocks (REST routes, MCP tools, limits) from the
tables in the code: runs the tidy tests that compare them and takes the expected text from
their failure messages. A maintainer's convenience; the tests stay the check."""
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCKS = {
    "readme_rest_reference_matches_the_route_table": "rest-reference",
    "readme_tool_reference_matches_the_tool_table": "mcp-tools",
    "readme_limits_table_matches_the_limits_table": "limits",
}


def expected_table(test):
    out = subprocess.run(
        ["cargo", "test", "--quiet", "--test", "it", test, "--", "--exact", f"tidy::{test}"],
        cwd=ROOT, capture_output=True, text=True,
    ).stdout
    marker = "replace the block between the markers with:\n"
    if marker not in out:
        return None
    lines = []
    for line in out.split(marker, 1)[1].split("\n"):
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    return "\n".join(lines) + "\n"


readme = ROOT / "README.md"
text = readme.read_text()
for test, name in BLOCKS.items():
    table = expected_table(test)
    if table is None:
        print(f"{name}: up to date")
        continue
    start, end = f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"
    text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: start + table + end,
                  text, flags=re.S)
    print(f"{name}: rewritten")
readme.write_text(text)
