"""How many replies of each judge-probe class the `require_answer` defence refuses before any judge is asked
(no model runs): `python benchmarks/judge_refusals.py --problems 100`. A refused reply scores 0 whatever the judge
would say, so these counts bound a class's false-positive rate with the defences on (docs/rewards.md)."""

from __future__ import annotations

import argparse
from collections import Counter

from rlvr.config import JudgeSettings
from rlvr.evaluation.hack_probes import addition_problems
from rlvr.evaluation.judge_probes import judge_probes
from rlvr.rewards.judge import refusal


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--problems", type=int, default=100)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    settings = JudgeSettings(model="(none: no judge is asked)")
    total, refused, why = Counter(), Counter(), {}
    for p in judge_probes(addition_problems(args.problems, args.seed)):
        total[p.name] += 1
        reason = refusal(settings, p.question, p.reference, p.reply)
        if reason is not None:
            refused[p.name] += 1
            why.setdefault(p.name, Counter())[reason] += 1
    print(f"| class | refused before the judge ({args.problems} questions, seed {args.seed}) | why |")
    print("|---|---|---|")
    for name in total:
        reasons = ", ".join(f"{r} {n}" for r, n in why.get(name, Counter()).most_common())
        print(f"| {name} | {refused[name]}/{total[name]} | {reasons or '-'} |")


if __name__ == "__main__":
    main()
