"""The trace viewer's files: ``/`` and ``/viewer/*`` served from package data.

The page is plain HTML, CSS and ES modules under ``server/viewer/`` (no build
step, nothing fetched from elsewhere) and reads runs through the same endpoints
the SDK uses (``POST /runs/query``, ``POST /runs/stats``, ``GET /runs/{id}``,
``GET /sessions``: the rows of :mod:`._routes` whose ``browsers`` is ``SAME_ORIGIN``),
so it needs no route of its own beyond its files.

The files are public: the page has to load before it can ask for the API key.
Run contents are untrusted (model output, user input), so the page renders
every value as text, and these headers make that the only way it can work:
the Content-Security-Policy allows scripts from this origin's files only (an
injected ``<script>`` or ``onerror=`` attribute does not run), no frames, no
forms, requests back to this origin only, and images from this origin or the
``data:`` URLs the page builds for a run's own images.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources

from ._reply import Reply

__all__ = ["ViewerFile", "viewer_file", "viewer_reply", "viewer_link", "share_link", "PATHS", "SECURITY_HEADERS", "CSP"]

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
)
"""The page's Content-Security-Policy: nothing inline, nothing from another origin, never framed.

Images may be ``data:`` URLs: a run's image is drawn from the bytes it carries (the page
builds such a URL only for png, jpeg, gif and webp, never for SVG), and never fetched
from another host."""

SECURITY_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    # The files change with the installed package; revalidating costs nothing on loopback.
    "Cache-Control": "no-cache",
}

# URL path -> (file under server/viewer/, Content-Type). A fixed table, so no request
# path ever reaches the filesystem.
_FILES = {
    "/": ("index.html", "text/html; charset=utf-8"),
    "/index.html": ("index.html", "text/html; charset=utf-8"),
    "/viewer/app.css": ("app.css", "text/css; charset=utf-8"),
    "/viewer/app.js": ("app.js", "text/javascript; charset=utf-8"),
    "/viewer/api.js": ("api.js", "text/javascript; charset=utf-8"),
    "/viewer/dom.js": ("dom.js", "text/javascript; charset=utf-8"),
    "/viewer/list.js": ("list.js", "text/javascript; charset=utf-8"),
    "/viewer/filters.js": ("filters.js", "text/javascript; charset=utf-8"),
    "/viewer/trace.js": ("trace.js", "text/javascript; charset=utf-8"),
    "/viewer/run.js": ("run.js", "text/javascript; charset=utf-8"),
    "/viewer/messages.js": ("messages.js", "text/javascript; charset=utf-8"),
    "/viewer/values.js": ("values.js", "text/javascript; charset=utf-8"),
    "/viewer/media.js": ("media.js", "text/javascript; charset=utf-8"),
    "/viewer/feedback.js": ("feedback.js", "text/javascript; charset=utf-8"),
    "/viewer/threads.js": ("threads.js", "text/javascript; charset=utf-8"),
    "/viewer/charts.js": ("charts.js", "text/javascript; charset=utf-8"),
    # uPlot (MIT, viewer/vendor/uPlot.LICENSE), the charts' library: its ES module and stylesheet as published.
    "/viewer/vendor/uPlot.esm.js": ("vendor/uPlot.esm.js", "text/javascript; charset=utf-8"),
    "/viewer/vendor/uPlot.min.css": ("vendor/uPlot.min.css", "text/css; charset=utf-8"),
    "/viewer/icon.svg": ("icon.svg", "image/svg+xml"),
}
PATHS = tuple(_FILES)
"""The URL paths of the viewer's files."""


@dataclass(frozen=True)
class ViewerFile:
    """One file of the viewer as the handler sends it: bytes, their type, and the headers that go with them."""

    data: bytes
    content_type: str
    headers: dict[str, str]


_cache: dict[str, ViewerFile] = {}


def viewer_file(path: str) -> ViewerFile | None:
    """The viewer's file for a URL path, or None when the path is not one of them.

    >>> viewer_file("/viewer/../_app.py") is None
    True
    >>> viewer_file("/").content_type
    'text/html; charset=utf-8'
    """
    known = _FILES.get(path)
    if known is None:
        return None
    cached = _cache.get(path)
    if cached is None:
        name, content_type = known
        data = resources.files(__package__).joinpath("viewer", *name.split("/")).read_bytes()
        cached = _cache[path] = ViewerFile(data, content_type, dict(SECURITY_HEADERS))
    return cached


def viewer_reply(path: str) -> Reply | None:
    """The answer serving the viewer's file at ``path``, or None when the path is not one of them."""
    page = viewer_file(path)
    if page is None:
        return None
    return Reply(200, page.data, dict(page.headers), content_type=page.content_type)


def viewer_link(service_url: str, trace_id: str, run_id: str | None = None) -> str:
    """The viewer's deep link to a trace (or one of its runs) on the service at ``service_url``.

    The route is in the fragment, so the link works wherever the service's address does.

    >>> viewer_link("http://127.0.0.1:1984/", "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d")
    'http://127.0.0.1:1984/#/trace/0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d'
    >>> viewer_link("127.0.0.1:1984", "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d")
    'http://127.0.0.1:1984/#/trace/0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d'
    """
    base = service_url.strip().rstrip("/")
    if "://" not in base:
        base = "http://" + base
    return f"{base}/#/trace/{trace_id}" + (f"/run/{run_id}" if run_id else "")


def share_link(service_url: str, token: str) -> str:
    """The viewer's read-only page of a shared trace: what the SDK's ``share_run`` builds from ``LANGSMITH_WEB_URL``.

    >>> share_link("http://127.0.0.1:1984/", "0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d")
    'http://127.0.0.1:1984/public/0190b3c5-f1b8-7a3e-9c1d-2e3f4a5b6c7d/r'
    """
    return f"{service_url.strip().rstrip('/')}/public/{token}/r"
