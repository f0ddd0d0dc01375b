"""What the RLPR reward pays replies that do no work: constant replies and restatements of the question, beside the
right and a wrong reply, on the addition recipe's held-out problems (docs/results.md, "Training on model rewards").

    python -m benchmarks.rlpr_baselines [--models smollm2-135m-instruct RUN/checkpoints/step-0000030 ...]
                                        [--output runs/rlpr_baselines.json]

RLPR (Yu et al. 2025) pays the policy's own mean probability of the reference after the reply's reasoning, less the
same without it (`rlvr.rewards.rlpr`, with the runs' settings: marker `\\boxed{`, debiased). Its value depends on the
policy, so each model named is scored as the policy: the base model is what the runs start from; a trained
checkpoint is what a run reaches. Per class of reply, over the recipe's 100 held-out problems: the mean reward and
the share of problems where the reply earns at least the right reply's reward. A constant reply that scores near
the right one would be a master key a policy could learn; a restatement ending right before the box is the
question handed back, which a probability reward may pay for what the policy itself would add.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
from pathlib import Path

from benchmarks.common import ROOT, commit

RECIPE = ROOT / "recipes" / "smollm2_addition.yaml"
MARKER = "\\boxed{"
OPERANDS = re.compile(r"What is (\d+) \+ (\d+)\?")
RIGHT = "right: 'a + b = c. \\boxed{c}'"


def replies(question: str, answer: str) -> dict[str, str]:
    """The replies scored for one problem, by class."""
    a, b = OPERANDS.search(question).groups()
    wrong = str(int(answer) + 1)
    return {
        RIGHT: f"{a} + {b} = {answer}. \\boxed{{{answer}}}",
        "wrong by one: 'a + b = c+1. \\boxed{c+1}'": f"{a} + {b} = {wrong}. \\boxed{{{wrong}}}",
        "constant: empty": "",
        "constant: '\\boxed{0}'": "\\boxed{0}",
        "constant: 'The answer is \\boxed{}'": "The answer is \\boxed{}",
        "constant: 'I do not know.'": "I do not know.",
        "restated question: 'a + b = \\boxed{'": f"{a} + {b} = \\boxed{{",
        "question echoed: 'What is a + b? \\boxed{'": f"What is {a} + {b}? \\boxed{{",
    }


def score(model_name: str, problems: list, cfg) -> dict[str, dict[str, float]]:
    """Each reply class's mean RLPR reward and share at or above the right reply's, with `model_name` the policy."""
    from rlvr.config import RlprSettings
    from rlvr.models.loading import load_model, load_tokenizer
    from rlvr.models.prompts import PromptEncoder
    from rlvr.rewards.rlpr import Policy, rlpr_rewards

    model_cfg = cfg.model.model_copy(update={"name": model_name})
    tokenizer = load_tokenizer(model_name)
    encode = PromptEncoder(tokenizer, cfg.model.chat_template, cfg.data.system_prompt, cfg.data.max_prompt_tokens)
    policy = Policy(load_model(model_cfg).eval(), tokenizer, encode)
    settings = RlprSettings(marker=MARKER)
    by_class: dict[str, list[tuple]] = {}
    for p in problems:
        for name, reply in replies(p.prompt, str(p.answer)).items():
            by_class.setdefault(name, []).append((p, reply))
    rewards = {name: rlpr_rewards(policy, [p.prompt for p, _ in rows], [r for _, r in rows],
                                  [p.answer for p, _ in rows], settings) for name, rows in by_class.items()}
    right = rewards[RIGHT]
    return {name: {"mean": statistics.mean(values),
                   "at least the right reply": statistics.mean(float(v >= r) for v, r in zip(values, right))}
            for name, values in rewards.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", nargs="+", default=["smollm2-135m-instruct"])
    parser.add_argument("--output", default="runs/rlpr_baselines.json")
    args = parser.parse_args()

    import torch

    from rlvr.config import load_config
    from rlvr.envs import make_tasks

    torch.set_num_threads(1)
    cfg = load_config(RECIPE, [])
    task = make_tasks(cfg.data.tasks, cfg.seed)[0]
    problems = [task.problem("eval", i) for i in range(min(task.size("eval"), cfg.eval.num_problems))]
    result = {"commit": commit(), "problems": len(problems), "marker": MARKER,
              "models": {m: score(m, problems, cfg) for m in args.models}}
    Path(args.output).parent.mkdir(parents=True, exist_ok=True)
    Path(args.output).write_text(json.dumps(result, indent=2))
    print(f"RLPR reward (debiased, marker {MARKER}) on the {len(problems)} held-out problems of "
          f"{RECIPE.relative_to(ROOT)}, commit {result['commit']}; written to {args.output}")
    print("| reply | " + " | ".join(f"{m}: mean reward | >= right reply" for m in args.models) + " |")
    print("|---|" + "---|---|" * len(args.models))
    for name in next(iter(result["models"].values())):
        cells = [f"{s[name]['mean']:.3f} | {100 * s[name]['at least the right reply']:.0f}%"
                 for s in result["models"].values()]
        print(f"| {name} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
