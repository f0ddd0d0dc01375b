"""A search agent on a real chat model without SFT: does GRPO teach SmolLM2-135M-Instruct to search a corpus for
answers it cannot know? (recipes/smollm2_search.yaml, docs/results.md "Search agent on a real model")

    python -m benchmarks.real_search baseline [--output runs/real_search]     # the same model without the tool
    python -m benchmarks.real_search readers                                  # simple readers, computed exactly
    python -m benchmarks.real_search train --arm rl --seeds 0 1 2 [--output runs/real_search]
    python -m benchmarks.real_search train --arm format --seeds 0 1 2
    python -m benchmarks.real_search summary [--output runs/real_search] [--plot docs/img/real_search.png]

The questions are about made-up people, towns and guilds (recipes/data/make_search_qa.py); the held-out ones name
only entities no training question names. `baseline` answers the held-out questions greedily without the tool (the
system prompt asks for <answer>...</answer> and offers no search): what the model gets right without the corpus.
`readers` scores simple policies exactly on the held-out questions the runs evaluate (the first 60): the best
constant answer, and a reader that searches the question as written and copies a uniformly random field (a year, a
profession, or a name that the question does not hold) of the passages that come back, or of the first one only,
or always the first field of the first one.
`train` runs the recipe per seed, resumably (a stopped run continues from its last checkpoint when started again),
and reads its held-out greedy evaluations (eval_completions.jsonl; the first is the base model with the tool) and
its sampled training episodes (completions.jsonl). Arms, each from the base model:
- `rl`: the recipe: exact match is the only reward;
- `format`: plus the search environment's format term at 0.5 (`format_reward`: an episode that searched, every
  search well formed), ToolRL's kind, which started tool use reliably in benchmarks/real_tool_use.py.

Every measure is computed here from the episodes' messages, apart from the reward:
- exact: the last assistant turn's last <answer>...</answer> (else the whole turn), lowercased, without
  punctuation, articles and extra spaces, equals one of the references so treated;
- searched: an assistant turn holds <search>...</search>; searches: how many per episode;
- query names the entity: of the episodes that searched, the share whose queries name the question's person, town
  or guild (its `entity` in the question file).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import string
import sys
import time
from pathlib import Path

from benchmarks import common as bench
from rlvr.tracking.jsonl import read_jsonl

RECIPE = bench.ROOT / "recipes" / "smollm2_search.yaml"
HELDOUT = bench.ROOT / "recipes" / "data" / "search_qa_heldout.jsonl"
TRAIN = bench.ROOT / "recipes" / "data" / "search_qa_train.jsonl"
SEARCH = re.compile(r"<search>(.*?)</search>", re.DOTALL)
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NO_TOOL_PROMPT = ("Answer the question about a person, town or guild. Give the answer as <answer>answer</answer>. "
                  "Example:\nUser: In which town was Amos Keller born?\nAssistant: <answer>Brindlewick</answer>")


# ---------------------------------------------------------------------------------------------------- measures


def plain(text: str) -> str:
    text = "".join(c for c in text.lower() if c not in string.punctuation)
    return " ".join(w for w in text.split() if w not in ("a", "an", "the"))


def final_answer(reply: str) -> str:
    """The reply's last <answer>...</answer>, else the whole reply."""
    answers = ANSWER.findall(reply)
    return answers[-1] if answers else reply


def exact(reply: str, references: list[str]) -> bool:
    return plain(final_answer(reply)) in {plain(r) for r in references}


def questions() -> dict[str, dict]:
    """Question text -> its row (references, entity), for both question files."""
    return {row["question"]: row for path in (TRAIN, HELDOUT) for row in read_jsonl(path)}


def question_of(prompt) -> str:
    if isinstance(prompt, list):
        return next(m["content"] for m in reversed(prompt) if m["role"] == "user")
    return prompt.rsplit("user\n", 1)[-1].split("<|im_end|>")[0].strip()


