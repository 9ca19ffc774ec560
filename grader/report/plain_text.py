"""Text that came from a submission, made safe for the two places staff open it outside a browser.

- A spreadsheet (grades.csv, the Canvas export): a cell that starts with `=`, `+`, `-` or `@` (or a tab
  or carriage return) is read as a formula by Excel, LibreOffice and Sheets, so a submission named
  `=HYPERLINK("http://...")` would run in the TA's gradebook. `csv_cell` prefixes such a cell with `'`,
  which spreadsheets show as text; plain numbers (`-0.5`) are left as they are. Its control characters
  are escaped as below, since staff also read CSV files in a terminal.
- A terminal (log.txt, the log's tail in result.json): escape sequences (ESC, OSC, CSI), carriage returns
  and bidirectional overrides in the student's output can rewrite what `cat log.txt` shows, set the
  terminal's title or clipboard, or hide text. `printable` writes every such character as a visible
  escape (`\\x1b`), keeping newlines and tabs.
"""

from __future__ import annotations

import re

_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
_NUMBER = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?")
# C0 controls but tab and newline, DEL, C1 controls (U+0080-U+009F: CSI and OSC as single characters),
# and the bidirectional overrides and isolates that reorder a line as displayed.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def csv_cell(value) -> str:
    """`value` as a CSV cell no spreadsheet evaluates and no terminal that shows the file obeys."""
    text = printable("" if value is None else str(value))
    if text.startswith(_FORMULA_START) and not _NUMBER.fullmatch(text):
        return "'" + text
    return text


def csv_row(values) -> list[str]:
    return [csv_cell(value) for value in values]


def printable(text: str) -> str:
    """`text` with every control character but newline and tab written as a visible escape."""
    return _CONTROL.sub(_escape, text.replace("\r\n", "\n"))


def _escape(match: re.Match) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"
