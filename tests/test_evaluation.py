"""Evaluation: the estimators against brute force over k-subsets, answer grouping, `rlvr eval`'s outputs, and the
best model kept during training."""

import itertools
import json
import math
import random
import shutil
import subprocess
from collections import Counter
from fractions import Fraction
from pathlib import Path

import pytest
from conftest import ROOT, rlvr_command

from rlvr.cli.eval import model_labels, parse_ks
from rlvr.config import TinyModelConfig, build_config
from rlvr.errors import ConfigError, RlvrError
from rlvr.evaluation.estimators import avg_at_k, bootstrap_ci, majority_at_k, pass_at_k
from rlvr.evaluation.evaluate import answer_classes
from rlvr.models.loading import build_tiny_model, save_pretrained, train_tokenizer
from rlvr.tasks import make_task
from rlvr.training.checkpoint import BEST, best_model_info
from rlvr.training.trainer import Trainer


def brute_pass(n: int, c: int, k: int) -> Fraction:
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return Fraction(sum(any(s) for s in subsets), len(subsets))


def brute_majority(labels: list, right: dict, k: int) -> Fraction:
    """Mean over all k-subsets of the chance that the most frequent answer (ties: uniform) is correct."""
    total, count = Fraction(0), 0
    for subset in itertools.combinations(labels, k):
        count += 1
        votes = Counter(a for a in subset if a is not None)
        if votes:
            top = max(votes.values())
            tied = [a for a, v in votes.items() if v == top]
            total += Fraction(sum(right[a] for a in tied), len(tied))
    return total / count


@pytest.mark.parametrize("n", range(1, 9))
def test_pass_at_k_equals_enumeration_over_all_k_subsets(n):
    for c in range(n + 1):
        for k in range(1, n + 1):
            assert pass_at_k(n, c, k) == pytest.approx(float(brute_pass(n, c, k)), abs=1e-12)


def test_pass_at_k_is_finite_and_exact_for_1024_samples():
    n = 1024
    for c in (0, 1, 2, 3, 10, 100, 512, 900, 1000, 1023, 1024):
        for k in (1, 2, 8, 64, 100, 256, 512, 1000, 1024):
            exact = 1 - Fraction(math.comb(n - c, k), math.comb(n, k))
            value = pass_at_k(n, c, k)
            assert math.isfinite(value)
            assert abs(value - float(exact)) < 1e-9, (c, k)


def test_majority_at_k_equals_enumeration_over_all_k_subsets():
    rng = random.Random(0)
    cases = 0
    for _ in range(150):
        n = rng.randint(1, 9)
        kinds = rng.randint(1, 4)
        labels = [rng.choice([*range(kinds), None]) for _ in range(n)]  # None: a sample with no answer
        right = {a: rng.random() < 0.4 for a in range(kinds)}
        votes = Counter(a for a in labels if a is not None)
        classes = sorted(votes)
        got = majority_at_k([votes[a] for a in classes], [right[a] for a in classes], n, list(range(1, n + 1)))
        for k in range(1, n + 1):
            assert got[k] == pytest.approx(float(brute_majority(labels, right, k)), abs=1e-12), (labels, right, k)
            cases += 1
    assert cases > 500


def test_majority_at_k_ties_split_evenly_and_unanswered_samples_never_win():
    # two samples, one right answer and one wrong: a 2-subset is a tie, won half the time
    assert majority_at_k([1, 1], [True, False], 2, [2])[2] == pytest.approx(0.5)
    # one answered (right) sample among four unanswered: it wins whenever it is drawn
    assert majority_at_k([1], [True], 5, [1, 3, 5]) == pytest.approx({1: 0.2, 3: 0.6, 5: 1.0})


def test_majority_at_k_for_1024_samples_is_a_probability_and_matches_known_cases():
    n = 1024
    ks = [1, 4, 64, 512, 1024]
    got = majority_at_k([600, 300, 100], [True, False, False], n, ks)
    assert all(0 <= v <= 1 and math.isfinite(v) for v in got.values())
    assert got[1] == pytest.approx(600 / n)  # maj@1 is the chance of drawing a right sample
    assert got[1024] == 1.0  # with all samples the largest class (right) wins
    assert got[512] > got[64] > got[4] > got[1]
    assert majority_at_k([1024], [True], n, ks) == pytest.approx(dict.fromkeys(ks, 1.0))


def test_avg_at_k_is_the_sample_accuracy():
    assert avg_at_k(8, 3) == 3 / 8


def test_estimators_reject_k_outside_the_samples():
    with pytest.raises(ValueError, match="k=9"):
        pass_at_k(8, 1, 9)
    with pytest.raises(ValueError, match="do not fit"):
        majority_at_k([5, 5], [True, False], 8, [1])


