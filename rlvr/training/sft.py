"""Supervised fine-tuning cold start: cross-entropy on completion tokens only."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch

from rlvr.config import RunConfig
from rlvr.envs import make_tasks
from rlvr.errors import DataError
from rlvr.models.compile import compile_training_layers
from rlvr.models.loading import (
    TINY,
    load_model,
    load_policy,
    load_processor,
    load_tokenizer,
    model_source,
    resolve_device,
    save_pretrained,
)
from rlvr.models.prompts import PromptEncoder, conversation_problem, prompt_key, prompt_text
from rlvr.models.vision import collate_inputs, is_vision_model, make_prompt_encoder, model_positions, prompt_inputs
from rlvr.tasks.dataset import read_rows
from rlvr.tracking import MetricsLogger


def conversations(cfg: RunConfig) -> list[list[dict]]:
    """The conversations of sft.data_file's sft.messages_column."""
    s = cfg.sft
    out = []
    for i, row in enumerate(read_rows(s.data_file), 1):
        messages = row.get(s.messages_column)
        if not isinstance(messages, list) or not all(isinstance(m, dict) and "role" in m and "content" in m
                                                      for m in messages):
            raise DataError(f"{s.data_file}, row {i}: column '{s.messages_column}' must be a list of "
                            "{role, content} messages.")
        out.append(messages)
    return out


def demonstrations(cfg: RunConfig) -> list[tuple[str, str]]:
    """(prompt, completion) pairs: from sft.data_file, or the tasks' reference solutions. A prompt may be a
    conversation (a list of {role, content} messages)."""
    s = cfg.sft
    if s.data_file:
        pairs = []
        for i, row in enumerate(read_rows(s.data_file), 1):
            missing = [(key, c) for key, c in (("sft.prompt_column", s.prompt_column),
                                                ("sft.completion_column", s.completion_column)) if not row.get(c)]
            if missing:
                key, column = missing[0]
                raise DataError(
                    f"{s.data_file}, row {i}: column '{column}' is missing or empty. Columns found: "
                    f"{', '.join(sorted(row))}. Map it with {key}=NAME."
                )
            prompt = row[s.prompt_column]
            if isinstance(prompt, list):  # a conversation goes through the chat template as it is
                if problem := conversation_problem(prompt):
                    raise DataError(f"{s.data_file}, row {i}: column '{s.prompt_column}' {problem}.")
            else:
                prompt = str(prompt)
            pairs.append((prompt, str(row[s.completion_column])))
        return pairs
    tasks = make_tasks(cfg.data.tasks, cfg.seed + s.seed_offset)
    for task in tasks:
        if task.problem("train", 0).solution is None:
            hint = (" Name the dataset's column of reference completions with data.tasks[].args.solution_column=NAME,"
                    " or give" if task.has_rows else " Give")
            raise DataError(f"Task '{task.label}' has no reference solutions for SFT.{hint} sft.data_file with "
                            "prompt/completion pairs (columns sft.prompt_column, sft.completion_column).")
    pairs, index = [], 0
    available = [task.size("train") for task in tasks]
    while len(pairs) < s.num_examples and any(n is None or index < n for n in available):
        for task, n in zip(tasks, available):  # round robin over the tasks; a finite one runs out
            if len(pairs) < s.num_examples and (n is None or index < n):
                p = task.problem("train", index)
                pairs.append((p.prompt, p.solution))
        index += 1
    if len(pairs) < s.num_examples:
        print(f"note: sft.num_examples={s.num_examples}, but the tasks hold only {len(pairs)} training rows; "
              f"using all {len(pairs)}.", file=sys.stderr)
    return pairs


Example = tuple[list[int], list[int], list[bool] | None]  # prompt ids, target ids, which targets are trained (None: all)


def encode_pairs(pairs, encode: PromptEncoder, tokenizer) -> list[Example]:
    out = []
    for i, (prompt, completion) in enumerate(pairs):
        target = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        out.append((encode(prompt, where=f"demonstration {i}"), target, None))
    return out


def encode_conversations(messages: list[list[dict]], encode: PromptEncoder) -> list[Example]:
    """Multi-turn demonstrations as episodes: environment messages rendered as the episode runner renders them
    and left out of the loss."""
    from rlvr.envs.render import ChatRenderer

    renderer = ChatRenderer(encode.tokenizer, encode.use_template, encode.system_prompt, encode.template_kwargs)
    return [renderer.conversation(m) for m in messages]


