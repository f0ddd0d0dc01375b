"""Supervised fine-tuning cold start: cross-entropy on completion tokens only."""

from __future__ import annotations

import time
from pathlib import Path

import torch

from rlvr.config import RunConfig
from rlvr.errors import DataError
from rlvr.models import TINY, load_model, load_policy, load_tokenizer, resolve_device, save_pretrained
from rlvr.prompts import PromptEncoder
from rlvr.tasks import make_tasks
from rlvr.tasks.dataset import read_rows
from rlvr.tracking import MetricsLogger


def demonstrations(cfg: RunConfig) -> list[tuple[str, str]]:
    """(prompt, completion) pairs: from sft.data_file, or the tasks' reference solutions."""
    s = cfg.sft
    if s.data_file:
        pairs = []
        for i, row in enumerate(read_rows(s.data_file), 1):
            missing = [c for c in (s.prompt_column, s.completion_column) if not row.get(c)]
            if missing:
                raise DataError(
                    f"{s.data_file}, row {i}: column '{missing[0]}' is missing or empty. Columns found: "
                    f"{', '.join(sorted(row))}. Map it with sft.prompt_column / sft.completion_column."
                )
            pairs.append((str(row[s.prompt_column]), str(row[s.completion_column])))
        return pairs
    tasks = make_tasks(cfg.data.tasks, cfg.seed + s.seed_offset)
    pairs = []
    for i in range(s.num_examples):
        task = tasks[i % len(tasks)]
        p = task.problem("train", i // len(tasks))
        if p.solution is None:
            raise DataError(f"Task '{task.label}' has no reference solutions; give sft.data_file with prompt/completion pairs.")
        pairs.append((p.prompt, p.solution))
    return pairs


def encode_pairs(pairs, encode: PromptEncoder, tokenizer) -> list[tuple[list[int], list[int]]]:
    out = []
    for i, (prompt, completion) in enumerate(pairs):
        target = tokenizer(completion, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
        out.append((encode(prompt, where=f"demonstration {i}"), target))
    return out


def sft_loss(model, examples: list[tuple[list[int], list[int]]], pad_id: int) -> torch.Tensor:
    """Mean cross-entropy over the completion tokens of `examples` (right-padded batch)."""
    width = max(len(p) + len(c) for p, c in examples)
    ids = torch.full((len(examples), width), pad_id, dtype=torch.long)
    labels = torch.full((len(examples), width), -100, dtype=torch.long)
    attn = torch.zeros((len(examples), width), dtype=torch.long)
    for r, (p, c) in enumerate(examples):
        seq = p + c
        ids[r, : len(seq)] = torch.tensor(seq)
        attn[r, : len(seq)] = 1
        labels[r, len(p) : len(seq)] = torch.tensor(c)
    device = next(model.parameters()).device
    logits = model(input_ids=ids.to(device), attention_mask=attn.to(device)).logits[:, :-1].float()
    return torch.nn.functional.cross_entropy(logits.transpose(1, 2), labels[:, 1:].to(device), ignore_index=-100)


def run_sft(cfg: RunConfig) -> Path:
    """Train on the demonstrations and save an HF model directory; returns its path."""
    s = cfg.sft
    out = Path(s.output_dir or Path(cfg.tracking.output_dir) / "sft")
    torch.manual_seed(cfg.seed)
    pairs = demonstrations(cfg)
    if cfg.model.name == TINY:
        model, tokenizer = load_policy(cfg.model, cfg.seed, [t for pair in pairs for t in pair])
    else:
        model, tokenizer = load_model(cfg.model), load_tokenizer(cfg.model.tokenizer or cfg.model.name)
    model.to(resolve_device(cfg.model.device))
    encode = PromptEncoder(tokenizer, cfg.model.chat_template, cfg.data.system_prompt, cfg.data.max_prompt_tokens)
    examples = encode_pairs(pairs, encode, tokenizer)
    optimizer = torch.optim.AdamW(model.parameters(), lr=s.lr)
    steps_per_epoch = -(-len(examples) // s.batch_size)
    logger = MetricsLogger(out, s.epochs * steps_per_epoch, console=cfg.tracking.console, tensorboard="off",
                           description="sft")
    model.train()
    step, start = 0, time.perf_counter()

    def out_of_time() -> bool:
        return s.time_budget_s is not None and time.perf_counter() - start >= s.time_budget_s

    try:
        for _ in range(s.epochs):
            if out_of_time():
                break
            for rows in torch.randperm(len(examples)).split(s.batch_size):
                if out_of_time():
                    break
                loss = sft_loss(model, [examples[i] for i in rows.tolist()], tokenizer.pad_token_id)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                step += 1
                logger.log(step, {"sft/loss": loss.item()})
    finally:
        logger.close()
    save_pretrained(model, tokenizer, out)
    return out
