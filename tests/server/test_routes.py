"""The route table (server/_routes.py) is the single source of the local service's routes.

Every row answers its declared methods (at the root and under /api/v1, with and
without a trailing slash, as it declares), every other method on its path is a 405
whose Allow lists exactly the path's methods, public rows ask no key, the rate
rules and the viewer's calls agree with the rows, and the docs' route list is the
table's.
"""

from __future__ import annotations

import doctest
import re
import uuid
from collections.abc import Iterator
from importlib import resources
from pathlib import Path

import pytest
import requests

from otel_runs_exporter.server import LocalService, _reply, _routing
from otel_runs_exporter.server._ratelimit import SPEC_RULES
from otel_runs_exporter.server._route_docs import BEGIN, END, markdown
from otel_runs_exporter.server._routes import FILES, ROUTER, ROUTES
from otel_runs_exporter.server._origins import Caller
from otel_runs_exporter.server._routing import ANY_PAGE, MULTIPART_ON, Auth, Route
from otel_runs_exporter.server._shares import NO_SHARE

KEY = "route-table-key"
TOKEN = "route-table-bearer"
HEADERS = {"x-api-key": KEY}
METHODS = ("GET", "HEAD", "POST", "PATCH", "PUT", "DELETE")
DOC = Path(__file__).resolve().parents[2] / "docs" / "local-service.md"
# What the router itself answers; a handler's own 404 names what it did not find.
NO_ROUTE = {"detail": "Not Found"}


def example(path: str) -> str:
    """The row's path with each parameter filled in."""
    return re.sub(r"{[a-z_]+}", lambda _: str(uuid.uuid4()), path)


def paths_of(route: Route) -> list[str]:
    """Every form of the row's path the service answers: with /api/v1 and a trailing slash where declared."""
    path = example(route.path)
    forms = [path] + ([path + "/"] if route.trailing_slash else [])
    return forms + (["/api/v1" + p for p in forms] if route.api_v1 else [])


def groups() -> dict[str, list[Route]]:
    by_path: dict[str, list[Route]] = {}
    for route in ROUTES:
        by_path.setdefault(route.path, []).append(route)
    return by_path


def call(http: requests.Session, url: str, method: str, **kwargs) -> requests.Response:
    # The auth wait holds a request up to its timeout; 0 answers at once.
    query = {"timeout": "0"} if "/v2/auth/wait/" in url else None
    body = {"json": {}} if method in ("POST", "PATCH", "PUT") else {}
    return http.request(method, url, params=query, timeout=10, **body, **kwargs)


@pytest.fixture(scope="module")
def svc() -> Iterator[LocalService]:
    with LocalService(api_key=KEY, bearer_token=TOKEN) as service:
        yield service


@pytest.fixture(scope="module")
def http() -> Iterator[requests.Session]:
    with requests.Session() as session:
        yield session


@pytest.mark.parametrize("route", ROUTES, ids=lambda r: f"{'+'.join(r.methods)} {r.path}")
def test_each_route_answers_its_methods_at_each_of_its_paths(svc, http, route: Route) -> None:
    for path in paths_of(route):
        for method in route.methods:
            resp = call(http, svc.url + path, method, headers=HEADERS)
            assert resp.status_code not in (401, 405) and resp.status_code < 500, (method, path, resp.text)
            if method != "HEAD":
                assert resp.json() != NO_ROUTE, (method, path)


@pytest.mark.parametrize("path", list(groups()), ids=str)
def test_other_methods_are_405_with_the_paths_methods_in_allow(svc, http, path: str) -> None:
    rows = groups()[path]
    allowed = [m for row in rows for m in row.methods]
    for method in METHODS:
        if method in allowed:
            continue
        resp = call(http, svc.url + example(path), method, headers=HEADERS)
        assert resp.status_code == 405, (method, path, resp.status_code)
        assert resp.headers["Allow"] == ", ".join(allowed), (method, path)
        if method != "HEAD":
            assert resp.json() == {"detail": "Method Not Allowed"}


def test_root_only_routes_are_not_under_api_v1_and_exact_ones_take_no_slash(svc, http) -> None:
    for route in ROUTES:
        path = example(route.path)
        if not route.api_v1:
            resp = call(http, svc.url + "/api/v1" + path, route.methods[0], headers=HEADERS)
            assert resp.status_code == 404 and resp.json() == NO_ROUTE, route.path
        if not route.trailing_slash:
            resp = call(http, svc.url + path + "/", route.methods[0], headers=HEADERS)
            assert resp.status_code == 404 and resp.json() == NO_ROUTE, route.path


