"""The peer benchmark's arithmetic: medians over rounds, the best peer, per-round ratios, and the
figures and table rows made from them (bench/peers/summary.py)."""

from __future__ import annotations

import pytest
from bench.peers.summary import (
    Comparison,
    Rates,
    best_peer,
    compare,
    median,
    rate_figures,
    ratio_figures,
    round_ratios,
    rows,
)

ONE = "enqueue one job per call"
PROCESS = "process no-op jobs"
FAIL = "always-failing jobs to the dead/failed state"
RETRY = "retry every failed job"
PEERS = ("pgqueuer", "oban-py")
OURS = ("redrive HTTP", "redrive embedded")
SQLITE = "redrive embedded SQLite"


def rates() -> Rates:
    return {
        "pgqueuer": {ONE: [2_000.0, 2_100.0, 1_900.0], RETRY: [40_000.0, 41_000.0, None]},
        "oban-py": {ONE: [1_400.0, 1_500.0, 1_450.0], RETRY: [70_000.0, 80_000.0, 75_000.0]},
        "redrive HTTP": {ONE: [400.0, 420.0, None], RETRY: [17_500.0, 16_000.0, 20_000.0]},
        "redrive embedded": {ONE: [2_000.0, 4_200.0, 3_800.0], RETRY: [None, None, None]},
    }


def test_median_skips_rounds_that_failed() -> None:
    assert median([3.0, None, 1.0, 2.0]) == 2.0
    assert median([4.0, None, 1.0]) == 2.5
    assert median([None, None]) is None
    assert median([]) is None


def test_best_peer_is_the_highest_median_on_each_path() -> None:
    assert best_peer(rates(), PEERS, ONE) == "pgqueuer"
    assert best_peer(rates(), PEERS, RETRY) == "oban-py"


def test_best_peer_ignores_peers_without_figures_and_may_be_none() -> None:
    measured = rates()
    measured["pgqueuer"][ONE] = [None, None, None]
    assert best_peer(measured, PEERS, ONE) == "oban-py"
    assert best_peer(measured, ("absent",), ONE) is None


def test_ratios_pair_rounds_and_drop_any_round_missing_a_side() -> None:
    assert round_ratios([400.0, 420.0, None], [2_000.0, 2_100.0, 1_900.0]) == [0.2, 0.2]
    assert round_ratios([1.0, 2.0], [None, 0.0]) == []


def test_compare_reports_each_redrive_column_against_the_best_peer_with_its_target() -> None:
    found = compare(rates(), PEERS, OURS, ONE)
    assert [(item.tool, item.peer) for item in found] == [
        ("redrive HTTP", "pgqueuer"),
        ("redrive embedded", "pgqueuer"),
    ]
    http, embedded = found
    assert http.ratios == [0.2, 0.2]
    assert http.target == 0.7
    assert embedded.ratios == [1.0, 2.0, 2.0]
    assert embedded.ratio == 2.0
    assert embedded.target == 1.0


def test_compare_leaves_out_a_column_with_no_measured_round() -> None:
    found = compare(rates(), PEERS, OURS, RETRY)
    assert [item.tool for item in found] == ["redrive HTTP"]
    assert found[0].peer == "oban-py"
    assert found[0].ratios == pytest.approx([0.25, 0.2, 0.26666667])
    assert found[0].ratio == pytest.approx(0.25)


def test_ratio_figures_carry_the_target_as_a_lower_bound_and_every_round() -> None:
    comparison = Comparison("redrive HTTP", ONE, "pgqueuer", [0.5, 0.8, 0.6], 0.7)
    [figure] = ratio_figures([comparison])
    assert figure.name == "redrive HTTP / pgqueuer: enqueue one job per call"
    assert figure.value == 0.6
    assert figure.at_least is True
    assert figure.met is False
    assert figure.note == "per round: 0.50, 0.80, 0.60"
    assert figure.detail == {"ratios": [0.5, 0.8, 0.6], "peer": "pgqueuer"}
    met = ratio_figures([Comparison("redrive HTTP", ONE, "pgqueuer", [0.7], 0.7)])
    assert met[0].met is True


