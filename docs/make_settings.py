"""Write the settings tables of docs/settings.md from their one declaration, ``_settings.py``.

    python docs/make_settings.py           # rewrite the tables in docs/settings.md
    python docs/make_settings.py --check   # exit 1 (and say so) when the file is not what this writes

Each table sits between a ``<!-- settings table: NAME -->`` line and a
``<!-- end of settings table -->`` line; the prose around them is edited by hand
and kept as it is. A new setting is a row in ``_settings.py`` (and a documented
constant in ``environment_variables.py``); run this, and
``tests/core/test_settings_doc.py`` keeps the two the same.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Mapping

from otel_runs_exporter import _settings

DOC = Path(__file__).resolve().parent / "settings.md"
_TABLE = re.compile(r"(<!-- settings table: (\w+) -->\n)(.*?)(<!-- end of settings table -->)", re.S)
_HEADER = "| Argument | Environment | Default | If malformed | Meaning |\n|---|---|---|---|---|\n"


def _tables() -> Mapping[str, Mapping[str, Any]]:
    return {"exporter": _settings._DECLS, "instrumentation": _settings._INSTRUMENTATION_DECLS}


def _millis(decl: Any) -> bool:
    return decl.parse is _settings._millis_to_seconds


def shown_default(decl: Any) -> str:
    """A setting's default as the table shows it: as its variable spells it, in its units."""
    if decl.shown_default is not None:
        return decl.shown_default
    value = decl.default
    if value is None or value == ():
        return "—"
    if isinstance(value, int) and not isinstance(value, bool) and value >= _settings.MiB and value % _settings.MiB == 0:
        return f"{value // _settings.MiB} MiB"
    spelled = f"`{_settings.spelled_default(decl)}`"
    return f"{spelled} ms" if _millis(decl) else spelled


def if_malformed(decl: Any) -> str:
    """What a malformed value of the variable does (an argument's is always a ConfigError)."""
    if not decl.env:
        return "—"
    if decl.read is not None:
        return "never refused"  # another tool's variables, read by its own rules
    return "untraced" if decl.kind == _settings.ESSENTIAL else "default"


def row(name: str, decl: Any) -> str:
    environment = ", ".join(f"`{var}`" for var in decl.env) or "(argument only)"
    if _millis(decl):
        environment += " (ms)"
    meaning = decl.doc.replace("|", "\\|")
    return f"| `{name}` | {environment} | {shown_default(decl)} | {if_malformed(decl)} | {meaning} |\n"


def table(decls: Mapping[str, Any]) -> str:
    return _HEADER + "".join(row(name, decl) for name, decl in decls.items())


def render(text: str) -> str:
    """``text`` with every marked table written anew from the declarations."""
    tables = _tables()

    def write(match: re.Match[str]) -> str:
        name = match.group(2)
        if name not in tables:
            raise SystemExit(f"docs/settings.md names a table {name!r}; known: {sorted(tables)}")
        return match.group(1) + table(tables[name]) + match.group(4)

    written, found = _TABLE.subn(write, text)
    if found != len(tables):
        raise SystemExit(f"docs/settings.md must mark {len(tables)} tables ({sorted(tables)}), not {found}")
    return written


def main(argv: list[str]) -> int:
    text = DOC.read_text(encoding="utf-8")
    written = render(text)
    if "--check" in argv:
        if written != text:
            print("docs/settings.md is not what docs/make_settings.py writes: run python docs/make_settings.py")
            return 1
        return 0
    DOC.write_text(written, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
