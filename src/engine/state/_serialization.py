"""How keys and values of a ``KeyValueState`` are stored: a documented, versioned format.

Every key and every value is stored as bytes that start with the format version, one
ASCII digit (``b"1"`` today), then a one-letter type tag, then the payload:

=====  ===================================  ===============================
tag    Python type                          payload
=====  ===================================  ===============================
``s``  ``str``                              UTF-8
``i``  ``int`` (not ``bool``)               decimal ASCII, ``-`` for negatives
``b``  ``bytes``                            the bytes themselves
``p``  anything else (tuples, floats, ...)  ``pickle`` protocol 5
=====  ===================================  ===============================

So the key ``"cat"`` is stored as ``b"1scat"`` and the count ``3`` as ``b"1i3"``: readable in
``redis-cli`` or ``sqlite3``, and equal keys give equal bytes for the three plain types
(``1`` and ``True`` are different keys here, as they are not in a ``dict``: use one type per
key space). Pickled keys must pickle deterministically (tuples of plain values do).
A reader meets a version it does not know with ``StateFormatError``, never a guess.
"""

from __future__ import annotations

import pickle
from typing import Any

from ._errors import StateFormatError

__all__ = ["FORMAT_VERSION", "decode", "encode"]

#: The version digit every stored key and value starts with.
FORMAT_VERSION = 1
_V = str(FORMAT_VERSION).encode()


def encode(obj: Any) -> bytes:
    """``obj`` as stored bytes (see the module's table)."""
    t = type(obj)
    if t is str:
        return _V + b"s" + obj.encode()
    if t is int:
        return _V + b"i" + str(obj).encode()
    if t is bytes:
        return _V + b"b" + obj
    return _V + b"p" + pickle.dumps(obj, protocol=5)


def decode(data: bytes) -> Any:
    """The object ``encode`` stored as ``data``."""
    data = bytes(data)
    if data[:1] != _V or len(data) < 2:
        raise StateFormatError(
            f"stored state {data[:16]!r} is not in format version {FORMAT_VERSION} (it starts "
            f"with {data[:1]!r}): it was written by another version of squall or by another "
            f"program; point topology.state.provider.config at a store of this version"
        )
    tag, payload = data[1:2], data[2:]
    if tag == b"s":
        return payload.decode()
    if tag == b"i":
        return int(payload)
    if tag == b"b":
        return payload
    if tag == b"p":
        return pickle.loads(payload)
    raise StateFormatError(f"stored state {data[:16]!r} has an unknown type tag {tag!r}")
