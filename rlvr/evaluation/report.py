"""What `rlvr eval` writes: eval.json for machines (metrics with 95% intervals, diversity, throughput, the
per-problem table, boundary tables), report.md for people, and plots (passk.png, boundary.png)."""

from __future__ import annotations

import json
from itertools import combinations
from pathlib import Path

from rlvr.evaluation.evaluate import EvalRun, EvalSettings, ProblemResult
from rlvr.models.images import loggable_prompt
from rlvr.models.prompts import content_text

SHOWN_UIDS = 20  # problems listed by name in the report's boundary table
SHOWN_PROBLEMS = 5  # problems whose kept completions the report shows
SHOWN_COMPLETIONS = 2  # completions shown per problem and model


def boundary(a: EvalRun, b: EvalRun) -> dict:
    """Which problems each model solves at all (some correct sample of N, i.e. pass@N > 0): the reasoning
    boundary compared at large k (Yue et al. 2025, "Does Reinforcement Learning Really Incentivize Reasoning
    Capacity in LLMs Beyond the Base Model?")."""
    solved_a = {(r.task, r.uid) for r in a.results if r.correct}
    solved_b = {(r.task, r.uid) for r in b.results if r.correct}
    order = [(r.task, r.uid) for r in a.results]
    if set(order) != {(r.task, r.uid) for r in b.results}:
        raise ValueError("boundary: the two evaluations are not on the same problems")
    return {"solved_by_both": len(solved_a & solved_b),
            "only_a": [uid for task, uid in order if (task, uid) in solved_a - solved_b],
            "only_b": [uid for task, uid in order if (task, uid) in solved_b - solved_a],
            "neither": len(order) - len(solved_a | solved_b)}


def problem_row(result: ProblemResult, metrics: dict[str, float]) -> dict:
    """One row of the per-problem table: counts, the five most frequent answers, the problem's estimates."""
    top = sorted(result.classes, key=lambda c: -c.count)[:5]
    prompt, images = loggable_prompt(result.prompt)
    return {"task": result.task, "uid": result.uid, "reference": result.reference, "prompt": prompt,
            **({"images": images} if images else {}), "samples": result.samples,
            "correct": result.correct, "greedy_correct": result.greedy_correct,
            "distinct_answers": len(result.classes), "no_answer": result.no_answer,
            "answers": [[c.answer, c.count, c.correct] for c in top], "completions": result.completions,
            **{name: round(v, 6) for name, v in metrics.items() if name != "greedy"}}


def model_record(label: str, path: str, run: EvalRun) -> dict:
    return {
        "label": label,
        "path": path,
        "metrics": run.summary(),
        "diversity": run.diversity(),
        "turns_mean": run.turns_mean(),
        "episode_metrics": run.episode_metrics(),
        "generation": {"completions": run.completions, "seconds": round(run.generation_s, 3),
                       "completions_per_s": run.completions / max(run.generation_s, 1e-9)},
        "problems": [problem_row(r, m) for r, m in zip(run.results, run.problem_metrics)],
    }


def report_data(task: str, settings: EvalSettings, models: list[tuple[str, str, EvalRun]]) -> dict:
    """The JSON document: settings, one record per (label, path, run), and boundary tables for each pair."""
    return {
        "task": task,
        "problems": len(models[0][2].results),
        "samples": settings.samples,
        "k": settings.ks,
        "temperature": settings.temperature,
        "max_new_tokens": settings.max_new_tokens,
        "models": [model_record(label, path, run) for label, path, run in models],
        "boundary": [{"a": la, "b": lb, "k": settings.samples, **boundary(ra, rb)}
                     for (la, _, ra), (lb, _, rb) in combinations(models, 2)] if settings.samples else [],
    }


def _pct(stats: dict) -> str:
    ci = stats.get("ci95")
    text = f"{100 * stats['value']:.1f}%"
    return f"{text} [{100 * ci[0]:.1f}, {100 * ci[1]:.1f}]" if ci else text


