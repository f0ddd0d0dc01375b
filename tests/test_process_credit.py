"""Process credit (PURE): min-form and sum-form returns on hand-computed step rewards, the arithmetic step checker on
right, wrong and padded chains, step rewards placed on the tokens that end the steps, a learned PRM through the same
interface, and a training run with step rewards."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch
from transformers import LlamaConfig, LlamaForSequenceClassification, LlamaForTokenClassification

from rlvr.algorithms import AdvantageInputs, compute_advantages, future_step_returns
from rlvr.config import AlgorithmConfig, StepRewardConfig, build_config
from rlvr.errors import ConfigError
from rlvr.models.loading import train_tokenizer
from rlvr.rewards.arithmetic_steps import arithmetic_steps
from rlvr.rewards.composite import RewardComposer
from rlvr.rewards.contract import checked_spans
from rlvr.rewards.failures import FailureBudget
from rlvr.rewards.pool import RewardPool
from rlvr.rewards.process import resolve_process_reward, span_token_positions, token_text_ends
from rlvr.rewards.process_reward_model import process_reward_model, step_spans
from rlvr.rollout.base import Completion
from rlvr.rollout.process_rewards import ProcessRewards
from rlvr.rollout.stages import StageSetup
from rlvr.rollout.steps import Group
from rlvr.tasks import make_task
from rlvr.training.advantages import span_tensors
from rlvr.training.trainer import Trainer
from rlvr.verifiers.verdict import SpanScore


def steps_at(width: int, ends: dict[int, float]) -> tuple[torch.Tensor, torch.Tensor]:
    """One sample's step rewards [1, width] with reward ends[t] on token t, and the step-end mask."""
    rewards, mask = torch.zeros(1, width), torch.zeros(1, width)
    for t, r in ends.items():
        rewards[0, t], mask[0, t] = r, 1.0
    return rewards, mask


def test_a_step_reward_that_rises_then_falls():
    rewards, mask = steps_at(6, {1: 0.2, 3: 0.9, 5: -0.5})
    # sum of the rewards ahead: tokens 0-1 see 0.2 + 0.9 - 0.5, tokens 2-3 see 0.9 - 0.5, tokens 4-5 see -0.5
    assert torch.allclose(future_step_returns(rewards, mask, "sum"), torch.tensor([[0.6, 0.6, 0.4, 0.4, -0.5, -0.5]]))
    # min of the rewards ahead: the final fall is ahead of every token
    assert torch.allclose(future_step_returns(rewards, mask, "min"), torch.tensor([[-0.5] * 6]))


def test_a_step_reward_that_falls_then_rises_and_tokens_after_the_last_step():
    rewards, mask = steps_at(8, {1: -0.5, 3: 0.9, 5: 0.2})
    assert torch.allclose(future_step_returns(rewards, mask, "sum"),
                          torch.tensor([[0.6, 0.6, 1.1, 1.1, 0.2, 0.2, 0.0, 0.0]]))
    # once the bad step is behind, the minimum ahead is the lowest step still to come; nothing ahead: 0
    assert torch.allclose(future_step_returns(rewards, mask, "min"),
                          torch.tensor([[-0.5, -0.5, 0.2, 0.2, 0.2, 0.2, 0.0, 0.0]]))


def test_padding_with_correct_steps_raises_the_sum_form_return_and_not_the_min_form():
    honest, honest_mask = steps_at(6, {1: 1.0, 3: 1.0})
    padded, padded_mask = steps_at(6, {0: 1.0, 1: 1.0, 2: 1.0, 3: 1.0, 4: 1.0})
    assert future_step_returns(honest, honest_mask, "sum")[0, 0] == 2.0
    assert future_step_returns(padded, padded_mask, "sum")[0, 0] == 5.0
    assert future_step_returns(honest, honest_mask, "min")[0, 0] == future_step_returns(padded, padded_mask, "min")[0, 0] == 1.0


def test_process_min_advantages_hand_computed():
    # One group of two samples, three tokens each. Sample 0: steps on tokens 0 (+1) and 2 (-1), outcome 0.
    # Sample 1: one step on token 1 (+1), outcome 1. Outcome weight 1.
    rewards = torch.tensor([[1.0, 0.0, -1.0], [0.0, 1.0, 0.0]])
    mask_steps = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    inp = AdvantageInputs(scores=torch.tensor([0.0, 1.0]), group_ids=torch.tensor([0, 0]), mask=torch.ones(2, 3),
                          step_rewards=rewards, step_mask=mask_steps)
    adv, _ = compute_advantages(inp, AlgorithmConfig(advantage="process_min", advantage_epsilon=0.0))
    # returns: sample 0 min ahead = -1 everywhere (+0); sample 1: 1, 1, then nothing ahead: 0 (+1 outcome) -> 2, 2, 1
    # whole returns -1 and 2, group mean 0.5: centred [-1.5]*3 and [1.5, 1.5, 0.5]; whitened over the 6 tokens
    centred = torch.tensor([[-1.5, -1.5, -1.5], [1.5, 1.5, 0.5]])
    mean = centred.mean()
    std = math.sqrt(((centred - mean) ** 2).sum() / 5)
    assert torch.allclose(adv, (centred - mean) / std, atol=1e-6)
    # the same samples under sum form: sample 0 returns 0, -1, -1 (whole 0); sample 1: 2, 2, 1 (whole 2)
    adv_sum, _ = compute_advantages(inp, AlgorithmConfig(advantage="process_sum", advantage_epsilon=0.0))
    centred = torch.tensor([[-1.0, -2.0, -2.0], [1.0, 1.0, 0.0]])
    mean = centred.mean()
    std = math.sqrt(((centred - mean) ** 2).sum() / 5)
    assert torch.allclose(adv_sum, (centred - mean) / std, atol=1e-6)


