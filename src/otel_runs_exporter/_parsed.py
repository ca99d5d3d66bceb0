"""A run's inputs or outputs just as ``orjson.loads`` made them, known as such by the encoder.

A value decoded from a JSON attribute (``input.value`` with a JSON mime type)
holds only what JSON has: dicts, lists, str, int in 64 bits, finite floats,
bool and None; so does a GenAI conversation read only from JSON text
(``gen_ai.input.messages``, ``gen_ai.output.messages``), reshaped into messages
of that text and what ``orjson.loads`` made, with text or whole counts merged in. The encoder's fallbacks exist for everything else (NaN written as
``null``, objects without a JSON type), and one of them scans the whole output
for ``null``: about 33 µs for a 64 KB value, half of what encoding it costs. A
:class:`ParsedJson` tells the encoder that none of them can apply.

Its own module, outside the compiled ones: mypyc compiles no subclass of ``dict``.

Whoever puts into one what ``orjson.loads`` would not make (a user's redaction
callable may) must hand on a plain copy instead: :func:`plain` makes it.

    >>> value = ParsedJson({"q": 1})
    >>> value == {"q": 1}, type(plain(value)) is dict
    (True, True)
"""

from __future__ import annotations

from typing import Any

__all__ = ["ParsedJson", "plain"]


class ParsedJson(dict[str, Any]):
    """A dict whose whole content came from ``orjson.loads`` (see the module)."""

    __slots__ = ()


def plain(value: Any) -> Any:
    """``value``, as a plain dict if it was a :class:`ParsedJson` (a shallow copy), so a change to it is seen."""
    return dict(value) if type(value) is ParsedJson else value