def test_rate_figures_are_medians_with_every_round_kept() -> None:
    figures = rate_figures(rates(), ["pgqueuer", "redrive embedded"], [ONE, RETRY], 20_000)
    assert [figure.name for figure in figures] == [
        "pgqueuer: enqueue one job per call",
        "pgqueuer: retry every failed job",
        "redrive embedded: enqueue one job per call",
    ]
    retry = figures[1]
    assert retry.value == 40_500.0
    assert retry.unit == "jobs/s"
    assert retry.note == "median of 2; min 40,000, max 41,000"
    assert retry.detail == {"rounds": [40_000.0, 41_000.0, None], "jobs": 20_000}
    assert retry.target is None


def test_rows_show_peers_first_then_redrive_with_its_ratio_and_the_peer_compared() -> None:
    table = rows(rates(), PEERS, OURS, [ONE, RETRY])
    assert table == [
        [ONE, "2,000", "1,450", "410 (0.20x)", "3,800 (2.00x)", "pgqueuer"],
        [RETRY, "40,500", "75,000", "17,500 (0.25x)", "n/a", "oban-py"],
    ]


def test_rows_without_any_peer_figure_show_plain_rates() -> None:
    table = rows({"redrive HTTP": {ONE: [300.0]}}, PEERS, ("redrive HTTP",), [ONE])
    assert table == [[ONE, "n/a", "n/a", "300", "none"]]


def sqlite_rates() -> Rates:
    return {
        "pgqueuer": {ONE: [2_000.0], PROCESS: [4_000.0, 4_400.0], FAIL: [2_000.0, 1_900.0]},
        "redrive embedded": {ONE: [700.0], PROCESS: [3_000.0, 3_200.0], FAIL: [2_000.0, None]},
        SQLITE: {ONE: [1_400.0], PROCESS: [6_000.0, 4_000.0], FAIL: [2_500.0, 3_000.0]},
    }


def test_the_sqlite_column_is_compared_with_postgresql_embedded_on_process_and_fail() -> None:
    ours = ("redrive embedded", SQLITE)
    [embedded, sqlite] = compare(sqlite_rates(), PEERS, ours, PROCESS)
    assert (embedded.peer, embedded.target) == ("pgqueuer", 1.5)
    assert sqlite.peer == "redrive embedded"
    assert sqlite.ratios == pytest.approx([2.0, 1.25])
    assert sqlite.target == 1.5
    [_, failing] = compare(sqlite_rates(), PEERS, ours, FAIL)
    assert (failing.peer, failing.ratios, failing.target) == ("redrive embedded", [1.25], 1.5)


def test_the_sqlite_column_has_no_ratio_on_the_other_paths_nor_without_its_baseline() -> None:
    assert [
        item.tool for item in compare(sqlite_rates(), PEERS, ("redrive embedded", SQLITE), ONE)
    ] == ["redrive embedded"]
    alone = sqlite_rates()
    del alone["redrive embedded"]
    assert compare(alone, PEERS, (SQLITE,), PROCESS) == []
    assert compare(alone, (), (SQLITE,), PROCESS) == []


def test_rows_show_the_sqlite_ratio_on_its_target_paths_and_its_plain_rate_elsewhere() -> None:
    table = rows(sqlite_rates(), ("pgqueuer",), ("redrive embedded", SQLITE), [ONE, PROCESS])
    assert table == [
        [ONE, "2,000", "700 (0.35x)", "1,400", "pgqueuer"],
        [PROCESS, "4,200", "3,100 (0.74x)", "5,000 (1.62x)", "pgqueuer"],
    ]
    [figure] = ratio_figures(compare(sqlite_rates(), PEERS, (SQLITE,), FAIL))
    assert figure.name == "redrive embedded SQLite / redrive embedded: " + FAIL
    assert figure.target == 1.5
    assert figure.met is False