def markdown(data: dict, figures: list[str]) -> str:
    """report.md: metric table, boundary, diversity, throughput, figures, per-problem table."""
    models = data["models"]
    labels = [m["label"] for m in models]
    head = lambda cols: [f"| {' | '.join(cols)} |", f"|{'---|' * len(cols)}"]  # noqa: E731
    lines = [f"# Evaluation: {data['task']}", "",
             f"{data['problems']} held-out problems; {data['samples']} sampled completions per problem "
             f"(temperature {data['temperature']}, at most {data['max_new_tokens']} new tokens) plus one greedy. "
             "Means over problems with 95% percentile-bootstrap intervals over problems; estimators in "
             "docs/evaluation.md.", "", "## Accuracy", "", *head(["metric", *labels])]
    for name in models[0]["metrics"]:
        lines.append(f"| {name} | " + " | ".join(_pct(m["metrics"][name]) for m in models) + " |")
    if data["boundary"]:
        lines += ["", f"## Reasoning boundary at k = {data['samples']}", "",
                  "Problems that some sample of one model solves and no sample of the other (Yue et al. 2025).", "",
                  *head(["models", "solved by both", "only first", "only second", "neither", "only first (uids)",
                         "only second (uids)"])]
        for b in data["boundary"]:
            shown = [", ".join(u[:SHOWN_UIDS]) + (" ..." if len(u) > SHOWN_UIDS else "") for u in
                     (b["only_a"], b["only_b"])]
            lines.append(f"| {b['a']} vs {b['b']} | {b['solved_by_both']} | {len(b['only_a'])} | "
                         f"{len(b['only_b'])} | {b['neither']} | {shown[0] or '-'} | {shown[1] or '-'} |")
    if any(m["diversity"] for m in models):
        lines += ["", "## Answer diversity (per problem, over its samples)", "",
                  *head(["model", "distinct answers", "distinct correct answers", "no answer",
                         "mean token entropy (nats)"])]
        for m in models:
            d = m["diversity"]
            entropy = f"{d['token_entropy']:.3f}" if "token_entropy" in d else "-"
            lines.append(f"| {m['label']} | {d['distinct_answers']:.2f} | {d['distinct_correct_answers']:.2f} | "
                         f"{100 * d['no_answer_frac']:.1f}% | {entropy} |")
    if any((m["turns_mean"] or 1) != 1 or m["episode_metrics"] for m in models):
        names = list(dict.fromkeys(name for m in models for name in m["episode_metrics"]))
        lines += ["", "## Episodes", "", "Environment metrics are means over the sampled episodes each applies to "
                  "(the greedy ones when nothing is sampled).", "",
                  *head(["model", "mean assistant turns per episode", *names])]
        for m in models:
            cells = [f"{m['episode_metrics'][n]:.3f}" if n in m["episode_metrics"] else "-" for n in names]
            lines.append(f"| {m['label']} | {m['turns_mean'] or 1:.2f} | " + " | ".join(cells) + " |")
    lines += ["", "## Generation", "", *head(["model", "path", "completions", "seconds", "completions/s"])]
    for m in models:
        g = m["generation"]
        lines.append(f"| {m['label']} | `{m['path']}` | {g['completions']} | {g['seconds']:.1f} | "
                     f"{g['completions_per_s']:.1f} |")
    lines += ["", "\n\n".join(f"![{Path(f).stem}]({f})" for f in figures)]
    lines += completion_lines(data)
    lines += ["", "## Per problem", "", "Correct samples out of N, greedy correct (y/n), and the most frequent answer.",
              "", *head(["task", "problem", "reference", *labels])]
    for rows in zip(*(m["problems"] for m in models)):
        cells = []
        for r in rows:
            greedy = "" if r["greedy_correct"] is None else f" ({'y' if r['greedy_correct'] else 'n'})"
            top = f" `{r['answers'][0][0]}`" if r["answers"] else ""
            cells.append(f"{r['correct']}/{r['samples']}{greedy}{top}")
        reference = f"`{rows[0]['reference']}`" if rows[0]["reference"] is not None else "-"
        lines.append(f"| {rows[0]['task']} | `{rows[0]['uid']}` | {reference} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def transcript(messages: list) -> str:
    """Messages as '[role] content' paragraphs (a conversational prompt, an episode's turns)."""
    return "\n".join(f"[{m.get('role', '?')}] {content_text(m.get('content', ''))}" if isinstance(m, dict) else str(m)
                     for m in messages)


def text_block(text: str) -> list[str]:
    return ["```text", text.replace("```", "` ` `"), "```"]


def completion_lines(data: dict) -> list[str]:
    """report.md's sample completions: the first problems' kept completions, per model, with their verdicts."""
    models = data["models"]
    if not any(p.get("completions") for m in models for p in m["problems"]):
        return []
    lines = ["", "## Sample completions", "",
             f"The first {SHOWN_PROBLEMS} problems, up to {SHOWN_COMPLETIONS} completions per model (greedy first); "
             "eval.json keeps more per problem."]
    for i, first in enumerate(models[0]["problems"][:SHOWN_PROBLEMS]):
        reference = f", reference `{first['reference']}`" if first["reference"] is not None else ""
        lines += ["", f"### {first['task']} / `{first['uid']}`{reference}"]
        prompt = first.get("prompt")
        if first.get("images"):  # thumbnails of the prompt's images, inline
            lines += ["", " ".join(f"![image {j}]({uri})" for j, uri in enumerate(first["images"], 1))]
        if prompt:
            lines += ["", "Prompt:", "", *text_block(transcript(prompt) if isinstance(prompt, list) else str(prompt))]
        for m in models:
            for c in m["problems"][i].get("completions", [])[:SHOWN_COMPLETIONS]:
                kind = "greedy" if c["greedy"] else "sampled"
                verdict = "correct" if c["correct"] else "wrong"
                answer = f"`{c['answer']}`" if c["answer"] is not None else "no answer"
                lines += ["", f"**{m['label']}**, {kind}: {verdict}, answer {answer}, {c['tokens']} tokens"
                          + (" (cut at the token limit)" if c["truncated"] else ""), "",
                          *text_block(transcript(c["messages"]) if c.get("messages") else c["text"])]
    return lines


def write_report(data: dict, out_dir: str | Path) -> list[Path]:
    """eval.json, report.md and the plots under out_dir; returns their paths."""
    from rlvr.reporting.plotting import plot_boundary, plot_pass_at_k

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    figures = []
    if data["samples"]:
        figures.append(plot_pass_at_k(data, out / "passk.png"))
        figures.append(plot_boundary(data, out / "boundary.png"))
    (out / "eval.json").write_text(json.dumps(data, indent=2))
    (out / "report.md").write_text(markdown(data, [f.name for f in figures]))
    return [out / "eval.json", out / "report.md", *figures]