def episode_measures(row: dict, known: dict[str, dict]) -> dict[str, float | None]:
    question = known[question_of(row["prompt"])]
    messages = row.get("messages") or [{"role": "assistant", "content": row.get("completion", "")}]
    turns = [m["content"] for m in messages if m["role"] == "assistant"]
    queries = [q for t in turns for q in SEARCH.findall(t)]
    names = any(question["entity"].lower() in q.lower() for q in queries) if queries else None
    return {"exact": float(exact(turns[-1] if turns else "", question["golden_answers"])),
            "searched": float(bool(queries)), "searches": float(len(queries)),
            "names_entity": None if names is None else float(names)}


def rates(rows: list[dict], known: dict[str, dict]) -> dict[str, float | None]:
    measured = [episode_measures(r, known) for r in rows]
    named = [m["names_entity"] for m in measured if m["names_entity"] is not None]
    return {"exact": statistics.mean(m["exact"] for m in measured),
            "searched": statistics.mean(m["searched"] for m in measured),
            "searches": statistics.mean(m["searches"] for m in measured),
            "names_entity": statistics.mean(named) if named else None,
            "verifier": statistics.mean(float(bool(r["correct"])) for r in rows), "episodes": len(rows)}


def curve(path: Path, known: dict[str, dict]) -> list[dict]:
    """Per step of a completions file: the rates over its rows (a row written again by a resumed run replaces its
    twin: same problem and sample)."""
    by_step: dict[int, dict] = {}
    for row in read_jsonl(path):
        by_step.setdefault(row["step"], {})[(row["uid"], row.get("sample", 0))] = row
    return [{"step": step, **rates(list(rows.values()), known)} for step, rows in sorted(by_step.items())]


# ---------------------------------------------------------------------------------------------------- baseline


def baseline(args) -> None:
    """The base model's greedy answers to the held-out questions, without the tool."""
    import torch

    from rlvr.config import load_config
    from rlvr.models.loading import load_model, load_tokenizer
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rollout import SamplingParams, make_engine
    from rlvr.tasks import make_task

    torch.set_num_threads(1)
    cfg = load_config(RECIPE, [])
    task = make_task("qa", 0, {"path": str(TRAIN), "eval_path": str(HELDOUT)})
    tokenizer = load_tokenizer(cfg.model.name)
    encode = PromptEncoder(tokenizer, cfg.model.chat_template, NO_TOOL_PROMPT, cfg.data.max_prompt_tokens)
    engine = make_engine("static", load_model(cfg.model).eval(), tokenizer, cfg.rollout.batch_size)
    problems = [task.problem("eval", i) for i in range(task.size("eval"))]
    t0 = time.perf_counter()
    with torch.no_grad():
        groups = engine.generate([encode(p.prompt) for p in problems],
                                 SamplingParams(n=1, greedy=True, max_new_tokens=cfg.rollout.max_new_tokens,
                                                stop=["</answer>"]))
    rows = [{"prompt": p.prompt, "completion": g[0].text, "correct": None} for p, g in zip(problems, groups)]
    known = questions()
    hits = [episode_measures(r, known)["exact"] for r in rows]
    result = {"commit": bench.commit(), "questions": len(rows), "exact": statistics.mean(hits),
              "seconds": time.perf_counter() - t0, "rows": rows}
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "baseline.json").write_text(json.dumps(result, indent=2))
    print(f"without the tool: held-out exact {100 * result['exact']:.1f}% of {len(rows)} questions (greedy, "
          f"{result['seconds']:.0f} s, commit {result['commit']}); written to {out / 'baseline.json'}")


# ---------------------------------------------------------------------------------------------------- readers

HEADER = re.compile(r"Doc \d+ \(Title: [^)]*\) ")
FIELD = re.compile(r"\b\d+\b|\bwas an? ([a-z]+)\b|[A-Z][a-z]+(?: [A-Z][a-z]+)*")
NOT_FIELDS = {"the", "its", "doc", "title"}


