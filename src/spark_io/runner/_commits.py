"""A spout's ``commit`` on Spark: once per micro-batch, from the driver, the last one included.

Spark tells a streaming source that a micro-batch is done only when it plans the *next*
one (it commits batch ``N``'s end offsets while starting ``N + 1``). The last micro-batch
of an ``availableNow`` run is never followed by another, and neither is the last one
before an idle stretch or a restart with no new data: a spout's ``commit`` would lag one
micro-batch behind forever, where local mode commits everything that was acked.

So the runner commits itself, in the query's ``foreachBatch`` once the micro-batch's
output is written: it reads the batch's end offsets from Spark's offset log (written before
the batch runs, the same on every run of the batch) and hands each spout its own. To find
its own, each spout's offsets carry its component id (``NamedReader``), and Spark's own,
late call to the source's ``commit`` does nothing. A batch that runs again after a driver
crash commits the same ends again: ``commit(end)`` says "every row before ``end`` is done",
which stays true.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._errors import CheckpointError
from .._stream_source import PositionReader, WrappedReader

__all__ = ["SPOUT_KEY", "NamedReader", "commit_micro_batch"]

#: The offset entry naming the spout (task indexes and ``offset`` are the other keys).
SPOUT_KEY = "__spout"


def _strip(offsets: Mapping[str, Any]) -> dict[str, int]:
    return {k: v for k, v in offsets.items() if k != SPOUT_KEY}


@dataclass
class NamedReader(WrappedReader):
    """``inner``'s offsets with the spout's id added; everything else is ``inner``'s."""

    @classmethod
    def of(cls, reader: PositionReader) -> NamedReader:
        return cls.wrapping(reader)

    def _tag(self, offsets: Mapping[str, int]) -> dict[str, Any]:
        return {**offsets, SPOUT_KEY: self.component}

    def initial(self) -> dict[str, Any]:
        return self._tag(self.inner.initial())

    def available(self) -> dict[str, Any]:
        return self._tag(self.inner.available())

    def latest(self, start: dict[str, Any], max_rows: int | None) -> dict[str, Any]:
        return self._tag(self.inner.latest(_strip(start), max_rows))

    def ranges(self, start: dict[str, Any], end: dict[str, Any]) -> Any:
        return self.inner.ranges(_strip(start), _strip(end))

    def commit(self, end: dict[str, Any]) -> None:
        """Spark's call, one micro-batch late: the driver has committed already."""


def commit_micro_batch(
    checkpoint: str, batch_id: int, readers: Mapping[str, PositionReader]
) -> None:
    """Tell every spout that the rows of micro-batch ``batch_id`` are done."""
    path = Path(checkpoint) / "offsets" / str(batch_id)
    try:
        lines = path.read_text().splitlines()
    except OSError as exc:
        raise CheckpointError(
            f"cannot read micro-batch {batch_id}'s offsets from {str(path)!r} ({exc}); the "
            f"spouts' commits come from there"
        ) from exc
    for line in lines[2:]:  # the version, the batch's metadata, then one line per source
        try:
            offsets = json.loads(line)
            reader = readers[offsets[SPOUT_KEY]]
        except (ValueError, TypeError, KeyError) as exc:
            raise CheckpointError(
                f"micro-batch {batch_id}'s offsets in {str(path)!r} hold {line!r}, which names "
                f"no spout of this topology ({exc!r}); was the checkpoint written by another "
                f"topology?"
            ) from exc
        reader.commit(_strip(offsets))
