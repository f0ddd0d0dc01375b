"""Agent programs as tasks, through the OpenAI-compatible endpoint over the policy, with the real `openai` client:
token-exact capture, segments, batching, tool calls, failures, mixtures with native environments, `rlvr serve`."""

from __future__ import annotations

import json
import socket
import time

import pytest
import torch
from conftest import assert_policy_runs_were_sampled
from test_episodes import CHATML, RecordingEngine, tiny_chat_policy

from rlvr.config import EnvConfig, RunConfig
from rlvr.envs.base import episode_verdict
from rlvr.envs.render import ChatRenderer
from rlvr.envs.task import EnvTask
from rlvr.errors import ConfigError, RlvrError
from rlvr.models.logprobs import completion_logprobs
from rlvr.models.prompts import PromptEncoder
from rlvr.rollout import SamplingParams, group_generator
from rlvr.rollout.chat_endpoint import ChatEndpoint
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.rollout.openai_format import Limits, assistant_message, template_messages
from rlvr.tasks import make_task
from rlvr.training.batch import RolloutBatch

openai = pytest.importorskip("openai", reason="the agents extra: pip install 'rlvr[agents]'")

ADD = {"type": "function", "function": {"name": "add", "description": "Add two numbers.", "parameters": {
    "type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]}}}


@pytest.fixture(scope="module")
def policy():
    return tiny_chat_policy()


def agent_task(function, label=None, **args) -> EnvTask:
    task = make_task("arithmetic", 0, {"max_operand": 9, "eval_size": 10}, label=label)
    return EnvTask(task, EnvConfig(name="agent", args={"function": function, **args}))


def run_agents(model, tok, tasks_and_problems, n=4, max_new=5, max_wait_s=None):
    engine = RecordingEngine(model, tok)
    runner = EpisodeRunner(engine, PromptEncoder(tok))
    runner.agents.version = 7
    if max_wait_s is not None:
        runner.agents.max_wait_s = max_wait_s
    gens = [group_generator(torch.device("cpu"), 0, i) for i in range(len(tasks_and_problems))]
    prompts, groups = runner.generate(tasks_and_problems, SamplingParams(n=n, max_new_tokens=max_new), gens)
    return engine, runner, prompts, groups


def two_turns(client, row):
    """Asks, hands back a tool result, asks again: the second call extends the first."""
    messages = [{"role": "user", "content": row["prompt"]}]
    first = client.chat.completions.create(model=row["model"], messages=messages, tools=[ADD], logprobs=True)
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": "x", "content": "Incorrect. Try again."}]
    second = client.chat.completions.create(model=row["model"], messages=messages, tools=[ADD])
    return {"reward": float(len(second.choices[0].message.content or "") % 2), "length": 3.0}


def test_agent_calls_are_captured_token_exact_and_batched(policy):
    model, tok = policy
    task = agent_task(two_turns)
    # a straggler limit far above the threads' start-up spread on a loaded machine: the count below is exact
    engine, runner, prompts, groups = run_agents(model, tok, [(task, task.problem("train", i)) for i in range(3)],
                                                 max_wait_s=5.0)
    sampled: dict[tuple[int, ...], list[list[int]]] = {}
    for call_prompts, outs in engine.calls:
        for p, group in zip(call_prompts, outs):
            sampled.setdefault(tuple(p), []).extend(group)
    for prompt, group in zip(prompts, groups):
        for e in group:
            assert "episode_error" not in e.fields, e.fields
            assert e.turns == 2 and e.fields["episode_metrics"]["segments"] == 1.0
            assert e.fields["episode_metrics"]["length"] == 3.0
            # the second turn continues the first as sampled; the tool result is environment tokens
            assert_policy_runs_were_sampled(prompt, e.token_ids, e.policy_mask, sampled)
            assert any(not m for m in e.policy_mask) and sum(e.policy_mask) > 0
            assert "Incorrect. Try again." in tok.decode([t for t, m in zip(e.token_ids, e.policy_mask) if not m])
            # every call recorded: its prompt, what the engine sampled for it, the policy version
            assert len(e.calls) == 2 and all(c.version == 7 for c in e.calls)
            for call in e.calls:
                assert all(c.token_ids in sampled[tuple(call.prompt_ids)] for c in call.completions)
    # each turn of the 12 episodes in one engine batch (the batcher waits for every live episode's call)
    metrics = runner.agents.metrics
    assert metrics["endpoint/calls"] == 24 and metrics["endpoint/batch_calls_max"] == 12
    assert metrics["endpoint/engine_calls"] == 2, [len(c[0]) for c in engine.calls]
    batch = RolloutBatch.from_completions(prompts, groups, tok.pad_token_id, [{}] * len(groups))
    with torch.no_grad():
        logp, _ = completion_logprobs(model, batch.input_ids, batch.attention_mask, batch.completion_width, 1.0)
    mask = batch.completion_mask.bool()
    assert torch.allclose(logp[mask], batch.rollout_logprobs[mask], atol=1e-4)


def test_the_batcher_waits_for_every_live_episode_and_no_longer_than_its_limit(policy):
    from rlvr.rollout.call_batcher import CallBatcher

    model, tok = policy
    engine = RecordingEngine(model, tok)
    batcher = CallBatcher(engine, wait_s=0.005, max_wait_s=1.5, per_episode=True)
    params, prompt = SamplingParams(n=1, max_new_tokens=2), tok("1 + 1 =")["input_ids"]
    try:
        for episode in "abc":
            batcher.open(episode)
        first = batcher.submit(prompt, params, episode="a")
        time.sleep(0.1)  # far past wait_s: a batcher that waits only while calls keep coming would go alone
        second = batcher.submit(prompt, params, episode="b")
        time.sleep(0.1)
        assert not first.done()  # "c" is live and may still call
        batcher.finish("c")  # "c" ended without calling again: nothing more can come
        first.result(timeout=5), second.result(timeout=5)
        assert batcher.batch_calls == [2]
        batcher.open("c")  # live, but never calls: the batch goes after the straggler limit, not never
        t0 = time.monotonic()
        batcher.submit(prompt, params, episode="a").result(timeout=10)
        assert 1.4 < time.monotonic() - t0 < 6 and batcher.batch_calls == [2, 1]
    finally:
        batcher.close()


def rewrites_history(client, row):
    """Second call drops the first exchange (a summarizing agent): a new segment."""
    first = client.chat.completions.create(model=row["model"], messages=[{"role": "user", "content": row["prompt"]}])
    summary = f"Earlier you said {first.choices[0].message.content!r}. {row['prompt']}"
    second = client.chat.completions.create(model=row["model"], messages=[{"role": "user", "content": summary}])
    return 1.0 if second.choices[0].message.content else 0.0


def test_a_rewritten_history_starts_a_new_segment_and_the_last_one_is_trained(policy):
    model, tok = policy
    task = agent_task(rewrites_history)
    engine, runner, prompts, groups = run_agents(model, tok, [(task, task.problem("train", 0))], n=2)
    problem = task.problem("train", 0)
    first = tok.apply_chat_template([{"role": "user", "content": problem.prompt}], add_generation_prompt=True)
    called = {tuple(p) for call_prompts, _ in engine.calls for p in call_prompts}
    second_prompts = called - {tuple(first)}
    assert len(called) == 3  # the shared first prompt, then each episode's rewritten one
    for e in groups[0]:
        assert e.fields["episode_metrics"]["segments"] == 2.0 and e.turns == 1
        full = prompts[0] + e.token_ids
        start = e.policy_mask.index(True)
        assert tuple(full[: len(prompts[0]) + start]) in second_prompts  # the trained sample is the second segment
        assert all(e.policy_mask[start:])


def failing_agent(kind):
    def agent(client, row):
        if kind == "raises":
            raise ValueError("the agent's own bug")
        if kind == "hangs":
            time.sleep(30)
        if kind == "never calls":
            return 1.0
        if kind == "bad model":
            client.chat.completions.create(model="gpt-4o", messages=[{"role": "user", "content": "hi"}])
        if kind == "bad parameter":
            client.chat.completions.create(model=row["model"], messages=[{"role": "user", "content": "hi"}],
                                           frequency_penalty=0.5)
        if kind == "other temperature":
            client.chat.completions.create(model=row["model"], messages=[{"role": "user", "content": "hi"}],
                                           temperature=0.3)
        client.chat.completions.create(model=row["model"], messages=[{"role": "user", "content": row["prompt"]}])
        return "garbage" if kind == "garbage" else 1.0
    return agent


def test_failed_episodes_carry_their_errors_and_the_others_go_on(policy):
    model, tok = policy
    kinds = {"raises": "ValueError: the agent's own bug", "hangs": "did not finish within episode_timeout_s=1",
             "never calls": "never called the model", "garbage": "returned 'garbage' (str)",
             "bad model": "The model 'gpt-4o' does not exist here; this endpoint serves 'policy'",
             "bad parameter": "'frequency_penalty' is not supported",
             "other temperature": "'temperature'=0.3 differs from the run's rollout.temperature=1", "fine": None}
    work = []
    for kind in kinds:
        task = agent_task(failing_agent(kind), label=kind, episode_timeout_s=1.0)
        work.append((task, task.problem("train", 0)))
    t0 = time.perf_counter()
    # a short straggler limit: the hung agent stays live for its whole second and holds each batch that long
    _, _, prompts, groups = run_agents(model, tok, work, n=1, max_wait_s=0.05)
    assert time.perf_counter() - t0 < 15  # the hung agent is abandoned after its limit, not waited on
    for (kind, message), group in zip(kinds.items(), groups):
        e = group[0]
        if message is None:
            assert "episode_error" not in e.fields and episode_verdict("", "", **e.fields)["score"] == 1.0
            continue
        assert message in e.fields["episode_error"], (kind, e.fields["episode_error"])
        assert not any(e.policy_mask)  # a failed episode is not trained
        with pytest.raises(RlvrError, match="Agent episode of task"):
            episode_verdict("", "", **e.fields)  # the verifier's error: counted by the failure budget


def test_a_port_in_use_is_a_clear_error(policy):
    model, tok = policy
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        port = taken.getsockname()[1]
        with pytest.raises(RlvrError, match=f"Port {port} on 127.0.0.1 is in use"):
            ChatEndpoint(RecordingEngine(model, tok), ChatRenderer(tok, True), Limits("tiny", 4), port=port)


def test_tool_calls_are_parsed_and_rendered_in_the_hermes_format():
    text = 'Let me add.<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'
    message = assistant_message(text, [ADD], [])
    assert message["content"] == "Let me add."
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "add" and json.loads(call["function"]["arguments"]) == {"a": 2, "b": 3}
    assert assistant_message(text, [], [])["content"] == text  # no tools offered: plain text
    assert assistant_message("<tool_call>{not json</tool_call>", [ADD], []).get("tool_calls") is None
    stopped = assistant_message(text, [ADD], ["</tool_call>"])  # a turn stopped at its call still calls
    assert stopped["content"] == "Let me add." and len(stopped["tool_calls"]) == 1
    # a template without tools: the schemas go into the system message, the calls into the assistant's text
    messages, native = template_messages([{"role": "user", "content": "2+3?"},
                                          {"role": "assistant", "content": "",
                                           "tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]}],
                                         [ADD], CHATML)
    assert native is None and messages[0]["role"] == "system" and '"name": "add"' in messages[0]["content"]
    assert messages[2]["content"] == '<tool_call>\n{"name": "add", "arguments": {"a": 2, "b": 3}}\n</tool_call>'


CALCULATOR = {"type": "function", "function": {"name": "calculator", "description": "Evaluate an expression.",
              "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}


def test_tool_calls_in_tags_are_parsed_rendered_back_and_a_tool_of_two_parameters_is_refused():
    from rlvr.rollout.openai_format import APIError, parse_request

    text = "I will compute. <calculator>12*34</calculator>"
    message = assistant_message(text, [CALCULATOR], ["</calculator>"], "tags")
    assert message["content"] == "I will compute."
    [call] = message["tool_calls"]
    assert call["function"]["name"] == "calculator" and json.loads(call["function"]["arguments"]) == \
        {"expression": "12*34"}
    assert assistant_message("<add>1</add>", [CALCULATOR], [], "tags").get("tool_calls") is None  # not offered
    # the history written back as the model wrote it, and no Hermes description of the tools
    messages, native = template_messages([{"role": "user", "content": "12*34?"},
                                          {"role": "assistant", "content": "I will compute.",
                                           "tool_calls": [{"name": "calculator", "arguments": {"expression": "12*34"}}]}],
                                         [CALCULATOR], CHATML, "tags")
    assert native is None and [m["role"] for m in messages] == ["user", "assistant"]
    assert messages[1]["content"] == "I will compute.\n<calculator>12*34</calculator>"
    body = {"model": "policy", "messages": [{"role": "user", "content": "hi"}], "tools": [ADD]}
    with pytest.raises(APIError, match="Tool 'add' takes 2 parameters.*exactly one"):
        parse_request(body, Limits("policy", 8, tool_call_format="tags"))


def test_a_tags_call_sent_back_continues_its_segment_with_the_sampled_tokens(policy):
    from rlvr.rollout.agent_trace import EpisodeTrace
    from rlvr.rollout.base import Completion
    from rlvr.rollout.openai_format import normal_call

    _, tok = policy
    trace = EpisodeTrace(ChatRenderer(tok, True), call_format="tags")
    opening = [{"role": "user", "content": "12*34?"}]
    first = trace.begin(opening, [CALCULATOR])
    sampled = tok("<calculator>12*34</calculator>", add_special_tokens=False)["input_ids"]
    completion = Completion(sampled, "<calculator>12*34</calculator>", [0.0] * len(sampled), False)
    reply = assistant_message(completion.text, [CALCULATOR], [], "tags")
    assert reply["tool_calls"][0]["function"]["arguments"] == '{"expression": "12*34"}'
    trace.answered(first, [completion], [reply])
    sent_back = {"role": "assistant", "content": reply["content"] or "",  # as the endpoint reads it back
                 "tool_calls": [normal_call(c, "tool_calls") for c in reply["tool_calls"]]}
    second = trace.begin([*opening, sent_back, {"role": "tool", "tool_call_id": "x", "content": "408"}], [CALCULATOR])
    assert len(trace.segments) == 1  # the call continues the first one's segment
    assert second.prompt_ids[: len(first.prompt_ids) + len(sampled)] == first.prompt_ids + sampled  # as sampled
    assert "408" in tok.decode(second.prompt_ids[len(first.prompt_ids) + len(sampled):])
    with pytest.raises(ConfigError, match="tool_call_format must be 'json' or 'tags'"):
        task = agent_task(two_turns, tool_call_format="xml")
        task.make_envs(task.problem("train", 0), 1)


def test_rlvr_serve_answers_chat_completions_with_tools_from_a_checkpoint(policy, tmp_path):
    from rlvr.cli.main import build_parser, parse_args
    from rlvr.cli.serve import start_server
    from rlvr.models.loading import save_pretrained

    model, tok = policy
    save_pretrained(model, tok, tmp_path / "ckpt")
    args = parse_args(build_parser(), ["serve", str(tmp_path / "ckpt"), "--port", "0", "--name", "tiny"])
    assert (args.port, args.name) == (0, "tiny")
    endpoint = start_server(args.model, port=0, name="tiny", max_tokens=6, overrides=["model.device=cpu"])
    try:
        client = openai.OpenAI(base_url=endpoint.url, api_key="any", max_retries=0)
        assert [m.id for m in client.models.list().data] == ["tiny"]
        messages = [{"role": "user", "content": "2+3?"}]
        plain = client.chat.completions.create(model="tiny", messages=messages, max_tokens=4, seed=1)
        out = client.chat.completions.create(model="tiny", messages=messages, tools=[ADD], n=3, logprobs=True,
                                             max_tokens=4, seed=1)
        assert len(out.choices) == 3 and out.usage.prompt_tokens > plain.usage.prompt_tokens  # tools rendered
        assert all(len(c.logprobs.content) <= 4 and c.finish_reason in ("stop", "length") for c in out.choices)
        # a history with a tool call and its result is rendered too
        history = messages + [{"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}]},
                              {"role": "tool", "tool_call_id": "c1", "content": "5"}]
        assert client.chat.completions.create(model="tiny", messages=history, tools=[ADD]).choices
        streamed = list(client.chat.completions.create(model="tiny", messages=messages, max_tokens=4, seed=1,
                                                       stream=True, stream_options={"include_usage": True}))
        assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == \
            plain.choices[0].message.content  # the same seed: the same completion, as server-sent events
        assert streamed[-1].usage.completion_tokens == plain.usage.completion_tokens
        with pytest.raises(openai.BadRequestError, match="'max_tokens' must be a int in"):
            client.chat.completions.create(model="tiny", messages=messages, max_tokens=1000)
    finally:
        endpoint.close()


AGENT_FILE = '''
def agent(client, row):
    reply = client.chat.completions.create(model=row["model"], messages=[{"role": "user", "content": row["prompt"]}])
    return float(len(reply.choices[0].message.content or "") % 2)


def broken(client, row):
    raise ValueError("this agent always fails")
'''


@pytest.fixture
def saved_chat_model(policy, tmp_path):
    from rlvr.models.loading import save_pretrained

    model, tok = policy
    save_pretrained(model, tok, tmp_path / "chat")
    (tmp_path / "agents.py").write_text(AGENT_FILE)
    return tmp_path


def agent_entry(tmp_path, function: str, **fields) -> dict:
    return {"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}, **fields,
            "env": {"name": "agent", "args": {"function": f"{tmp_path / 'agents.py'}:{function}"}}}


def test_native_environments_and_agent_programs_train_in_one_mixture(fast_config, saved_chat_model):
    from rlvr.training.trainer import Trainer

    tmp_path = saved_chat_model
    tasks = [{"name": "arithmetic", "args": {"max_operand": 9, "eval_size": 10}, "label": "native", "weight": 1.0,
              "env": {"name": "try_again", "max_turns": 2}},
             agent_entry(tmp_path, "agent", label="agent", weight=1.0)]
    cfg = RunConfig.model_validate(fast_config(model={"name": str(tmp_path / "chat"), "device": "cpu"},
                                               data={"tasks": tasks, "prompts_per_step": 4}, steps=2))
    Trainer(cfg).fit()
    rows = [json.loads(line) for line in open(tmp_path / "run" / "metrics.jsonl")]
    for row in rows:  # each source its own metrics; the endpoint's batches
        assert {"source/native/reward", "source/agent/reward", "endpoint/batch_calls_mean"} <= set(row), sorted(row)
        assert row["endpoint/calls"] > 0 and row["endpoint/calls"] % 4 == 0  # four episodes a prompt, a call each
    completions = [json.loads(line) for line in open(tmp_path / "run" / "completions.jsonl")]
    assert {c["task"] for c in completions} == {"native", "agent"}


@pytest.mark.slow  # the failure budget's stop is tested at large elsewhere; this is its agent case in a real run
def test_a_run_whose_agent_always_fails_stops_naming_the_error(fast_config, saved_chat_model):
    from rlvr.training.trainer import Trainer

    tmp_path = saved_chat_model
    cfg = RunConfig.model_validate(fast_config(model={"name": str(tmp_path / "chat"), "device": "cpu"},
                                               data={"tasks": [agent_entry(tmp_path, "broken")], "prompts_per_step": 1},
                                               rollout={"samples_per_prompt": 2}, steps=1))
    with pytest.raises(RlvrError, match="the agent raised ValueError: this agent always fails"):
        Trainer(cfg).fit()


def test_the_documented_agent_program_runs_as_written(policy, tmp_path):
    import re
    from pathlib import Path

    import yaml

    section = (Path(__file__).parents[1] / "docs" / "environments.md").read_text().split(
        "## Your own agent program")[1]
    code, config = re.findall(r"```(?:python|yaml)\n(.*?)```", section, re.DOTALL)[:2]
    (tmp_path / "calculator_agent.py").write_text(code)
    entry = yaml.safe_load(config)["data"]["tasks"][0]
    entry["env"]["args"]["function"] = f"{tmp_path / 'calculator_agent.py'}:agent"
    task = EnvTask(make_task(entry["name"], 0, {"max_operand": 9, "eval_size": 10}), EnvConfig(**entry["env"]))
    model, tok = policy
    _, _, _, groups = run_agents(model, tok, [(task, task.problem("train", 0))], n=2)
    for e in groups[0]:
        assert "episode_error" not in e.fields, e.fields
        assert e.fields["episode_reward"] in (0.0, 1.0) and e.turns >= 1
