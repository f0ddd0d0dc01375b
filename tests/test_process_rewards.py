"""The reward contract's process rewards (rewards.step_reward): scored in the reward workers like every reward (time
limit, failure budget, loading at start), only when the advantage estimator reads them; their spans placed on tokens
in linear time, at the tokens prefix decoding finds; a reward's payload and spans through the pool."""

from __future__ import annotations

import random
import textwrap
from collections import Counter

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from rlvr.config import StepRewardConfig, build_config
from rlvr.errors import ConfigError
from rlvr.models.loading import train_tokenizer
from rlvr.rewards.composite import RewardComposer
from rlvr.rewards.failures import FailureBudget, RewardFailure
from rlvr.rewards.loading import check_reward_functions
from rlvr.rewards.pool import RewardPool, RewardRequest
from rlvr.rewards.process import WINDOW, process_reward_for, span_token_positions, token_text_ends
from rlvr.rollout.base import Completion
from rlvr.rollout.process_rewards import ProcessRewards
from rlvr.rollout.stages import StageSetup
from rlvr.rollout.steps import Group
from rlvr.tasks import make_task
from rlvr.training.advantages import span_tensors
from rlvr.verifiers.verdict import SpanScore

PROCESS = textwrap.dedent(
    """
    import time
    from rlvr.verifiers.verdict import RewardResult, SpanScore

    time.sleep(float(open(__file__ + ".import_s").read()))  # a slow import (a model), loaded before any item

    def lines(prompt, completion, **fields):
        # each non-empty line a span scored by its length; 'hang' sleeps, 'boom' raises, 'wide' returns a bad span
        if "hang" in completion:
            time.sleep(60)
        if "boom" in completion:
            raise RuntimeError("boom")
        if "wide" in completion:
            return [(0, len(completion) + 5, 1.0)]
        spans, start = [], 0
        for line in completion.split("\\n"):
            if line:
                spans.append(SpanScore(start, start + len(line), float(len(line))))
            start += len(line) + 1
        return RewardResult(spans=spans)

    def with_payload(prompt, completion, **fields):
        return RewardResult({"score": 0.5, "answer": "x"}, spans=[(0, 1, 2.0)], payload={"echo": completion})

    def unpicklable_payload(prompt, completion, **fields):
        import threading
        return RewardResult(1.0, payload=threading.Lock())
    """
)


@pytest.fixture
def process_file(tmp_path):
    path = tmp_path / "process.py"
    path.write_text(PROCESS)
    (tmp_path / "process.py.import_s").write_text("0")
    return path


def samples(texts):
    problem = make_task("arithmetic_chain", 0, {}).problem("train", 0)
    return [(problem, text, {}) for text in texts]


def test_a_process_reward_that_hangs_raises_or_returns_a_bad_span_fails_that_sample_only(process_file):
    with RewardPool(num_workers=2, timeout_s=1.0) as pool:
        pool.start()
        composer = RewardComposer([], pool, process=StepRewardConfig(function=f"{process_file}:lines"))
        texts = ["ab\ncde", "hang", "boom", "wide", "x"]
        scoring = composer.score_spans(samples(texts), [f"sample {i}" for i in range(5)])
    assert scoring.spans[0] == [SpanScore(0, 2, 2.0), SpanScore(3, 6, 3.0)] and scoring.spans[4] == [SpanScore(0, 1, 1.0)]
    assert scoring.spans[1:4] == [None, None, None]
    assert scoring.failures == Counter(timeout=1, error=2)
    assert scoring.first_error.startswith("timeout on sample 1: no result within 1 s")
    assert pool.timeouts == 2 and pool.retries == 1  # timed out, retried once on a fresh worker, like any reward