def fields(passages: str, question: str) -> list[str]:
    """The distinct values a reader could copy from rendered passages ('Doc i (Title: ...) text'): numbers,
    the word after 'was a(n)', and runs of capitalized words without a leading 'The'/'Its', leaving out what the
    question itself holds (its entity's name)."""
    asked = set(plain(question).split())
    found: dict[str, str] = {}
    for match in FIELD.finditer(HEADER.sub("", passages)):
        words = (match.group(1) or match.group(0)).split()
        while words and words[0].lower() in NOT_FIELDS:
            words = words[1:]
        value = " ".join(words)
        if value and not set(plain(value).split()) <= asked:
            found.setdefault(plain(value), value)
    return list(found.values())


def random_field_exact(passages: str, question: str, references: list[str]) -> float:
    """The chance that a uniformly random field of `passages` is an exact answer."""
    candidates = fields(passages, question)
    return sum(exact(c, references) for c in candidates) / len(candidates) if candidates else 0.0


def first_field_exact(passages: str, question: str, references: list[str]) -> float:
    """1.0 when the first field of `passages` is an exact answer."""
    return float(exact((fields(passages, question) or [""])[0], references))


def best_constant(rows: list[dict]) -> tuple[str, float]:
    """The one answer that is right for the most questions, and its share: the best a blind guesser can do."""
    counts: dict[str, int] = {}
    for row in rows:
        for answer in {plain(r) for r in row["golden_answers"]}:
            counts[answer] = counts.get(answer, 0) + 1
    answer = max(counts, key=counts.get)
    return answer, counts[answer] / len(rows)


READERS = ("a random field of the passages", "a random field of the first passage", "the first field of the first passage")


def readers(args) -> None:
    """The simple policies' held-out exact match, computed exactly (no sampling) with the recipe's own search."""
    from rlvr.config import load_config
    from rlvr.envs.retrieval import open_index
    from rlvr.envs.search import Searcher

    cfg = load_config(RECIPE, [])
    env = cfg.data.tasks[0].env.args
    rows = list(read_jsonl(HELDOUT))[: cfg.eval.num_problems]
    index = open_index(bench.ROOT / env["corpus"])
    constant, constant_exact = best_constant(rows)
    result = {"commit": bench.commit(), "questions": len(rows), "best constant": constant_exact,
              "best constant answer": constant}
    passages = {k: [Searcher(index, k, env["max_passage_chars"], max_query_chars=1000).search(r["question"])
                    for r in rows] for k in (1, env["k"])}
    for name, k, reader in zip(READERS, (env["k"], 1, 1), (random_field_exact, random_field_exact, first_field_exact)):
        result[name] = statistics.mean(reader(p, r["question"], r["golden_answers"]) for p, r in zip(passages[k], rows))
    out = Path(args.output)
    out.mkdir(parents=True, exist_ok=True)
    (out / "readers.json").write_text(json.dumps(result, indent=2))
    print(f"simple readers on the first {len(rows)} held-out questions (commit {result['commit']}):")
    print(f"  best constant answer ('{constant}'): exact {100 * constant_exact:.1f}%")
    for name in READERS:
        print(f"  search the question as written, copy {name}: exact {100 * result[name]:.1f}%")


EXAMPLE_QUERY = "Amos Keller"  # the system prompt's example search, a name the corpus does not hold


