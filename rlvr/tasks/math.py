"""Math problems with reference answers from a file on disk (JSONL / JSON / Parquet / CSV / saved `datasets`
directory), scored by rlvr.verifiers.math:math_score (answer extraction + math-verify equivalence)."""

from __future__ import annotations

from rlvr.errors import DataError
from rlvr.models.prompts import with_instruction
from rlvr.tasks.base import TASKS
from rlvr.tasks.dataset import DatasetTask
from rlvr.verifiers.rules import final_boxed_answer

SOLUTION_CHARS = 200  # a bare answer is shorter than this
BOXED_INSTRUCTION = "Please reason step by step, and put your final answer within \\boxed{}."


@TASKS.register("math")
class MathTask(DatasetTask):
    """Math problems with reference answers (args: path, prompt_column='problem', answer_column='answer', ...).

    The answer column may hold a bare answer ('\\frac{1}{3}') or a worked solution ending in \\boxed{...}, as in
    MATH's 'solution' column (answer_column=solution): the gold answer is then its last \\boxed{} (several boxes of
    its final statement together). When
    `solution_column` is set, that column is also kept as the reference completion (for SFT). `instruction`
    is appended to every problem ('' for none)."""

    name = "math"
    verifier = "rlvr.verifiers.math:math_score"

    def __init__(self, seed: int = 0, path: str = "", prompt_column: str = "problem", answer_column: str = "answer",
                 solution_column: str | None = None, eval_path: str | None = None, eval_size: int = 0,
                 extra_columns: list[str] | None = None, instruction: str = BOXED_INSTRUCTION, bad_rows: str = "error",
                 prompt_template: str | None = None, split: str = "train", eval_split: str = "test",
                 answer_form: str | None = None):
        super().__init__(seed=seed, path=path, prompt_column=prompt_column, answer_column=answer_column,
                         solution_column=solution_column, eval_path=eval_path, eval_size=eval_size,
                         verifier=self.verifier, extra_columns=extra_columns, bad_rows=bad_rows,
                         prompt_template=prompt_template, split=split, eval_split=eval_split,
                         answer_form=answer_form)
        for problems in self._splits.values():
            for problem in problems:
                problem.answer = self._gold(problem.answer, problem.uid, answer_column)
                if instruction:
                    problem.prompt = with_instruction(problem.prompt, instruction)

    @staticmethod
    def _gold(text: str, uid: str, column: str) -> str:
        """A bare answer as it is; a solution's last \\boxed{} contents. A long multi-line cell without one (a
        solution with no boxed answer) or an unclosed \\boxed{ is an error."""
        boxed = final_boxed_answer(text)
        if boxed is not None:
            return boxed
        if "\\boxed" in text or "\\fbox" in text or (len(text) > SOLUTION_CHARS and "\n" in text.strip()):
            file_name, row = uid.rsplit("-", 1)  # DatasetTask names problems '<file>-<row>'
            raise DataError(f"{file_name}, row {row}: column '{column}' (answer) looks like a worked solution but has "
                            "no complete \\boxed{...} answer. Fix the row, or point answer_column at bare answers.")
        return text.strip()
