"""`rlvr report RUN_DIR`: one self-contained HTML page about a training run (plots inlined as PNG, no network
assets): the run's facts, final metrics, metric curves, the reward of each function, the prompt pool's pass-rate
histogram over time, held-out pass@k, and sampled completions with their scores. Written at the end of every run
as <output_dir>/report.html."""

from __future__ import annotations

import base64
import html
import io
import json
import re
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from rlvr.errors import RlvrError  # noqa: E402
from rlvr.models.prompts import content_text  # noqa: E402
from rlvr.tracking.jsonl import read_jsonl  # noqa: E402

CURVES = [("reward/mean", "reward (mean over samples)"), ("accuracy", "training accuracy"),
          ("eval/accuracy", "held-out accuracy (greedy)"), ("response_length/mean", "completion length (tokens)"),
          ("actor/entropy", "entropy (nats/token)"), ("actor/loss", "policy loss"), ("actor/kl_ref", "KL to reference"),
          ("actor/grad_norm", "gradient norm"), ("groups/zero_std_frac", "groups with equal rewards"),
          ("response/truncated_frac", "truncated completions"), ("perf/step_s", "seconds per step")]
COMPLETION_STEPS = 3  # latest logged steps whose completions the page shows
COMPLETION_CHARS = 1200  # a longer completion is cut in the page (completions.jsonl keeps it whole)


def series(rows: list[dict], key: str) -> tuple[list[int], list[float]]:
    """(steps, values) of `key`; step 0 (before training) only for evaluations."""
    first = 0 if key.startswith("eval/") else 1
    points = [(r["step"], r[key]) for r in rows if isinstance(r.get(key), (int, float)) and r["step"] >= first]
    return [s for s, _ in points], [v for _, v in points]


def _png(fig) -> str:
    for ax in fig.axes:
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=100)
    plt.close(fig)
    return f'<img alt="" src="data:image/png;base64,{base64.b64encode(buffer.getvalue()).decode()}">'