def last_evaluation_errors(path: Path, known: dict[str, dict]) -> dict[str, int]:
    """At the last held-out evaluation of a run: its wrong answers, those that are a field of the passages the
    episode got back (by `fields`), its queries, and those that copy the system prompt's example."""
    rows = list(read_jsonl(path))
    last_step = max(row["step"] for row in rows)
    last = {r["uid"]: r for r in rows if r["step"] == last_step}
    counts = {"episodes": len(last), "wrong": 0, "wrong, a field of the passages": 0, "queries": 0,
              "queries copying the example": 0}
    for row in last.values():
        question = known[question_of(row["prompt"])]
        turns = [m["content"] for m in row["messages"] if m["role"] == "assistant"]
        returned = "\n".join(re.sub(r"</?information>", "", m["content"]) for m in row["messages"]
                             if m["role"] != "assistant")
        queries = [q.strip() for t in turns for q in SEARCH.findall(t)]
        counts["queries"] += len(queries)
        counts["queries copying the example"] += sum(q == EXAMPLE_QUERY for q in queries)
        if turns and not exact(turns[-1], question["golden_answers"]):
            answer = plain(final_answer(turns[-1]))
            counts["wrong"] += 1
            counts["wrong, a field of the passages"] += answer in {plain(f) for f in fields(returned, question["question"])}
    return counts


# ---------------------------------------------------------------------------------------------------- train


ARMS = {"rl": [], "format": ["data.tasks.0.env.args.format_reward=0.5"]}


def train(args) -> None:
    out = Path(args.output) / args.arm
    out.mkdir(parents=True, exist_ok=True)
    known = questions()
    for seed in args.seeds:
        run_dir = out / f"seed{seed}"
        if (out / f"seed{seed}.json").is_file():
            print(f"seed {seed}: finished earlier, kept ({out / f'seed{seed}.json'})")
            continue
        settings = [f"seed={seed}", *(["steps=" + str(args.steps)] if args.steps else []), *ARMS[args.arm], *args.set]
        load, t0, resumed = bench.load_average(), time.perf_counter(), bench.has_checkpoints(run_dir)
        seconds = bench.train_resumably([str(RECIPE), *settings], run_dir, out / f"seed{seed}.log")
        result = {"arm": args.arm, "seed": seed, "commit": bench.commit(), "resumed": resumed,
                  "wall_seconds": time.perf_counter() - t0, "rl_seconds": seconds, "load_before": load,
                  "load_after": bench.load_average(),
                  "eval": curve(run_dir / "eval_completions.jsonl", known),
                  "train": curve(run_dir / "completions.jsonl", known)}
        (out / f"seed{seed}.json").write_text(json.dumps(result, indent=2))
        print(f"{args.arm} seed {seed}: {result['wall_seconds'] / 60:.1f} min "
              f"(load {load} -> {bench.load_average()})")
        for p in result["eval"]:
            print(f"  step {p['step']:>3}: exact {pct(p['exact'])}  searched {pct(p['searched'])}  searches "
                  f"{p['searches']:.2f}  query names the entity {pct(p['names_entity'])}", flush=True)


# ---------------------------------------------------------------------------------------------------- summary


def pct(x: float | None) -> str:
    return "n/a" if x is None else f"{100 * x:.0f}%"


