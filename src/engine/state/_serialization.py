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

An ``int`` with more digits than Python converts to text (``sys.get_int_max_str_digits()``,
4300 by default) is pickled (``p``).

So the key ``"cat"`` is stored as ``b"1scat"`` and the count ``3`` as ``b"1i3"``: readable in
``redis-cli`` or ``sqlite3``, and equal keys give equal bytes for the three plain types
(``1`` and ``True`` are different keys here, as they are not in a ``dict``: use one type per
key space). Pickled keys must pickle deterministically (tuples of plain values do).
A reader meets a version it does not know with ``StateFormatError``, never a guess.

``encode_many`` / ``decode_many`` are the same for many objects in one call (a checkpoint's
changes, a state being loaded): when every object is a ``str`` (or every one an ``int``),
the whole list is converted by C-level ``map`` calls, without a Python step per object;
mixed lists take the common types inline. A large checkpoint or recovery takes a third to
a fifth of the time it took object by object.
"""

from __future__ import annotations

import pickle
from collections.abc import Collection
from operator import itemgetter
from typing import Any

from ._errors import StateFormatError

__all__ = ["FORMAT_VERSION", "decode", "decode_many", "encode", "encode_many"]

#: The version digit every stored key and value starts with.
FORMAT_VERSION = 1
_V = str(FORMAT_VERSION).encode()
_STR, _INT, _INT_FORMAT = _V + b"s", _V + b"i", _V + b"i%d"
_VERSION_BYTE, _STR_TAG, _INT_TAG = _V[0], ord("s"), ord("i")
_HEAD, _PAYLOAD = itemgetter(slice(0, 2)), itemgetter(slice(2, None))


def encode(obj: Any) -> bytes:
    """``obj`` as stored bytes (see the module's table)."""
    t = type(obj)
    if t is str:
        text: str = obj
        return _V + b"s" + text.encode()
    if t is int:
        try:
            return _V + b"i" + str(obj).encode()
        except ValueError:  # too many digits for str(): pickled, below
            pass
    elif t is bytes:
        raw: bytes = obj
        return _V + b"b" + raw
    return _V + b"p" + pickle.dumps(obj, protocol=5)


def encode_many(objs: Collection[Any]) -> list[bytes]:
    """``[encode(o) for o in objs]``, faster."""
    types = set(map(type, objs))
    if types == {str}:
        return list(map(_STR.__add__, map(str.encode, objs)))
    try:
        if types == {int}:
            return list(map(_INT_FORMAT.__mod__, objs))
        out: list[bytes] = []
        append = out.append
        for o in objs:
            t = type(o)
            if t is str:
                append(_STR + o.encode())
            elif t is int:
                append(b"%b%d" % (_INT, o))
            else:
                append(encode(o))
        return out
    except ValueError:  # an int too long for %d (``encode`` pickles it)
        return [encode(o) for o in objs]


def decode_many(datas: Collection[bytes]) -> list[Any]:
    """``[decode(d) for d in datas]``, faster."""
    if set(map(type, datas)) == {bytes}:
        heads = set(map(_HEAD, datas))
        if heads == {_STR}:
            return list(map(bytes.decode, map(_PAYLOAD, datas)))
        if heads == {_INT}:
            return list(map(int, map(_PAYLOAD, datas)))
    out: list[Any] = []
    append = out.append
    for d in datas:
        if type(d) is bytes and len(d) > 1 and d[0] == _VERSION_BYTE:
            tag = d[1]
            if tag == _STR_TAG:
                append(d[2:].decode())
                continue
            if tag == _INT_TAG:
                append(int(d[2:]))
                continue
        append(decode(d))
    return out


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