def _smooth(values: list[float]) -> list[float]:
    window = max(1, len(values) // 15)
    return [sum(values[max(0, i - window + 1) : i + 1]) / len(values[max(0, i - window + 1) : i + 1])
            for i in range(len(values))]


def curves_figure(rows: list[dict]) -> str | None:
    present = [(k, title) for k, title in CURVES if len(series(rows, k)[0]) > 0]
    if not present:
        return None
    cols = 3
    nrows = -(-len(present) // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(12, 2.9 * nrows), squeeze=False)
    for ax, (key, title) in zip(axes.flat, present):
        steps, values = series(rows, key)
        marker = "o" if key.startswith("eval/") or len(steps) < 20 else None
        ax.plot(steps, values, color="tab:blue", alpha=0.35 if len(steps) >= 20 else 1, marker=marker, ms=3)
        if len(steps) >= 20:
            ax.plot(steps, _smooth(values), color="tab:blue")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.tick_params(labelsize=8)
        ax.grid(alpha=0.3)
    for ax in list(axes.flat)[len(present):]:
        ax.axis("off")
    fig.tight_layout()
    return _png(fig)


def reward_breakdown_figure(rows: list[dict]) -> str | None:
    names = sorted({m.group(1) for r in rows for k in r if (m := re.fullmatch(r"reward/(.+)/mean", k))})
    if not names:
        return None
    fig, ax = plt.subplots(figsize=(12, 3.4))
    for i, name in enumerate(names):
        steps, values = series(rows, f"reward/{name}/mean")
        ax.plot(steps, values, color=f"C{i}", label=name, marker="o" if len(steps) < 20 else None, ms=3)
    steps, values = series(rows, "reward/mean")
    ax.plot(steps, values, color="black", lw=1, ls="--", label="total (weighted)")
    ax.set(xlabel="step", ylabel="mean score", title="Reward per function (unweighted) and the weighted total")
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _png(fig)


ROLE_FIGURES = (("reward", "mean reward"), ("accuracy", "verifier's verdict (share correct)"),
                ("length", "completion length (policy tokens)"))


def role_figure(rows: list[dict]) -> str | None:
    """Self-play runs (docs/self_play.md): each role's reward, verdicts and lengths over training, one line per
    '<task>/<role>' (role/<key>/<figure> metrics), smoothed when long."""
    roles = sorted({m.group(1) for r in rows for k in r if (m := re.fullmatch(r"role/(.+)/samples", k))})
    if not roles:
        return None
    fig, axes = plt.subplots(1, len(ROLE_FIGURES), figsize=(12, 3.6), squeeze=False)
    for ax, (name, title) in zip(axes[0], ROLE_FIGURES):
        for i, role in enumerate(roles):
            steps, values = series(rows, f"role/{role}/{name}")
            ax.plot(steps, _smooth(values) if len(steps) >= 20 else values, color=f"C{i % 10}",
                    ls="-" if i < 10 else "--", label=role, marker="o" if len(steps) < 20 else None, ms=3)
        ax.set(xlabel="step", title=title)
        ax.title.set_fontsize(10)
        ax.grid(alpha=0.3)
    axes[0][-1].legend(loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    fig.tight_layout()
    return _png(fig)


def pass_rate_figure(rows: list[dict]) -> str | None:
    keys = sorted({k for r in rows for k in r if k.startswith("pool/pass_rate_")})
    if not keys:
        return None
    logged = [r for r in rows if r.get("step", 0) > 0 and keys[0] in r]
    totals = [max(1, sum(r.get(k) or 0 for k in keys)) for r in logged]
    shares = [[100 * (r.get(k) or 0) / t for r, t in zip(logged, totals)] for k in keys]
    fig, ax = plt.subplots(figsize=(12, 3.4))
    colors = plt.cm.RdYlGn([i / max(1, len(keys) - 1) for i in range(len(keys))])
    ax.stackplot([r["step"] for r in logged], shares, labels=[k.removeprefix("pool/pass_rate_") for k in keys],
                 colors=colors, alpha=0.9)
    ax.set(xlabel="step", ylabel="share of prompts seen (%)", ylim=(0, 100),
           title="Prompts seen so far by their recent pass rate (curriculum statistics)")
    ax.legend(title="pass rate", loc="upper left", bbox_to_anchor=(1.0, 1.0), fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return _png(fig)


def pass_at_k_figure(rows: list[dict]) -> str | None:
    keys = sorted({k for r in rows for k in r if re.fullmatch(r"eval/(pass|maj)@\d+", k)},
                  key=lambda k: (k.split("@")[0] != "eval/pass", int(k.split("@")[1])))
    if not keys:
        return None
    fig, ax = plt.subplots(figsize=(12, 3.4))
    for i, key in enumerate(keys):
        steps, values = series(rows, key)
        ax.plot(steps, [100 * v for v in values], marker="o", ms=3, color=f"C{i}",
                ls="-" if "pass" in key else "--", label=key.removeprefix("eval/"))
    ax.set(xlabel="step", ylabel="held-out problems (%)", title="Held-out pass@k and maj@k during training",
           ylim=(0, 100))
    ax.grid(alpha=0.3)
    ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    return _png(fig)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    return "-" if value is None else str(value)


def _cut(text: str) -> str:
    """`text` escaped for the page, cut at COMPLETION_CHARS; '(empty)' when blank."""
    if not text.strip():
        return '<span class="empty">(empty)</span>'
    return html.escape(text[:COMPLETION_CHARS]) + (" [...]" if len(text) > COMPLETION_CHARS else "")


def conversation_html(messages: list, episode: bool = False) -> str:
    """A list of {role, content} messages as role-labelled turns (a conversational prompt, an episode's turns). In
    an `episode`, each turn also says whose tokens it holds: the policy's (assistant turns, trained on) or the
    environment's (tool results, feedback, a game's replies: in the sequence, never in the loss)."""
    parts = []
    for m in messages:
        role = str(m.get("role", "?")) if isinstance(m, dict) else "?"
        content = m.get("content", "") if isinstance(m, dict) else m
        text = content if isinstance(content, str) else content_text(content) if isinstance(content, list) and \
            all(isinstance(c, dict) for c in content) else json.dumps(content, ensure_ascii=False)
        kind = role if role in ("system", "user", "assistant", "tool") else "other"
        source = ""
        if episode:
            source = "policy" if role == "assistant" else "env"
            kind += f" {source}"
            source = f'<span class="source">{"policy" if source == "policy" else "environment"}</span>'
        parts.append(f'<div class="turn {kind}"><span class="role">{html.escape(role)}</span>{source}'
                     f"<pre>{_cut(text)}</pre></div>")
    return "".join(parts)


def prompt_html(prompt: Any, images: list[str] | None = None) -> str:
    """A logged prompt: text in a box, a conversation as its turns; its images (data URIs) as thumbnails beside."""
    thumbs = "".join(f'<img class="thumb" alt="image {i}" src="{html.escape(uri)}">'
                     for i, uri in enumerate(images or [], 1) if uri.startswith("data:image/"))
    if isinstance(prompt, list):
        shown = f'<div class="prompt">{conversation_html(prompt)}</div>'
    else:
        text = prompt if isinstance(prompt, str) else json.dumps(prompt, ensure_ascii=False)
        shown = f'<pre class="prompt">{html.escape(text or "")}</pre>'
    return f'<div class="with-images"><div class="thumbs">{thumbs}</div>{shown}</div>' if thumbs else shown


def completions_section(rows: list[dict]) -> str:
    if not rows:
        return "<p>No completions logged (tracking.log_completions_every=0, or the run has not reached one).</p>"
    steps = sorted({r["step"] for r in rows})[-COMPLETION_STEPS:]
    parts = [f"<p>{len(rows)} completions logged over {len({r['step'] for r in rows})} steps "
             f"(completions.jsonl); the latest {len(steps)} steps below, newest first."
             + (" An episode shows its turns after the prompt: <span class='legend policy'>policy</span> turns are the "
                "tokens the model sampled and is trained on; <span class='legend env'>environment</span> turns (tool "
                "results, feedback, a game's replies) are in the sequence but never in the loss."
                if any(r.get("messages") for r in rows) else "") + "</p>"]
    for step in reversed(steps):
        mine = [r for r in rows if r["step"] == step]
        parts.append(f"<h3>Step {step}</h3>")
        for (task, uid), group in _by_group(mine).items():
            reference = group[0].get("reference")
            roles = {r.get("role") for r in group}
            per_sample = len(roles) > 1  # a game's seats: each sample's role in its row
            role = f" &middot; role {html.escape(str(group[0]['role']))}" if group[0].get("role") and not per_sample \
                else ""
            parts.append(f'<div class="group"><div class="meta">{html.escape(task)} / {html.escape(str(uid))}{role}'
                         + (f" &middot; reference <code>{html.escape(str(reference))}</code>" if reference else "")
                         + f'</div>{prompt_html(group[0].get("prompt"), group[0].get("images"))}<table class="samples"><tr><th>#</th>'
                         "<th>completion</th><th>verdict</th><th>scores</th><th>advantage</th><th>tokens</th>"
                         "<th>answer scored</th></tr>")
            for r in group:
                messages = r.get("messages")
                shown = conversation_html(messages, episode=True) if isinstance(messages, list) and messages else \
                    f"<pre>{_cut(r.get('completion') or '')}</pre>"
                scores = "<br>".join(f"{html.escape(k.removeprefix('reward/'))} {_fmt(v)}" for k, v in r.items()
                                     if k.startswith("reward/"))
                verdict = "ok" if r.get("correct") else "bad"
                answer = f"<code>{html.escape(_fmt(r.get('answer')))}</code>"
                if r.get("answer_from") == "task":  # the verifier did not say which answer it scored
                    answer += " (the task's reading)"
                if r.get("correct") and r.get("answer_matches") is False:
                    answer += ' <b class="bad">rewarded, but not the reference</b>'

                tokens = f"{r.get('length')}" + (" (cut)" if r.get("truncated") else "")
                sample = f'{r.get("sample", "")}' + (f'<br>{html.escape(str(r.get("role")))}' if per_sample else "")
                parts.append(f'<tr class="{verdict}"><td>{sample}</td><td>{shown}</td>'
                             f'<td class="verdict">{"correct" if verdict == "ok" else "wrong"}</td>'
                             f"<td><b>total {_fmt(r.get('reward'))}</b><br>{scores}</td>"
                             f"<td>{_fmt(r.get('advantage'))}</td><td>{tokens}</td><td>{answer}</td></tr>")
            parts.append("</table></div>")
    return "\n".join(parts)


def _by_group(rows: list[dict]) -> dict[tuple[str, str], list[dict]]:
    groups: dict[tuple[str, str], list[dict]] = {}
    for r in rows:
        groups.setdefault((r.get("task", ""), r.get("uid", "")), []).append(r)
    return groups


def facts_table(run_dir: Path, rows: list[dict]) -> str:
    from rlvr.config.yaml_io import load_yaml

    facts: dict[str, str] = {"run": str(run_dir.resolve())}
    config_path = run_dir / "config.yaml"
    if config_path.is_file():
        c = load_yaml(config_path.read_text()) or {}
        a, d, r = c.get("algorithm", {}), c.get("data", {}), c.get("rollout", {})
        facts["model"] = str(c.get("model", {}).get("name"))
        facts["tasks"] = ", ".join(t.get("label") or t.get("name") for t in d.get("tasks", []))
        facts["schedule"] = (f"{c.get('steps')} steps x {d.get('prompts_per_step')} prompts x "
                             f"{r.get('samples_per_prompt')} samples, up to {r.get('max_new_tokens')} new tokens")
        facts["algorithm"] = (f"preset {a['preset']}: " if a.get("preset") else "") + (
            f"advantage {a.get('advantage')}, loss {a.get('policy_loss')}, {a.get('loss_aggregation')}, "
            f"kl_coef {a.get('kl_coef')}, lr {c.get('optim', {}).get('lr')}")
    last = next((r for r in reversed(rows) if r.get("step", 0) > 0), None)
    if last:
        facts["steps logged"] = str(last["step"])
        facts["final"] = "  ".join(f"{k}={_fmt(last[k])}" for k, _ in CURVES[:5] if isinstance(last.get(k), (int, float)))
    best = run_dir / "best" / "best.json"
    if best.is_file():
        info = json.loads(best.read_text())
        facts["best model"] = f"{info['metric']} = {_fmt(info['value'])} at step {info['step']}"
    return "<table class='facts'>" + "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>"
                                             for k, v in facts.items()) + "</table>"


STYLE = """
body { font-family: -apple-system, 'Segoe UI', Helvetica, Arial, sans-serif; margin: 24px auto; max-width: 1220px;
       color: #222; }
h1 { font-size: 22px; } h2 { font-size: 18px; border-bottom: 1px solid #ddd; padding-bottom: 4px; margin-top: 28px; }
h3 { font-size: 15px; margin-bottom: 6px; }
img { max-width: 100%; }
table.facts th { text-align: left; padding-right: 16px; color: #555; font-weight: 600; vertical-align: top; }
table.facts td { font-family: ui-monospace, Menlo, monospace; font-size: 13px; }
.group { border: 1px solid #ddd; border-radius: 6px; padding: 8px; margin-bottom: 12px; }
.meta { color: #555; font-size: 13px; margin-bottom: 4px; }
pre { white-space: pre-wrap; word-break: break-word; margin: 0; font-size: 12px; }
.prompt { background: #f5f5f5; padding: 6px; border-radius: 4px; margin-bottom: 6px; }
.with-images { display: flex; gap: 8px; align-items: flex-start; }
.with-images .prompt { flex: 1; }
.thumb { width: 96px; height: 96px; object-fit: contain; image-rendering: pixelated; border: 1px solid #ccc;
         margin: 0 4px 4px 0; }
.turn { display: flex; gap: 8px; margin: 2px 0; }
.turn .role { flex: 0 0 72px; font-size: 11px; font-weight: 600; color: #666; text-transform: uppercase;
  padding-top: 1px; }
.turn pre { flex: 1; }
.turn.system .role { color: #8a6d00; } .turn.user .role { color: #1f5fa8; } .turn.assistant .role { color: #2a7d3a; }
.turn.tool .role { color: #7a3fa0; }
.turn .source { flex: 0 0 76px; font-size: 10px; color: #888; padding-top: 2px; }
.turn.env pre, .legend.env { background: #f1ecf8; border-left: 3px solid #a58cc9; padding-left: 4px; }
.turn.policy pre, .legend.policy { background: #eef7ef; border-left: 3px solid #2a9d3f; padding-left: 4px; }
table.samples { border-collapse: collapse; width: 100%; font-size: 12px; }
table.samples th, table.samples td { border-top: 1px solid #eee; padding: 4px 6px; text-align: left;
  vertical-align: top; }
table.samples td:nth-child(2) { width: 50%; }
table.samples td:last-child { max-width: 12em; overflow-wrap: anywhere; }
tr.ok td:first-child { border-left: 4px solid #2a9d3f; } tr.bad td:first-child { border-left: 4px solid #d04437; }
tr.ok td.verdict { color: #2a7d3a; } tr.bad td.verdict, b.bad { color: #b0352a; }
.empty { color: #999; font-style: italic; }
"""


def render_run_report(run_dir: str | Path) -> str:
    """The report page of a run directory (metrics.jsonl required; completions.jsonl and config.yaml used when
    present)."""
    run = Path(run_dir)
    rows = read_jsonl(run / "metrics.jsonl")
    if not rows:
        raise RlvrError(f"{run} holds no metrics.jsonl rows; `rlvr report` takes a training run's output directory "
                        "(tracking.output_dir).")
    sections = [("Metrics", curves_figure(rows)), ("Roles (self-play)", role_figure(rows)),
                ("Reward per function", reward_breakdown_figure(rows)),
                ("Prompt pool pass rates", pass_rate_figure(rows)), ("Held-out pass@k", pass_at_k_figure(rows))]
    body = [f"<h1>rlvr run report: {html.escape(run.resolve().name)}</h1>", facts_table(run, rows)]
    body += [f"<h2>{title}</h2>\n{figure}" for title, figure in sections if figure]
    body += ["<h2>Sampled completions</h2>", completions_section(read_jsonl(run / "completions.jsonl"))]
    return (f"<!DOCTYPE html>\n<html><head><meta charset='utf-8'><title>rlvr report: {html.escape(run.name)}"
            f"</title><style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")


def write_run_report(run_dir: str | Path, output: str | Path | None = None) -> Path:
    """Write the report page (default <run_dir>/report.html) and return its path."""
    path = Path(output) if output else Path(run_dir) / "report.html"
    text = render_run_report(run_dir)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    tmp.replace(path)
    return path