def test_public_routes_need_no_key_and_the_others_do(svc, http) -> None:
    for route in ROUTES:
        for method in route.methods:
            resp = call(http, svc.url + example(route.path), method)
            if route.auth is Auth.SHARE_TOKEN:
                # No key asked: the path's token is the credential, and an example's names no share.
                assert resp.status_code == 404, (method, route.path)
                assert method == "HEAD" or resp.json() == {"detail": NO_SHARE}, resp.text
            elif route.public and route.path.startswith("/attachments/"):
                # No key asked: the address's own signature is its credential, and an example has none.
                assert resp.status_code == 403, (method, route.path)
                assert method == "HEAD" or "signature" in resp.json()["detail"], resp.text
            elif route.public:
                assert resp.status_code == 200, (method, route.path)
            else:
                assert resp.status_code == 401, (method, route.path)
    # A method a public path does not serve is refused without asking for a key either.
    resp = http.post(svc.url + "/info", timeout=5)
    assert resp.status_code == 405 and resp.headers["Allow"] == "GET, HEAD"
    for path in FILES.paths:
        assert http.get(svc.url + path, timeout=5).status_code == 200, path


def test_a_bearer_token_stands_in_for_the_key_only_where_the_row_says(svc, http) -> None:
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for route in ROUTES:
        if route.public:
            continue
        resp = call(http, svc.url + example(route.path), route.methods[0], headers=bearer)
        assert (resp.status_code != 401) == (route.auth is Auth.KEY_OR_BEARER), (route.path, resp.status_code)


def test_a_route_turned_off_answers_404_to_every_method() -> None:
    (multipart,) = [r for r in ROUTES if r.enabled_by is MULTIPART_ON]
    with LocalService(multipart=False) as svc, requests.Session() as http:
        for method in METHODS:
            resp = call(http, svc.url + multipart.path, method)
            assert resp.status_code == 404, method


def test_rows_on_one_path_agree_and_no_path_hides_a_later_one() -> None:
    for path, rows in groups().items():
        first = rows[0]
        for row in rows[1:]:
            assert (row.auth, row.api_v1, row.trailing_slash, row.enabled_by) == (
                first.auth, first.api_v1, first.trailing_slash, first.enabled_by
            ), path
        methods = [m for row in rows for m in row.methods]
        assert len(methods) == len(set(methods)), f"{path} declares a method twice"
        for row in rows:
            for method in row.methods:
                assert ROUTER.match(method, example(path)).route is row, f"{method} {path} is served by an earlier row"


def test_each_rate_rule_the_table_names_exists_and_each_routed_rule_has_a_row() -> None:
    named = {r.rate for r in ROUTES if r.rate is not None}
    routed = {rule.route for rule in SPEC_RULES if rule.route is not None}
    assert named == routed
    for rule in SPEC_RULES:
        assert (rule.route is not None) != bool(rule.pattern) or rule.method == "OPTIONS", rule


def test_the_viewer_calls_exactly_the_routes_that_let_its_page_in() -> None:
    api = resources.files("otel_runs_exporter.server").joinpath("viewer", "api.js").read_text()
    calls = re.findall(r'request\("([A-Z]+)", [`"](/[^`"?]*)', api)
    assert calls, "the viewer's api.js no longer calls request(METHOD, path)"
    called = set()
    for method, path in calls:
        route = ROUTER.match(method, re.sub(r"\$\{[^}]*\}", "x", path)).route
        assert route is not None and Caller.SELF in route.browsers, (method, path)
        called.add(route)
    assert called == {r for r in ROUTES if Caller.SELF in r.browsers and r.browsers != ANY_PAGE}
    assert FILES.browsers == ANY_PAGE  # a link on any page opens the viewer; its files hold no runs
    # ... and so does a share link, the viewer's page itself (its token opens one trace, no key).
    assert [r.path for r in ROUTES if r.browsers == ANY_PAGE] == ["/public/{share_token}/r"]


def test_the_docs_route_list_is_the_table() -> None:
    doc = DOC.read_text(encoding="utf-8")
    listed = doc[doc.index(BEGIN) : doc.index(END) + len(END)]
    assert listed == markdown(), (
        "docs/local-service.md's route list differs from server/_routes.py; run "
        "python -m otel_runs_exporter.server._route_docs docs/local-service.md"
    )


@pytest.mark.parametrize("module", [_routing, _reply], ids=lambda m: m.__name__)
def test_doctests(module) -> None:
    assert doctest.testmod(module).failed == 0
