"""The batch side of :class:`~privstream.agents.validation.ExampleValidator`: an ``ExampleBatch``
checked row by row.

Only what concerns every row at once rejects the whole batch (its stream, columns that are
lists); each row is otherwise judged as the same fields sent as a single example would be
(:meth:`BatchValidation._row_invalid` asks the single-example check itself), so a row's reason
never depends on the batch it came in.
"""

from __future__ import annotations

from typing import Any

from privstream.agents.validation_rules import (
    Invalid,
    RejectedRow,
    RowEncoder,
    Stream,
    StreamRule,
    ValidExample,
    ValidRows,
)
from privstream.agents.validation_schema import (
    ABSENT,
    BATCH_COLUMNS,
    REQUIRED_COLUMNS,
    STREAM_ID,
    STREAM_ID_FORM,
    check_columns,
    missing_or_wrong,
    row_message,
    row_of,
)

__all__ = ["BatchValidation"]


class BatchValidation:
    """Rows of example batches, checked; the base of :class:`~privstream.agents.validation.ExampleValidator`,
    which sets the streams and their rules and checks single examples (:meth:`_single`)."""

    _encoders: dict[str, RowEncoder]
    _classes: dict[str, int]
    _streams: dict[str, Stream]
    _applying: dict[str, tuple[StreamRule, ...]]
    _good_ids: frozenset[str]

    def _single(self, data: dict[str, Any]) -> ValidExample | Invalid:
        raise NotImplementedError  # the single-example check, ExampleValidator's

    def _batch(self, data: dict[str, Any]) -> ValidRows | Invalid:
        message = self._batch_message(data)
        if type(message) is Invalid:
            return message
        stream_id, columns = message
        return self._batch_rows(stream_id, columns, 0, None)

    def _batch_rows(self, stream_id: str, sent: dict[str, list[Any]], lo: int, hi: int | None) -> ValidRows:
        """Rows ``[lo, hi)`` of a batch (``hi`` None: to its end), checked; ``sent``: its columns
        as sent, what a row's reason and its dead letter are made of. Rows are numbered in the
        whole batch."""
        columns = sent if lo == 0 and hi is None else {name: column[lo:hi] for name, column in sent.items()}
        encode = self._encoders.get(stream_id)
        if encode is not None:  # each row's vector; a refused row (None) is then judged as sent
            encoded = [encode(x) for x in columns["xs"]]
            columns = {**columns, "xs": [None if type(e) is Invalid else e for e in encoded]}
        values, failed = check_columns(columns, self._classes.get(stream_id, 2))
        why = {i: self._row_invalid(stream_id, sent, lo + i) for i in sorted(failed)}
        # The stream's rules in their order, each on the rows no earlier check rejected.
        stream = self._streams[stream_id]
        xs, users, times = values["xs"], values.get("user_ids"), values.get("event_times")
        for rule in self._applying[stream_id]:
            if rule.check_rows is not None:
                rule.check_rows(stream, xs, users, times, why)
                continue
            for i, x in enumerate(xs):
                if i not in why:
                    invalid = rule.check(stream, x, users[i] if users else None, times[i] if times else None)
                    if invalid is not None:
                        why[i] = invalid
        ids, rows = values.get("ids"), len(xs)
        if not why:
            return ValidRows(
                stream_id, list(range(lo, lo + rows)), values["xs"], values["ys"], users, times, ids, []
            )
        kept = [i for i in range(rows) if i not in why]

        def pick(column: list[Any]) -> list[Any]:
            return [column[i] for i in kept]

        return ValidRows(
            stream_id,
            [lo + i for i in kept],
            pick(values["xs"]),
            pick(values["ys"]),
            None if users is None else pick(users),
            None if times is None else pick(times),
            None if ids is None else pick(ids),
            [RejectedRow(lo + i, why[i], row_message(stream_id, sent, lo + i)) for i in sorted(why)],
        )

    def _batch_message(self, data: dict[str, Any]) -> tuple[str, dict[str, list[Any]]] | Invalid:
        """What concerns every row of a batch: its stream, and columns that are lists (the ones it
        gives, by name); else why the whole message is rejected."""
        stream_id = data.get("stream_id", ABSENT)
        if type(stream_id) is not str or (
            stream_id not in self._good_ids and not STREAM_ID.fullmatch(stream_id)
        ):
            return missing_or_wrong("stream_id", stream_id, STREAM_ID_FORM)
        columns: dict[str, list[Any]] = {}
        for name, *_ in BATCH_COLUMNS:
            column = data.get(name, ABSENT)
            if (column is None or column is ABSENT) and name not in REQUIRED_COLUMNS:
                continue  # an optional column left out
            if type(column) is not list:
                return missing_or_wrong(name, column, "a list with an entry per row")
            columns[name] = column
        if not columns["xs"]:
            return Invalid("wrong_type", "xs: should have at least 1 row")
        if stream_id not in self._streams:
            return Invalid("unknown_stream", f"stream {stream_id!r} is not configured")
        return stream_id, columns

    def _row_invalid(self, stream_id: str, columns: dict[str, list[Any]], i: int) -> Invalid:
        """Why row ``i`` is invalid: a given column without an entry for it, else the reason the row
        gets as a single example (the same check, so a row's reason never depends on the batch)."""
        for name, field, *_ in BATCH_COLUMNS:
            column = columns.get(name)
            if column is not None and i >= len(column):
                return Invalid(
                    "missing_field",
                    f"{field}: {name} has no entry for row {i} ({len(column)} entries)",
                )
        result = self._single(row_of(stream_id, columns, i))
        if type(result) is not Invalid:  # the column's check and the field's are the same type
            return Invalid("wrong_type", f"row {i}: an entry is not of its field's type")
        return result