def test_process_credit_without_step_rewards_says_what_to_set():
    inp = AdvantageInputs(scores=torch.tensor([0.0, 1.0]), group_ids=torch.tensor([0, 0]), mask=torch.ones(2, 3))
    with pytest.raises(ValueError, match="rewards.step_reward"):
        compute_advantages(inp, AlgorithmConfig(advantage="process_min"))
    with pytest.raises(ConfigError, match="needs rewards.step_reward"):
        build_config({"algorithm": {"advantage": "process_sum"}})


CHAIN = "Start with 7.\n7 + 5 = 12\n12 * 3 = 36\nSo the answer is \\boxed{36}."


def spans(text: str) -> list[tuple[str, float]]:
    return [(text[s.start:s.end], s.score) for s in arithmetic_steps("", text)]


def test_the_arithmetic_checker_on_a_right_chain():
    assert spans(CHAIN) == [("7 + 5 = 12", 1.0), ("12 * 3 = 36", 1.0)]


def test_the_arithmetic_checker_on_a_wrong_chain_marks_the_wrong_step_only():
    text = "7 + 5 = 12\n12 * 3 = 38\n38 - 4 = 34"
    assert spans(text) == [("7 + 5 = 12", 1.0), ("12 * 3 = 38", -1.0), ("38 - 4 = 34", 1.0)]


def test_the_arithmetic_checker_on_a_padded_chain_pays_every_true_step():
    text = "2 + 3 = 5\n7 + 5 = 12\n12 * 1 = 12\n12 + 0 = 12\n12 * 3 = 36"
    assert spans(text) == [(s, 1.0) for s in ("2 + 3 = 5", "7 + 5 = 12", "12 * 1 = 12", "12 + 0 = 12", "12 * 3 = 36")]


def test_the_arithmetic_checker_reads_chains_latex_and_parentheses_and_skips_what_is_not_arithmetic():
    text = "47 × 38 = 47 × 30 + 47 × 8 = 1786, \\(3 \\times 4 = 13\\), (2 + 3) * 4 = 20, x = 5, 10 / 0 = 1, 12 = 12"
    assert spans(text) == [("47 × 38 = 47 × 30 + 47 × 8", 1.0), ("47 × 30 + 47 × 8 = 1786", 1.0),
                           ("3 \\times 4 = 13", -1.0), ("(2 + 3) * 4 = 20", 1.0)]
    assert arithmetic_steps("", "7 + 5 = 13", correct=2.0, wrong=-0.5) == [SpanScore(0, 10, -0.5)]


def test_each_step_reward_lands_on_the_token_holding_its_last_character():
    tokenizer = train_tokenizer([CHAIN] * 20 + ["12 * 3 = 36 and more text"], vocab_size=60)
    ids = tokenizer(CHAIN, add_special_tokens=False)["input_ids"]
    text = tokenizer.decode(ids, skip_special_tokens=True)
    steps = arithmetic_steps("", text)
    ends = token_text_ends(tokenizer, ids)
    for step, pos in zip(steps, span_token_positions(steps, ends)):
        assert len(tokenizer.decode(ids[: pos + 1])) >= step.end > len(tokenizer.decode(ids[:pos]))


