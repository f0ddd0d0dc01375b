"""Samplers, group filters and curriculum statistics: exact formulas on synthetic statistics, and exact resume."""

from __future__ import annotations

import io
import json
import math
import zlib

import pytest
import torch

from rlvr.config import build_config
from rlvr.curriculum import SAMPLERS, CurriculumStats, GroupOutcome, make_filter, make_sampler, prompt_key
from rlvr.errors import ConfigError
from rlvr.tasks import make_task
from rlvr.training.trainer import Trainer


@pytest.fixture
def sources(tmp_path):
    """A procedural source and a finite dataset of 6 prompts."""
    path = tmp_path / "small.jsonl"
    path.write_text("".join(json.dumps({"prompt": f"p{i}", "answer": str(i)}) + "\n" for i in range(6)))
    return [make_task("arithmetic", 0, {"max_operand": 999}), make_task("dataset", 0, {"path": str(path)})]


def synthetic_outcomes(tasks, draws, n: int = 4) -> list[GroupOutcome]:
    """A fixed, prompt-dependent result per drawn prompt: k of n samples correct, |advantage| from the key."""
    outcomes = []
    for t, problem in draws:
        key = prompt_key(tasks[t], problem)
        k = zlib.crc32(key.encode()) % (n + 1)
        outcomes.append(GroupOutcome(t, key, [i < k for i in range(n)], k / n, (k % 3) / 2))
    return outcomes


def run_steps(sampler, stats, tasks, steps, first_step, admit=None) -> list[tuple[int, str]]:
    seen = []
    for step in range(first_step, first_step + steps):
        draws = sampler.next_batch(4, admit)
        stats.record_draws([t for t, _ in draws])
        outcomes = synthetic_outcomes(tasks, draws)
        stats.record(step, outcomes)
        sampler.observe(outcomes)
        seen += [(t, p.uid) for t, p in draws]
    return seen


