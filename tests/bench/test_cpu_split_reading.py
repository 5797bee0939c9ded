"""The CPU reading of ``benchmarks.cpu_split`` stays a reading when processes
come and go: a PostgreSQL backend that exits inside the window (another
session's, in a parallel test run) must not drive the figure below zero."""

from __future__ import annotations

from benchmarks.cpu_split import postgres_cpu_delta_s


def test_an_exited_backend_takes_nothing_away() -> None:
    before = {10: 5.0, 11: 30.0}  # 11 exits inside the window
    after = {10: 5.5}
    assert postgres_cpu_delta_s(before, after) == 0.5


def test_a_new_backend_counts_all_it_spent() -> None:
    assert postgres_cpu_delta_s({10: 1.0}, {10: 1.25, 12: 0.75}) == 1.0


def test_a_reused_pid_counts_as_new() -> None:
    # pid 10 exited and its number went to a new backend with less CPU.
    assert postgres_cpu_delta_s({10: 9.0}, {10: 0.25}) == 0.25
