"""Does a judge rank a right answer above wrong ones to the same question? The question a group-relative reward asks
of it (`output: probability`, docs/rewards.md). For each of `--problems` two-digit additions, one reply per kind
(the right sum, a near miss, another sum, a decimal, an answer in words), each written `a + b = \\boxed{x}`, scored
by the judge under each prompt setting; prints the mean P(yes) per kind and, per wrong kind, the share of questions
where the judge gave it at least the right answer's P(yes), with the AUC of right against all wrong answers.

    python benchmarks/judge_ranking.py --problems 100 [--judge smollm2-135m-instruct]

Defences stay off here (`require_answer: false`) so that the judge itself is measured on every kind; the refusals of
`require_answer` are benchmarks/judge_refusals.py's.
"""

from __future__ import annotations

import argparse
import random
from statistics import mean

from rlvr.config import JudgeSettings
from rlvr.evaluation.hack_probes import addition_problems
from rlvr.rewards.judge import Judge, load_causal_lm

SETTINGS = {  # name -> JudgeSettings overrides
    "reads=reply, chat (default)": {},
    "reads=answer, plain (ANSWER_TEMPLATE)": {"reads": "answer"},
}
WORDS = ["three times the previous one", "the sum of both", "twice the first", "resolved"]


def answers(reference: int, rng: random.Random) -> dict[str, str]:
    near = reference + rng.choice([-10, -2, -1, 1, 2, 10])
    other = rng.choice([x for x in range(20, 199) if x != reference])
    return {"right": str(reference), "near miss": str(near), "another sum": str(other),
            "decimal": f"{rng.randint(10, 99)}.{rng.randint(10, 99)}", "words": rng.choice(WORDS)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--judge", default="smollm2-135m-instruct")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    problems = addition_problems(args.problems, args.seed)
    replies = [{k: f"{p.a} + {p.b} = \\boxed{{{x}}}" for k, x in answers(int(p.reference), rng).items()}
               for p in problems]
    model, tokenizer = load_causal_lm(args.judge, "float32", "cpu")
    print(f"{args.problems} questions, judge {args.judge}: mean P(yes) per kind; share of questions where a wrong "
          "kind gets at least the right answer's P(yes)")
    for name, overrides in SETTINGS.items():
        judge = Judge(JudgeSettings(model=args.judge, require_answer=False, **overrides), model, tokenizer)
        p_yes = {k: [r["p_yes"] for r in judge.score([p.prompt for p in problems], [r[k] for r in replies],
                                                     [p.reference for p in problems])]
                 for k in replies[0]}
        wrong = [k for k in p_yes if k != "right"]
        auc = mean(float(r > w) + 0.5 * (r == w) for r in p_yes["right"] for k in wrong for w in p_yes[k])
        print(f"\n{name}: AUC right vs wrong {auc:.2f}")
        for k, values in p_yes.items():
            outranks = "" if k == "right" else \
                f"  >= right {mean(w >= r for w, r in zip(values, p_yes['right'])):.0%}"
            print(f"  {k:12s} P(yes) {mean(values):.2f}{outranks}")


if __name__ == "__main__":
    main()