def test_step_rewards_become_token_tensors_for_the_trained_samples():
    tokenizer = train_tokenizer([CHAIN] * 20, vocab_size=60)
    task = make_task("arithmetic_chain", 0, {})
    problem = task.problem("train", 0)
    texts = [CHAIN, "7 + 5 = 13", "no steps here"]
    completions = [Completion(tokenizer(t, add_special_tokens=False)["input_ids"], t, [], False) for t in texts]
    completions = [Completion(c.token_ids, tokenizer.decode(c.token_ids), [0.0] * len(c.token_ids), False)
                   for c in completions]
    group = Group(0, problem, [1, 2], completions, scored=None)
    width = max(len(c.token_ids) for c in completions)
    with RewardPool(num_workers=1, timeout_s=30.0) as pool:
        pool.start()
        composer = RewardComposer([], pool, process=StepRewardConfig(function="arithmetic_steps"))
        metrics = ProcessRewards(composer, FailureBudget(), tokenizer, ["chain"]).score([group])
    rewards, mask = span_tensors(completions, width)
    assert mask.sum(1).tolist() == [2.0, 1.0, 0.0]
    assert rewards[0][mask[0] > 0].tolist() == [1.0, 1.0] and rewards[1][mask[1] > 0].tolist() == [-1.0]
    assert metrics["process/spans_per_sample"] == 1.0 and metrics["process/no_span_frac"] == pytest.approx(1 / 3)
    # without a process reward (the estimator reads none) the stage is not in the run, and no span is scored
    assert ProcessRewards.configured(StageSetup(None, [task], composer=RewardComposer([], pool))) is None
    assert span_tensors([Completion([1], "x", [0.0], False)], 1) is None


def bad_steps(prompt, completion, **_):
    return [(0, 99, 1.0)]


def test_a_step_reward_with_a_bad_span_or_name_is_a_clear_error():
    with pytest.raises(ValueError, match=r"span 0: \[0, 99\) is not a non-empty range"):
        checked_spans(bad_steps("", "abc"), "abc")
    with pytest.raises(ValueError, match="not a finite number"):
        checked_spans([(0, 1, float("nan"))], "abc")
    with pytest.raises(ConfigError, match="arithmetic_steps"):
        resolve_process_reward("arithmetic_step")
    with pytest.raises(ConfigError, match="rewards.step_reward.args: wrongg"):
        RewardComposer([], RewardPool(), process=StepRewardConfig(function="arithmetic_steps", args={"wrongg": 1}))


@pytest.fixture(scope="module")
def tiny_prms(tmp_path_factory):
    """A two-label sequence-classification and a two-label token-classification tiny Llama, saved with a tokenizer."""
    root = tmp_path_factory.mktemp("prm")
    tokenizer = train_tokenizer([CHAIN] * 20 + ["What is 7 + 5?"], vocab_size=80)
    tokenizer.chat_template = None
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=2, num_labels=2, pad_token_id=tokenizer.pad_token_id)
    paths = {}
    for head, cls in (("sequence", LlamaForSequenceClassification), ("token", LlamaForTokenClassification)):
        torch.manual_seed(0)
        model = cls(config)
        paths[head] = root / head
        model.save_pretrained(paths[head])
        tokenizer.save_pretrained(paths[head])
    return paths, tokenizer


def test_a_sequence_head_prm_scores_each_step_prefix(tiny_prms):
    paths, tokenizer = tiny_prms
    model = LlamaForSequenceClassification.from_pretrained(paths["sequence"]).eval()
    steps = process_reward_model("What is 7 + 5?", CHAIN, model=str(paths["sequence"]))
    assert [(s.start, s.end) for s in steps] == step_spans(CHAIN, "\n")
    assert [CHAIN[s.start:s.end] for s in steps][1] == "7 + 5 = 12"
    for step in steps:  # p(good) - p(bad) of the prompt and the completion up to the step's end, read directly
        ids = tokenizer.encode(f"What is 7 + 5?\n{CHAIN[: step.end]}", add_special_tokens=False)
        with torch.no_grad():
            p = torch.softmax(model(input_ids=torch.tensor([ids])).logits[0].float(), -1)
        assert step.score == pytest.approx(float(p[1] - p[0]), abs=1e-5)


def test_a_token_head_prm_reads_each_steps_last_token_in_one_forward(tiny_prms):
    paths, tokenizer = tiny_prms
    model = LlamaForTokenClassification.from_pretrained(paths["token"]).eval()
    steps = process_reward_model("What is 7 + 5?", CHAIN, model=str(paths["token"]), score="probability")
    text = f"What is 7 + 5?\n{CHAIN}"
    encoded = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    with torch.no_grad():
        probs = torch.softmax(model(input_ids=torch.tensor([encoded["input_ids"]])).logits[0].float(), -1)
    for step in steps:
        end = len("What is 7 + 5?\n") + step.end
        pos = next(i for i, (_, stop) in enumerate(encoded["offset_mapping"]) if stop >= end)
        assert step.score == pytest.approx(float(probs[pos, 1]), abs=1e-5)


def test_a_run_with_min_form_process_credit_logs_its_steps(fast_config, tmp_path):
    cfg = build_config(fast_config(
        steps=2, data={"tasks": [{"name": "arithmetic_chain", "args": {"steps": 2, "eval_size": 4}}]},
        rollout={"max_new_tokens": 12}, algorithm={"advantage": "process_min"},
        rewards={"step_reward": {"function": "arithmetic_steps"}}))
    Trainer(cfg).fit()
    rows = [json.loads(line) for line in (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text().splitlines()]
    assert all("process/spans_per_sample" in r and math.isfinite(r["actor/loss"]) for r in rows)
