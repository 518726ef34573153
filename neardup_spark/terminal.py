"""Text from the data, made safe to print on a terminal.

Documents, ids and paths can hold control characters: ESC sequences retitle or clear a
terminal, plant hyperlinks (OSC 8) or move the cursor; a carriage return overwrites the
line shown; bidirectional overrides show text in another order than it is stored. Every
command prints data through `printable`, which shows each such character as its escape
(`\\x1b`, `\\r`, `\\u202e`) and leaves all other text as it is.
"""

from __future__ import annotations

import re

# C0 controls (tab and newline too: one field is one line), DEL, C1 controls, the line and
# paragraph separators, and the bidirectional embeddings, overrides and isolates.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match) -> str:
    code = ord(m.group(0))
    return {9: "\\t", 10: "\\n", 13: "\\r"}.get(code) or (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}")


def printable(value: object) -> str:
    """str(value) with every control character shown as its escape."""
    return _UNSAFE.sub(_escape, str(value))


__all__ = ["printable"]
