"""Held-out evaluation through the rollout engine, in batches: greedy accuracy and, from N sampled completions
per problem, pass@k, maj@k, avg@N with bootstrap intervals, answer diversity and token entropy. One code path
serves `rlvr eval` and evaluation during training."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

from rlvr.config import RewardFunctionConfig, RunConfig
from rlvr.evaluation.estimators import avg_at_k, bootstrap_ci, majority_at_k, pass_at_k
from rlvr.models.prompts import PromptEncoder
from rlvr.rewards.composite import RewardComposer
from rlvr.rollout.base import Completion, RolloutEngine, SamplingParams
from rlvr.rollout.episodes import EpisodeRunner
from rlvr.tasks.base import Problem, Task


@dataclass
class EvalSettings:
    """What to measure: greedy accuracy and/or `samples` completions per problem scored at each k in `ks`."""

    num_problems: int
    max_new_tokens: int
    min_new_tokens: int = 0  # EOS not sampled before this many tokens (fixed-length benchmarks only)
    samples: int = 0  # 0: greedy accuracy only
    ks: list[int] = field(default_factory=list)
    temperature: float = 1.0
    top_p: float = 1.0
    top_k: int = 0
    stop: list[str] = field(default_factory=list)
    greedy: bool = True
    token_entropy: bool = False
    batch_size: int = 256  # sequences per engine call, as rollout.batch_size
    keep_completions: int = 0  # completions kept per problem (the greedy one first) for people to read


@dataclass
class AnswerClass:
    """Samples that state one answer (up to the task's equivalence)."""

    answer: str  # the first spelling seen
    count: int
    correct: bool  # the verifier accepted at least half of these samples


@dataclass
class ProblemResult:
    task: str
    uid: str
    reference: str | None = None  # the problem's reference answer, when it has one
    prompt: Any = None  # the problem's prompt as the data gives it (text, or a list of messages)
    samples: int = 0
    correct: int = 0
    greedy_correct: bool | None = None
    classes: list[AnswerClass] = field(default_factory=list)
    no_answer: int = 0  # samples stating no answer
    distinct_correct_spellings: int = 0  # distinct answer texts among correct samples ('1/2' and '0.5': two)
    entropy_sum: float = 0.0
    tokens: int = 0  # policy tokens of the samples (an episode's environment tokens not counted)
    turns: int = 0  # assistant turns over everything generated, greedy included (1 per single-turn completion)
    generated: int = 0
    completions: list[dict] = field(default_factory=list)  # up to EvalSettings.keep_completions, greedy first
    # environment metric -> [sum, count] over the sampled episodes (the greedy ones when nothing is sampled);
    # NaN values (an episode outside the metric's population) are left out
    episode_sums: dict[str, list[float]] = field(default_factory=dict)

    def metrics(self, ks: list[int]) -> dict[str, float]:
        """This problem's estimates: greedy (0/1), pass@k, maj@k, avg@N."""
        out = {} if self.greedy_correct is None else {"greedy": float(self.greedy_correct)}
        if self.samples:
            majority = majority_at_k([c.count for c in self.classes], [c.correct for c in self.classes],
                                     self.samples, ks)
            out.update({f"pass@{k}": pass_at_k(self.samples, self.correct, k) for k in ks})
            out.update({f"maj@{k}": majority[k] for k in ks})
            out[f"avg@{self.samples}"] = avg_at_k(self.samples, self.correct)
        return out


@dataclass
class EvalRun:
    results: list[ProblemResult]
    settings: EvalSettings
    completions: int  # generated, greedy included
    generation_s: float  # wall time in the engine

    @cached_property
    def problem_metrics(self) -> list[dict[str, float]]:
        """Each problem's estimates (ProblemResult.metrics), in order."""
        return [r.metrics(self.settings.ks) for r in self.results]

    def summary(self, with_ci: bool = True, seed: int = 0) -> dict[str, dict[str, float | list[float]]]:
        """Each metric's mean over problems, with a 95% percentile bootstrap interval over problems."""
        out = {}
        for name in self.problem_metrics[0] if self.problem_metrics else []:
            values = [m[name] for m in self.problem_metrics]
            out[name] = {"value": sum(values) / len(values)}
            if with_ci:
                out[name]["ci95"] = list(bootstrap_ci(values, seed=seed))
        return out

    def turns_mean(self) -> float | None:
        """Mean assistant turns per generated episode, greedy included (1.0 for single-turn tasks)."""
        generated = sum(r.generated for r in self.results)
        return sum(r.turns for r in self.results) / generated if generated else None

    def episode_metrics(self) -> dict[str, float]:
        """Each environment metric (Environment.metrics: attempts, second-attempt success, tool calls) averaged
        over the episodes it applies to, pooled over problems; empty for single-turn tasks."""
        sums: dict[str, list[float]] = {}
        for r in self.results:
            for name, (total, count) in r.episode_sums.items():
                pooled = sums.setdefault(name, [0.0, 0])
                pooled[0] += total
                pooled[1] += count
        return {name: total / count for name, (total, count) in sums.items() if count}

    def diversity(self) -> dict[str, float]:
        """Mean distinct answers and distinct correct answers per problem; mean token entropy (nats)."""
        sampled = [r for r in self.results if r.samples]
        if not sampled:
            return {}
        out = {"distinct_answers": sum(len(r.classes) for r in sampled) / len(sampled),
               "distinct_correct_answers": sum(r.distinct_correct_spellings for r in sampled) / len(sampled),
               "no_answer_frac": sum(r.no_answer for r in sampled) / sum(r.samples for r in sampled)}
        tokens = sum(r.tokens for r in sampled)
        if self.settings.token_entropy and tokens:
            out["token_entropy"] = sum(r.entropy_sum for r in sampled) / tokens
        return out


def eval_settings(cfg: RunConfig) -> EvalSettings:
    """A run config's evaluation: its eval section, sampling as the rollout samples unless eval overrides it."""
    e, r = cfg.eval, cfg.rollout
    return EvalSettings(num_problems=e.num_problems, max_new_tokens=e.max_new_tokens or r.max_new_tokens,
                        samples=e.samples, ks=e.ks(), temperature=e.temperature or r.temperature, top_p=r.top_p,
                        top_k=r.top_k, stop=r.stop, batch_size=r.batch_size)


def eval_problems(task: Task, limit: int) -> list[Problem]:
    size = task.size("eval")
    count = limit if size is None else min(limit, size)
    return [task.problem("eval", i) for i in range(count)]


def stated_answers(task: Task, completions: list[str], reported: list[tuple] | None = None) -> list[str | None]:
    """Each completion's final answer: the one its verifier said it scored (`reported`, as Scored.answers), else
    the task's final_answer."""
    reported = reported or [()] * len(completions)
    return [said[0] if said else task.final_answer(text) for text, said in zip(completions, reported)]


def answer_classes(task: Task, completions: list[str], verdicts: list[bool],
                   reported: list[tuple] | None = None) -> tuple[list[AnswerClass], int, int]:
    """Group a problem's samples by stated answer (`stated_answers`, merged by the task's same_answer):
    (classes, samples without an answer, distinct texts among the correct samples' answers)."""
    spellings: dict[str, list[bool]] = {}
    no_answer = 0
    for answer, ok in zip(stated_answers(task, completions, reported), verdicts):
        if answer is None:
            no_answer += 1
        else:
            spellings.setdefault(answer, []).append(ok)
    classes: list[tuple[str, list[bool]]] = []
    for answer, oks in spellings.items():  # few distinct spellings: pairwise equivalence is affordable
        home = next((c for c in classes if task.same_answer(c[0], answer)), None)
        if home is None:
            classes.append((answer, list(oks)))
        else:
            home[1].extend(oks)
    correct_spellings = sum(1 for oks in spellings.values() if any(oks))
    return ([AnswerClass(a, len(oks), 2 * sum(oks) >= len(oks)) for a, oks in classes], no_answer,
            correct_spellings)


def run_evaluation(engine: RolloutEngine, encode: PromptEncoder, tasks: list[Task], composer: RewardComposer,
                   settings: EvalSettings, show_progress: bool = False, label: str = "eval") -> EvalRun:
    """Greedy and sampled completions for each task's first `num_problems` held-out problems, generated a
    batch of prompts per engine call and scored by the task's verifier."""
    work = [(task, problem) for task in tasks for problem in eval_problems(task, settings.num_problems)]
    results = [ProblemResult(task.label, p.uid, p.answer, p.prompt) for task, p in work]
    runner = EpisodeRunner(engine, encode)  # environment tasks are played as episodes
    passes = []
    if settings.greedy:
        passes.append(SamplingParams(n=1, greedy=True, max_new_tokens=settings.max_new_tokens, stop=settings.stop))
    if settings.samples:
        passes.append(SamplingParams(n=settings.samples, temperature=settings.temperature, top_p=settings.top_p,
                                     top_k=settings.top_k, max_new_tokens=settings.max_new_tokens,
                                     min_new_tokens=settings.min_new_tokens, stop=settings.stop,
                                     return_entropy=settings.token_entropy))
    total = len(work) * sum(p.n for p in passes)
    generation_s = 0.0
    with _progress(show_progress) as progress:
        bar = progress.add_task(label, total=total)
        for params in passes:
            per_call = max(1, settings.batch_size // params.n)
            for start in range(0, len(work), per_call):
                rows = range(start, min(start + per_call, len(work)))
                t0 = time.perf_counter()
                _, groups = runner.generate([work[i] for i in rows], params, where="eval problem")
                generation_s += time.perf_counter() - t0
                _score(composer, [work[i] for i in rows], [results[i] for i in rows], groups, params,
                       settings.keep_completions, episodes=not params.greedy or not settings.samples)
                progress.advance(bar, len(rows) * params.n)
    return EvalRun(results, settings, total, generation_s)


def _score(composer: RewardComposer, work: list[tuple[Task, Problem]], results: list[ProblemResult],
           groups: list[list[Completion]], params: SamplingParams, keep: int = 0, episodes: bool = True) -> None:
    scored = composer.score([(task, problem, c.text, c.reward_fields(params.max_new_tokens))
                             for (task, problem), group in zip(work, groups) for c in group], noisy=False)
    verdicts = scored.correct.tolist()
    for i, ((task, _), result, group) in enumerate(zip(work, results, groups)):
        ok = verdicts[i * params.n : (i + 1) * params.n]
        reported = [scored.reported_answer(j) for j in range(i * params.n, (i + 1) * params.n)]
        answers = stated_answers(task, [c.text for c in group], reported)
        result.turns += sum(getattr(c, "turns", 1) for c in group)
        result.generated += len(group)
        if episodes:
            _add_episode_metrics(result, group)
        room = keep - len(result.completions)
        result.completions += [{"text": c.text, "greedy": params.greedy, "correct": bool(v),
                                "answer": a, "tokens": len(c.token_ids), "truncated": c.truncated,
                                **({"messages": list(c.messages)} if getattr(c, "messages", None) else {})}
                               for c, v, a in zip(group[:max(room, 0)], ok, answers)]
        if params.greedy:
            result.greedy_correct = ok[0]
            continue
        result.samples, result.correct = params.n, sum(ok)
        result.classes, result.no_answer, result.distinct_correct_spellings = answer_classes(
            task, [c.text for c in group], ok, reported)
        result.entropy_sum = sum(sum(c.entropies) for c in group)
        result.tokens = sum(c.policy_tokens for c in group)


def _add_episode_metrics(result: ProblemResult, group: list[Completion]) -> None:
    for c in group:
        for name, value in c.fields.get("episode_metrics", {}).items():
            if not math.isnan(value):
                sums = result.episode_sums.setdefault(name, [0.0, 0])
                sums[0] += value
                sums[1] += 1


def _progress(show: bool) -> Progress:
    return Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                    TextColumn("completions"), TimeElapsedColumn(), TextColumn("eta"), TimeRemainingColumn(),
                    console=Console(stderr=True), disable=not show)


def evaluate_model(cfg: RunConfig, model_dir: str, settings: EvalSettings, show_progress: bool = False,
                   label: str = "eval") -> EvalRun:
    """Load a saved model and evaluate it on the config's tasks (model loading, prompts, verifiers as cfg says), set
    up as a training run is (rlvr.assembly). Sampling starts from seed cfg.seed, so a rerun reproduces the figures.
    The caller watches for stalls (WATCH.watch with tracking.stall_warning_s), as `rlvr eval` does."""
    import torch

    from rlvr.assembly import (
        build_engine,
        build_tasks,
        load_saved_model,
        local_reward_pool,
        start_rewards,
        wait_for_rewards,
    )

    tasks = build_tasks(cfg)
    with local_reward_pool(cfg.rewards) as pool:
        # Only the tasks' verifiers decide what is correct; other reward terms (possibly Python callables that a
        # saved config.yaml names but cannot hold) are not needed. The verifiers load while the model loads.
        verifier = start_rewards(pool, [RewardFunctionConfig(function="task", name="verifier")], tasks)
        tokenizer, model, encode = load_saved_model(cfg, model_dir)
        engine = build_engine(cfg, model, tokenizer)
        wait_for_rewards(pool)
        torch.manual_seed(cfg.seed)
        return run_evaluation(engine, encode, tasks, verifier, settings, show_progress, label)


def training_metrics(run: EvalRun) -> dict[str, float]:
    """An evaluation as flat training-log metrics: eval/accuracy (greedy), eval/<task>/accuracy, eval/pass@k,
    eval/maj@k, eval/avg@N; for environment tasks eval/turns_mean and eval/episode/<metric>."""
    metrics: dict[str, float] = {}
    for label in dict.fromkeys(r.task for r in run.results):
        flags = [r.greedy_correct for r in run.results if r.task == label and r.greedy_correct is not None]
        if flags:
            metrics[f"eval/{label}/accuracy"] = sum(flags) / len(flags)
    for name, stats in run.summary(with_ci=False).items():
        metrics["eval/accuracy" if name == "greedy" else f"eval/{name}"] = stats["value"]
    if run.turns_mean() is not None:
        metrics["eval/turns_mean"] = run.turns_mean()
    metrics.update({f"eval/episode/{name}": value for name, value in run.episode_metrics().items()})
    return metrics


def eval_completion_rows(step: int, results: list[ProblemResult]) -> list[dict[str, Any]]:
    """One row per problem for eval_completions.jsonl: its greedy completion (the first kept), the stated answer
    and the verdict beside the prompt and the reference."""
    rows = []
    for r in results:
        if not r.completions:
            continue
        c = r.completions[0]
        rows.append({"step": step, "task": r.task, "uid": r.uid, "prompt": r.prompt, "reference": r.reference,
                     "completion": c["text"], "answer": c["answer"], "correct": c["correct"],
                     "tokens": c["tokens"], "truncated": c["truncated"],
                     **({"messages": c["messages"]} if "messages" in c else {})})
    return rows
