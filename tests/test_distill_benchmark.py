"""The on-policy distillation benchmark's bookkeeping (benchmarks/distill.py): a finished arm is read back, not
trained again; the summary reads every finished seed, the first step at the teacher's accuracy and the accuracy at
equal training seconds."""

from __future__ import annotations

import json

import pytest

from benchmarks import distill


def curve(*points: tuple[int, float, float]) -> list[dict]:
    return [{"step": s, "seconds": t, "accuracy": a} for s, t, a in points]


def test_a_finished_arm_is_read_back_and_an_unfinished_one_is_trained_and_saved(tmp_path):
    trained = []

    def train() -> dict:
        trained.append(1)
        return {"curve": curve((0, 0.0, 0.1), (10, 5.0, 0.4)), "final": "model"}

    first = distill.finished_arm(tmp_path / "rl", train)
    again = distill.finished_arm(tmp_path / "rl", train)
    assert trained == [1] and first == again
    assert json.loads((tmp_path / "rl" / "arm.json").read_text())["final"] == "model"


def test_steps_to_the_teacher_and_accuracy_at_equal_seconds():
    rl = curve((0, 0.0, 0.15), (10, 200.0, 0.3), (20, 400.0, 0.7), (30, 600.0, 0.72))
    assert distill.steps_to_teacher(rl, 0.7) == 20 and distill.steps_to_teacher(rl, 0.8) is None
    assert distill.at_seconds(rl, 450.0)["accuracy"] == 0.7  # the last evaluation within the budget


def test_the_sft_arm_is_charged_its_share_of_the_teacher_sampling_and_equal_time_reads_it():
    result = {"sft_teacher_sampling_s": 300.0,
              "curves": {"sft": curve((0, 0.0, 0.1), (10, 100.0, 0.5), (20, 200.0, 0.6)),
                         "rl": curve((0, 0.0, 0.1), (10, 150.0, 0.3), (20, 300.0, 0.4))}}
    charged = distill.charged_curves(result)
    assert [p["seconds"] for p in charged["sft"]] == [0.0, 250.0, 500.0]  # + 300 s x step / 20
    assert charged["rl"] == result["curves"]["rl"] and result["curves"]["sft"][2]["seconds"] == 200.0  # unchanged
    assert distill.at_seconds(charged["sft"], 300.0)["step"] == 10  # at rl's 300 s, sft has paid for 10 steps


def test_the_summary_reads_every_finished_seed_with_means_over_seeds(tmp_path, monkeypatch, capsys):
    for seed, end in ((0, 0.6), (1, 0.8)):
        result = {"seed": seed, "teacher_accuracy": 0.7,
                  "curves": {"rl": curve((0, 0.0, 0.1), (10, 100.0, end)),
                             "distill": curve((0, 0.0, 0.1), (10, 50.0, 0.75))},
                  "reverse_kl": {"start": 0.3, "rl": 0.2, "distill": 0.05}}
        (tmp_path / f"seed{seed}").mkdir()
        (tmp_path / f"seed{seed}" / "result.json").write_text(json.dumps(result))
    (tmp_path / "seed2").mkdir()  # a seed still running: no result.json, not read
    monkeypatch.setattr("sys.argv", ["distill", "--summary", "--output", str(tmp_path)])
    distill.main()
    out = capsys.readouterr().out
    assert "70.0% ± 14.1%" in out  # rl's step-10 accuracy over the 2 finished seeds
    assert "10 ± 0 (1 of 2 seeds)" in out  # rl reached the teacher (at step 10) on one seed
    assert "10 ± 0 (2 of 2 seeds)" in out  # distill on both
    assert (tmp_path / "distill.png").is_file()


def test_the_summary_without_a_finished_seed_says_what_to_run(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("sys.argv", ["distill", "--summary", "--output", str(tmp_path)])
    with pytest.raises(SystemExit) as stopped:
        distill.main()
    assert stopped.value.code == 2 and "no finished seed" in capsys.readouterr().err
