"""`rlvr verify`: score a file of completions with a task's verifier, audit the math verifier on labelled rows, or
probe every built-in rule verifier with reward hacks (`rlvr verify hacks`), or an LLM judge with master-key replies
(`rlvr verify judge-probe`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.table import Table

from rlvr.config import parse_override
from rlvr.errors import ConfigError, RlvrError
from rlvr.rewards.pool import RewardLoad, RewardPool
from rlvr.verifiers.extraction import FORMATS_READ

READS = ("The built-in verifiers read the final answer by one rule (docs/verifiers.md, \"The final answer\"): "
         f"{FORMATS_READ}. Check that the prompt asks for one of these.")


def verifier_args(overrides: list[str]) -> dict[str, Any]:
    """'key=value' pairs (values read as YAML) -> keyword arguments for the verifier."""
    args = {}
    for text in overrides:
        path, value = parse_override(text)
        if len(path) != 1:
            raise ConfigError(f"--set '{text}': verifier arguments are plain names (key=value), not dotted paths.")
        args[path[0]] = value
    return args


def answer_reader(task: str | None) -> Callable[[str], str | None]:
    """The final answer a completion states, as the task reads it (Task.final_answer: what eval counts as its
    vote); without a task, or when the task cannot be built with default arguments, the default extraction."""
    from rlvr.tasks import make_task
    from rlvr.tasks.base import Task

    if task:
        try:
            return make_task(task, 0, {}).final_answer
        except (RlvrError, TypeError, ValueError, OSError):
            pass
    return lambda text: Task.final_answer(None, text)  # the base reading uses no task state


def details(outcome, answer: str | None, reference: Any) -> str:
    """Why a row scored what it did: the failure's message, or the answer read from the completion against the
    row's reference."""
    if outcome.status != "ok":
        return f"{outcome.status}: {outcome.message}" if outcome.message else outcome.status
    extras = " ".join(f"{k}={v:g}" for k, v in outcome.extras.items())
    stated = "no answer found" if answer is None else f"answer {answer!r}"
    if reference is None:
        text = stated
    elif outcome.value >= 1:
        text = f"{stated} matches reference {str(reference)!r}"
    elif answer is None:
        text = f"no answer found in the completion (reference {str(reference)!r})"
    else:
        text = f"{stated} is not reference {str(reference)!r}"
    return " ".join(t for t in (text, extras, outcome.message) if t)


@contextmanager
def ready_pool(workers: int, timeout_s: float, specs: list[str], args: dict[str, Any] | None = None
               ) -> Iterator[RewardPool]:
    """A reward pool of `workers`, set up as a training run's is (rlvr.assembly): started on the verifiers `specs`
    (with `args`) and ready before the first item is scored; a verifier that fails to load stops here, as it stops
    a run (RewardLoadError)."""
    from rlvr.assembly import start_pool, wait_for_rewards

    with start_pool(RewardPool(workers, timeout_s), [RewardLoad(spec, args or {}) for spec in dict.fromkeys(specs)]
                    ) as pool:
        wait_for_rewards(pool)
        yield pool


def audit_command(path: str, workers: int, timeout_s: float, as_json: bool) -> None:
    from rlvr.evaluation.verifier_audit import JUDGES, failing_rows, read_audit_rows, render, run_audit, summary

    rows = read_audit_rows(path)
    with ready_pool(workers, timeout_s, list(JUDGES.values())) as pool:
        cases = run_audit(rows, pool, show_progress=not as_json)
    if as_json:
        print(json.dumps({**summary(cases), "failures": failing_rows(cases)}, indent=2, ensure_ascii=False))
    else:
        render(cases, Console())