def test_process_reward_failures_count_in_the_failure_budget_and_stop_a_run_failing_everywhere(process_file):
    tokenizer = train_tokenizer(["ab cd boom"] * 10, vocab_size=60)
    problem = make_task("arithmetic_chain", 0, {}).problem("train", 0)

    def group(texts):
        ids = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in texts]
        return Group(0, problem, [1], [Completion(i, t, [0.0] * len(i), False) for i, t in zip(ids, texts)], None)

    with RewardPool(num_workers=1, timeout_s=5.0) as pool:
        pool.start()
        composer = RewardComposer([], pool, process=StepRewardConfig(function=f"{process_file}:lines"))
        budget = FailureBudget(max_failure_rate=0.5)
        process = ProcessRewards(composer, budget, tokenizer, ["chain"])
        scored = group(["ab", "boom"])
        process.score([scored])
        _, mask = span_tensors(scored.completions, 4)
        assert mask.sum(1).tolist() == [1.0, 0.0]  # the failed sample has no span; the run goes on
        assert budget.totals["step_reward"] == Counter(samples=2, error=1)
        with pytest.raises(RewardFailure, match=r"reward 'step_reward' failed on every one of this step's 2 samples"
                                                r".*First error: error on task chain, problem .*, sample 1: RuntimeError: boom"):
            process.score([group(["boom", "boom cd"])])


def test_a_process_reward_is_loaded_with_the_other_rewards_before_the_first_item(process_file):
    (process_file.parent / "process.py.import_s").write_text("1.5")  # longer than an item's limit
    task = make_task("arithmetic_chain", 0, {})
    with RewardPool(num_workers=1, timeout_s=1.0) as pool:
        composer = RewardComposer([], pool, process=StepRewardConfig(function=f"{process_file}:lines"))
        loads = composer.loads([task])
        assert [load.spec for load in loads] == [task.verifier, f"{process_file}:lines"]
        pool.start(loads)
        loaded = pool.wait_ready()
        assert loaded[f"'step_reward' ({process_file}:lines)"] >= 1.5
        scoring = composer.score_spans(samples(["ab"]), ["sample 0"])
    assert scoring.spans == [[SpanScore(0, 2, 2.0)]] and pool.timeouts == 0


def test_process_rewards_are_scored_only_when_the_estimator_reads_them():
    step_reward = {"step_reward": {"function": "arithmetic_steps"}}
    with pytest.raises(ConfigError, match=r"rewards.step_reward.function=arithmetic_steps is set, but "
                                          r"algorithm.advantage=grpo does not read step rewards"):
        build_config({"algorithm": {"advantage": "grpo"}, "rewards": step_reward})
    assert process_reward_for(build_config({"algorithm": {"advantage": "grpo"}})) is None
    cfg = build_config({"algorithm": {"advantage": "process_min"}, "rewards": step_reward})
    assert process_reward_for(cfg).function == "arithmetic_steps"
    composer = RewardComposer([], RewardPool(), process=None)
    assert ProcessRewards.configured(StageSetup(None, [], composer=composer, failures=FailureBudget())) is None
    assert all(load.spec != "arithmetic_steps" for load in composer.loads([make_task("arithmetic_chain", 0, {})]))


def test_a_process_reward_named_as_a_reward_or_a_reward_as_a_process_reward_is_a_config_error():
    cfg = build_config({"rewards": {"functions": [{"function": "task"}, {"function": "arithmetic_steps"}]}})
    with pytest.raises(ConfigError, match=r"rewards.functions\[1\].function = 'arithmetic_steps' is a process "
                                          r"reward.*rewards.step_reward.function"):
        check_reward_functions(cfg.rewards.functions, [])
    with pytest.raises(ConfigError, match="'judge' is a reward that returns a score, not spans"):
        RewardComposer([], RewardPool(), process=StepRewardConfig(function="judge"))


def test_a_reward_may_return_a_score_spans_and_a_payload_through_the_pool(process_file):
    with RewardPool(num_workers=1, timeout_s=5.0) as pool:
        pool.start()
        out = pool.score([RewardRequest(0, f"{process_file}:with_payload", "p", "abc"),
                          RewardRequest(1, f"{process_file}:lines", "p", "abc"),
                          RewardRequest(2, f"{process_file}:lines", "p", "abc", spans=True),
                          RewardRequest(3, f"{process_file}:unpicklable_payload", "p", "abc"),
                          RewardRequest(4, f"{process_file}:with_payload", "p", "abc")])
    assert (out[0].value, out[0].answer, out[0].payload) == (0.5, ("x",), {"echo": "abc"})
    assert out[0].spans == [SpanScore(0, 1, 2.0)]
    assert out[1].status == "error" and "must be a number" in out[1].message  # a score is what a reward owes
    assert out[2].status == "ok" and out[2].spans == [SpanScore(0, 3, 3.0)]  # a process reward owes its spans
    assert out[3].status == "error" and "cannot be sent to the trainer" in out[3].message
    assert out[4].status == "ok" and pool.restarts == 0  # the worker went on


