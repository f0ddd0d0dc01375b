"""Tree rollouts (TreePO) in the static engine: completions token-exact against independent greedy decoding of the
same prefixes, logprobs equal to a full forward, shared prefixes decoded once, exactly n samples per group whatever
ends early, per-group random streams; and the subtree advantage on hand-computed trees."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

from rlvr.algorithms import AdvantageInputs, compute_advantages
from rlvr.config import AlgorithmConfig, TreeConfig, build_config
from rlvr.errors import ConfigError
from rlvr.models.logprobs import completion_logprobs
from rlvr.rollout import SamplingParams, group_generator, make_engine
from rlvr.rollout.tree import TreeRollout
from rlvr.training.trainer import Trainer
from tests.test_static_engine import encode, tiny


@pytest.fixture(scope="module")
def tokenizer():
    from rlvr.models.loading import train_tokenizer

    return train_tokenizer([f"{a}+{b}={a + b} done" for a in range(20) for b in range(20)], 48)


PROMPTS = ["3+4=", "12+19=", "7+1="]


def tree_params(n=6, new=12, greedy=False, **tree) -> tuple[SamplingParams, TreeConfig]:
    spec = TreeConfig(**{"segment_tokens": 4, "branch_factor": 2, "roots": 2, "fork_fraction": 1.0, **tree})
    # min_new_tokens = max_new_tokens: every row runs to the end, so every boundary is reached
    return SamplingParams(n=n, greedy=greedy, max_new_tokens=new, min_new_tokens=new), spec


def grow(engine, prompts, params_and_tree, generators=None):
    """`generate` through a TreeRollout over `engine`, as a run with rollout.tree builds it."""
    params, tree = params_and_tree
    return TreeRollout(engine, tree, "static").generate(prompts, params, generators)


def test_a_greedy_tree_is_token_exact_against_independent_greedy_decoding_of_its_prefixes(tokenizer):
    model = tiny(tokenizer, "llama")
    prompts = encode(tokenizer, PROMPTS)
    static, hf = make_engine("static", model, tokenizer, 64), make_engine("hf", model, tokenizer, 64)
    groups = grow(static, prompts, tree_params(greedy=True))
    for prompt, group in zip(prompts, groups):
        assert len(group) == 6 and len({c.tree_path for c in group}) == 6
        for c in group:
            for boundary in range(0, 12, 4):  # every prefix a segment starts from, decoded alone by the hf engine
                (alone,), = hf.generate([prompt + c.token_ids[:boundary]],
                                        SamplingParams(greedy=True, max_new_tokens=12 - boundary,
                                                       min_new_tokens=12 - boundary))
                assert alone.token_ids == c.token_ids[boundary:]


def test_a_sampled_tree_shares_its_prefixes_and_its_logprobs_equal_a_full_forward(tokenizer):
    model = tiny(tokenizer, "qwen3")
    prompts = encode(tokenizer, PROMPTS)
    static = make_engine("static", model, tokenizer, 64)
    torch.manual_seed(0)
    groups = grow(static, prompts, tree_params())
    worst = 0.0
    for prompt, group in zip(prompts, groups):
        assert len(group) == 6
        for c in group:
            ids = torch.tensor([prompt + c.token_ids])
            with torch.no_grad():
                logp, _ = completion_logprobs(model, ids, torch.ones_like(ids), len(c.token_ids), 1.0)
            worst = max(worst, float((logp[0] - torch.tensor(c.logprobs)).abs().max()))
        # leaves whose paths share their first d entries share their first d segments, token for token
        for a in group:
            for b in group:
                d = next((k for k, (x, y) in enumerate(zip(a.tree_path, b.tree_path)) if x != y), len(a.tree_path))
                assert a.token_ids[: 4 * d] == b.token_ids[: 4 * d]
        # each distinct path prefix's segment was decoded once: the group decoded fewer tokens than it holds
        nodes = {c.tree_path[:d] for c in group for d in range(1, len(c.tree_path) + 1)}
        assert sum(c.decoded for c in group) == 4 * len(nodes) < sum(len(c.token_ids) for c in group)
    print(f"max |logprob - full forward| = {worst:.2e}")
    assert worst < 1e-5
    assert static.reused_tokens > 0  # forked rows continued from their parent's cached keys and values


def test_a_tree_whose_rows_end_early_still_gives_n_samples(tokenizer):
    model = tiny(tokenizer, "llama")
    static = make_engine("static", model, tokenizer, 64)
    prompts = encode(tokenizer, PROMPTS)
    # segments as long as the completions: no boundary, two roots, the other four decoded from the prompt
    groups = grow(static, prompts, tree_params(n=6, new=8, segment_tokens=8))
    for group in groups:
        assert sorted(c.tree_path for c in group) == [(k,) for k in range(6)]
        assert all(c.decoded == len(c.token_ids) == 8 for c in group)
    # free EOS: rows end anywhere, forks stop at the group's budget, the rest is filled: always n
    free = SamplingParams(n=5, max_new_tokens=12), TreeConfig(segment_tokens=3, roots=2, fork_fraction=0.5)
    for seed in range(3):
        torch.manual_seed(seed)
        assert [len(g) for g in grow(static, prompts, free)] == [5, 5, 5]


def test_a_groups_tree_depends_on_its_own_generator_only(tokenizer):
    model = tiny(tokenizer, "llama")
    static = make_engine("static", model, tokenizer, 64)
    prompts = encode(tokenizer, PROMPTS)
    params = tree_params()

    def run(rows):
        return grow(static, [prompts[r] for r in rows], params, [group_generator("cpu", 7, r) for r in rows])

    together, alone = run([0, 1, 2]), run([1])
    assert [c.token_ids for c in together[1]] == [c.token_ids for c in alone[0]]


def test_trees_need_the_static_engine_and_fit_the_group():
    from transformers import GPT2Config, GPT2LMHeadModel

    from rlvr.models.loading import train_tokenizer

    tok = train_tokenizer(["1+1=2"] * 10, 40)
    model = GPT2LMHeadModel(GPT2Config(vocab_size=len(tok), n_embd=16, n_layer=1, n_head=2)).eval()
    with pytest.raises(ConfigError, match="rollout.engine=static"):
        grow(make_engine("hf", model, tok, 8), [[3, 4]], tree_params())
    base = {"samples_per_prompt": 4, "engine": "static"}
    with pytest.raises(ConfigError, match="roots=5 exceeds"):
        build_config({"rollout": {**base, "tree": {"roots": 5}}})
    with pytest.raises(ConfigError, match="stop strings"):
        build_config({"rollout": {**base, "tree": {}, "stop": ["\n"]}})
    with pytest.raises(ConfigError, match="rollout.engine=static"):
        build_config({"rollout": {**base, "engine": "hf", "tree": {}}})


def tree_inputs(scores, paths, groups=None) -> AdvantageInputs:
    n = len(scores)
    return AdvantageInputs(scores=torch.tensor(scores, dtype=torch.float64),
                           group_ids=torch.tensor(groups or [0] * n), mask=torch.ones(n, 1), tree_paths=paths)


def test_the_subtree_advantage_hand_computed():
    # Two roots, each forked once: paths (0,0) (0,1) (1,0) (1,1); only the first sample is right.
    adv, _ = compute_advantages(tree_inputs([1.0, 0, 0, 0], [(0, 0), (0, 1), (1, 0), (1, 1)]),
                                AlgorithmConfig(advantage="tree", advantage_epsilon=0.0))
    # group: mean 0.25, std (N-1) 0.5. Sample 0: [4 (1 - 0.25) + 2 (1 - 0.5)] / 6 / 0.5 = 4/3. Sample 1:
    # [4 (-0.25) + 2 (-0.5)] / 6 / 0.5 = -2/3. Samples 2, 3: their subtree's mean is 0: 4 (-0.25) / 6 / 0.5 = -1/3.
    assert torch.allclose(adv.flatten(), torch.tensor([4 / 3, -2 / 3, -1 / 3, -1 / 3], dtype=adv.dtype))


def test_the_subtree_advantage_is_grpo_for_independent_samples_and_groups_of_one():
    scores, groups = [1.0, 0.0, 0.5, 2.0], [0, 0, 0, 1]
    independent = tree_inputs(scores, [(0,), (1,), (2,), (0,)], groups)
    cfg = AlgorithmConfig(advantage="tree")
    grpo, _ = compute_advantages(independent, AlgorithmConfig(advantage="grpo"))
    assert torch.allclose(compute_advantages(independent, cfg)[0], grpo)
    independent.tree_paths = None
    assert torch.allclose(compute_advantages(independent, cfg)[0], grpo)


def test_a_run_with_tree_rollouts_logs_fewer_decoded_tokens_than_completion_tokens(fast_config):
    cfg = build_config(fast_config(
        steps=2, rollout={"engine": "static", "samples_per_prompt": 4, "max_new_tokens": 8, "min_new_tokens": 8,
                          "tree": {"segment_tokens": 2, "roots": 1, "fork_fraction": 1.0}},
        algorithm={"advantage": "tree"}))
    Trainer(cfg).fit()
    rows = [json.loads(line) for line in (Path(cfg.tracking.output_dir) / "metrics.jsonl").read_text().splitlines()]
    for row in rows:
        # one root decodes 2 tokens, forks to 2 rows (4 tokens), then 4 rows (8 + 8): 22 for 4 x 8 = 32 tokens
        assert row["rollout/decoded_tokens_per_completion"] == pytest.approx(22 / 4)
        assert row["response_length/mean"] == 8
