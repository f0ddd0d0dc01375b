"""The static engine's cache kept across the turns of an episode: token-identical episodes to re-encoding the
whole conversation every turn, with only the new tokens prefilled."""

from __future__ import annotations

import pytest
import torch

from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.static import KVCache, StaticCacheEngine
from tests.test_episodes import chat_policy, env_task  # noqa: F401  (the fixture)


def play(engine, tok, keep: bool, problems: int = 3, n: int = 4):
    engine.keep_turns = keep
    runner = EpisodeRunner(engine, PromptEncoder(tok))
    task = env_task("try_again", max_turns=3, max_tokens=70, args={"attempts": 3})
    work = [(task, task.problem("train", i)) for i in range(problems)]
    generators = [group_generator(torch.device("cpu"), 7, g) for g in range(problems)]
    calls = []
    generate = engine.generate
    engine.generate = lambda prompts, params, gens=None: calls.append(len(prompts)) or generate(prompts, params, gens)
    try:
        prompts, groups = runner.play(work, SamplingParams(n=n, max_new_tokens=10, stop=list("12345")), generators)
    finally:
        del engine.generate
    return [(prompts[g], c) for g, group in enumerate(groups) for c in group], calls


@pytest.mark.parametrize("static_shapes", [False, True])  # True: the CUDA layout (buckets, compaction) on a CPU
def test_kept_cache_gives_the_episodes_re_encoding_gives(chat_policy, static_shapes, monkeypatch):  # noqa: F811
    model, tok = chat_policy
    compactions = []
    keep_rows = KVCache.keep_rows
    monkeypatch.setattr(KVCache, "keep_rows", lambda self, index: compactions.append(len(index)) or keep_rows(self, index))
    engine = StaticCacheEngine(model, tok, batch_size=64)
    engine.static_shapes = static_shapes
    fresh, calls = play(engine, tok, keep=False)
    assert engine.reused_tokens == 0 and len(calls) > 1  # several turns were played
    compactions.clear()
    kept, _ = play(engine, tok, keep=True)
    assert compactions  # rows finished at different steps (stop strings) and the cache was compacted meanwhile
    episodes = [e for _, e in fresh]
    assert any(e.turns == 3 for e in episodes) and len({len(e.token_ids) for e in episodes}) > 1
    assert [e.token_ids for _, e in kept] == [e.token_ids for e in episodes]
    assert [e.policy_mask for _, e in kept] == [e.policy_mask for e in episodes]
    for (_, a), b in zip(kept, episodes):
        assert torch.allclose(torch.tensor(a.logprobs), torch.tensor(b.logprobs), atol=1e-5)
    # Every later turn continued its episode's kept row: the prompt and all the episode's tokens before the
    # previous turn's last sampled token came from the cache, only that token and the reply were prefilled.
    reused = 0
    for prompt, e in fresh:
        for t in range(1, e.turns):
            reply = e.policy_mask.index(False, e.turn_starts[t - 1])
            reused += len(prompt) + reply - 1
    assert reused > 0 and engine.reused_tokens == reused
    assert not engine.kept and not engine.keeping  # the session's rows are dropped when play() ends
