"""Which web pages may reach the local service: the Host rule, the Origin rule and the CORS answer.

A service on the user's own machine is reachable by every page the user opens, and
it holds prompts and outputs. Two attacks matter (Jupyter's ``check_host`` and
``check_origin`` refuse the same two):

- DNS rebinding: a page at ``http://evil.example:1984`` whose name is then made to
  resolve to 127.0.0.1 calls what the browser takes for its own origin, and reads
  the answers. The browser still sends ``Host: evil.example:1984``, so the
  :class:`HostRule` refuses any Host that is not a name of this service.
- Cross-site writes and reads: a page elsewhere sends "simple" requests (a form, a
  ``fetch`` in ``no-cors`` mode with ``text/plain`` or ``multipart/form-data``) that
  need no preflight. Browsers send them with ``Origin`` (or, for some GETs, only
  ``Sec-Fetch-Site``), so :meth:`PagePolicy.caller` tells the service's own page
  from every other one, and the route table's ``browsers`` column says who may call
  each route.

The page's own origin is the request's Host (whatever name and port it was opened
under: ``localhost``, ``127.0.0.1``, an ``ssh -L`` port), not "any loopback
origin": a page on another loopback port, a developer's other server, is another
site, and ``multipart/form-data`` is both a safelisted type a page may send
without asking and the type ``/runs/multipart`` takes.

>>> policy = PagePolicy.build("127.0.0.1", allow_hosts=(), cors_origins=("http://localhost:5173",))
>>> policy.host_allowed("localhost:1984", "127.0.0.1"), policy.host_allowed("evil.example:1984", "127.0.0.1")
(True, False)
>>> policy.caller({"host": "localhost:1984", "origin": "http://localhost:1984"})
(<Caller.SELF: 'same origin'>, 'http://localhost:1984')
>>> policy.caller({"host": "localhost:1984", "origin": "http://localhost:8000"})
(<Caller.FOREIGN: 'another site'>, 'http://localhost:8000')
>>> policy.caller({"host": "localhost:1984", "origin": "http://localhost:5173"})
(<Caller.CORS: '`--cors-origin`'>, 'http://localhost:5173')
>>> policy.caller({"host": "localhost:1984"})
(<Caller.CLIENT: 'no page'>, None)
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import Enum

__all__ = [
    "ANY_HOST",
    "CORS_REQUEST_HEADERS",
    "Caller",
    "PagePolicy",
    "is_browser",
    "normalize_allowed_host",
    "normalize_origin",
    "split_host",
]

ANY_HOST = "*"
"""``allow_hosts`` entry that turns the Host check off."""

class Caller(Enum):
    """Who sent a request; a route's ``browsers`` is the set of pages it lets in (the values are the docs' words)."""

    CLIENT = "no page"
    """No page: the exporter, an SDK, curl, or the user typing the address."""
    SELF = "same origin"
    """The service's own page, whatever name it was opened under."""
    CORS = "`--cors-origin`"
    """A page of an origin named with ``--cors-origin``."""
    FOREIGN = "another site"
    """Any other page (``null`` origins included)."""

CORS_REQUEST_HEADERS = "accept, authorization, content-encoding, content-type, x-api-key, x-tenant-id"
"""What a ``--cors-origin`` page may send: what the service's clients send."""

_HOST = re.compile(r"^(?P<name>\[[0-9A-Fa-f:.]+\]|[^\[\]:/@?#\\\s]+)(?::(?P<port>[0-9]{1,5}))?$")
_ORIGIN = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*)://(?P<host>[^/?#@\s]+)$")
_DEFAULT_PORTS = {"http": 80, "https": 443}


def split_host(value: str) -> tuple[str, int | None] | None:
    """A Host header (or an origin's host part) as (lower-case name without brackets or final dot, port); None if malformed.

    >>> split_host("LocalHost.:1984"), split_host("[::1]:8080"), split_host("a b"), split_host("x:99999")
    (('localhost', 1984), ('::1', 8080), None, None)
    """
    found = _HOST.match(value.strip())
    if found is None:
        return None
    name = found.group("name").lower()
    if name.startswith("["):
        name = name[1:-1]
    else:
        name = name.rstrip(".")
    port = int(found.group("port")) if found.group("port") else None
    if not name or (port is not None and not 0 < port < 65536):
        return None
    return name, port