def image_inputs(model, ids: torch.Tensor, attn: torch.Tensor, examples: list[Example]) -> dict[str, torch.Tensor]:
    """The images of a right-padded batch of a vision-language model's examples, with their positions (M-RoPE);
    nothing for text prompts."""
    inputs = collate_inputs([prompt_inputs(e[0]) for e in examples], ids.device)
    return {**inputs, "position_ids": model_positions(model, ids, attn, inputs)} if inputs else {}


def sft_loss(model, examples: list[Example], pad_id: int) -> torch.Tensor:
    """Mean cross-entropy over the trained target tokens of `examples` (right-padded batch); a (prompt, target)
    pair trains every target token."""
    examples = [(e[0], e[1], e[2] if len(e) > 2 else None) for e in examples]
    width = max(len(p) + len(c) for p, c, _ in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    for r, (p, c, trained) in enumerate(examples):
        seq = p + c
        ids[r, : len(seq)] = torch.tensor(seq)
        attn[r, : len(seq)] = 1
        target = torch.tensor(c)
        if trained is not None:
            target = target.masked_fill(~torch.tensor(trained, dtype=torch.bool), -100)
        labels[r, len(p) : len(seq)] = target
    device = next(model.parameters()).device
    ids, attn = ids.to(device), attn.to(device)
    logits = model(input_ids=ids, attention_mask=attn, **image_inputs(model, ids, attn, examples)).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels[:, 1:].to(device), ignore_index=-100)


def trained_tokens(example: Example) -> int:
    """The target tokens an example trains (all of a pair's completion; a conversation's assistant tokens)."""
    return len(example[1]) if len(example) < 3 or example[2] is None else sum(example[2])


def accumulate_sft_loss(model, examples: list[Example], pad_id: int, micro_batch_size: int) -> float:
    """Backpropagate the batch's mean cross-entropy over its trained target tokens, `micro_batch_size` sequences at a
    time: each micro-batch's mean weighted by its share of the batch's target tokens, so the accumulated gradient is
    the whole batch's up to float rounding (one micro-batch: its share is 1). Returns the batch's loss; a batch with
    no trained token backpropagates nothing."""
    total, loss = sum(trained_tokens(e) for e in examples), 0.0
    for start in range(0, len(examples), micro_batch_size):
        micro = examples[start : start + micro_batch_size]
        share = sum(trained_tokens(e) for e in micro) / total if total else 0.0
        if share:
            part = sft_loss(model, micro, pad_id) * share
            part.backward()
            loss += part.item()
    return loss


@torch.no_grad()
def exact_match(model, examples: list[Example], pad_id: int, batch_size: int = 256) -> float:
    """Share of `examples` whose every trained target token (the answer and its EOS) is the model's most likely
    next token given the prompt and the target so far: the greedy completion is then exactly the target."""
    was_training, hits = model.training, 0
    model.eval()
    device = next(model.parameters()).device
    for i in range(0, len(examples), batch_size):
        chunk = [(e[0], e[1], e[2] if len(e) > 2 else None) for e in examples[i : i + batch_size]]
        width = max(len(p) + len(c) for p, c, _ in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long)
        attn = torch.zeros((len(chunk), width), dtype=torch.long)
        for r, (p, c, _) in enumerate(chunk):
            ids[r, : len(p) + len(c)] = torch.tensor(p + c)
            attn[r, : len(p) + len(c)] = 1
        ids, attn = ids.to(device), attn.to(device)
        predicted = model(input_ids=ids, attention_mask=attn,
                          **image_inputs(model, ids, attn, chunk)).logits.argmax(-1).cpu()
        for r, (p, c, trained) in enumerate(chunk):
            guess = predicted[r, len(p) - 1 : len(p) + len(c) - 1].tolist()
            hits += all(g == t for g, t, k in zip(guess, c, trained or [True] * len(c)) if k)
    model.train(was_training)
    return hits / max(len(examples), 1)


@dataclass
class StopAtAccuracy:
    """Stop SFT once the greedy exact-match accuracy on held-out demonstrations reaches `target`, checked every
    `every_steps` optimizer steps (and logged as sft/val_accuracy): the SFT start is then a chosen level of skill,
    not wherever a fixed number of epochs happens to leave a given initialisation."""

    pairs: list[tuple[str, str]]
    target: float
    every_steps: int = 8
    history: list[tuple[int, float]] = field(default_factory=list)


