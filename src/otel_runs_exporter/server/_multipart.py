"""A strict ``multipart/form-data`` parser for the local service.

The stdlib's ``cgi`` module is deprecated and ``email`` accepts almost anything, so
this parser walks the body itself and says exactly where it stops making sense.
It parses structure only; what the parts must contain (names, content types,
lengths, JSON) is judged by :mod:`._validate`, so that a lenient service can still
record and accept a body whose parts break a rule.

Example::

    >>> body = (b'--xyz\\r\\nContent-Disposition: form-data; name="post.1"\\r\\n'
    ...         b'Content-Type: application/json\\r\\nContent-Length: 2\\r\\n\\r\\n{}\\r\\n--xyz--\\r\\n')
    >>> [(p.name, p.media_type, p.declared_length, p.content) for p in parse(body, "xyz")]
    [('post.1', 'application/json', 2, b'{}')]
"""

from __future__ import annotations

from dataclasses import dataclass, field
from email.message import Message

from ._numbers import plain_int

__all__ = ["MultipartError", "Part", "boundary_from_content_type", "parse", "parse_header_value"]

# RFC 2046 5.1.1: 1 to 70 characters from a restricted set.
_BOUNDARY_CHARS = frozenset(
    "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ'()+_,-./:=? "
)
_MAX_HEADER_BYTES = 16 * 1024


class MultipartError(ValueError):
    """The body is not well-formed multipart/form-data; the message says where."""


@dataclass(frozen=True)
class Part:
    """One part of a multipart body, with its headers already interpreted."""

    name: str
    content: bytes
    content_type: str | None
    """The full Content-Type header value, parameters included, or None if absent."""
    media_type: str | None
    """Lower-cased type/subtype without parameters."""
    params: dict[str, str] = field(default_factory=dict)
    """Content-Type parameters, e.g. ``{"length": "12"}``."""
    declared_length: int | None = None
    """The part's Content-Length header, if it sent one."""
    filename: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    """All part headers, names lower-cased."""
    offset: int = 0
    """Byte offset of the part's headers in the body, for error messages."""


def parse_header_value(value: str, header: str = "content-type") -> tuple[str, dict[str, str]]:
    """Split a header such as ``application/json; length=3`` into its main value and parameters.

    Parsing MIME parameters (quoting, RFC 2231) is delegated to :mod:`email`, which
    handles it correctly; only the structure around it is ours.
    """
    msg = Message()
    msg[header] = value
    params = msg.get_params(header=header) or []
    if not params:
        return "", {}
    main = params[0][0].strip().lower()
    rest: dict[str, str] = {}
    for key, val in params[1:]:
        rest[key.lower()] = val if isinstance(val, str) else "".join(str(x) for x in val if x)
    return main, rest


def boundary_from_content_type(content_type: str | None) -> str:
    """The boundary of a ``multipart/form-data`` Content-Type header, or MultipartError."""
    if not content_type:
        raise MultipartError("missing Content-Type header; expected multipart/form-data; boundary=...")
    media, params = parse_header_value(content_type)
    if media != "multipart/form-data":
        raise MultipartError(f"Content-Type is {media!r}, expected multipart/form-data")
    boundary = params.get("boundary")
    if not boundary:
        raise MultipartError("Content-Type multipart/form-data has no boundary parameter")
    if len(boundary) > 70 or not set(boundary) <= _BOUNDARY_CHARS or boundary.endswith(" "):
        raise MultipartError(f"boundary {boundary[:80]!r} is not a valid RFC 2046 boundary")
    return boundary


def _parse_headers(block: bytes, offset: int) -> dict[str, str]:
    if len(block) > _MAX_HEADER_BYTES:
        raise MultipartError(f"part at byte {offset}: headers longer than {_MAX_HEADER_BYTES} bytes")
    try:
        text = block.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise MultipartError(f"part at byte {offset}: headers are not UTF-8") from exc
    headers: dict[str, str] = {}
    for line in text.split("\r\n"):
        if not line:
            continue
        if line[0] in " \t":
            raise MultipartError(f"part at byte {offset}: folded header lines are not allowed")
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise MultipartError(f"part at byte {offset}: malformed header line {line[:80]!r}")
        key = name.lower()
        if key in headers:
            raise MultipartError(f"part at byte {offset}: header {name!r} appears twice")
        headers[key] = value.strip()
    return headers


def _make_part(headers: dict[str, str], content: bytes, offset: int) -> Part:
    disposition = headers.get("content-disposition")
    if disposition is None:
        raise MultipartError(f"part at byte {offset}: missing Content-Disposition header")
    kind, dparams = parse_header_value(disposition, "content-disposition")
    if kind != "form-data":
        raise MultipartError(f"part at byte {offset}: Content-Disposition is {kind!r}, expected form-data")
    name = dparams.get("name")
    if not name:
        raise MultipartError(f"part at byte {offset}: Content-Disposition has no name")
    content_type = headers.get("content-type")
    media_type: str | None = None
    params: dict[str, str] = {}
    if content_type is not None:
        media_type, params = parse_header_value(content_type)
    declared: int | None = None
    raw_length = headers.get("content-length")
    if raw_length is not None:
        declared = plain_int(raw_length)
        if declared is None:
            raise MultipartError(f"part {name!r}: Content-Length {raw_length[:40]!r} is not a number")
    return Part(
        name=name,
        content=content,
        content_type=content_type,
        media_type=media_type,
        params=params,
        declared_length=declared,
        filename=dparams.get("filename"),
        headers=headers,
        offset=offset,
    )


def parse(body: bytes, boundary: str) -> list[Part]:
    """Split ``body`` into parts delimited by ``boundary`` (RFC 2046 5.1, RFC 7578).

    Strict where clients never differ: the body starts with the first delimiter,
    every part has a Content-Disposition ``form-data`` with a name, header lines
    are well-formed, and the close delimiter is present. Bytes after the close
    delimiter (the epilogue) are ignored as the RFC requires.
    """
    delimiter = b"--" + boundary.encode("ascii")
    if not body.startswith(delimiter):
        raise MultipartError(f"body does not start with the boundary delimiter --{boundary}")
    parts: list[Part] = []
    pos = len(delimiter)
    next_delimiter = b"\r\n" + delimiter
    while True:
        if body.startswith(b"--", pos):
            return parts
        # RFC 2046 allows linear whitespace after a delimiter; clients do not send it,
        # but skipping it costs nothing.
        while pos < len(body) and body[pos] in b" \t":
            pos += 1
        if not body.startswith(b"\r\n", pos):
            raise MultipartError(f"byte {pos}: expected CRLF or -- after the boundary delimiter")
        pos += 2
        header_end = body.find(b"\r\n\r\n", pos)
        if body.startswith(b"\r\n", pos):
            header_end = pos - 2  # no headers at all
        if header_end < 0:
            raise MultipartError(f"part at byte {pos}: headers are not terminated by an empty line")
        headers = _parse_headers(body[pos:header_end], pos)
        content_start = header_end + 4
        content_end = body.find(next_delimiter, content_start)
        if content_end < 0:
            raise MultipartError(
                f"part at byte {pos}: no closing boundary delimiter (body truncated or wrong boundary)"
            )
        parts.append(_make_part(headers, body[content_start:content_end], pos))
        pos = content_end + len(next_delimiter)
