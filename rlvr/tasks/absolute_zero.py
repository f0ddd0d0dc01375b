"""Absolute Zero (Zhao et al. 2025, "Absolute Zero: Reinforced Self-play Reasoning with Zero Data", arXiv
2505.03335): one policy proposes code-reasoning tasks and solves them, with the sandboxed executor as the only
source of truth (docs/self_play.md).

A task is a triplet (program p, input i, output o = p(i)) read as one of three task types: deduction (predict o
from p and i), abduction (find an input that gives o) and induction (write p from input/output pairs and a hint).
Each step:

1. The sampler draws propose problems (role `<type>.propose`), cycling through the task types. A propose prompt
   shows `references` triplets drawn from that type's buffer (seeded with the identity program on 'Hello World');
   an induction proposer is given a program from the buffer and writes inputs for it and a hint.
2. The verifier checks each proposal in the sandbox (rlvr.tasks.program_io): it must parse, import only pure
   standard-library modules, run within the sandbox's limits, return a literal, and return the same in two runs.
   A rejected proposal scores `invalid_penalty` (-0.5), a reply with no program or input `format_penalty` (-1); its
   reason is counted (reward/verifier/rejected_<reason>, task/<label>/rejected/<reason>).
3. `follow_ups`: every distinct valid proposal is filed into its type's buffer and becomes a solve problem (role
   `<type>.solve`) in the same step; a type with fewer than `min_solve` fresh ones is topped up from its buffer.
4. The solver's groups are scored by running its answers (deduction: compare values; abduction: run f on the
   proposed input; induction: run the written program on every pair).
5. `late_rewards`: a valid proposal earns its learnability, 1 - s when the solver's success rate s on it is
   strictly between 0 and 1, else 0.

With `algorithm.advantage: task_relative` each (task type, role) pair has its own baseline (AZR's TRR++). The
buffers, the task's random state and its counters are saved by checkpoints (`state_dict`), so a resumed run draws
the same problems. The held-out split is a fixed file of program-output questions (deduction) written apart from
the proposer: recipes/data/program_outputs.jsonl.
"""

from __future__ import annotations

import ast
import json
import random
from collections import Counter
from pathlib import Path
from typing import Any

from rlvr.errors import DataError
from rlvr.tasks.base import TASKS, GroupResult, Problem, Task
from rlvr.tasks.dataset import read_rows
from rlvr.tasks.program_io import (
    REJECTIONS,
    as_json,
    call,
    checked_outputs,
    labelled,
    literal,
    parse_arguments,
    program_block,
    program_lines,
    same_value,
    shown_arguments,
    stated_inputs,
    stated_value,
    static_problem,
)
from rlvr.verifiers.verdict import RewardResult

TYPES = ("deduction", "abduction", "induction")
SEED_PROGRAM = "def f(a):\n    return a"
SEED_INPUT = "'Hello World'"
HELDOUT = Path(__file__).resolve().parent.parent / "recipes" / "data" / "program_outputs.jsonl"

PROPOSE = {
    "deduction": "Write a new Python function f and an input for it, such that working out the output by reading the "
                 "code takes some thought.",
    "abduction": "Write a new Python function f and an input for it, such that working out an input from the code and "
                 "its output takes some thought.",
}
FORMAT = ("Reply with the function in a ```python block, then a line `Input: <the arguments of one call, as Python "
          "literals>`.")


def learnability(success_rate: float) -> float:
    """AZR's proposer reward: 1 - s for a solver success rate s strictly between 0 and 1, else 0 (a task always or
    never solved teaches nothing)."""
    return 1.0 - success_rate if 0.0 < success_rate < 1.0 else 0.0


def _example(entry: dict) -> str:
    return f"```python\n{entry['program']}\n```\nInput: {entry['input']}"


def propose_prompt(task_type: str, references: list[dict], inputs: int) -> str:
    if task_type == "induction":
        program = references[0]["program"]
        return (f"```python\n{program}\n```\nWrite {inputs} different inputs for this function f, each on its own line "
                "`Input: <the arguments of one call, as Python literals>`, then a line `Hint: <what f does>`.")
    examples = "\n\n".join(_example(r) for r in references)
    return f"{PROPOSE[task_type]} Examples:\n\n{examples}\n\n{FORMAT}"