def through_disk(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


SAMPLER_ARGS = {"mixture": {}, "uniform": {"pool_size": 5}, "ucb": {"temperature": 0.05}, "mopps": {"pool_size": 8}}


@pytest.mark.parametrize("name", SAMPLERS.names())
@pytest.mark.parametrize("with_filter", [False, True])
def test_every_sampler_resumes_to_the_identical_prompt_sequence(name, with_filter, sources):
    band = make_filter("pass_rate", {"low": 0.25, "high": 0.75, "min_attempts": 4})

    def build():
        stats = CurriculumStats(len(sources), window=5)
        sampler = make_sampler(name, SAMPLER_ARGS[name], sources, [2.0, 1.0], 7, stats)
        admit = (lambda t, p: band.admit(stats, prompt_key(sources[t], p))) if with_filter else None
        return sampler, stats, admit

    sampler, stats, admit = build()
    run_steps(sampler, stats, sources, 5, 1, admit)
    saved = through_disk({"sampler": sampler.state_dict(), "stats": stats.state_dict()})
    expected = run_steps(sampler, stats, sources, 6, 6, admit)

    resumed, resumed_stats, resumed_admit = build()
    resumed_stats.load_state_dict(saved["stats"])
    resumed.load_state_dict(saved["sampler"])
    assert run_steps(resumed, resumed_stats, sources, 6, 6, resumed_admit) == expected
    assert resumed_stats.state_dict() == stats.state_dict()


def test_mixture_reshuffles_a_finite_source_every_epoch(sources):
    solo = make_sampler("mixture", {}, [sources[1]], [1.0], 0, CurriculumStats(1))
    epochs = [[p.uid for _, p in solo.next_batch(6)] for _ in range(3)]
    assert all(sorted(e) == sorted(epochs[0]) for e in epochs) and len(set(epochs[0])) == 6
    assert len({tuple(e) for e in epochs}) > 1  # not the same order every epoch


def test_uniform_epochs_cover_the_pool_once_each_and_procedural_sources_bring_new_problems(sources):
    sampler = make_sampler("uniform", {"pool_size": 4}, sources, [1.0, 1.0], 0, CurriculumStats(2))
    first, second = ([(t, p.uid) for t, p in sampler.next_batch(10)] for _ in range(2))
    for epoch in (first, second):
        assert sum(t == 1 for t, _ in epoch) == 6 and len(set(epoch)) == 10  # all 6 rows once, 4 procedural
    assert {u for t, u in first if t == 1} == {u for t, u in second if t == 1}
    assert not {u for t, u in first if t == 0} & {u for t, u in second if t == 0}  # fresh procedural problems


def test_ucb_scores_and_weights_follow_the_formula(sources):
    tasks = sources + [make_task("arithmetic", 0, {"max_operand": 99}, label="big")]
    stats = CurriculumStats(3, window=3)
    for source, draws, advantages in ((0, 10, [0.1, 0.2, 0.3, 0.9]), (1, 30, [0.5, 0.7]), (2, 60, [])):
        stats.sources[source].drawn = draws
        stats.record(1, [GroupOutcome(source, f"x{source}/{i}", [True], 1.0, a) for i, a in enumerate(advantages)])
    c = 0.5
    expected = [(0.2 + 0.3 + 0.9) / 3 + c * math.sqrt(math.log(100) / 10),  # window of 3: the oldest 0.1 is gone
                0.6 + c * math.sqrt(math.log(100) / 30),
                0.0 + c * math.sqrt(math.log(100) / 60)]
    greedy = make_sampler("ucb", {"c": c, "temperature": 0}, tasks, [1, 1, 1], 0, stats)
    assert greedy.scores() == pytest.approx(expected, abs=1e-12)
    assert {t for t, _ in greedy.next_batch(16)} == {0}  # the argmax source only
    soft = make_sampler("ucb", {"c": c, "temperature": 0.2}, tasks, [1, 1, 1], 0, stats)
    soft.next_batch(1)
    z = [math.exp(s / 0.2) for s in expected]
    assert soft.weights == pytest.approx([v / sum(z) for v in z], abs=1e-12)
    metrics = soft.metrics()
    assert metrics["source/big/ucb_score"] == pytest.approx(expected[2])
    assert metrics["source/arithmetic/weight"] == pytest.approx(z[0] / sum(z))


def test_ucb_explores_a_source_never_drawn_first(sources):
    stats = CurriculumStats(2)
    stats.sources[0].drawn = 50
    stats.record(1, [GroupOutcome(0, "a/1", [True], 1.0, 5.0)])  # a huge learnability does not beat +inf
    sampler = make_sampler("ucb", {}, sources, [1, 1], 0, stats)
    assert sampler.scores()[1] == math.inf and {t for t, _ in sampler.next_batch(8)} == {1}


def test_mopps_picks_prompts_whose_sampled_pass_rate_is_nearest_the_target(sources):
    sampler = make_sampler("mopps", {"pool_size": 0, "target": 0.5}, [sources[1]], [1.0], 0, CurriculumStats(1))
    keys = [prompt_key(sources[1], p) for _, p in sampler.candidates]
    # concentrated posteriors: rows 0-1 near 0.5, the others near 0 or 1
    results = {0: 50, 1: 50, 2: 0, 3: 100, 4: 0, 5: 100}
    sampler.observe([GroupOutcome(0, keys[i], [j < k for j in range(100)], 0.0) for i, k in results.items()])
    assert sampler.alpha.tolist() == [51, 51, 1, 101, 1, 101] and sampler.beta.tolist() == [51, 51, 101, 1, 101, 1]
    for _ in range(5):
        assert sorted(prompt_key(sources[1], p) for _, p in sampler.next_batch(2)) == sorted(keys[:2])


def test_mopps_forgets_with_its_decay_factor(sources):
    sampler = make_sampler("mopps", {"pool_size": 0, "decay": 0.5, "prior_alpha": 2.0}, [sources[1]], [1.0], 0,
                           CurriculumStats(1))
    key = prompt_key(sources[1], sampler.candidates[0][1])
    sampler.observe([GroupOutcome(0, key, [True, True, False], 0.0)])
    # alpha = 0.5 * 2 + 0.5 * 2 + 2, beta = 0.5 * 1 + 0.5 * 1 + 1
    assert (sampler.alpha[0], sampler.beta[0]) == (4.0, 2.0)


def test_pass_rate_band_keeps_intermediate_groups_and_turns_down_known_extremes():
    band = make_filter("pass_rate", {"low": 0.25, "high": 0.75, "min_attempts": 4})
    rewards = torch.zeros(4)
    assert [band.keep(rewards, torch.tensor([i < k for i in range(4)])) for k in range(5)] == \
        [False, True, True, True, False]
    stats = CurriculumStats(1)
    stats.record(1, [GroupOutcome(0, "easy", [True] * 4, 1.0), GroupOutcome(0, "few", [True] * 2, 1.0),
                     GroupOutcome(0, "mid", [True, False] * 2, 0.5)])
    assert [band.admit(stats, k) for k in ("easy", "few", "mid", "new")] == [False, True, True, True]


def test_stats_record_attempts_pass_rate_last_step_and_recent_advantage():
    stats = CurriculumStats(2, window=2)
    stats.record_draws([0, 0, 1])
    stats.record(3, [GroupOutcome(0, "a", [True, False], 0.5, 0.4), GroupOutcome(1, "b", [False] * 2, 0.0)])
    stats.record(5, [GroupOutcome(0, "a", [True, True], 1.0, 0.2), GroupOutcome(0, "c", [True, True], 1.0, 0.6)])
    a = stats.prompts["a"]
    assert (a.attempts, a.successes, a.last_step, a.abs_advantage, a.pass_rate) == (4, 3, 5, 0.2, 0.75)
    assert stats.prompts["b"].abs_advantage is None  # a group set aside by a filter has no advantage
    assert list(stats.sources[0].recent_abs_advantage) == [0.2, 0.6]  # window 2
    assert (stats.sources[0].drawn, stats.sources[1].drawn) == (2, 1)
    assert stats.pass_rate_histogram() == [1, 0, 0, 1, 1]  # b: 0, a: 0.75, c: 1.0


def test_bad_sampler_and_filter_settings_name_the_key():
    with pytest.raises(ConfigError, match="data.sampler.name: Unknown sampler 'ucbb'. Did you mean 'ucb'"):
        build_config({"data": {"sampler": "ucbb"}})
    with pytest.raises(ConfigError, match="data.filter.args for filter 'pass_rate'"):
        make_filter("pass_rate", {"lo": 0.2})
    with pytest.raises(ConfigError, match="0 <= low <= high <= 1"):
        make_filter("pass_rate", {"low": 0.8, "high": 0.2})
    with pytest.raises(ConfigError, match="several tasks are labelled 'arithmetic'"):
        Trainer(build_config({"data": {"tasks": [{"name": "arithmetic"}, {"name": "arithmetic"}]}}))


def test_trainer_logs_sources_and_pool_and_resumes_curriculum_state_exactly(fast_config, tmp_path):
    tasks = [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 4}},
             {"name": "arithmetic", "label": "hard", "args": {"max_operand": 99, "eval_size": 4}}]
    base = {"data": {"tasks": tasks, "sampler": {"name": "ucb", "args": {"temperature": 0.1}},
                     "filter": {"name": "pass_rate", "args": {"low": 0.0, "high": 0.5}}},
            "checkpoint": {"every_steps": 1, "keep_last": 5}, "eval": {"every_steps": 0}}
    whole = Trainer(build_config(fast_config(steps=3, **base, tracking={"output_dir": str(tmp_path / "whole"),
                                                                         "console": False, "tensorboard": "off"})))
    last = whole.fit()
    for key in ("source/arithmetic/drawn", "source/hard/drawn", "source/hard/ucb_score", "source/arithmetic/weight",
                "pool/prompts_seen", "pool/pass_rate_0.0-0.2", "sampling/filled_frac", "sampling/skipped_prompts"):
        assert key in last, key
    assert last["source/arithmetic/drawn"] + last["source/hard/drawn"] >= 3 * 4
    assert sum(last[k] for k in last if k.startswith("pool/pass_rate_")) == last["pool/prompts_seen"]

    split = fast_config(steps=2, **base, tracking={"output_dir": str(tmp_path / "split"), "console": False,
                                                   "tensorboard": "off"})
    Trainer(build_config(split)).fit()
    resumed = Trainer(build_config({**split, "steps": 3}), resume="auto")
    resumed.fit()
    assert resumed.stats.state_dict() == whole.stats.state_dict()
    assert resumed.sampler.state_dict() == whole.sampler.state_dict()
