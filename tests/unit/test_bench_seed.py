"""The dead-letter benchmark's seed templates: one COPY cell per column of each table, whatever
fields the store's records leave out."""

from __future__ import annotations

from bench.seed import DEAD_LETTER_COLUMNS, SNAPSHOT_COLUMNS, Template, type_templates


def cells(template: Template) -> list[str]:
    """The template's COPY cells, holes left empty (a hole never holds a tab)."""
    return "".join(template.literals).split("\t")


def test_a_type_template_has_a_cell_for_every_dead_letter_and_snapshot_column() -> None:
    templates = type_templates("billing.charge", "billing", 1_700_000_000_000)
    dead_letter = cells(templates.dead_letter_line)
    assert len(dead_letter) == len(DEAD_LETTER_COLUMNS)
    # A seeded dead letter has not moved and has no aggregate key: NULL, not a missing cell.
    for column in ("moved_at", "moved_by", "aggregate_key"):
        assert dead_letter[DEAD_LETTER_COLUMNS.index(column)] == "\\N"
    snapshot = cells(templates.snapshot_line)
    assert len(snapshot) == len(SNAPSHOT_COLUMNS)
    assert snapshot[SNAPSHOT_COLUMNS.index("aggregate_key")] == "\\N"
