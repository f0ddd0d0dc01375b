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


def test_final_answers_are_read_by_the_verifier_and_the_exact_check_and_disputes_counted(monkeypatch):
    from rlvr.evaluation.evaluate import EvalRun, ProblemResult

    answers = [("12 + 30 = 42", "42", True), ("12 + 30 = 42; check: 42 - 30 = 12", "42", True),  # exact: 12
               ("I think 7", "8", False)]
    results = [ProblemResult(task="t", uid=str(i), reference=ref, completions=[
        {"text": text, "answer": None, "correct": correct, "tokens": 3, "truncated": False}])
        for i, (text, ref, correct) in enumerate(answers)]
    monkeypatch.setattr(distill, "evaluate_model", lambda cfg, model, settings: EvalRun(results, settings, 3, 0.0))
    cfg = distill.load_config(distill.RECIPE, [])
    checked = distill.checked_answers(cfg, "model", 3)
    assert checked == {"problems": 3, "verifier": 2 / 3, "exact": 1 / 3, "disputes": 1}


def test_check_finals_reads_each_final_model_on_disk_once_and_names_the_missing(tmp_path, monkeypatch, capsys):
    calls = []
    monkeypatch.setattr(distill, "checked_answers", lambda cfg, model, problems: calls.append(model) or {"m": model})
    (tmp_path / "teacher").mkdir()
    (tmp_path / "sft").mkdir()
    result = {"seed": 0, "teacher": str(tmp_path / "teacher"),
              "final_model": {"sft": str(tmp_path / "sft"), "rl": str(tmp_path / "gone")},
              "final_check": {"sft": {"m": "checked before"}}}
    args = distill_args(tmp_path)
    checked = distill.check_finals(args, result)
    assert calls == [str(tmp_path / "teacher")]  # sft was checked before, rl's model is gone
    assert checked["final_check"] == {"sft": {"m": "checked before"}, "teacher": {"m": str(tmp_path / "teacher")}}
    assert f"seed 0 rl: {tmp_path / 'gone'} is no longer on disk" in capsys.readouterr().out


def distill_args(tmp_path):
    import argparse

    return argparse.Namespace(output=str(tmp_path), eval_problems=3, steps=2, eval_every=1, prompts_per_step=2,
                              samples=2, max_new_tokens=16)
