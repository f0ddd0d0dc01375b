"""A task read from a dataset on disk: JSONL, Parquet, CSV, or a `datasets` directory saved with
save_to_disk, with a column mapping.

Every row is checked before training starts. A row that cannot be used (malformed JSON, not UTF-8, a
missing or empty column, a prompt over the token limit) either stops the run there, naming file, line and
column (`data.bad_rows=error`), or is dropped and counted (`skip`). A column that no row has is a mapping
mistake and always an error."""

from __future__ import annotations

import csv
import json
import re
import string
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rlvr.errors import ConfigError, DataError, did_you_mean
from rlvr.models.images import image_parts, load_image, with_images
from rlvr.models.prompts import Prompt, conversation_problem, is_conversation
from rlvr.tasks.base import RESERVED_FIELDS, TASKS, Problem, Task
from rlvr.verifiers.extraction import bare, reply_text, without_sign_off
from rlvr.verifiers.rules import written_final_answers
from rlvr.verifiers.verdict import Verdict, shown_answer

BAD_ROW_POLICIES = ("error", "skip")
ANSWER_FORMS = ("auto", "number", "any")  # as rlvr.verifiers.math.ANSWER_FORMS (that module needs the math extra)
MATH_VERIFIER = "rlvr.verifiers.math:math_score"


@dataclass
class Row:
    """One row of a dataset file: where it is, its values, and why it cannot be read (None when it can)."""

    where: str  # 'data.jsonl, line 7'
    values: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


def exact_match(prompt: str, completion: str, answer: str, truncated: bool = False, **_: Any) -> Verdict:
    """1.0 when the completion's final answer is exactly the reference, by the final-answer rule
    (rlvr.verifiers.extraction): its `<answer>` tag's contents, the answer of its final-answer line ("Final answer:
    ...", "#### ..."), its boxed answer, else the whole reply; compared as written, without what only dresses it
    (spacing, `$...$`, `**...**`, one box around it, a full stop). Several different final answers (a hedge) score
    0, and so does an answer cut off by the token limit. The answer it judged is shown."""
    stated = written_final_answers(completion)
    values = stated.values or [bare(without_sign_off(reply_text(completion)[0]))]
    finished = not truncated or (stated.finished if stated.values else reply_text(completion)[1])
    reference = bare(str(answer))
    ok = finished and all(v == reference for v in values)
    return Verdict(float(ok), shown_answer(" or ".join(values)))


def _utf8_problem(raw: bytes, error: UnicodeDecodeError) -> str:
    return f"not valid UTF-8 (byte {raw[error.start]:#04x} at character {error.start + 1})"


def _jsonl_rows(path: str, p: Path) -> list[Row]:
    rows = []
    with p.open("rb") as f:
        for line_no, raw in enumerate(f, 1):
            where = f"{path}, line {line_no}"
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                rows.append(Row(where, problem=_utf8_problem(raw, e)))
                continue
            if not line.strip():
                continue
            try:
                value = json.loads(line)
            except json.JSONDecodeError as e:
                rows.append(Row(where, problem=f"not valid JSON ({e.msg})"))
                continue
            if isinstance(value, dict):
                rows.append(Row(where, value))
            else:
                rows.append(Row(where, problem=f"expected a JSON object, got {type(value).__name__}"))
    return rows


def _json_rows(path: str, p: Path) -> list[Row]:
    raw = p.read_bytes()
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[: e.start].count(b"\n") + 1
        raise DataError(f"{path}, line {line}: {_utf8_problem(raw, e)}.") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise DataError(f"{path}, line {e.lineno}: not valid JSON ({e.msg}).") from None
    if not isinstance(data, list):
        raise DataError(f"{path}: a .json dataset must hold a list of objects, not a {type(data).__name__}.")
    return [Row(f"{path}, item {i}", item) if isinstance(item, dict)
            else Row(f"{path}, item {i}", problem=f"expected a JSON object, got {type(item).__name__}")
            for i, item in enumerate(data, 1)]


def _csv_rows(path: str, p: Path, delimiter: str) -> list[Row]:
    rows = []
    # surrogateescape keeps undecodable bytes as lone surrogates, so one bad row does not hide the others.
    with p.open(encoding="utf-8", errors="surrogateescape", newline="") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        for values in reader:
            where = f"{path}, line {reader.line_num}"
            if None in values:
                rows.append(Row(where, problem=f"has {len(values[None])} more fields than the header"))
            elif any(isinstance(v, str) and any("\udc80" <= c <= "\udcff" for c in v) for v in values.values()):
                rows.append(Row(where, problem="not valid UTF-8"))
            else:
                rows.append(Row(where, values))
    return rows


