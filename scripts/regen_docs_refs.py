#!/usr/bin/env python3
"""Rewrites the generated reference blocks of docs/ (REST routes, MCP tools, limits, flags) from the
tables in the code: runs the tidy tests that compare them and takes the expected text from
their failure messages. A maintainer's convenience; the tests stay the check."""
import pathlib
import re
import subprocess

ROOT = pathlib.Path(__file__).resolve().parent.parent
BLOCKS = {
    "docs_rest_reference_matches_the_route_table": ("docs/rest.md", "rest-reference"),
    "docs_tool_reference_matches_the_tool_table": ("docs/mcp.md", "mcp-tools"),
    "docs_limits_table_matches_the_limits_table": ("docs/limits.md", "limits"),
    "docs_flags_tables_match_the_flag_table": ("docs/flags.md", "flags"),
}


def expected_table(test):
    run = subprocess.run(
        ["cargo", "test", "--quiet", "--test", "it", test, "--", "--exact", f"tidy::{test}"],
        cwd=ROOT, capture_output=True, text=True,
    )
    out = run.stdout
    marker = "replace the block between the markers with:\n"
    if marker not in out:
        if run.returncode != 0:
            # The test failed for another reason (a document without its markers, a build error).
            raise SystemExit(f"tidy::{test} failed:\n{out[-2000:]}{run.stderr[-2000:]}")
        return None
    text = out.split(marker, 1)[1]
    if "\n(end of block)\n" in text:
        # A block of headings and tables, ended by this line.
        return text.split("\n(end of block)\n", 1)[0] + "\n"
    lines = []
    for line in text.split("\n"):
        if line.startswith("|"):
            lines.append(line)
        elif lines:
            break
    return "\n".join(lines) + "\n"


for test, (path, name) in BLOCKS.items():
    table = expected_table(test)
    if table is None:
        print(f"{path} {name}: up to date")
        continue
    doc = ROOT / path
    text = doc.read_text()
    start, end = f"<!-- {name}:start -->\n", f"<!-- {name}:end -->"
    text = re.sub(re.escape(start) + ".*?" + re.escape(end), lambda _: start + table + end,
                  text, flags=re.S)
    doc.write_text(text)
    print(f"{path} {name}: rewritten")