def test_bootstrap_interval_is_reproducible_and_brackets_the_mean():
    values = [float(i % 3 == 0) for i in range(200)]
    low, high = bootstrap_ci(values, seed=1)
    assert (low, high) == bootstrap_ci(values, seed=1)
    assert low < sum(values) / len(values) < high
    assert bootstrap_ci([0.5] * 10) == (0.5, 0.5)


def test_answer_classes_count_votes_per_stated_answer():
    task = make_task("arithmetic", 0, {})
    classes, no_answer, correct_spellings = answer_classes(
        task, ["12", " 12 ", "13", "x", "012"], [True, True, False, False, True])
    assert no_answer == 1
    assert [(c.answer, c.count, c.correct) for c in classes] == [("12", 3, True), ("13", 1, False)]
    assert correct_spellings == 1


def test_math_answers_vote_together_when_equivalent(tmp_path):
    data = tmp_path / "m.jsonl"
    data.write_text("\n".join(json.dumps({"problem": f"p{i}", "answer": "1/2"}) for i in range(3)))
    task = make_task("math", 0, {"path": str(data), "eval_size": 1})
    texts = ["so \\boxed{\\frac{1}{2}}", "the answer is \\boxed{0.5}", "\\boxed{1/2}", "\\boxed{3}"]
    classes, no_answer, correct_spellings = answer_classes(task, texts, [True, True, True, False])
    assert no_answer == 0
    assert sorted((c.count, c.correct) for c in classes) == [(1, False), (3, True)]
    assert correct_spellings == 3  # three ways of writing one half


def test_parse_ks_and_labels_name_the_bad_argument():
    assert parse_ks(None, 12) == [1, 2, 4, 8, 12]
    assert parse_ks("4,1", 8) == [1, 4]
    with pytest.raises(ConfigError, match="--samples 8"):
        parse_ks("16", 8)
    with pytest.raises(ConfigError, match="comma-separated integers"):
        parse_ks("a,b", 8)
    with pytest.raises(ConfigError, match="2 distinct"):
        model_labels(["a", "b"], "x,x")
    assert model_labels(["/r/sft/model", "/r/rl/model"], None) == ["sft/model", "rl/model"]


def test_eval_k_beyond_samples_is_a_config_error():
    with pytest.raises(ConfigError, match="eval.k"):
        build_config({"eval": {"samples": 4, "k": [1, 8]}})


@pytest.fixture
def two_tiny_models(tmp_path) -> list[Path]:
    tokenizer = train_tokenizer([f"{a}+{b}={a + b}" for a in range(10) for b in range(10)], 40)
    spec = TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64)
    paths = []
    for seed in (0, 1):
        path = tmp_path / f"model{seed}"
        save_pretrained(build_tiny_model(spec, tokenizer, seed=seed), tokenizer, path)
        paths.append(path)
    return paths


