"""An ack's element of complete_jobs' JSON rows: the record `present` makes of its fields."""

from __future__ import annotations

from itertools import product
from typing import Any

from redrive.domain.frozen import Assembler
from redrive.ports.attempts import Completion
from redrive.store.base import present
from redrive.store.jobs import ack_record

assemble_completion = Assembler(Completion)


def test_an_ack_record_is_its_fields_in_order_without_the_null_ones() -> None:
    # Falsy values that are not null (0, False, "", [], {}) are kept, as `present` keeps them.
    results: list[Any] = [None, 0, False, "", [], {}, {"n": 1}, "done"]
    for worker_id, lease_token, result in product([None, "w-1", ""], [None, "t-1"], results):
        completion = assemble_completion.adopt(
            {"job_id": "job-1", "worker_id": worker_id, "lease_token": lease_token,
             "result": result, "event_id": "evt_1"}
        )  # fmt: skip
        expected = present(
            {"id": "job-1", "worker_id": worker_id, "lease_token": lease_token,
             "result": result, "event_id": "evt_1"}
        )  # fmt: skip
        record = ack_record(completion)
        assert record == expected
        assert list(record) == list(expected)
        if result is not None:
            assert record["result"] is result


def test_a_completed_job_is_read_from_its_row_by_its_columns_places() -> None:
    """Whatever the order of the statement's columns (the two stores' differ), each field is
    the value of its own column, in the fields' order, and the reader is made once a shape."""
    from dataclasses import fields

    from redrive.ports.attempts import CompletedJob
    from redrive.store.jobs import completed_job_reader

    names = [item.name for item in fields(CompletedJob)]
    for columns in (
        ("kind", *names, "events"),
        ("events", *reversed(names), "kind"),
        ("kind", "extra", *names[::2], "events", *names[1::2]),
    ):
        row = tuple(f"value of {column}" for column in columns)
        assemble, read = completed_job_reader(columns)
        state = read(row)
        assert list(state) == names
        assert state == {name: f"value of {name}" for name in names}
        job = assemble.adopt(state)
        values: dict[str, Any] = {name: f"value of {name}" for name in names}
        assert job == CompletedJob(**values)
        assert completed_job_reader(columns)[1] is read