def solve_prompt(task_type: str, entry: dict) -> str:
    if task_type == "deduction":
        return (f"```python\n{entry['program']}\n```\nWhat does f({entry['input']}) return? Reply with a line "
                "`Output: <the value>`.")
    if task_type == "abduction":
        return (f"```python\n{entry['program']}\n```\nFind an input for which f returns {entry['output']}. Reply with "
                "a line `Input: <the arguments of one call, as Python literals>`.")
    shown = "\n".join(f"f({i}) == {o}" for i, o in entry["cases"][: entry["shown"]])
    hint = f"\nHint: {entry['message']}" if entry.get("message") else ""
    return f"Write a Python function f such that:\n{shown}{hint}\nReply with f in a ```python block."


# ------------------------------------------------------------------ the verifier (runs in the reward workers)

def score(prompt: str, completion: str, azr_kind: str, task_type: str, invalid_penalty: float = -0.5,
          format_penalty: float = -1.0, **fields: Any) -> RewardResult | dict[str, Any]:
    """The verifier of every Absolute Zero problem: a proposal's validity (score 0 when valid, its learnability
    comes later; `invalid_penalty` or `format_penalty` when not), or a solution's correctness (1 / 0;
    `format_penalty` when no answer can be read). A proposal's result carries the checked task (or its rejection)
    as its payload, which `follow_ups` reads, and shows it as JSON for its answer; a solution reports its stated
    answer."""
    if azr_kind == "propose":
        return judge_proposal(completion, task_type, invalid_penalty, format_penalty, **fields)
    return judge_solution(completion, task_type, format_penalty, **fields)


def _filed(scores: dict[str, float], proposal: dict[str, Any]) -> RewardResult:
    """A proposal's result: its scores, and the proposal (a task, or a rejection) as payload and shown answer."""
    return RewardResult({**scores, "answer": as_json(proposal)}, payload=proposal)


def _rejected(reason: str, penalty: float, detail: str = "") -> RewardResult:
    return _filed({"score": penalty, "correct": 0.0, "valid": 0.0,
                   **{f"rejected_{r}": float(r == reason) for r in REJECTIONS}}, {"rejected": reason, "detail": detail})


def judge_proposal(completion: str, task_type: str, invalid_penalty: float, format_penalty: float,
                   program: str | None = None, induction_inputs: int = 4, **_: Any) -> RewardResult:
    """A proposal checked in the sandbox (rlvr.tasks.program_io.checked_outputs, two runs)."""
    inputs = stated_inputs(completion)
    if task_type != "induction":
        program = program_block(completion)
        inputs = inputs[:1]
    else:
        inputs = inputs[:induction_inputs]
    if program is None or not inputs or (task_type == "induction" and len(inputs) < 2):
        return _rejected("format", format_penalty, "no program defining f, or no input" if task_type != "induction"
                         else "fewer than 2 distinct literal inputs")
    run = checked_outputs(program, inputs)
    if run.outputs is None:
        penalty = format_penalty if run.rejection == "format" else invalid_penalty
        return _rejected(run.rejection, penalty, run.detail)
    valid = {"score": 0.0, "correct": 1.0, "valid": 1.0, **{f"rejected_{r}": 0.0 for r in REJECTIONS},
             "program_lines": float(program_lines(program))}
    if task_type == "induction":
        hints = [h for h in labelled(completion, "hint") if h]
        task = {"program": program, "cases": [list(c) for c in zip(inputs, run.outputs)],
                "message": hints[0][:200] if hints else ""}
    else:
        task = {"program": program, "input": shown_arguments(parse_arguments(inputs[0])), "output": run.outputs[0]}
    return _filed(valid, {"type": task_type, **task})


def judge_solution(completion: str, task_type: str, format_penalty: float, program: str = "", call_input: str = "",
                   output: str = "", cases: list | None = None, **_: Any) -> dict[str, Any]:
    """A solver's answer checked by running it (abduction, induction) or comparing values (deduction)."""
    if task_type == "deduction":
        answer = stated_value(completion, "output")
        if not answer:
            return {"score": format_penalty, "correct": 0.0, "answer": None}
        return {"score": float(same_value(output, answer)), "answer": answer}
    if task_type == "abduction":
        answer = stated_value(completion, "input")
        arguments = parse_arguments(answer)
        if arguments is None:
            return {"score": format_penalty, "correct": 0.0, "answer": answer or None}
        run = call(program, [arguments])
        return {"score": float(run.outputs is not None and same_value(output, run.outputs[0])), "answer": answer}
    written = program_block(completion)
    if written is None:
        return {"score": format_penalty, "correct": 0.0, "answer": None}
    calls = [parse_arguments(i) for i, _ in cases or []]
    run = call(written, calls) if static_problem(written) is None and calls else None
    right = run is not None and run.outputs is not None and all(
        same_value(o, got) for (_, o), got in zip(cases, run.outputs))
    return {"score": float(right), "answer": written}