# ------------------------------------------------------------------ spans to tokens

def prefix_decoded_ends(tokenizer, ids):
    """Each token's end as prefix decoding measures it (what rlvr did before: one decode per prefix, O(L^2))."""
    return [len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)) for i in range(len(ids))]


CORPUS = ["Start with 7.\n7 + 5 = 12\n12 * 3 = 36\nSo the answer is \\boxed{36}.", "the cat sat, didn't it ?"] * 20
TEXTS = ["Start with 7. 7 + 5 = 12 → 12 × 3 = 36 ✓", "café naïve résumé — “quoted” … ok",
         "数学题：七加五等于十二。答案是 36。", "emoji 😀👍🏽 and 🇫🇷 flags; combining e\u0301 too",
         "tabs\tand\nnewlines  double  spaces", "isn't it ? yes , it is ."]


def sentencepiece_like() -> PreTrainedTokenizerFast:
    """A Llama-2-style tokenizer: metaspace pieces, byte fallback for characters it has no piece for."""
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace()
    tok.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(),
                                     decoders.Strip(" ", 1, 0)])
    tok.train_from_iterator(CORPUS, trainers.BpeTrainer(
        vocab_size=200, special_tokens=["<unk>", "<pad>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)],
        show_progress=False))
    return PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", eos_token="</s>", unk_token="<unk>")


@pytest.mark.parametrize("kind", ["byte-level", "sentencepiece"])
def test_spans_land_where_prefix_decoding_puts_them_on_varied_texts_and_sampled_ids(kind):
    tokenizer = train_tokenizer(CORPUS, vocab_size=120) if kind == "byte-level" else sentencepiece_like()
    rng = random.Random(0)
    sequences = [tokenizer(t, add_special_tokens=False)["input_ids"] for t in TEXTS]
    # sampled ids need not be a text's own tokenization: split characters, special tokens, anything
    sequences += [[rng.randrange(len(tokenizer)) for _ in range(rng.randrange(1, 80))] for _ in range(40)]
    for ids in sequences:
        ends = prefix_decoded_ends(tokenizer, ids)
        assert token_text_ends(tokenizer, ids) == ends
        text = tokenizer.decode(ids, skip_special_tokens=True)
        spans = sorted({SpanScore(a, b, 1.0) for a, b in (sorted(rng.sample(range(len(text) + 1), 2))
                                                           for _ in range(10) if len(text) > 1)},
                       key=lambda s: (s.end, s.start))
        assert span_token_positions(spans, token_text_ends(tokenizer, ids)) == span_token_positions(spans, ends)


class CountingDecoder:
    """A tokenizer's decoding, counting how many token ids it is asked to decode."""

    def __init__(self, tokenizer):
        self.tokenizer, self.decoded = tokenizer, 0

    def decode(self, ids, **kwargs):
        self.decoded += len(ids)
        return self.tokenizer.decode(ids, **kwargs)

    def batch_decode(self, sequences, **kwargs):
        self.decoded += sum(len(ids) for ids in sequences)
        return self.tokenizer.batch_decode(sequences, **kwargs)


def test_a_4000_token_completion_maps_to_tokens_by_decoding_linearly_many_tokens():
    tokenizer = CountingDecoder(train_tokenizer(CORPUS, vocab_size=120))
    ids = tokenizer.tokenizer(" ".join(TEXTS) * 60, add_special_tokens=False)["input_ids"][:4000]
    assert len(ids) == 4000
    ends = token_text_ends(tokenizer, ids)
    # two windows per token and one whole decode; prefix by prefix would be about 8 million
    assert tokenizer.decoded <= (2 * WINDOW + 3) * len(ids)
    assert ends[-1] == len(tokenizer.decode(ids, skip_special_tokens=True))
    assert ends[::400] == [len(tokenizer.decode(ids[: i + 1], skip_special_tokens=True)) for i in range(0, 4000, 400)]
