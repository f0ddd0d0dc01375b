"""What a run prints: a start banner, progress, warnings and an end summary.

On a terminal progress is a rich bar whose counters (step/total, elapsed, ETA) fit in 80 columns, with the key
metrics on a line of their own below it. Anywhere else (a file, a pipe: nohup, Slurm, CI) it is a plain, flushed
line every `log_every` steps and at the first and last step."""

from __future__ import annotations

import sys
import time
from typing import TextIO

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
from rich.text import Text

KEY_METRICS = {"reward/mean": "reward", "accuracy": "acc", "eval/accuracy": "eval_acc", "actor/entropy": "entropy",
               "response_length/mean": "len", "perf/step_s": "s/step", "sft/loss": "loss"}


def compact_metrics(metrics: dict[str, float]) -> str:
    """'reward=0.42  acc=0.4  len=12' from the key metrics present in a row."""
    return "  ".join(f"{short}={metrics[key]:.3g}" for key, short in KEY_METRICS.items()
                     if isinstance(metrics.get(key), (int, float)))


def format_facts(facts: dict[str, str]) -> str:
    """Aligned 'label  value' lines; a multi-line value is indented under its label."""
    width = max(map(len, facts))
    lines = []
    for label, value in facts.items():
        first, *rest = str(value).split("\n") or [""]
        lines.append(f"{label:<{width}}  {first}")
        lines += [f"{'':<{width}}  {line}" for line in rest]
    return "\n".join(lines)


def clock(seconds: float) -> str:
    seconds = max(0, int(round(seconds)))
    return f"{seconds // 3600}:{seconds % 3600 // 60:02d}:{seconds % 60:02d}"


class _BarAndMetrics(Progress):
    """The progress bar with the step's key metrics on their own line, so they never push the counters off."""

    metrics_line = ""

    def get_renderables(self):
        yield self.make_tasks_table(self.tasks)
        if self.metrics_line:
            yield Text(self.metrics_line, no_wrap=True, overflow="ellipsis")


def progress_bar(console: Console | None = None) -> _BarAndMetrics:
    return _BarAndMetrics(
        TextColumn("[bold]{task.description}"), BarColumn(bar_width=None), MofNCompleteColumn(), TimeElapsedColumn(),
        TextColumn("eta"), TimeRemainingColumn(), console=console, transient=False, expand=True,
    )


class ConsoleProgress:
    """Progress of `total` steps from `start`: a live bar on a terminal, plain lines elsewhere. With `until` (a
    stop condition, e.g. "sft/val_accuracy >= 0.45"), `total` is only a cap: lines name the condition instead of
    an eta counted to the cap."""

    def __init__(self, total: int, start: int = 0, log_every: int = 10, description: str = "train",
                 stream: TextIO | None = None, until: str | None = None):
        self.stream = stream or sys.stdout
        self.total, self.start, self.log_every, self.description = total, start, log_every, description
        self.until = until
        self.console = Console(file=self.stream, soft_wrap=True)
        self.live = self.stream.isatty()
        self.t0 = time.monotonic()
        self.bar = None
        if self.live:
            self.bar = progress_bar(self.console)
            self.bar.start()
            self.task = self.bar.add_task(description, total=None if until else total, completed=start)

    def print(self, text: str) -> None:
        """A line above the bar (or a plain line), flushed."""
        if self.bar is not None:
            self.bar.console.print(text, markup=False, highlight=False)
        else:
            self.stream.write(text + "\n")
            self.stream.flush()

    def banner(self, title: str, facts: dict[str, str]) -> None:
        self.print(f"== {title} ==\n{format_facts(facts)}")

    def update(self, step: int, metrics: dict[str, float]) -> None:
        line = compact_metrics(metrics)
        if self.bar is not None:
            self.bar.metrics_line = line
            self.bar.update(self.task, completed=step)
            return
        if step <= self.start:  # an evaluation before the first step
            self.print(f"{self.description} step {step}/{self.total} (before training)  {line}".rstrip())
        elif step == self.start + 1 or step % self.log_every == 0 or step >= self.total:
            elapsed = time.monotonic() - self.t0
            if self.until:
                self.print(f"{self.description} step {step} (at most {self.total})  elapsed {clock(elapsed)}  "
                           f"until {self.until}  {line}".rstrip())
                return
            done = step - self.start
            eta = elapsed / done * (self.total - step) if done > 0 else 0.0
            self.print(f"{self.description} step {step}/{self.total} ({100 * step / self.total:.0f}%)  elapsed "
                       f"{clock(elapsed)}  eta {clock(eta)}  {line}".rstrip())

    def warn(self, message: str) -> None:
        if self.bar is not None:
            self.bar.console.print(f"[yellow]warning:[/yellow] {message}", highlight=False)
        else:
            print(f"warning: {message}", file=sys.stderr, flush=True)

    def stop(self) -> None:
        if self.bar is not None:
            self.bar.stop()
            self.bar = None