def score_command(path: str, task: str | None, verifier: str | None, overrides: list[str], workers: int,
                  timeout_s: float, as_json: bool) -> None:
    from rlvr.evaluation.offline_scoring import score_file, task_verifier

    if not task and not verifier:
        raise ConfigError("rlvr verify needs --task NAME (see `rlvr tasks`) or --verifier module:function.")
    spec = verifier or task_verifier(task)
    if task:
        from rlvr.sandbox.policy import minimum_isolation
        from rlvr.sandbox.run import prepare_sandbox
        from rlvr.tasks import TASKS

        prepare_sandbox(minimum_isolation(), [TASKS.get(task)])  # a code task: refuse before scoring anything
    args = verifier_args(overrides)
    with ready_pool(workers, timeout_s, [spec], args) as pool:
        rows = score_file(path, spec, args, pool, show_progress=not as_json)
    from rlvr.evaluation.offline_scoring import run_log_checks

    read_answer = answer_reader(task)
    # the answer the verifier says it scored; the task's reading only for verifiers that do not say
    answers = [r.answer[0] if r.answer else read_answer(r.completion) for r in rows]
    scores = [r.outcome.value for r in rows]
    mean = sum(scores) / len(scores)
    failed = sum(r.outcome.status != "ok" for r in rows)
    no_answer = sum(r.outcome.status == "ok" and answer is None for r, answer in zip(rows, answers))
    checks = run_log_checks(rows) if any(r.logged is not None for r in rows) else {}
    if as_json:
        for r, answer in zip(rows, answers):
            logged = {"logged_answer": r.logged.get("answer"), "logged_correct": r.logged.get("correct")} \
                if r.logged is not None else {}
            print(json.dumps({"row": r.line, "id": r.row_id, "score": r.outcome.value, "status": r.outcome.status,
                              "answer": answer, "answer_from": "verifier" if r.answer else "task",
                              "reference": r.reference, **logged,
                              "details": details(r.outcome, answer, r.reference), **r.outcome.extras,
                              **({"message": r.outcome.message} if r.outcome.message else {})}))
        print(json.dumps({"verifier": spec, "rows": len(rows), "mean": mean, "failed": failed, "no_answer": no_answer,
                          **checks}))
        return
    table = Table(title=f"{spec} on {path}")
    for column in ("row", "id", "score", "status", "details"):
        table.add_column(column, overflow="fold", justify="right" if column in ("row", "score") else "left")
    for r, answer in zip(rows, answers):
        table.add_row(str(r.line), r.row_id, f"{r.outcome.value:g}", r.outcome.status,
                      details(r.outcome, answer, r.reference))
    console = Console()
    console.print(table)
    console.print(f"mean score {mean:.4f} over {len(rows)} rows; no answer found in {no_answer}"
                  + (f"; {failed} failed to score" if failed else ""))
    if no_answer * 2 > len(rows):
        console.print(f"[bold]Most completions state no answer this verifier reads.[/bold] {READS}")
    if checks:
        console.print(f"run log: {checks['rewarded']} of {checks['run_log_rows']} rows were rewarded; "
                      f"{len(checks['rewarded_answer_not_reference'])} of them showed an answer that is not the "
                      f"reference (rows {checks['rewarded_answer_not_reference'][:20]}); the answer shown differs from "
                      f"the verifier's reading now on {len(checks['shown_answer_differs_now'])} rows and the verdict "
                      f"on {len(checks['verdict_differs_now'])}.")


def hacks_command(only: str | None, problems: int, seed: int, workers: int, timeout_s: float, as_json: bool,
                  strict: bool) -> int:
    """Probe the built-in rule verifiers with reward hacks; 1 with `strict` when a hack is paid or a control refused."""
    from rlvr.evaluation.hack_probes import VERIFIERS, available_verifiers, build_probes, failures, render, run_probes
    from rlvr.evaluation.hack_probes import summary as probe_summary

    names = available_verifiers()
    if only:
        wanted = [n.strip() for n in only.split(",") if n.strip()]
        unknown = [n for n in wanted if n not in VERIFIERS]
        if unknown:
            raise ConfigError(f"--only: unknown verifier(s) {', '.join(unknown)}; choose from {', '.join(VERIFIERS)}.")
        missing = [n for n in wanted if n not in names]
        if missing:
            raise ConfigError(f"--only: {', '.join(missing)} need(s) an extra that is not installed "
                              "(math: pip install 'rlvr[math]'; reasoning_gym: pip install 'rlvr[gym]').")
        names = wanted
    probes = build_probes(names, problems, seed)
    with ready_pool(workers, timeout_s, [VERIFIERS[name][0] for name in names]) as pool:
        results = run_probes(probes, pool, show_progress=not as_json)
    result = probe_summary(results)
    if as_json:
        print(json.dumps({**result, "failures": failures(results)}, indent=2, ensure_ascii=False))
    else:
        render(results, Console())
    return 1 if strict and not result["clean"] else 0


MAX_MASTER_KEY_RATE = 0.05  # judge-probe --strict: a master-key class paid more often than this fails, ...
MAX_WRONG_PASS_RATIO = 0.5  # ... and so do wrong answers passed more than this times as often as right ones


def judge_probe_command(model: str, overrides: list[str], problems: int, seed: int, as_json: bool,
                        strict: bool, defences: str = "off,on") -> int:
    """Probe an LLM judge with master-key replies, defences off and on; 1 with `strict` when, with the defences
    on, a master-key class passes above MAX_MASTER_KEY_RATE or wrong answers pass more than MAX_WRONG_PASS_RATIO
    times as often as right ones."""
    from pydantic import ValidationError

    from rlvr.config import JudgeSettings
    from rlvr.evaluation.judge_probes import probe_judge, render, summary

    try:
        settings = JudgeSettings(model=model, **verifier_args(overrides))
    except ValidationError as e:
        problems_text = "; ".join(f"{'.'.join(str(p) for p in err['loc'])}: {err['msg']}" for err in e.errors())
        raise ConfigError(f"judge-probe --set: {problems_text}") from None
    which = tuple(d.strip() for d in defences.split(",") if d.strip())
    if not which or set(which) - {"off", "on"}:
        raise ConfigError(f"--defences: 'off', 'on' or 'off,on', got {defences!r}")
    probes, results, calibration = probe_judge(settings, problems, seed, which)
    result = {**summary(probes, results), "calibration": calibration}
    if as_json:
        print(json.dumps({"judge": settings.model_dump(), **result}, indent=2, ensure_ascii=False))
    else:
        render(result, Console())
    judged = result["wrong_vs_right"].get("on")
    tells_apart = judged is None or judged["wrong_passed"] <= MAX_WRONG_PASS_RATIO * judged["right_passed"]
    return 1 if strict and (result["worst_master_key_rate"].get("on", 0.0) > MAX_MASTER_KEY_RATE
                            or not tells_apart) else 0
