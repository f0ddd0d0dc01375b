"""Conversational datasets (TRL's format: a prompt is a list of {role, content} messages) reach the model exactly
as the tokenizer's chat template renders them, with data.system_prompt merged and model.chat_template_kwargs
passed on; a prompt column of any other type is an error naming file, line and column."""

from __future__ import annotations

import json

import pytest

from rlvr.config import TinyModelConfig, build_config
from rlvr.errors import DataError
from rlvr.models.loading import build_tiny_model, save_pretrained, train_tokenizer
from rlvr.models.prompts import PromptEncoder
from rlvr.tasks import make_task

# A Qwen3-like template: `enable_thinking=False` closes an empty think block after the generation prompt.
TEMPLATE = ("{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}<|assistant|>{% if enable_thinking is defined and not enable_thinking %}"
            "<think></think>{% endif %}{% endif %}")
SYSTEM = "Add."
ROWS = [
    {"prompt": [{"role": "user", "content": "2+3="}], "answer": "5"},
    {"prompt": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "4+4="}], "answer": "8"},
    {"prompt": [{"role": "user", "content": "1+6="}], "answer": "7"},
    {"prompt": "3+3=", "answer": "6"},  # a plain string prompt in the same file is one user turn
]


@pytest.fixture
def chat_model(tmp_path):
    corpus = [TEMPLATE, SYSTEM, "Be brief.", "<|system|><|user|><|assistant|><think></think>",
              *[f"{a}+{b}={a + b}" for a in range(10) for b in range(10)]]
    tokenizer = train_tokenizer(corpus, 120)
    tokenizer.chat_template = TEMPLATE
    model = build_tiny_model(TinyModelConfig(hidden_size=32, num_layers=1, num_heads=2, intermediate_size=64),
                             tokenizer, 0)
    save_pretrained(model, tokenizer, tmp_path / "chat-model")
    return tmp_path / "chat-model", tokenizer


def expected_messages(prompt) -> list[dict]:
    """The merge rule: a string is one user turn; the system prompt goes first unless the row has its own."""
    messages = [{"role": "user", "content": prompt}] if isinstance(prompt, str) else list(prompt)
    return messages if messages[0]["role"] == "system" else [{"role": "system", "content": SYSTEM}, *messages]


def test_conversational_prompts_reach_the_model_as_the_chat_template_renders_them(chat_model, fast_config,
                                                                                  tmp_path):
    from rlvr.training.trainer import Trainer

    model_dir, tokenizer = chat_model
    path = tmp_path / "chat.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    cfg = build_config(fast_config(
        steps=1, model={"name": str(model_dir), "chat_template_kwargs": {"enable_thinking": False}},
        data={"tasks": [{"name": "dataset", "args": {"path": str(path)}}], "system_prompt": SYSTEM,
              "prompts_per_step": len(ROWS), "sampler": "uniform"},
        rollout={"samples_per_prompt": 2, "max_new_tokens": 2}))
    trainer = Trainer(cfg)
    seen = []
    generate = trainer.engine.generate

    def recording(prompts, *args, **kwargs):
        seen.extend(tuple(p) for p in prompts)
        return generate(prompts, *args, **kwargs)

    trainer.engine.generate = recording
    trainer.fit()
    expected = {tuple(tokenizer.apply_chat_template(expected_messages(r["prompt"]), add_generation_prompt=True,
                                                    tokenize=True, enable_thinking=False)["input_ids"])
                for r in ROWS}
    assert set(seen) == expected
    assert all(tokenizer.decode(ids).endswith("<|assistant|><think></think>") for ids in seen)
    texts = sorted(tokenizer.decode(ids) for ids in seen)
    assert sum(t.count("<|system|>") for t in texts) == len(ROWS)  # one system turn each, never two
    assert any("<|system|>Be brief.\n<|user|>4+4=" in t for t in texts)


def test_rewards_receive_the_conversation(chat_model):
    _, tokenizer = chat_model
    encode = PromptEncoder(tokenizer, "auto", None)
    conversation = ROWS[1]["prompt"]
    assert encode.messages(conversation) == conversation
    assert encode(conversation) == tokenizer.apply_chat_template(conversation, add_generation_prompt=True,
                                                                 tokenize=True)["input_ids"]