def summary(args) -> None:
    out = Path(args.output)
    results = [json.loads(p.read_text()) for p in sorted(out.glob("*/seed*.json"))]
    known = questions()
    for run_dir in sorted(out.glob("*/seed*/")):  # a run stopped before its end: its curves so far
        if not run_dir.with_suffix(".json").is_file() and (run_dir / "eval_completions.jsonl").is_file():
            results.append({"arm": run_dir.parent.name, "seed": int(run_dir.name.removeprefix("seed")),
                            "unfinished": True, "eval": curve(run_dir / "eval_completions.jsonl", known),
                            "train": curve(run_dir / "completions.jsonl", known)})
    base = json.loads((out / "baseline.json").read_text()) if (out / "baseline.json").is_file() else None
    simple = json.loads((out / "readers.json").read_text()) if (out / "readers.json").is_file() else None
    if not results:
        raise SystemExit(f"no results under {out} (run `train` first)")
    print("without the tool (greedy, same held-out questions): exact " + (pct(base["exact"]) if base else "not run"))
    if simple:
        print(f"simple readers (first {simple['questions']} held-out questions, exactly): best constant answer "
              f"{100 * simple['best constant']:.1f}%; " + "; ".join(
                  f"search the question, copy {name}: {100 * simple[name]:.1f}%" for name in READERS))
    else:
        print("simple readers: not computed (run `readers`)")
    print("| arm | seed | held-out greedy exact, base -> end | searched | searches per episode | query names the entity "
          "| sampled training episodes: exact, step 1 -> last 5 | searched | minutes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        first, last = r["eval"][0], r["eval"][-1]
        late = {k: statistics.mean(p[k] for p in r["train"][-5:]) for k in ("exact", "searched")}
        print(f"| {r['arm']} | {r['seed']} | {pct(first['exact'])} -> {pct(last['exact'])} | "
              f"{pct(first['searched'])} -> {pct(last['searched'])} | {first['searches']:.2f} -> {last['searches']:.2f} | "
              f"{pct(first['names_entity'])} -> {pct(last['names_entity'])} | {pct(r['train'][0]['exact'])} -> "
              f"{pct(late['exact'])} | {pct(r['train'][0]['searched'])} -> {pct(late['searched'])} | "
              f"{'unfinished' if r.get('unfinished') else bench.run_minutes(r)} |")
    for r in results:
        c = last_evaluation_errors(out / r["arm"] / f"seed{r['seed']}" / "eval_completions.jsonl", known)
        print(f"{r['arm']} seed {r['seed']}, last held-out evaluation: {c['wrong']} of {c['episodes']} answers wrong, "
              f"{c['wrong, a field of the passages']} of them a field of the passages returned; "
              f"{c['queries copying the example']} of {c['queries']} queries copy the prompt's example "
              f"'{EXAMPLE_QUERY}'")
    for arm in dict.fromkeys(r["arm"] for r in results):
        mine = [r for r in results if r["arm"] == arm]
        if len(mine) > 1:
            exact = bench.mean_sd([r["eval"][-1]["exact"] for r in mine], pct)
            searched = bench.mean_sd([r["eval"][-1]["searched"] for r in mine], pct)
            print(f"| {arm} | mean ± sd ({len(mine)} seeds) | {exact} | {searched} | | | | | |")
    if args.plot:
        plot(results, base, simple, Path(args.plot))


def plot(results: list[dict], base: dict | None, simple: dict | None, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    keys = (("exact", "held-out exact match", 100), ("searched", "episodes that search", 100),
            ("searches", "searches per episode", 1), ("names_entity", "queries naming the entity", 100))
    fig, axes = plt.subplots(1, 4, figsize=(17, 4))
    last = max(p["step"] for r in results for p in r["eval"])
    for ax, (key, title, scale) in zip(axes, keys):
        for r in results:
            points = [(p["step"], scale * p[key]) for p in r["eval"] if p[key] is not None]
            ax.plot(*zip(*points), marker="o", label=f"{r['arm']} seed {r['seed']}")
        if key == "exact" and base:
            ax.axhline(100 * base["exact"], color="black", linestyle="--", label="same model, no tool")
        if key == "exact" and simple:
            ax.axhline(100 * simple[READERS[2]], color="grey", linestyle=":", label="reader: first field of Doc 1")
            ax.axhline(100 * simple["best constant"], color="grey", linestyle="-.", label="best constant answer")
        ax.set(title=title, xlabel="GRPO step (held-out greedy evaluations)", xlim=(-1, last + 1),
               ylabel="%" if scale == 100 else "count", **({"ylim": (-3, 103)} if scale == 100 else {}))
    bench.save_figure(fig, path, title="SmolLM2-135M-Instruct searching a fictional corpus (BM25), held-out entities",
                      panels=axes)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    b = sub.add_parser("baseline")
    b.add_argument("--output", default="runs/real_search")
    r = sub.add_parser("readers")
    r.add_argument("--output", default="runs/real_search")
    bench.train_arguments(sub, list(ARMS), "runs/real_search")
    bench.summary_arguments(sub, "runs/real_search")
    args = parser.parse_args()
    {"baseline": baseline, "readers": readers, "train": train, "summary": summary}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