def held_out_demonstrations(cfg: RunConfig, n: int) -> list[tuple[str, str]]:
    """`n` demonstrations SFT does not train on: the tasks' train stream at SFT's seed after its sft.num_examples,
    leaving out prompts among the demonstrations (and the tasks' evaluation problems, as every train draw does)."""
    seen = {prompt_key(prompt) for prompt, _ in demonstrations(cfg)}
    tasks = make_tasks(cfg.data.tasks, cfg.seed + cfg.sft.seed_offset)
    pairs = []
    for index in range(cfg.sft.num_examples, cfg.sft.num_examples + 100 * n):  # a small finite task runs out
        if len(pairs) >= n:
            break
        for task in tasks:
            size = task.size("train")
            if size is not None and index >= size:
                continue
            p = task.problem("train", index)
            if prompt_key(p.prompt) not in seen and len(pairs) < n:
                seen.add(prompt_key(p.prompt))
                pairs.append((p.prompt, p.solution))
    return pairs


def accuracy_stop(cfg: RunConfig) -> StopAtAccuracy | None:
    """The stop sft.stop_at_accuracy asks for (on sft.held_out held-out demonstrations), or None."""
    s = cfg.sft
    if s.stop_at_accuracy is None:
        return None
    return StopAtAccuracy(held_out_demonstrations(cfg, s.held_out), s.stop_at_accuracy, s.check_every)


def run_sft(cfg: RunConfig, stop: StopAtAccuracy | None = None) -> Path:
    """Train on the demonstrations and save an HF model directory; returns its path. Training ends early once the
    held-out accuracy reaches sft.stop_at_accuracy (`stop`, when given, is that stop: its history is read back);
    sft.epochs and sft.time_budget_s still cap."""
    s = cfg.sft
    stop = stop if stop is not None else accuracy_stop(cfg)
    out = Path(s.output_dir or Path(cfg.tracking.output_dir) / "sft")
    torch.manual_seed(cfg.seed)
    multi_turn = bool(s.data_file and s.messages_column)
    dialogues = conversations(cfg) if multi_turn else []
    pairs = [] if multi_turn else demonstrations(cfg)
    if cfg.model.name == TINY:
        texts = [m["content"] for d in dialogues for m in d] + [prompt_text(t) for pair in pairs for t in pair]
        hints = [h for task in make_tasks(cfg.data.tasks, cfg.seed) for h in task.corpus(0)]  # environment text
        model, tokenizer = load_policy(cfg.model, cfg.seed, texts + hints)
    else:
        model = load_model(cfg.model)
        tokenizer = load_tokenizer(cfg.model.tokenizer or model_source(cfg.model), cfg.model.trust_remote_code)
    model.to(resolve_device(cfg.model.device))
    if cfg.model.compile_layers:
        compile_training_layers(model)
    processor = load_processor(model_source(cfg.model), cfg.model.trust_remote_code) if is_vision_model(model) else None
    encode = make_prompt_encoder(tokenizer, processor, chat_template=cfg.model.chat_template,
                                 system_prompt=cfg.data.system_prompt, max_tokens=cfg.data.max_prompt_tokens,
                                 template_kwargs=cfg.model.chat_template_kwargs)
    examples = encode_conversations(dialogues, encode) if multi_turn else encode_pairs(pairs, encode, tokenizer)
    held_out = encode_pairs(stop.pairs, encode, tokenizer) if stop else []
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=s.lr)
    steps_per_epoch = -(-len(examples) // s.batch_size)
    logger = MetricsLogger(out, s.epochs * steps_per_epoch, console=cfg.tracking.console, description="sft",
                           log_every=cfg.tracking.log_every,
                           until=f"sft/val_accuracy >= {stop.target:g}" if stop else None)
    model.train()
    step, start = 0, time.perf_counter()

    reached = False  # the stop's target

    def finished() -> bool:
        return reached or (s.time_budget_s is not None and time.perf_counter() - start >= s.time_budget_s)

    try:
        for _ in range(s.epochs):
            if finished():
                break
            for rows in torch.randperm(len(examples)).split(s.batch_size):
                if finished():
                    break
                optimizer.zero_grad(set_to_none=True)
                loss = accumulate_sft_loss(model, [examples[i] for i in rows.tolist()], tokenizer.pad_token_id,
                                           s.micro_batch_size or s.batch_size)
                optimizer.step()
                step += 1
                metrics = {"sft/loss": loss}
                if stop and step % stop.every_steps == 0:
                    metrics["sft/val_accuracy"] = exact_match(model, held_out, tokenizer.pad_token_id)
                    stop.history.append((step, metrics["sft/val_accuracy"]))
                    reached = metrics["sft/val_accuracy"] >= stop.target
                logger.log(step, metrics)
    finally:
        logger.close()
    save_pretrained(model, tokenizer, out)
    return out