def _ip(name: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    try:
        ip = ipaddress.ip_address(name.split("%", 1)[0])
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def normalize_origin(text: str) -> str:
    """An origin as browsers serialize it: ``scheme://host[:port]``, lower case, no default port.

    Raises ValueError saying what an origin looks like.

    >>> normalize_origin("HTTP://LocalHost:80/"), normalize_origin("https://app.example:8443")
    ('http://localhost', 'https://app.example:8443')
    """
    value = text.strip()
    if value.endswith("/"):
        value = value[:-1]
    found = _ORIGIN.match(value)
    host = split_host(found.group("host")) if found else None
    if found is None or host is None:
        raise ValueError(
            f"{text[:100]!r} is not an origin; write scheme://host[:port] with no path, e.g. http://localhost:5173"
        )
    scheme = found.group("scheme").lower()
    name, port = host
    if ":" in name:
        name = f"[{name}]"
    if port is None or port == _DEFAULT_PORTS.get(scheme):
        return f"{scheme}://{name}"
    return f"{scheme}://{name}:{port}"


def normalize_allowed_host(text: str) -> str:
    """One ``--allow-host`` value: a host name or address without a port (any port is allowed), or ``*``.

    >>> normalize_allowed_host("DevBox.Example"), normalize_allowed_host("[fd00::1]"), normalize_allowed_host("*")
    ('devbox.example', 'fd00::1', '*')
    """
    value = text.strip()
    if value == ANY_HOST:
        return ANY_HOST
    host = split_host(value)
    if host is None or host[1] is not None or (value.count(":") == 1 and not value.startswith("[")):
        raise ValueError(
            f"--allow-host (allow_hosts) {text[:100]!r}: give a host name or address without a port (every port of it is "
            "allowed), or * to turn the Host check off"
        )
    ip = _ip(host[0])
    return str(ip) if ip is not None else host[0]


def is_browser(headers: Mapping[str, str]) -> bool:
    """Whether a browser sent the request: it carries ``Origin`` or a ``Sec-Fetch-*`` header (no client library sends them)."""
    return "origin" in headers or any(name.startswith("sec-fetch-") for name in headers)


@dataclass(frozen=True)
class PagePolicy:
    """The service's Host names and ``--cors-origin`` origins, and what they make of one request's headers.

    ``names``: host names and addresses allowed beyond loopback (``--allow-host``, and
    the bind address); ``any_host``: the Host check is off (``--allow-host '*'``).
    """

    names: frozenset[str]
    any_host: bool
    cors_origins: frozenset[str]

    @classmethod
    def build(cls, bind_host: str, allow_hosts: Iterable[str], cors_origins: Iterable[str]) -> PagePolicy:
        """From the service's arguments; ValueError names a malformed host or origin."""
        names = {normalize_allowed_host(name) for name in allow_hosts}
        try:
            origins = frozenset(normalize_origin(origin) for origin in cors_origins)
        except ValueError as exc:
            raise ValueError(f"--cors-origin (cors_origins): {exc}") from None
        try:
            bound = normalize_allowed_host(bind_host) if bind_host else ""
        except ValueError:
            bound = ""  # not a host name: binding it fails and says so
        if bound and bound != ANY_HOST:
            names.add(bound)  # a name or address the user chose to bind (0.0.0.0 included: it is what `url` prints)
        return cls(frozenset(names - {ANY_HOST}), ANY_HOST in names, origins)

    def host_allowed(self, host: str | None, local_ip: str) -> bool:
        """Whether a Host header names this service: loopback, an allowed name, or an address the client connected to.

        A request without Host (HTTP/1.0) comes from no browser, which always sends one.
        Any address the client connected to is ours, so it cannot be a rebound name.
        """
        if self.any_host or host is None:
            return True
        parts = split_host(host)
        if parts is None:
            return False
        name = parts[0]
        ip = _ip(name)
        if ip is None:
            return name == "localhost" or name in self.names
        if ip.is_loopback or ip.is_unspecified or str(ip) in self.names:
            return True  # 0.0.0.0 and [::] reach this machine only: clients use them for loopback
        local = _ip(local_ip)
        return local is not None and local == ip

    def caller(self, headers: Mapping[str, str]) -> tuple[Caller, str | None]:
        """Who sent the request (:data:`Caller`), and the origin it names.

        With an ``Origin``: the service's own page when it is the request's Host (same
        host and port), a ``--cors-origin`` one, else foreign (``null`` included).
        Without one, ``Sec-Fetch-Site`` says the same where a browser sends it
        (``same-site`` is another port of this machine: foreign too); without either,
        no page sent it.
        """
        origin = headers.get("origin")
        if origin is None:
            site = headers.get("sec-fetch-site", "none").strip().lower()
            if site == "none":
                return Caller.CLIENT, None
            return (Caller.SELF if site == "same-origin" else Caller.FOREIGN), None
        try:
            normal = normalize_origin(origin)
        except ValueError:
            return Caller.FOREIGN, origin[:200]
        if normal in self.cors_origins:
            return Caller.CORS, normal
        host = headers.get("host")
        return (Caller.SELF if host is not None and self._same(normal, host) else Caller.FOREIGN), normal

    def _same(self, origin: str, host: str) -> bool:
        scheme, _, rest = origin.partition("://")
        theirs, ours = split_host(rest), split_host(host)
        if theirs is None or ours is None or scheme not in _DEFAULT_PORTS:
            return False
        default = _DEFAULT_PORTS[scheme]
        return theirs[0] == ours[0] and (theirs[1] or default) == (ours[1] or default)