HUB_NAME = re.compile(r"^[\w.-]+/[\w.-]+$")


def _hub_rows(name: str, split: str) -> list[Row]:
    """A dataset named on the Hugging Face hub (needs the network or the local datasets cache)."""
    try:
        from datasets import load_dataset
    except ImportError:
        raise DataError(f"'{name}' is not a local file; loading hub datasets needs `pip install datasets`.") from None
    try:
        data = load_dataset(name, split=split)
    except Exception as e:  # offline, unknown name, unknown split: all user-facing
        raise DataError(f"Dataset '{name}' is not a local file or directory, and loading it from the hub (split "
                        f"'{split}') failed: {type(e).__name__}: {str(e)[:300]}. Give a local path, or save the "
                        "dataset with datasets' save_to_disk on a machine with network access.") from None
    return [Row(f"{name}[{split}], row {i}", dict(r)) for i, r in enumerate(data, 1)]


def read_records(path: str | Path, split: str = "train") -> list[Row]:
    """Every row of a JSONL / JSON / Parquet / CSV file, a saved `datasets` directory (its `split`) or a hub
    dataset name (its `split`), with its location; a line that cannot be read (malformed JSON, not an object,
    not UTF-8) comes back with its `problem`."""
    p = Path(path).expanduser()
    if not p.exists():
        if HUB_NAME.match(str(path)) and not p.suffix:
            return _hub_rows(str(path), split)
        where = "" if p.is_absolute() else f" (resolved against the working directory {Path.cwd()})"
        raise DataError(f"Dataset file '{path}'{where} does not exist.")
    if p.is_dir():
        try:
            from datasets import load_from_disk
        except ImportError:
            raise DataError(f"'{path}' is a directory; reading saved datasets needs `pip install datasets`.") from None
        data = load_from_disk(str(p))
        if hasattr(data, "keys"):  # a DatasetDict: take the split asked for, else its first
            data = data[split] if split in data else data[next(iter(data.keys()))]
        return [Row(f"{path}, row {i}", dict(r)) for i, r in enumerate(data, 1)]
    suffix = p.suffix.lower()
    if suffix in (".jsonl", ".ndjson"):
        return _jsonl_rows(str(path), p)
    if suffix == ".json":
        return _json_rows(str(path), p)
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        return [Row(f"{path}, row {i}", r) for i, r in enumerate(pq.read_table(p).to_pylist(), 1)]
    if suffix in (".csv", ".tsv"):
        return _csv_rows(str(path), p, "\t" if suffix == ".tsv" else ",")
    raise DataError(f"Dataset file '{path}' has an unknown format '{suffix}'; use .jsonl, .json, .parquet or .csv.")


def read_rows(path: str | Path) -> list[dict[str, Any]]:
    """All rows of a dataset file; the first row that cannot be read raises DataError naming file and line."""
    rows = read_records(path)
    for row in rows:
        if row.problem is not None:
            raise DataError(f"{row.where}: {row.problem}.")
    return [row.values for row in rows]


