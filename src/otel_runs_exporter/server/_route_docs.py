"""The route list of ``docs/local-service.md``, generated from the route table (:mod:`._routes`).

``tests/server/test_routes.py`` checks that the list in the docs is this one. After
changing a row::

    python -m otel_runs_exporter.server._route_docs docs/local-service.md   # rewrite the list in place
    python -m otel_runs_exporter.server._route_docs                         # or print it
"""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ._origins import Caller
from ._ratelimit import SPEC_RULES, RateRule
from ._routes import FILES, ROUTES
from ._routing import ANY_PAGE, Files, Pages, Route

__all__ = ["BEGIN", "END", "markdown", "replace_in"]

BEGIN = (
    "<!-- The route list: generated from server/_routes.py by "
    "`python -m otel_runs_exporter.server._route_docs docs/local-service.md`; do not edit by hand. -->"
)
END = "<!-- end of the route list -->"

_IDENTITY = {"ip": "IP", "api_key": "API key", "user_ip": "user and IP"}


def _rate(route: Route, rules: Sequence[RateRule]) -> str:
    if route.rate is None:
        return "default"
    named = [r for r in rules if r.route is route.rate]
    return "; ".join(
        f"{r.category} {r.count}/{r.interval:g} s per {_IDENTITY[r.identity]}" + (f" ({r.method})" if r.method else "")
        for r in named
    )


def _path(route: Route) -> str:
    notes = []
    if not route.api_v1:
        notes.append("root only")
    if not route.trailing_slash:
        notes.append("exact")
    if route.enabled_by is not None:
        notes.append(f"only with `{route.enabled_by.name}`")
    return f"`{route.path}`" + (f" ({', '.join(notes)})" if notes else "")


def _browsers(pages: Pages) -> str:
    if pages == ANY_PAGE:
        return "any page"
    return ", ".join(caller.value for caller in Caller if caller in pages) or "no"


def markdown(routes: Sequence[Route] = ROUTES, files: Files = FILES, rules: Sequence[RateRule] = SPEC_RULES) -> str:
    """The list, between its two marker comments."""
    lines = [
        BEGIN,
        "",
        "| Methods | Path | Credentials | Body (from browsers) | Rate limit (`--rate-limits`) | Injected faults | Browsers | Streams |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for route in routes:
        body = route.body.kind if route.body.kind == "none" else f"{route.body.kind} ({', '.join(route.body.content_types)})"
        lines.append(
            f"| {', '.join(route.methods)} | {_path(route)} | {route.auth.value} | {body} | {_rate(route, rules)} "
            f"| {route.faults.value if route.faults else ''} | {_browsers(route.browsers)} | {'yes' if route.streams else 'no'} |"
        )
    paths = ", ".join(f"`{p}`" for p in files.paths)
    lines += [
        f"| {', '.join(files.methods)} | the viewer's files: {paths} (root only, exact) | none | none | not limited "
        f"| | {_browsers(files.browsers)} | no |",
        "",
        END,
    ]
    return "\n".join(lines)


def replace_in(text: str) -> str:
    """``text`` (the doc) with its route list replaced by the current one."""
    start, end = text.index(BEGIN), text.index(END) + len(END)
    return text[:start] + markdown() + text[end:]


if __name__ == "__main__":
    if len(sys.argv) > 1:
        with open(sys.argv[1], encoding="utf-8") as f:
            doc = f.read()
        with open(sys.argv[1], "w", encoding="utf-8") as f:
            f.write(replace_in(doc))
    else:
        print(markdown())