# ------------------------------------------------------------------ the task (lives in the trainer)

@TASKS.register("absolute_zero")
class AbsoluteZeroTask(Task):
    """Absolute Zero self-play over Python programs (see the module's docstring).

    Args: types (task types to propose and solve, default all three), references (buffer triplets shown in a
    propose prompt, 2), induction_inputs (inputs an induction proposal writes, 4; half are shown to the solver),
    min_solve (solve problems per type per step at least, topped up from the buffer, 1), invalid_penalty (-0.5),
    format_penalty (-1), seed_tasks (a JSONL file of {program, input} rows added to the deduction and abduction
    buffers after the identity program, each checked in the sandbox first), eval_path (held-out program-output
    questions, JSONL rows {id, program, input, output}; default the packaged set), eval_size (first rows of it,
    default all)."""

    name = "absolute_zero"
    verifier = "rlvr.tasks.absolute_zero:score"
    runs_untrusted_code = True
    derives_problems = True
    gives_roles = True  # each problem's role: a task type's proposer or solver

    def __init__(self, seed: int = 0, types: list[str] | tuple[str, ...] = TYPES, references: int = 2,
                 induction_inputs: int = 4, min_solve: int = 1, invalid_penalty: float = -0.5,
                 format_penalty: float = -1.0, seed_tasks: str | None = None, eval_path: str | None = None,
                 eval_size: int | None = None):
        unknown = [t for t in types if t not in TYPES]
        if not types or unknown:
            raise TypeError(f"types must be a non-empty list of {', '.join(TYPES)}; got {list(types)}")
        if references < 1 or induction_inputs < 2 or min_solve < 0:
            raise TypeError(f"references >= 1, induction_inputs >= 2 and min_solve >= 0 are needed, got {references}, "
                            f"{induction_inputs}, {min_solve}")
        self.seed, self.types, self.references = seed, list(dict.fromkeys(types)), references
        self.induction_inputs, self.min_solve = induction_inputs, min_solve
        self.penalties = {"invalid_penalty": invalid_penalty, "format_penalty": format_penalty}
        self.heldout = read_heldout(Path(eval_path) if eval_path else HELDOUT)[:eval_size]
        seed_entry = {"program": SEED_PROGRAM, "input": SEED_INPUT, "output": SEED_INPUT, "step": 0}
        self.buffers: dict[str, list[dict]] = {
            "deduction": [dict(seed_entry)], "abduction": [dict(seed_entry)],
            "induction": [{"program": SEED_PROGRAM, "cases": [[SEED_INPUT, SEED_INPUT], ["'abc'", "'abc'"]],
                           "shown": 1, "message": "f returns its argument", "step": 0}]}
        for entry in read_seed_tasks(Path(seed_tasks)) if seed_tasks else []:
            self.buffers["deduction"].append(dict(entry))
            self.buffers["abduction"].append(dict(entry))
        self.filed = {entry_key(t, e) for t, entries in self.buffers.items() for e in entries}
        self.heldout_programs = {program_identity(r["program"]): r["id"] for r in self.heldout}
        for entries in self.buffers.values():
            for entry in entries:
                if program_identity(entry["program"]) in self.heldout_programs:
                    held = self.heldout_programs[program_identity(entry["program"])]
                    raise DataError(f"held-out question {held} asks about a program the buffers are seeded with "
                                    f"({entry['program']!r}: the seed program or a seed_tasks row); the held-out set "
                                    "must be disjoint from every program the solver trains on: drop it from eval_path "
                                    "or from seed_tasks.")
        self.rng = random.Random(f"absolute-zero-{seed}")
        self.counts: Counter = Counter()
        self.pending: dict[tuple[str, int], str] = {}  # (propose uid, sample) -> the uid of its solve problem
        self.last: dict[str, float] = {}

    # problems -------------------------------------------------------------

    def size(self, split: str) -> int | None:
        return len(self.heldout) if split == "eval" else None

    def problem(self, split: str, index: int) -> Problem:
        if split == "eval":
            row = self.heldout[index]
            return Problem(uid=row["id"], prompt=solve_prompt("deduction", row), answer=row["output"],
                           fields={"azr_kind": "solve", "task_type": "deduction", "program": row["program"],
                                   "call_input": row["input"], "output": row["output"], **self.penalties},
                           role="deduction.solve")
        task_type = self.types[index % len(self.types)]
        rng = random.Random(f"{self.seed}-propose-{index}")  # a pure function of the buffer and the index
        fields: dict[str, Any] = {"azr_kind": "propose", "task_type": task_type, **self.penalties}
        if task_type == "induction":
            pool = self.buffers["deduction"] + self.buffers["abduction"]
            references = [rng.choice(pool)]
            fields.update(program=references[0]["program"], induction_inputs=self.induction_inputs)
        else:
            pool = self.buffers[task_type]
            references = rng.sample(pool, min(self.references, len(pool)))
        return Problem(uid=f"{split}-{index}", prompt=propose_prompt(task_type, references, self.induction_inputs),
                       fields=fields, role=f"{task_type}.propose")

    def _solve_problem(self, uid: str, task_type: str, entry: dict) -> Problem:
        fields: dict[str, Any] = {"azr_kind": "solve", "task_type": task_type, "program": entry["program"],
                                  **self.penalties}
        if task_type == "induction":
            fields["cases"] = entry["cases"]
            answer = entry["program"]
        else:
            fields.update(call_input=entry["input"], output=entry["output"])
            answer = entry["output"] if task_type == "deduction" else entry["input"]
        return Problem(uid=uid, prompt=solve_prompt(task_type, entry), answer=answer, fields=fields,
                       role=f"{task_type}.solve")

    def final_answer(self, completion: str) -> str | None:
        return stated_value(completion, "output") or None

    def same_answer(self, a: str, b: str) -> bool:
        return same_value(a, b) if literal(a)[0] else a == b

    # self-play --------------------------------------------------------------

    def follow_ups(self, step: int, groups: list[GroupResult]) -> list[Problem]:
        """Each distinct valid proposal of this step as a solve problem (and into its buffer); each type topped up
        to `min_solve` from its buffer."""
        proposals = [g for g in groups if g.problem.fields.get("azr_kind") == "propose"]
        if not proposals:
            return []  # the solve groups of this step ask for nothing more
        out: dict[str, list[Problem]] = {t: [] for t in self.types}
        seen: dict[str, str] = {}
        lines: list[int] = []
        for group in proposals:
            task_type = group.problem.fields["task_type"]
            for j, payload in enumerate(group.payloads):
                # None: the verifier itself failed (a reward timeout; counted by the failure budget too)
                proposal = payload if payload is not None else {"rejected": "unscored"}
                self.counts["proposals"] += 1
                if "rejected" in proposal:
                    self.counts[f"rejected/{proposal['rejected']}"] += 1
                    continue
                entry = {k: v for k, v in proposal.items() if k != "type"}
                if program_identity(entry["program"]) in self.heldout_programs:  # never trained on: not filed
                    self.counts["rejected/heldout"] += 1
                    continue
                self.counts["valid"] += 1
                if task_type == "induction":
                    entry["shown"] = (len(entry["cases"]) + 1) // 2
                key = entry_key(task_type, entry)
                if key not in seen:
                    seen[key] = f"step{step}-{task_type}-{len(out[task_type])}"
                    out[task_type].append(self._solve_problem(seen[key], task_type, entry))
                    lines.append(program_lines(entry["program"]))
                    if key not in self.filed:
                        self.filed.add(key)
                        self.buffers[task_type].append({**entry, "step": step})
                        self.counts["filed"] += 1
                self.pending[(group.problem.uid, j)] = seen[key]
        self.last = {"fresh_tasks": float(len(seen)),
                     "fresh_program_lines": sum(lines) / len(lines) if lines else float("nan")}
        for task_type in self.types:
            for k in range(len(out[task_type]), self.min_solve):
                entry = self.rng.choice(self.buffers[task_type])
                out[task_type].append(self._solve_problem(f"step{step}-{task_type}-buffer{k}", task_type, entry))
        return [p for t in self.types for p in out[t]]

    def late_rewards(self, groups: list[GroupResult]) -> list[list[float] | None]:
        """A valid proposal's learnability from the solver's success on its solve group."""
        rates = {g.problem.uid: sum(g.correct) / len(g.correct) for g in groups
                 if g.problem.fields.get("azr_kind") == "solve" and g.correct}
        out: list[list[float] | None] = []
        earned, fresh_rates = [], [rates[uid] for uid in set(self.pending.values()) if uid in rates]
        for g in groups:
            if g.problem.fields.get("azr_kind") != "propose":
                out.append(None)
                continue
            bonus = []
            for j in range(len(g.texts)):
                uid = self.pending.get((g.problem.uid, j))
                bonus.append(0.0 if uid is None else learnability(rates.get(uid, 0.0)))
                if uid is not None:
                    earned.append(bonus[-1])
            out.append(bonus)
        self.pending = {}
        if earned:
            self.last["learnability"] = sum(earned) / len(earned)
        if fresh_rates:
            self.last["fresh_solve_rate"] = sum(fresh_rates) / len(fresh_rates)
        return out

    def metrics(self) -> dict[str, float]:
        """Buffer sizes, cumulative proposals / valid / rejections by reason, and this step's fresh tasks: how many,
        their mean program lines, the solver's success on them and the learnability the proposals earned."""
        out = {f"buffer/{t}": float(len(self.buffers[t])) for t in TYPES}
        out.update({k: float(v) for k, v in self.counts.items()})
        out.update({"valid_frac": self.counts["valid"] / max(1, self.counts["proposals"]), **self.last})
        self.last = {}
        return out

    def state_dict(self) -> dict[str, Any]:
        return {"buffers": json.loads(json.dumps(self.buffers)), "rng": self.rng.getstate(),
                "counts": dict(self.counts)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.buffers = {k: [dict(e) for e in v] for k, v in state["buffers"].items()}
        self.rng.setstate(state["rng"])
        self.counts = Counter(state["counts"])
        self.filed = {entry_key(t, e) for t, entries in self.buffers.items() for e in entries}
        self.pending, self.last = {}, {}

    def corpus(self, n: int = 2000):
        yield from (self.problem("train", i).prompt for i in range(min(n, 3 * len(self.types))))
        yield from (self.problem("eval", i).prompt for i in range(len(self.heldout)))
        yield "Output: 'Hello World'\nInput: 1, 2\nHint: f adds one"


class _Canonical(ast.NodeTransformer):
    """Names a function's arguments by position, so programs that differ only in them are one program."""

    def __init__(self, names: list[str]):
        self.names = {name: f"_{i}" for i, name in enumerate(names)}

    def visit_arg(self, node: ast.arg) -> ast.arg:
        node.arg = self.names.get(node.arg, node.arg)
        return node

    def visit_Name(self, node: ast.Name) -> ast.Name:
        node.id = self.names.get(node.id, node.id)
        return node


def program_identity(program: str) -> str:
    """A program's identity for the held-out set's disjointness: its syntax tree with the arguments named by
    position (`def f(a): return a` and `def f(x):\n    return x` are one program); the text itself when it does not
    parse."""
    try:
        tree = ast.parse(program)
    except (SyntaxError, ValueError):
        return program
    names = [a.arg for node in ast.walk(tree) if isinstance(node, ast.FunctionDef) for a in node.args.args]
    return ast.dump(_Canonical(names).visit(tree), annotate_fields=False)


def entry_key(task_type: str, entry: dict) -> str:
    """A buffer entry's identity (its step left out): one task is filed once."""
    return as_json({"type": task_type, **{k: v for k, v in entry.items() if k != "step"}})


def read_seed_tasks(path: Path) -> list[dict]:
    """Buffer entries from rows {program, input}, each run twice in the sandbox for its output."""
    entries = []
    for i, row in enumerate(read_rows(str(path)), 1):
        if not all(isinstance(row.get(k), str) for k in ("program", "input")):
            raise DataError(f"{path}, row {i}: needs text columns program and input.")
        run = checked_outputs(row["program"], [row["input"]])
        if run.outputs is None:
            raise DataError(f"{path}, row {i}: the program is not a valid task ({run.rejection}"
                            f"{': ' + run.detail if run.detail else ''}).")
        entries.append({"program": row["program"], "input": shown_arguments(parse_arguments(row["input"])),
                        "output": run.outputs[0], "step": 0})
    return entries


def read_heldout(path: Path) -> list[dict]:
    """Held-out program-output questions: rows {id, program, input, output} (output: the repr f(input) returns)."""
    rows = []
    for i, row in enumerate(read_rows(str(path)), 1):
        if not all(isinstance(row.get(k), str) for k in ("program", "input", "output")):
            raise DataError(f"{path}, row {i}: needs text columns program, input and output (and optionally id).")
        rows.append({"id": str(row.get("id", f"heldout-{i}")), "program": row["program"], "input": row["input"],
                     "output": row["output"]})
    if not rows:
        raise DataError(f"{path}: no held-out questions.")
    return rows