@TASKS.register("dataset")
class DatasetTask(Task):
    """Problems with reference answers from a file on disk, a saved dataset or a hub name (args: path, split,
    prompt_column or prompt_template, answer_column, solution_column, extra_columns, eval_path or eval_size,
    verifier, answer_form: handed to the verifier with every problem, 'auto' / 'number' / 'any' for the math
    verifier, images_column). `prompt_template` is a Python format string over the row's columns, e.g.
    'Solve: {question}\nGive the answer after ####.'. Rows with images: the images column (default 'images')
    holds file paths, bytes or PIL images, taken in order by the prompt's `{"type": "image"}` parts
    (docs/vision.md)."""

    name = "dataset"
    has_rows = True

    def __init__(self, seed: int = 0, path: str = "", prompt_column: str = "prompt", answer_column: str = "answer",
                 solution_column: str | None = None, eval_path: str | None = None, eval_size: int = 0,
                 verifier: str = "rlvr.tasks.dataset:exact_match", extra_columns: list[str] | None = None,
                 bad_rows: str = "error", prompt_template: str | None = None, split: str = "train",
                 eval_split: str = "test", answer_form: str | None = None, images_column: str = "images"):
        if not path:
            raise DataError("The dataset task needs data.tasks[].args.path: a .jsonl/.parquet/.csv file or a saved dataset.")
        for key, value in (("path", path), ("eval_path", eval_path)):
            if value is not None and not isinstance(value, (str, Path)):
                raise ConfigError(f"data.tasks[].args.{key} must be a file, directory or hub name, not a "
                                  f"{type(value).__name__}; for rows held in memory use rlvr.train(train_dataset=rows, "
                                  "eval_dataset=...).")
        if bad_rows not in BAD_ROW_POLICIES:
            raise ConfigError(f"bad_rows must be one of {', '.join(BAD_ROW_POLICIES)}, got {bad_rows!r}.")
        if answer_form is not None and answer_form not in ANSWER_FORMS:
            raise ConfigError(f"data.tasks[].args.answer_form must be one of {', '.join(ANSWER_FORMS)}, got "
                              f"{answer_form!r}.")
        self.verifier, self.bad_rows = verifier, bad_rows
        # handed to the verifier with every problem (the math verifier's answer_form; docs/verifiers.md)
        self.answer_form = {"answer_form": answer_form} if answer_form is not None else {}
        self.skipped_rows: list[str] = []
        self._where: dict[str, str] = {}  # problem uid -> its file and line
        self.template = prompt_template
        template_columns = self._template_columns(prompt_template) if prompt_template else []
        self.columns = {"answer": answer_column} if prompt_template else {"prompt": prompt_column,
                                                                          "answer": answer_column}
        if solution_column:
            self.columns["solution"] = solution_column
        self.extra = extra_columns or []
        clash = [c for c in self.extra if c in RESERVED_FIELDS]
        if clash:
            raise ConfigError(f"data.tasks[].args.extra_columns: {', '.join(clash)} cannot be handed to reward "
                              f"functions (they receive {', '.join(RESERVED_FIELDS)} themselves); leave them out.")
        self.template_columns = template_columns
        self.images_column = images_column
        rows = self._load(path, split)
        if eval_path:
            self._splits = {"train": rows, "eval": self._load(eval_path, eval_split)}
        else:
            cut = len(rows) - eval_size
            if cut <= 0:
                raise DataError(f"{path}: eval_size={eval_size} leaves no training rows (file has {len(rows)}).")
            self._splits = {"train": rows[:cut], "eval": rows[cut:]}

    @staticmethod
    def _template_columns(template: str) -> list[str]:
        try:
            names = [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]
        except ValueError as e:
            raise ConfigError(f"data.tasks[].args.prompt_template is not a valid format string: {e}.") from None
        if not names or any(not n.isidentifier() for n in names):
            raise ConfigError("data.tasks[].args.prompt_template must name columns as {column}, e.g. "
                              f"'Solve: {{question}}'; got {template!r}.")
        return list(dict.fromkeys(names))

    def _required(self) -> list[tuple[str, str]]:
        """(role, column) pairs every row needs."""
        return [*self.columns.items(), *(("template", c) for c in self.template_columns),
                *(("extra", c) for c in self.extra)]

    @staticmethod
    def _mapping_hint(role: str) -> str:
        hints = {"extra": "data.tasks[].args.extra_columns", "template": "data.tasks[].args.prompt_template"}
        return hints.get(role, f"data.tasks[].args.{role}_column=NAME")

    def _prompt(self, values: dict[str, Any]) -> Prompt:
        """The row's prompt: the prompt column's text or conversation (list of messages), or the template filled."""
        if self.template is None:
            return values[self.columns["prompt"]]
        return self.template.format(**{c: values[c] for c in self.template_columns})

    def _check_mapping(self, path: str, rows: list[Row]) -> None:
        """A column that no row has is a misnamed column: one error naming it and the columns found."""
        found = sorted({k for row in rows for k in row.values})
        for role, col in self._required():
            if not any(col in row.values for row in rows):
                raise DataError(
                    f"{rows[0].where}: column '{col}' ({role}) is missing, and no other row of {path} has it either."
                    f"{did_you_mean(col, found)} Columns found: {', '.join(found) or 'none'}. "
                    f"Map the column with {self._mapping_hint(role)}."
                )

    def _row_problem(self, values: dict[str, Any]) -> str | None:
        for role, col in self._required():
            value = values.get(col)
            if value is None or (isinstance(value, str) and not value.strip()):
                what = "is missing" if col not in values else "is null" if value is None else "is empty"
                return (f"column '{col}' ({role}) {what}. Columns found: {', '.join(sorted(values)) or 'none'}. "
                        f"Fix the row, or map the column with {self._mapping_hint(role)}")
        if self.template is None:
            return self._prompt_value_problem(values[self.columns["prompt"]])
        return None

    def _prompt_value_problem(self, value: Any) -> str | None:
        """A prompt is text, or a conversation: a list of {'role', 'content'} messages (TRL's conversational
        format). Anything else is a mistake, never turned into its Python repr."""
        col = self.columns["prompt"]
        if isinstance(value, str):
            return None
        if isinstance(value, list):
            problem = conversation_problem(value)
            return None if problem is None else f"column '{col}' (prompt) {problem}"
        return (f"column '{col}' (prompt) holds a {type(value).__name__} ({str(value)[:60]!r}); a prompt must be "
                "text or a list of {'role', 'content'} messages. Fix the column, or build the prompt from columns "
                "with data.tasks[].args.prompt_template")

    def _with_images(self, prompt: Prompt, value: Any, path: str) -> Prompt:
        """The prompt with the row's images (the images column: file paths, bytes, `datasets` Image values or PIL
        images) put into its `{"type": "image"}` parts; a text prompt with images becomes one user turn, images
        first. Each image is opened now, so a missing or unreadable one is a bad row. Relative paths are resolved
        against the dataset file's folder."""
        col, parts = self.images_column, len(image_parts(prompt))
        images = [] if value is None else value if isinstance(value, list) else [value]
        if not images:
            if parts:
                raise DataError(f"the prompt has {parts} {{'type': 'image'}} part(s) but column '{col}' (images) "
                                f"{'is missing' if value is None else 'is empty'}; give the images there, or map the "
                                "column with data.tasks[].args.images_column")
            return prompt
        if is_conversation(prompt) and len(images) != parts:
            raise DataError(f"column '{col}' (images) holds {len(images)} image(s), but the prompt has {parts} "
                            "{'type': 'image'} part(s); each image part takes the next image")
        base = Path(path).expanduser().parent if Path(path).expanduser().is_file() else None
        resolved = []
        for i, image in enumerate(images, 1):
            try:
                load_image(image, base)
            except DataError as e:
                raise DataError(f"column '{col}' (images), image {i}: {e}") from None
            if isinstance(image, (str, Path)) and base is not None and not Path(image).expanduser().is_absolute():
                image = str(base / image)
            resolved.append(image)
        return with_images(prompt, resolved)

    def _reject(self, where: str, problem: str) -> None:
        """Apply the bad-row policy to an unusable row."""
        if self.bad_rows == "error":
            raise DataError(f"{where}: {problem}. (data.bad_rows=skip drops such rows and counts them.)")
        self.skipped_rows.append(f"{where}: {problem}")

    def _load(self, path: str, split: str) -> list[Problem]:
        records = read_records(path, split)
        readable = [row for row in records if row.problem is None]
        if not readable:
            first = f" First line: {records[0].where}: {records[0].problem}." if records else ""
            raise DataError(f"Dataset file '{path}' has no readable rows.{first}")
        self._check_mapping(path, readable)
        problems = []
        for i, row in enumerate(records, 1):
            problem = row.problem or self._row_problem(row.values)
            if problem is not None:
                self._reject(row.where, problem)
                continue
            values, uid = row.values, f"{Path(path).name}-{i}"
            try:
                prompt = self._with_images(self._prompt(values), values.get(self.images_column), path)
            except DataError as e:
                self._reject(row.where, str(e))
                continue
            self._where[uid] = row.where
            problems.append(
                Problem(
                    uid=uid,
                    prompt=prompt,
                    answer=str(values[self.columns["answer"]]),
                    solution=str(values[self.columns["solution"]]) if "solution" in self.columns else None,
                    fields={**{c: values[c] for c in self.extra}, **self.answer_form},
                )
            )
        if not problems:
            raise DataError(f"Dataset file '{path}' has no usable rows; all {len(records)} were skipped "
                            f"(first: {self.skipped_rows[0]}).")
        return problems

    def screen_prompts(self, encode) -> None:
        """Encode every prompt now, so an empty or over-long one meets the bad-row policy before training."""
        for split, problems in self._splits.items():
            kept = []
            for p in problems:
                try:
                    encode(p.prompt)
                except DataError as e:
                    self._reject(self._where[p.uid], str(e).rstrip("."))
                    continue
                kept.append(p)
            if problems and not kept:
                raise DataError(f"No {split} prompt of task '{self.label}' is usable; all were skipped "
                                f"(first: {self.skipped_rows[0]}).")
            self._splits[split] = kept

    def size(self, split: str) -> int | None:
        return len(self._splits[split])

    def final_answer(self, completion: str) -> str | None:
        if self.verifier == "rlvr.tasks.dataset:exact_match":  # the whole completion is the answer
            return completion.strip() or None
        return super().final_answer(completion)

    def same_answer(self, a: str, b: str) -> bool:
        """Equal text; with the math verifier, mathematical equivalence as it judges (`1/2` and `0.5` are one
        answer; an unevaluated `58 + 96` is no answer `154`)."""
        if self.verifier == MATH_VERIFIER:
            from rlvr.verifiers.math import same_answer

            return same_answer(a, b)
        return a == b

    def problem(self, split: str, index: int) -> Problem:
        return self._splits[split][index]
