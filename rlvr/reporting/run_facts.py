"""Labelled facts about a run, for people to check before it trains: the model and its size, the tasks and
their sizes, the step's batch, the algorithm, and the first prompt exactly as the model will see it.

`run_facts` takes pieces a run has already built (the trainer's start banner); `describe_run` builds them from
a config alone, without training or writing anything (`rlvr train RECIPE --dry-run`)."""

from __future__ import annotations

from collections.abc import Sequence

from rlvr.config import RunConfig


def parameter_counts(model) -> tuple[int, int]:
    """(all parameters, trainable parameters) of a torch module."""
    total = trainable = 0
    for p in model.parameters():
        total += p.numel()
        trainable += p.numel() if p.requires_grad else 0
    return total, trainable


def human_count(n: int) -> str:
    """1234567 -> '1.23M'."""
    for unit, size in (("B", 1e9), ("M", 1e6), ("K", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def task_size(task, split: str) -> str:
    size = task.size(split)
    return "procedural (unbounded)" if size is None else f"{size:,} problems"


def run_facts(cfg: RunConfig, tasks: Sequence, tokenizer, encode, parameters: int,
              trainable: int | None = None) -> dict[str, str]:
    """Label -> value, in the order people read them. `cfg` as resolved (`RunConfig.resolved()`: what it implies is
    listed); `encode` is the run's PromptEncoder; `parameters` and `trainable` the policy's counts (trainable None:
    all of them)."""
    m, d, r, a, o = cfg.model, cfg.data, cfg.rollout, cfg.algorithm, cfg.optim
    size = f"{human_count(parameters)} parameters"
    if trainable is not None and trainable != parameters:
        size += f", {human_count(trainable)} trainable"
    facts = {
        "model": f"{m.name} ({size}, {m.dtype})",
        "tokenizer": f"{len(tokenizer):,} tokens; chat template {'on' if encode.use_template else 'off'}",
    }
    for task, tc in zip(tasks, d.tasks):
        facts[f"task {task.label}"] = (f"{task.name}, weight {tc.weight:g}: train {task_size(task, 'train')}, "
                                       f"eval {task_size(task, 'eval')}")
    samples = d.prompts_per_step * r.samples_per_prompt
    facts["batch"] = (f"{d.prompts_per_step} prompts x {r.samples_per_prompt} samples = {samples} completions per "
                      f"step, up to {r.max_new_tokens} new tokens each; micro-batch {o.micro_batch_size}")
    facts["steps"] = f"{cfg.steps} ({o.ppo_epochs} epoch(s) x {o.mini_batches} mini-batch(es) of updates each)"
    facts["algorithm"] = ((f"preset {a.preset}: " if a.preset else "") + f"advantage {a.advantage}, loss "
                          f"{a.policy_loss}, aggregation {a.loss_aggregation}, kl_coef {a.kl_coef:g}, lr {o.lr:g}")
    if cfg.teacher is not None:
        facts["teacher"] = teacher_fact(cfg)
    facts["rewards"] = ", ".join(f"{f.metric_name} x {f.weight:g}" for f in cfg.rewards.functions)
    if cfg.implied:
        facts["implied"] = "; ".join(cfg.implied)
    facts["output"] = cfg.tracking.output_dir
    first = tasks[0].problem("train", 0).prompt
    ids = encode(first, where=f"task {tasks[0].label}, first problem")
    facts["first prompt tokens"] = str(len(ids))
    facts["first prompt"] = tokenizer.decode(ids)
    return facts


def teacher_fact(cfg: RunConfig) -> str:
    """The teacher of on-policy distillation as the run will load and read it."""
    t, a = cfg.teacher, cfg.algorithm
    use = (f"its per-token term is the advantage (distill_gamma {a.distill_gamma:g})" if a.advantage == "distill" else
           f"distill_weight {a.distill_weight:g} x its per-token term added to the {a.advantage} advantage")
    return (f"{t.name} ({t.dtype or cfg.model.dtype}, on {t.device}, micro-batch "
            f"{t.micro_batch_size or cfg.optim.micro_batch_size}); {use}")


def _model_size(cfg: RunConfig) -> int:
    """Parameters of a hub or local model, counted on the meta device (no weights are read)."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForImageTextToText

    from rlvr.models.loading import model_source
    from rlvr.models.vision import is_vision_model

    config = AutoConfig.from_pretrained(model_source(cfg.model), trust_remote_code=cfg.model.trust_remote_code)
    auto = AutoModelForImageTextToText if is_vision_model(config) else AutoModelForCausalLM
    with torch.device("meta"):
        model = auto.from_config(config, trust_remote_code=cfg.model.trust_remote_code)
    return parameter_counts(model)[0]


def describe_run(cfg: RunConfig) -> dict[str, str]:
    """The facts of the run `cfg` describes, built without training and without writing to its output
    directory: tasks are read and every prompt screened, a tiny model is built in memory, a hub or local model
    is counted from its config alone."""
    from transformers import AutoConfig

    from rlvr.envs import make_tasks
    from rlvr.models.loading import (
        TINY,
        check_model_reachable,
        load_policy,
        load_processor,
        load_tokenizer,
        model_source,
    )
    from rlvr.models.prompts import prompt_token_limit
    from rlvr.models.vision import is_vision_model, make_prompt_encoder

    tasks = make_tasks(cfg.data.tasks, cfg.seed, cfg.data.bad_rows)
    if cfg.model.name == TINY:
        model, tokenizer = load_policy(cfg.model, cfg.seed, [t for task in tasks for t in task.corpus()])
        parameters, context = parameter_counts(model)[0], model.config.max_position_embeddings
    else:
        source = model_source(cfg.model)  # a GGUF model: its cached HF directory (converted once)
        check_model_reachable(source)
        tokenizer = load_tokenizer(cfg.model.tokenizer or source, cfg.model.trust_remote_code)
        parameters, context = _model_size(cfg), None
    vision = cfg.model.name != TINY and is_vision_model(AutoConfig.from_pretrained(
        source, trust_remote_code=cfg.model.trust_remote_code))
    processor = load_processor(source, cfg.model.trust_remote_code) if vision else None
    limit = prompt_token_limit(cfg.data.max_prompt_tokens, context, cfg.rollout.max_new_tokens)
    encode = make_prompt_encoder(tokenizer, processor, chat_template=cfg.model.chat_template,
                                 system_prompt=cfg.data.system_prompt, max_tokens=limit[0], limit_source=limit[1],
                                 template_kwargs=cfg.model.chat_template_kwargs)
    for task in tasks:
        task.screen_prompts(encode)
    return run_facts(cfg.resolved(), tasks, tokenizer, encode, parameters)
