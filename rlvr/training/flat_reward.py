"""A flat reward speaks: when the first steps of a run pay (almost) nothing and the verifier found no answer in most
completions, the run says so once, with one such completion, the formats the verifier reads and the one the prompt
asks for. A prompt that asks for `<answer>` tags scored by a verifier that reads only boxes trains nothing, and
without this the only sign is a reward that stays at 0.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from rlvr.config import RewardFunctionConfig
from rlvr.models.prompts import prompt_text
from rlvr.rollout.steps import Group
from rlvr.tasks import Task
from rlvr.verifiers.extraction import FORMATS_READ

FIRST_STEPS = 3  # the steps watched
MIN_SAMPLES = 16  # judged once this many completions were scored (or at the last step watched)
MAX_PAID = 0.05  # "pays (almost) nothing": at most this share of completions paid ...
MIN_NO_ANSWER = 0.5  # ... and no answer found in more than this share (most)
EXAMPLE_CHARS = 300
READS = {  # what a built-in verifier reads; the rule verifiers all follow the final-answer rule
    "rlvr.verifiers.math:math_score": FORMATS_READ,
    "rlvr.tasks.dataset:exact_match": f"{FORMATS_READ}, compared exactly (else the whole reply)",
    "rlvr.tasks.arithmetic:score": f"{FORMATS_READ}, or the integer the reply starts with",
    "rlvr.tasks.reasoning_gym:score": "the contents of <answer>...</answer> tags, else a final-answer line or a box",
}
ASKED = {  # a format a prompt asks for -> how it is named
    "<answer> tags": re.compile(r"<answer>", re.IGNORECASE),
    "a \\boxed{} answer": re.compile(r"\\boxed"),
    "a '####' line": re.compile(r"####"),
    "a final-answer line": re.compile(r"final answer", re.IGNORECASE),
}


class FlatRewardAlarm:
    """Watches the first FIRST_STEPS steps' generated completions: the share the verifier paid and the share in
    which it found no answer (the answer its Verdict reports, else the task's own reading)."""

    def __init__(self, tasks: Sequence[Task], functions: Sequence[RewardFunctionConfig] = ()):
        self.tasks = tasks
        self.verifier_args = next((f.args for f in functions if f.function == "task"), {})
        self.samples = self.paid = self.unanswered = 0
        self.example: tuple[Group, str] | None = None
        self.done = False
        self.pending: str | None = None

    def speak(self, logger) -> None:
        """Hand the warning `record` raised, if any, to the run's logger (once)."""
        if self.pending:
            logger.warn(self.pending)
            self.pending = None

    def record(self, step: int, groups: list[Group]) -> str | None:
        """Count one step's generated groups; the warning (also kept for `speak`), once, when the steps so far pay
        (almost) nothing and most completions state no answer the verifier found; None otherwise."""
        if self.done:
            return None
        for group in groups:
            for i, completion in enumerate(group.completions):
                reported = group.scored.reported_answer(i)
                answer = reported[0] if reported else self.tasks[group.source].final_answer(completion.text)
                self.samples += 1
                self.paid += bool(group.scored.correct[i])
                if answer is None:
                    self.unanswered += 1
                    self.example = self.example or (group, completion.text)
        if self.samples < MIN_SAMPLES and step < FIRST_STEPS:
            return None
        self.done = True
        flat = self.paid <= MAX_PAID * self.samples and self.unanswered > MIN_NO_ANSWER * self.samples
        self.pending = self.message(step) if flat and self.example is not None else None
        return self.pending

    def message(self, step: int) -> str:
        group, text = self.example
        task = self.tasks[group.source]
        spec = getattr(task, "verifier", "")
        reads = READS.get(spec, "formats of its own (a verifier rlvr does not know: check what it reads)")
        if self.verifier_args.get("extract") == "boxed":
            reads = "only \\boxed{...} answers (extract: boxed)"
        prompt = prompt_text(group.problem.prompt)
        asked = [name for name, pattern in ASKED.items() if pattern.search(prompt)]
        shown = text if len(text) <= EXAMPLE_CHARS else text[:EXAMPLE_CHARS] + "..."
        return (f"the reward is flat: in steps 1-{step} the verifier paid {self.paid} of {self.samples} completions "
                f"and found no answer in {self.unanswered} ({self.unanswered / self.samples:.0%}). One of them: "
                f"{shown!r}. The verifier ({spec or 'the task`s'}) reads {reads}."
                + (f" The prompt asks for {' and '.join(asked)}." if asked else "")
                + " If the model answers in a format the verifier does not read, change the prompt or the verifier "
                  "(docs/verifiers.md, \"The final answer\"); `rlvr verify` on completions.jsonl counts the rows with "
                  "no answer found.")
