"""The figures the real-model tables are made of (benchmarks/common.py): means over seeds that say how many seeds
have the figure, and trend windows by step number that never overlap."""

from __future__ import annotations

import math

import pytest

from benchmarks.common import cell, mean, mean_sd, spread, step_windows, window_mean


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def test_a_mean_over_seeds_says_how_many_seeds_have_the_figure():
    assert mean_sd([0.5, 0.7, 0.6], pct) == "60.0% ± 10.0%"
    assert mean_sd([0.5, None, 0.7], pct) == "60.0% ± 14.1% (2 of 3 seeds)"  # not labelled as 3 seeds
    assert mean_sd([0.5, float("nan"), None], pct) == "50.0% ± 0.0% (1 of 3 seeds)"
    assert mean_sd([None, None], pct) == "-"
    assert mean_sd([0.1, -0.3], lambda v: f"{v:+.2f}") == "-0.10 ± 0.28"  # the sd carries no sign


def test_a_start_end_column_is_spread_per_side_and_a_missing_figure_reads_n_a():
    assert spread([(0.2, 0.4), (0.4, None)], ".2f") == "0.30 ± 0.14 -> 0.40 ± 0.00 (1 of 2 seeds)"
    assert cell((0.2, float("nan")), ".2f") == "0.20 -> n/a"
    assert math.isnan(mean([None, float("nan")])) and mean([1, None, 2]) == 1.5


def test_trend_windows_are_the_first_and_last_steps_by_number_and_never_overlap():
    assert step_windows(20, 10) == (range(1, 11), range(11, 21))
    assert step_windows(25, 10) == (range(1, 11), range(16, 26))
    with pytest.raises(ValueError, match="do not overlap"):
        step_windows(15, 10)


def test_a_window_mean_takes_only_its_own_steps_even_when_steps_lack_the_figure():
    # a figure logged only at steps 9..20 (steps 1-8 had no valid proposal): a true 0 -> 1
    points = [(9, 0.0), (10, 0.0)] + [(s, 1.0) for s in range(11, 21)]
    first, last = step_windows(20, 10)
    assert (window_mean(points, first), window_mean(points, last)) == (0.0, 1.0)
    # the first ten points that exist would have read 0.0 for two and 1.0 for eight: 0.8, not 0.0
    assert math.isnan(window_mean([(15, 1.0)], first))


def test_first_and_last_steps_are_chosen_by_step_number_not_by_position():
    from benchmarks.common import first_last_steps

    rows = [{"step": s} for s in (1, 2, 3, 5, 6, 7, 8, 9, 10, 11, 12)]  # step 4 logged nothing
    first, last = first_last_steps(rows, 5)
    assert [r["step"] for r in first] == [1, 2, 3, 5] and [r["step"] for r in last] == [8, 9, 10, 11, 12]


def test_time_figures_leave_out_evaluation_steps_and_read_the_endpoint_only_where_it_was_called(tmp_path):
    import json

    from benchmarks.common import time_figures

    rows = [{"step": 0, "eval/accuracy": 0.0},
            {"step": 1, "perf/step_s": 10.0, "perf/env_s": 1.0, "perf/gen_s": 5.0},
            {"step": 2, "perf/step_s": 20.0, "perf/env_s": 1.0, "perf/gen_s": 5.0, "eval/accuracy": 0.5}]
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    assert time_figures(tmp_path) == {"step_s": 10.0, "env_share": 0.1}  # step 2 held an evaluation
    rows.append({"step": 3, "perf/step_s": 30.0, "perf/gen_s": 4.0, "endpoint/calls": 10,
                 "endpoint/call_ms_mean": 2500.0, "endpoint/batch_calls_mean": 5.0, "endpoint/engine_s": 3.0})
    (tmp_path / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    figures = time_figures(tmp_path)
    assert figures["step_s"] == 20.0 and figures["env_share"] == pytest.approx(0.05)  # no env_s: none spent
    # 10 concurrent calls of 2.5 s each (their latencies overlap) in 4 s of generation, 3 s of it in the engine
    assert (figures["call_ms"], figures["calls_per_batch"], figures["outside_engine_share"]) == (2500.0, 5.0, 0.25)
