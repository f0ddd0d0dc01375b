"""Multi-turn episodes: token-exact bookkeeping, masks, gradients, logprobs, environments, tools, training."""

from __future__ import annotations

import json
import math
import time

import pytest
import torch
from conftest import assert_policy_runs_were_sampled, assert_rollout_logprobs_match_a_full_forward

from rlvr.algorithms import KL_ESTIMATORS, POLICY_LOSSES
from rlvr.algorithms.advantages import discounted_returns
from rlvr.config import AlgorithmConfig, EnvConfig, RunConfig, TinyModelConfig
from rlvr.envs import make_tasks
from rlvr.envs.base import REWARD_RULES, episode_verdict
from rlvr.envs.render import ChatRenderer
from rlvr.envs.task import EnvTask
from rlvr.errors import ConfigError
from rlvr.models.loading import build_tiny_model, train_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, group_generator
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.hf import HFRolloutEngine
from rlvr.tasks import make_task
from rlvr.training.batch import RolloutBatch
from rlvr.training.update import LossSetup, accumulate_gradients

# A ChatML template with a tool role (written for these tests), on a tokenizer trained here.
CHATML = (
    "{% for m in messages %}"
    "{% if m['role'] == 'tool' %}<|im_start|>tool\n{{ m['content'] }}<|im_end|>\n"
    "{% else %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def chat_tokenizer():
    corpus = [f"{a}+{b}={a + b}\nIncorrect. Try again.\nuser assistant tool" for a in range(20) for b in range(5)]
    tok = train_tokenizer(corpus, 80)
    tok.add_special_tokens({"additional_special_tokens": ["<|im_start|>", "<|im_end|>"]})
    tok.eos_token = "<|im_end|>"
    tok.chat_template = CHATML
    return tok


def tiny_chat_policy():
    """A tiny policy (eval mode) and its tokenizer with a ChatML template."""
    tok = chat_tokenizer()
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    return model.eval(), tok


@pytest.fixture(scope="module")
def chat_policy():
    return tiny_chat_policy()


class RecordingEngine(HFRolloutEngine):
    """The hf engine, remembering every call's prompts and sampled continuations."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[tuple[list[list[int]], list[list[list[int]]]]] = []

    def generate(self, prompts, params, generators=None):
        out = super().generate(prompts, params, generators)
        self.calls.append(([list(p) for p in prompts], [[c.token_ids for c in g] for g in out]))
        return out


def env_task(env: str = "try_again", **env_fields) -> EnvTask:
    task = make_task("arithmetic", 0, {"max_operand": 9, "eval_size": 10})
    return EnvTask(task, EnvConfig(name=env, **env_fields))


def play(model, tok, task, n=3, problems=2, max_new=4, generators=None):
    engine = RecordingEngine(model, tok)
    runner = EpisodeRunner(engine, PromptEncoder(tok))
    work = [(task, task.problem("train", i)) for i in range(problems)]
    prompts, groups = runner.play(work, SamplingParams(n=n, max_new_tokens=max_new), generators)
    return engine, prompts, groups


def test_trained_ids_are_the_sampled_ids_and_the_environment_turns(chat_policy):
    model, tok = chat_policy
    torch.manual_seed(1)
    engine, prompts, groups = play(model, tok, env_task(max_turns=3, max_tokens=40))
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    width_p = batch.input_ids.shape[1] - batch.completion_width
    sampled = {}  # prompt ids as a tuple -> the continuations the engine returned for it
    for call_prompts, outs in engine.calls:
        for p, conts in zip(call_prompts, outs):
            sampled.setdefault(tuple(p), []).extend(conts)
    multi_turn = 0
    row = 0
    for prompt, group in zip(prompts, groups):
        for ep in group:
            real = batch.attention_mask[row].bool()
            sequence = batch.input_ids[row][real].tolist()
            assert sequence == prompt + ep.token_ids  # the trained sequence is the episode, nothing re-encoded
            mask = batch.completion_mask[row, : len(ep.token_ids)].bool().tolist()
            assert mask == ep.policy_mask and len(mask) == len(ep.token_ids)
            assert_policy_runs_were_sampled(prompt, ep.token_ids, ep.policy_mask, sampled)
            multi_turn += ep.turns > 1 and not all(ep.policy_mask)
            row += 1
    assert multi_turn > 0  # some episodes had environment turns in the middle
    assert batch.input_ids.shape[1] - width_p == batch.completion_width


def test_environment_turns_render_as_the_template_renders_the_conversation(chat_policy):
    _, tok = chat_policy
    renderer = ChatRenderer(tok, use_template=True)
    opening = [{"role": "user", "content": "3+4="}]
    turn = tok("7", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    reply = [{"role": "user", "content": "Incorrect. Try again."}]
    ids = renderer.opening(opening) + turn + renderer.continuation(reply, turn)
    whole = tok.apply_chat_template(opening + [{"role": "assistant", "content": "7"}] + reply,
                                    add_generation_prompt=True, tokenize=False)
    assert tok.decode(ids) == whole
    # A turn cut before its end-of-turn token gets the template's closing from the environment.
    cut = turn[:-1]
    closed = renderer.continuation(reply, cut)
    assert tok.decode(cut + closed).startswith("7<|im_end|>")


def test_plain_text_rendering_without_a_chat_template():
    tok = train_tokenizer(["1+2=3 456 <result>x</result>"], 48)
    renderer = ChatRenderer(tok, use_template=False)
    assert tok.decode(renderer.continuation([{"role": "tool", "content": "56"}], [])) == "<result>56</result>"
    assert tok.decode(renderer.opening([{"role": "user", "content": "1+2="}])) == "1+2="


def test_policy_logprobs_match_a_full_forward_over_the_episode(chat_policy):
    model, tok = chat_policy
    torch.manual_seed(2)
    _, prompts, groups = play(model, tok, env_task(max_turns=3, max_tokens=40))
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    assert_rollout_logprobs_match_a_full_forward(model, batch)


def _gradients(model, batch: RolloutBatch) -> list[torch.Tensor]:
    model.zero_grad(set_to_none=True)
    a = AlgorithmConfig(entropy_coef=0.01)
    setup = LossSetup(algorithm=a, policy_loss=POLICY_LOSSES.get(a.policy_loss), kl_estimator=KL_ESTIMATORS.get("k3"),
                      kl_coef=0.0, temperature=1.0, norm_constant=1.0, micro_batch_size=4, on_policy=False)
    accumulate_gradients(model, batch, setup)
    return [p.grad.clone() for p in model.parameters()]


def test_gradients_do_not_depend_on_anything_at_environment_tokens(chat_policy):
    model, tok = chat_policy
    torch.manual_seed(3)
    _, prompts, groups = play(model, tok, env_task(max_turns=3, max_tokens=40))
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    mask = batch.completion_mask
    env_tokens = (batch.attention_mask[:, -batch.completion_width :] > 0) & (mask == 0)
    assert env_tokens.any()
    batch.loss_mask = mask
    batch.advantages = torch.randn(mask.shape) * mask
    batch.old_logprobs = batch.rollout_logprobs.clone()
    model.train()
    base = _gradients(model, batch)
    noise = torch.randn(mask.shape) * 100 * env_tokens
    batch.advantages, batch.old_logprobs = batch.advantages + noise, batch.old_logprobs + noise
    perturbed = _gradients(model, batch)
    assert any(g.abs().sum() > 0 for g in base)
    assert all(torch.equal(a, b) for a, b in zip(base, perturbed))
    model.eval()


def test_episode_samples_do_not_depend_on_the_other_episodes_in_the_batch(chat_policy):
    model, tok = chat_policy
    task = env_task(max_turns=3, max_tokens=40)
    gens = lambda k: [group_generator(torch.device("cpu"), 7, g) for g in range(k)]  # noqa: E731
    _, _, alone = play(model, tok, task, problems=1, generators=gens(1))
    _, _, together = play(model, tok, task, problems=2, generators=gens(2))
    assert [e.token_ids for e in alone[0]] == [e.token_ids for e in together[0]]


def test_discounted_returns_skip_environment_tokens_instead_of_restarting():
    rewards = torch.tensor([[0.0, 0.0, 0.0, 0.0, 1.0]])
    mask = torch.tensor([[1.0, 0.0, 0.0, 1.0, 1.0]])  # a policy token, two environment tokens, two policy tokens
    returns = discounted_returns(rewards, mask, gamma=0.5)
    assert returns.tolist() == [[0.25, 0.0, 0.0, 0.5, 1.0]]


def test_select_keeps_environment_tokens_that_end_an_episode():
    from rlvr.rollout.base import Completion

    c = Completion([5, 6, 7, 8], "x", [0.0] * 4, False, policy_mask=[True, False, False, True])
    batch = RolloutBatch.from_completions([[1, 2]], [[c]], 0, [{}])
    picked = batch.select(torch.tensor([0]))
    assert picked.input_ids.tolist() == [[1, 2, 5, 6, 7, 8]]
    assert picked.completion_mask.tolist() == [[1.0, 0.0, 0.0, 1.0]]


# ------------------------------------------------------------------------------------------ environments

def test_reward_rules_and_the_verdict_a_reward_pool_reads():
    assert REWARD_RULES["final"](1.0, [0.5, 0.5], 0.5) == 1.0
    assert REWARD_RULES["sum"](1.0, [0.5, 0.5], 0.5) == 2.0
    assert REWARD_RULES["discounted"](1.0, [0.0, 0.0, 0.0], 0.5) == 0.25
    verdict = episode_verdict("p", "c", episode_reward=0.5, episode_success=True, episode_metrics={"turns": 2.0})
    assert verdict == {"turns": 2.0, "score": 0.5, "correct": 1.0}


def test_try_again_gives_unary_feedback_and_discounts_by_attempt():
    task = env_task(args={"attempts": 3, "discount": 0.5})
    problem = task.problem("train", 0)
    wrong = str(int(problem.answer) + 1)
    env = task.make_env(problem)
    first = env.step(wrong)
    assert not first.done and first.messages == [{"role": "user", "content": "Incorrect. Try again."}]
    assert env.step(problem.answer).done
    assert (env.outcome().reward, env.outcome().success) == (0.5, True)
    assert env.metrics()["second_attempt_success"] == 1.0 and env.metrics()["repeated_answer"] == 0.0
    env = task.make_env(problem)
    for _ in range(2):
        assert not env.step(wrong).done
    assert env.step(wrong).done and env.outcome().reward == 0.0 and not env.outcome().success
    assert env.metrics()["repeated_answer"] == 1.0  # the same wrong answer again (Liu et al.'s collapse)
    env = task.make_env(problem)
    env.step(f" {wrong}\n")
    env.step(wrong)  # the same answer stated differently still repeats it
    assert env.metrics()["repeated_answer"] == 1.0
    penalized = env_task(args={"attempts": 3, "discount": 0.5, "repeat_penalty": 0.1}).make_env(problem)
    for text in (wrong, wrong, problem.answer):  # one repeat, then solved at the third attempt
        penalized.step(text)
    assert penalized.outcome().reward == pytest.approx(0.25 - 0.1) and penalized.outcome().success
    env = task.make_env(problem)
    env.step(problem.answer)  # right at once: no second attempt, so outside both populations
    assert math.isnan(env.metrics()["second_attempt_success"]) and math.isnan(env.metrics()["repeated_answer"])


def test_number_guessing_answers_higher_and_lower_until_found():
    task = make_tasks([RunConfig.model_validate({"data": {"tasks": [{"name": "guess_number"}]}}).data.tasks[0]],
                      0)[0]
    assert isinstance(task, EnvTask)  # the game names its own environment
    problem = task.problem("train", 3)
    secret = int(problem.answer)
    env = task.make_env(problem)
    assert env.step(str(secret - 1)).messages[0]["content"] == "higher"
    assert env.step(f"I guess {secret + 1}").messages[0]["content"] == "lower"
    assert env.step("no idea").messages[0]["content"] == "Reply with a number."
    assert env.step(str(secret)).done and env.outcome().success


def test_unknown_environment_and_bad_arguments_are_named():
    with pytest.raises(ConfigError, match="Unknown environment 'try_agian'.*try_again"):
        RunConfig.model_validate({"data": {"tasks": [{"name": "arithmetic", "env": "try_agian"}]}})
    cfg = RunConfig.model_validate({"data": {"tasks": [{"name": "arithmetic", "env": {"name": "try_again",
                                                                                   "args": {"tries": 2}}}]}})
    with pytest.raises(ConfigError, match="data.tasks\\[\\].env.args.*tries"):
        make_tasks(cfg.data.tasks, 0)
    cfg = RunConfig.model_validate({"data": {"tasks": [{"name": "arithmetic", "env": {"name": "tools",
                                                                                   "args": {"tools": ["abacus"]}}}]}})
    with pytest.raises(ConfigError, match="Unknown tool 'abacus'"):
        make_tasks(cfg.data.tasks, 0)


# ------------------------------------------------------------------------------------------------- tools

def user_tools(tmp_path) -> str:
    path = tmp_path / "my_tools.py"
    path.write_text(
        "import time\n\n"
        "def boom(x: str) -> str:\n    \"\"\"Always fails.\n\n    Args:\n        x: Anything.\n    \"\"\"\n"
        "    raise RuntimeError('kaput')\n\n"
        "def slow(x: str) -> str:\n    \"\"\"Never answers in time.\n\n    Args:\n        x: Anything.\n    \"\"\"\n"
        "    time.sleep(30)\n")
    return str(path)


def test_a_tool_that_raises_or_hangs_answers_with_a_tool_message(tmp_path):
    path = user_tools(tmp_path)
    task = env_task("tools", args={"tools": [f"{path}:boom", f"{path}:slow", "calculator"], "timeout_s": 0.5})
    env = task.make_env(task.problem("train", 0))
    call = lambda name, args: f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"  # noqa: E731
    start = time.monotonic()
    step = env.step(call("boom", {"x": "1"}) + call("slow", {"x": "1"}) + call("calculator", {"expression": "6*7"})
                    + "<tool_call>{not json</tool_call>" + call("nope", {}))
    assert time.monotonic() - start < 5
    assert not step.done
    contents = [m["content"] for m in step.messages]
    assert all(m["role"] == "tool" for m in step.messages)
    assert contents[0] == "Error: RuntimeError: kaput"
    assert contents[1] == "Error: slow timed out after 0.5 s"
    assert contents[2] == "42"
    assert contents[3].startswith("Error: malformed tool call")
    assert contents[4].startswith("Error: unknown tool 'nope'")
    assert env.metrics()["tool_errors"] == 4


def test_tool_schemas_come_from_signatures_and_docstrings(tmp_path):
    from rlvr.envs.tools import Tool

    def undocumented(x):
        return x

    with pytest.raises(ConfigError, match="type hints and a docstring"):
        Tool(undocumented)
    env = env_task("tools", args={"tools": ["calculator", "python"]}).make_env(env_task().problem("train", 0))
    names = [t.schema["function"]["name"] for t in env.tools]
    assert names == ["calculator", "python"]
    assert env.tools[0].schema["function"]["parameters"]["required"] == ["expression"]


@pytest.mark.parametrize("expression", ["__import__('os').system('true')", "(1).__class__", "9**9**9", "open('x')",
                                        "[1]*10**9"])
def test_the_calculator_evaluates_arithmetic_only(expression):
    from rlvr.envs.tools import Tool, calculator

    assert Tool(calculator)({"expression": expression}).startswith("Error: ValueError")
    assert Tool(calculator)({"expression": "123*456 - 7//2"}) == "56085"


def test_tag_calls_for_models_without_a_template():
    from rlvr.envs.tools import Tool, calculator, parse_tool_calls

    tools = {"calculator": Tool(calculator)}
    calls = parse_tool_calls("<calculator>12*3</calculator> then <calculator>1+</calculator>", tools, "tags")
    assert [c.arguments for c in calls] == [{"expression": "12*3"}, {"expression": "1+"}]


# -------------------------------------------------------------------------------------- trainer and eval

def test_an_environment_task_trains_through_the_trainer(fast_config):
    from rlvr.training.trainer import Trainer

    task = {"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10},
            "env": {"name": "try_again", "max_turns": 3, "max_tokens": 24}}
    trainer = Trainer(RunConfig.model_validate(fast_config(data={"tasks": [task]}, steps=1)))
    batch, metrics = trainer.rollout()
    env_tokens = (batch.attention_mask[:, -batch.completion_width :] > 0) & (batch.completion_mask == 0)
    assert env_tokens.any() and (batch.loss_mask[env_tokens] == 0).all()
    assert metrics["reward/verifier/turns"] > 1 and "reward/verifier/second_attempt_success" in metrics
    assert 0 < metrics["perf/env_s"] < metrics["perf/gen_s"]  # the environments' share of collecting the step
    assert math.isfinite(trainer.update(batch)["actor/loss"])
    trainer.pool.close()


def test_a_skyrl_gym_environment_trains_for_a_few_steps(fast_config):
    pytest.importorskip("skyrl_gym")
    import json as _json

    from rlvr.training.trainer import Trainer

    task = {"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10},
            "env": {"name": "skyrl", "args": {"id": "gsm8k_multi_turn", "extras": {"max_turns": 3}}, "max_turns": 3,
                    "max_tokens": 400}}
    cfg = RunConfig.model_validate(fast_config(data={"tasks": [task]}, steps=3))
    final = Trainer(cfg).fit()
    rows = [_json.loads(line) for line in open(f"{cfg.tracking.output_dir}/metrics.jsonl") if line.strip()]
    assert [r["step"] for r in rows if "actor/loss" in r] == [1, 2, 3]
    assert all(math.isfinite(r["actor/loss"]) for r in rows if "actor/loss" in r)
    assert final["reward/verifier/steps"] > 1  # SkyRL's own metric: its multi-turn env asked again


def test_evaluation_of_an_environment_reports_pass_at_k_over_episodes_and_turns(chat_policy):
    from rlvr.evaluation.evaluate import EvalSettings, run_evaluation, training_metrics
    from rlvr.rewards.composite import RewardComposer
    from rlvr.rewards.pool import RewardPool

    model, tok = chat_policy
    task = env_task(max_turns=3, max_tokens=40)
    settings = EvalSettings(num_problems=3, max_new_tokens=4, samples=4, ks=[1, 2])
    with RewardPool(1, 5.0) as pool:
        pool.start()
        run = run_evaluation(HFRolloutEngine(model, tok), PromptEncoder(tok), [task], RewardComposer([], pool),
                             settings)
    metrics = training_metrics(run)
    assert {"eval/accuracy", "eval/pass@1", "eval/pass@2", "eval/turns_mean"} <= set(metrics)
    assert 1 < metrics["eval/turns_mean"] <= 3
    # The environment's own metrics, over the 12 sampled episodes (the greedy ones are not sampled).
    assert 1 < metrics["eval/episode/attempts"] <= 3 and 0 <= metrics["eval/episode/first_attempt_success"] <= 1
    assert "eval/episode/second_attempt_success" in metrics
    from rlvr.evaluation.report import markdown, report_data

    data = report_data("arithmetic", settings, [("policy", "path", run)])
    assert data["models"][0]["episode_metrics"] == run.episode_metrics()
    table = markdown(data, []).split("## Episodes")[1]
    assert "second_attempt_success" in table and f"{run.episode_metrics()['attempts']:.3f}" in table


def test_evaluation_pools_episode_metrics_over_the_episodes_each_applies_to():
    from rlvr.evaluation.evaluate import EvalRun, EvalSettings, ProblemResult, _add_episode_metrics
    from rlvr.rollout.base import Completion

    def episode(first: float, second: float) -> Completion:
        return Completion([1], "x", [0.0], False, fields={"episode_metrics": {"first": first, "second": second}})

    nan = float("nan")
    results = [ProblemResult("t", "a"), ProblemResult("t", "b")]
    _add_episode_metrics(results[0], [episode(1.0, nan), episode(1.0, nan), episode(0.0, 1.0)])
    _add_episode_metrics(results[1], [episode(0.0, 0.0)])
    run = EvalRun(results, EvalSettings(num_problems=2, max_new_tokens=1), 4, 0.0)
    # pooled over episodes (not a mean of per-problem means); NaN episodes are outside the population
    assert run.episode_metrics() == {"first": 0.5, "second": 0.5}


def test_sft_on_conversations_trains_assistant_turns_only(tmp_path):
    from rlvr.training.sft import encode_conversations, sft_loss

    tok = chat_tokenizer()
    encode = PromptEncoder(tok)
    conversation = [{"role": "user", "content": "3+4="}, {"role": "assistant", "content": "8"},
                    {"role": "user", "content": "Incorrect. Try again."}, {"role": "assistant", "content": "7"}]
    (prompt, ids, trained), = encode_conversations([conversation], encode)
    # As the template renders it, except that the episode ends at the end token the model samples.
    assert tok.decode(prompt + ids) == tok.apply_chat_template(conversation, tokenize=False).removesuffix("\n")
    assert tok.decode([i for i, t in zip(ids, trained) if t]) == "8<|im_end|>7<|im_end|>"
    # The loss does not depend on the environment tokens' targets: changing them leaves it unchanged.
    torch.manual_seed(0)
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64), tok, 0)
    loss = sft_loss(model, [(prompt, ids, trained)], tok.pad_token_id)
    everything = sft_loss(model, [(prompt, ids, None)], tok.pad_token_id)
    assert not torch.isclose(loss, everything)
    n_trained = sum(trained)
    logits = model(input_ids=torch.tensor([prompt + ids])).logits[0, len(prompt) - 1 : -1]
    manual = torch.nn.functional.cross_entropy(logits[torch.tensor(trained)], torch.tensor(ids)[torch.tensor(trained)])
    assert torch.isclose(loss, manual, atol=1e-5) and n_trained == 4
    context_only = [{**m, "train": False} if m["content"] == "8" else m for m in conversation]
    (_, same_ids, trained), = encode_conversations([context_only], encode)
    assert same_ids == ids and tok.decode([i for i, t in zip(ids, trained) if t]) == "7<|im_end|>"


def test_budget_and_turn_limits_end_episodes(chat_policy):
    model, tok = chat_policy
    torch.manual_seed(4)
    task = env_task(max_turns=2, max_tokens=12)
    _, prompts, groups = play(model, tok, task, n=4, problems=3, max_new=8)
    for ep in (e for g in groups for e in g):
        assert len(ep.token_ids) <= 12 and ep.turns <= 2
        assert len(ep.token_ids) == len(ep.policy_mask) == len(ep.logprobs) == len(ep.entropies)
        if ep.policy_mask[-1] and ep.token_ids[-1] != tok.eos_token_id:
            assert ep.truncated  # the last turn was cut (turn limit or budget)
    _, _, groups = play(model, tok, env_task(max_turns=2, max_tokens=5), n=4, problems=3, max_new=8)
    cut = [e for g in groups for e in g if len(e.token_ids) == 5 and e.token_ids[-1] != tok.eos_token_id]
    assert cut and all(e.truncated and e.turns == 1 and all(e.policy_mask) for e in cut)