def test_rlvr_eval_compares_models_and_writes_json_report_and_plots(two_tiny_models, tmp_path):
    out = tmp_path / "eval"
    proc = subprocess.run(
        rlvr_command("eval", *map(str, two_tiny_models), "--samples", "8", "--k", "1,2,8",
                     "--num-problems", "6", "--labels", "first,second", "--output", str(out),
                     "--set", "data.tasks=[{name: arithmetic, args: {max_operand: 9, eval_size: 6}}]",
                     "--set", "rollout.max_new_tokens=3",
                     "--set", "rollout.batch_size=16"),
        cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    for name in ("eval.json", "report.md", "passk.png", "boundary.png"):
        assert (out / name).stat().st_size > 0, name
    data = json.loads((out / "eval.json").read_text())
    assert data["samples"] == 8 and data["k"] == [1, 2, 8] and data["problems"] == 6
    assert [m["label"] for m in data["models"]] == ["first", "second"]
    for model in data["models"]:
        problems = model["problems"]
        assert len(problems) == 6 and all(p["samples"] == 8 for p in problems)
        assert all(p["reference"] == str(sum(map(int, p["uid"].split("+")))) for p in problems)
        assert all(sum(count for _, count, _ in p["answers"]) <= 8 - p["no_answer"] for p in problems)
        for k in (1, 2, 8):
            mean = sum(pass_at_k(8, p["correct"], k) for p in problems) / 6
            stats = model["metrics"][f"pass@{k}"]
            assert stats["value"] == pytest.approx(mean)
            assert stats["ci95"][0] <= stats["value"] <= stats["ci95"][1]
        assert model["metrics"]["avg@8"]["value"] == pytest.approx(sum(p["correct"] for p in problems) / 48)
        greedy = [p["greedy_correct"] for p in problems]
        assert model["metrics"]["greedy"]["value"] == pytest.approx(sum(greedy) / 6)
        assert model["generation"]["completions"] == 6 * (8 + 1)  # sampled plus greedy
        assert {"distinct_answers", "distinct_correct_answers", "token_entropy"} <= set(model["diversity"])
        for p in problems:  # kept completions (--keep-completions, default 4): the greedy one, then samples
            kept = p["completions"]
            assert len(kept) == 4 and [c["greedy"] for c in kept] == [True, False, False, False]
            assert kept[0]["correct"] == p["greedy_correct"] and all(0 < c["tokens"] <= 3 for c in kept)
            assert all(c["answer"] is None or c["answer"] in c["text"] for c in kept)
    [pair] = data["boundary"]
    first, second = ({p["uid"] for p in m["problems"] if p["correct"]} for m in data["models"])
    assert set(pair["only_a"]) == first - second and set(pair["only_b"]) == second - first
    assert pair["solved_by_both"] == len(first & second)
    report = (out / "report.md").read_text()
    assert "pass@8" in report and "Reasoning boundary" in report and "![passk](passk.png)" in report
    assert "## Sample completions" in report
    first = data["models"][0]["problems"][0]
    assert f"**first**, greedy: {'correct' if first['greedy_correct'] else 'wrong'}" in report
    assert f"```text\n{first['completions'][0]['text']}\n```" in report


def test_rlvr_eval_names_a_missing_model_directory(tmp_path):
    proc = subprocess.run(rlvr_command("eval", str(tmp_path / "nope"), "--task", "arithmetic"), cwd=ROOT,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2
    assert "nope" in proc.stderr and "config.json" in proc.stderr


def test_training_eval_logs_pass_at_k_and_keeps_the_best_model(fast_config, tmp_path):
    cfg = build_config(fast_config(steps=4, eval={"every_steps": 2, "num_problems": 4, "samples": 4, "k": [1, 4],
                                                  "best_metric": "eval/pass@4"}))
    Trainer(cfg).fit()
    rows = [json.loads(line) for line in (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()]
    evals = [r for r in rows if "eval/pass@4" in r]
    assert [r["step"] for r in evals] == [0, 2, 4]
    assert all({"eval/accuracy", "eval/pass@1", "eval/maj@4", "eval/avg@4"} <= set(r) for r in evals)
    best = best_model_info(tmp_path / "run")
    top = max(r["eval/pass@4"] for r in evals)
    assert best["metric"] == "eval/pass@4" and best["value"] == top
    assert best["step"] == next(r["step"] for r in evals if r["eval/pass@4"] == top)  # the first to reach it
    link = tmp_path / "run" / BEST
    assert (link / "model.safetensors").is_file() and (link / "config.json").is_file()
    assert len(list((tmp_path / "run").glob("best-step-*"))) == 1  # earlier bests are removed
    # a fresh run in a directory whose earlier run left a best model but no checkpoint starts with no best
    shutil.rmtree(tmp_path / "run" / "checkpoints")
    trainer = Trainer(cfg)
    trainer.pool.close()
    assert best_model_info(tmp_path / "run") is None and not list((tmp_path / "run").glob("best-step-*"))


def test_training_eval_logs_the_first_problems_greedy_completions(fast_config, tmp_path):
    """eval.log_completions=N writes, at every evaluation, the greedy completion of the first N held-out problems
    with what the verifier read and decided, agreeing with the logged accuracy when N covers every problem."""
    cfg = build_config(fast_config(steps=2, eval={"every_steps": 2, "num_problems": 4, "samples": 2,
                                                  "log_completions": 4}))
    Trainer(cfg).fit()
    run = tmp_path / "run"
    rows = [json.loads(line) for line in (run / "eval_completions.jsonl").read_text().splitlines()]
    assert [r["step"] for r in rows] == [0] * 4 + [2] * 4
    problems = [make_task("arithmetic", 0, {"max_operand": 9, "eval_size": 10}).problem("eval", i) for i in range(4)]
    assert [(r["prompt"], r["reference"]) for r in rows] == [(p.prompt, p.answer) for p in problems] * 2
    for r in rows:
        assert r["correct"] == (r["answer"] == r["reference"])
    metrics = {r["step"]: r for r in map(json.loads, (run / "metrics.jsonl").read_text().splitlines())}
    for step in (0, 2):
        assert metrics[step]["eval/accuracy"] == sum(r["correct"] for r in rows if r["step"] == step) / 4
    cfg = build_config(fast_config(steps=1, eval={"every_steps": 1, "num_problems": 2},
                                   tracking={"output_dir": str(tmp_path / "plain")}))
    Trainer(cfg).fit()
    assert (tmp_path / "plain" / "metrics.jsonl").is_file()
    assert not (tmp_path / "plain" / "eval_completions.jsonl").exists()  # off by default


def test_unknown_best_metric_lists_the_logged_ones(fast_config):
    cfg = build_config(fast_config(steps=1, eval={"every_steps": 1, "num_problems": 2, "best_metric": "eval/pass@8"}))
    with pytest.raises(RlvrError, match="eval/accuracy"):
        Trainer(cfg).fit()