def test_a_conversation_without_a_chat_template_is_an_error():
    tokenizer = train_tokenizer(["1+1=2"], 20)
    with pytest.raises(DataError, match="is a conversation .* the tokenizer has no chat template"):
        PromptEncoder(tokenizer)([{"role": "user", "content": "1+1="}], where="row 3")


@pytest.mark.parametrize(("prompt", "problem"), [
    (12, r"column 'prompt' \(prompt\) holds a int \('12'\); a prompt must be text or a list of"),
    ({"role": "user", "content": "1+1="}, r"column 'prompt' \(prompt\) holds a dict"),
    ([{"role": "user"}], r"column 'prompt' \(prompt\) message 0 is not a \{'role': str, 'content': str\} mapping"),
    ([], r"column 'prompt' \(prompt\) is an empty list of messages"),
])
def test_a_prompt_of_another_type_names_file_line_and_column(tmp_path, prompt, problem):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"prompt": "1+1=", "answer": "2"}) + "\n" + json.dumps({"prompt": prompt, "answer": "2"}))
    with pytest.raises(DataError, match=rf"bad.jsonl, line 2: {problem}"):
        make_task("dataset", 0, {"path": str(path)})
    skipped = make_task("dataset", 0, {"path": str(path), "bad_rows": "skip"})
    assert skipped.size("train") == 1 and "line 2" in skipped.skipped_rows[0]


def test_the_math_instruction_joins_the_last_user_turn_of_a_conversation(tmp_path):
    """The math task appends its instruction to the prompt; for a conversation, to its last user message (it used to
    turn the list of messages into a string)."""
    from rlvr.tasks.math import BOXED_INSTRUCTION

    path = tmp_path / "math.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in ROWS))
    task = make_task("math", 0, {"path": str(path), "prompt_column": "prompt"})
    prompts = [task.problem("train", i).prompt for i in range(len(ROWS))]
    by_answer = {task.problem("train", i).answer: p for i, p in enumerate(prompts)}
    assert by_answer["8"] == [{"role": "system", "content": "Be brief."},
                              {"role": "user", "content": f"4+4=\n\n{BOXED_INSTRUCTION}"}]
    assert by_answer["6"] == f"3+3=\n\n{BOXED_INSTRUCTION}"
    assert ROWS[1]["prompt"][1]["content"] == "4+4="  # the data's own rows are not changed


def test_eval_report_shows_conversational_prompts_and_episode_turns():
    from rlvr.evaluation.report import completion_lines

    prompt = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+3="}]
    kept = [{"text": "5", "greedy": True, "correct": True, "answer": "5", "tokens": 6, "truncated": False,
             "messages": [{"role": "assistant", "content": "4"}, {"role": "user", "content": "Try again."},
                          {"role": "assistant", "content": "5"}]}]
    data = {"models": [{"label": "m", "problems": [{"task": "t", "uid": "p", "reference": "5", "prompt": prompt,
                                                    "completions": kept}]}]}
    text = "\n".join(completion_lines(data))
    assert "Prompt:\n\n```text\n[system] Be brief.\n[user] 2+3=\n```" in text
    assert "```text\n[assistant] 4\n[user] Try again.\n[assistant] 5\n```" in text


def test_sft_pairs_keep_a_conversational_prompt(tmp_path, fast_config):
    from rlvr.training.sft import demonstrations

    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"prompt": ROWS[1]["prompt"], "completion": "8"}) + "\n"
                    + json.dumps({"prompt": [{"role": "user"}], "completion": "8"}) + "\n")
    cfg = build_config(fast_config(sft={"data_file": str(path)}))
    with pytest.raises(DataError, match=r"pairs.jsonl, row 2: column 'prompt' message 0 is not"):
        demonstrations(cfg)
    path.write_text(path.read_text().splitlines()[0] + "\n")
    assert demonstrations(cfg) == [(ROWS[1]["prompt"], "8")]
