"""The teacher of on-policy distillation: a frozen model, loaded once like the reference model, that scores the
student's sampled tokens (the `distill` estimator and algorithm.distill_weight read its logprobs; docs/algorithms.md).

It is any model rlvr loads (a hub name, an HF directory, a GGUF file, an rlvr run's checkpoint) with the student's
tokenizer: a different vocabulary is refused at start, since the teacher's logprob of the student's token id would
be the probability of another string. Scoring reuses the trainer's chunked logprob path (rlvr.models.logprobs via
BatchScorer), micro-batch by micro-batch on the teacher's own device, so full logits never exist for the batch."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers import PreTrainedTokenizerBase

from rlvr.algorithms.kl import sampled_reverse_kl
from rlvr.config import RunConfig, TeacherConfig
from rlvr.errors import RlvrError
from rlvr.models.loading import load_model, load_tokenizer, model_source, resolve_device
from rlvr.models.prompt_prefix import shares_prompt_forward
from rlvr.rollout import SamplingParams
from rlvr.training.batch import RolloutBatch
from rlvr.training.checkpoint import COMPLETE, MANIFEST, STATE_FILE, checkpoint_damage, resolve_resume
from rlvr.training.scoring import batch_logprobs

PHASE = "the teacher's logprob pass"


@dataclass
class Teacher:
    """A loaded teacher: the frozen model on its device, and how it scores (rows per forward, one prompt forward per
    group)."""

    model: torch.nn.Module
    name: str
    device: torch.device
    micro_batch_size: int
    share_prompts: bool


def teacher_source(name: str) -> str:
    """What teacher.name loads from: a run's output directory -> its newest intact checkpoint; a checkpoint
    directory must be finished (its COMPLETE marker and manifest intact) and not the hidden directory of a save in
    progress; anything else (a hub name, an HF directory, a GGUF file) as written."""
    path = Path(name).expanduser()
    if not path.is_dir():
        return name
    if path.name.startswith((".tmp-", ".trash-")):
        raise RlvrError(f"teacher.name={name} is the temporary directory of a checkpoint being written (or being "
                        f"deleted) by a run; give a finished checkpoint, e.g. {path.with_name(path.name.split('-', 1)[1])} once it "
                        f"exists, or the run's output directory for its newest finished one.")
    if not (path / "config.json").is_file() and (path / "checkpoints").is_dir():
        found = resolve_resume("auto", path)
        if found is None:
            raise RlvrError(f"teacher.name={name} is a run's output directory without a finished checkpoint yet "
                            f"(nothing complete under {path / 'checkpoints'}); wait for its first checkpoint or name "
                            "another model.")
        return str(found)
    if any((path / f).exists() for f in (STATE_FILE, MANIFEST, COMPLETE)):  # an rlvr checkpoint
        problem = checkpoint_damage(path)
        if problem is not None:
            raise RlvrError(f"teacher.name={name} is an rlvr checkpoint that is not finished or not intact: "
                            f"{problem}. A run still writing it completes it with its {COMPLETE} marker; give a "
                            f"finished checkpoint, or the run's output directory for its newest finished one.")
    return name


def tokenizer_mismatch(student: PreTrainedTokenizerBase, teacher: PreTrainedTokenizerBase) -> str | None:
    """How the two tokenizers differ, or None when they are the same vocabulary: the number of tokens (len(), added
    tokens included) and the token -> id maps (get_vocab(), special and added tokens included) are compared."""
    if len(student) != len(teacher):
        return f"the student's tokenizer has {len(student)} tokens, the teacher's {len(teacher)}"
    s, t = student.get_vocab(), teacher.get_vocab()
    if s == t:
        return None
    differ = sorted(tok for tok in s.keys() | t.keys() if s.get(tok) != t.get(tok))
    shown = ", ".join(f"{tok!r}: student {s.get(tok)}, teacher {t.get(tok)}" for tok in differ[:3])
    return f"{len(differ)} tokens map to different ids ({shown}{', ...' if len(differ) > 3 else ''})"


def load_teacher(cfg: RunConfig, student_tokenizer: PreTrainedTokenizerBase, wrap_on_policy_device) -> Teacher:
    """cfg.teacher loaded frozen as cfg.model loads models (its dtype unless teacher.dtype), on teacher.device
    (`wrap_on_policy_device`, the parallel strategy's frozen-model wrapper, for 'policy'). A teacher that cannot be
    loaded, has another tokenizer, or is a checkpoint a run is still writing is an RlvrError naming it."""
    t: TeacherConfig = cfg.teacher
    settings = cfg.model.model_copy(update={"name": teacher_source(t.name), "gguf_file": t.gguf_file,
                                            "dtype": t.dtype or cfg.model.dtype, "gradient_checkpointing": False,
                                            "tokenizer": None, "lora": None})
    try:
        source = model_source(settings, "teacher.name")
        tokenizer = load_tokenizer(source, settings.trust_remote_code, "teacher.name")
        model = load_model(settings, name=source, setting="teacher.name")
    except (RlvrError, OSError, ValueError) as e:
        raise RlvrError(f"Could not load the teacher (teacher.name={t.name}): {e}") from None
    if (why := tokenizer_mismatch(student_tokenizer, tokenizer)) is not None:
        raise RlvrError(f"teacher.name={t.name} does not share the student's tokenizer (model.name={cfg.model.name}): "
                        f"{why}. On-policy distillation scores the student's token ids under the teacher, so both "
                        "need one vocabulary (the same len(tokenizer) and token -> id map); choose a teacher of the "
                        "student's family.")
    model = model.eval().requires_grad_(False)
    with out_of_memory(f"loading the teacher (teacher.name={t.name})", "put it on another device (teacher.device) "
                       "or load it in half precision (teacher.dtype=bfloat16)"):
        model = (wrap_on_policy_device(model) if t.device == "policy"
                 else model.to(resolve_device(t.device, "teacher.device")))
    return Teacher(model=model, name=t.name, device=next(model.parameters()).device,
                   micro_batch_size=t.micro_batch_size or cfg.optim.micro_batch_size,
                   share_prompts=cfg.optim.share_prompt_forward and shares_prompt_forward(model))


@contextlib.contextmanager
def out_of_memory(phase: str, fix: str) -> Iterator[None]:
    """An out-of-memory error inside the block (CUDA's, or a CPU allocation that failed) is an RlvrError naming
    `phase` and the `fix`."""
    try:
        yield
    except torch.OutOfMemoryError as e:
        raise RlvrError(f"{phase} ran out of memory: {str(e).splitlines()[0]}. To fix: {fix}.") from None
    except RuntimeError as e:
        if "can't allocate memory" not in str(e):
            raise
        raise RlvrError(f"{phase} ran out of memory: {str(e).splitlines()[0]}. To fix: {fix}.") from None


def scoring_out_of_memory(teacher: Teacher):
    """The teacher's logprob pass, its out-of-memory error named with the settings that shrink it."""
    return out_of_memory(f"{PHASE} (teacher.name={teacher.name} on {teacher.device})",
                         f"lower teacher.micro_batch_size (now {teacher.micro_batch_size}), put the teacher on another "
                         "device (teacher.device=cuda:1) or load it in half precision (teacher.dtype=bfloat16)")



def held_out_reverse_kl(engine, teacher: torch.nn.Module, prompts: list[list[int]], params: SamplingParams,
                        pad_id: int, seed: int = 0, micro_batch_size: int = 8) -> float:
    """The student's mean per-token reverse KL to `teacher` on prompts it does not train on: `params.n` samples per
    prompt from `engine` (the student; prompt i's from a generator seeded `seed + i`, so two students are compared
    on equally drawn samples), their sampling logprobs against the teacher's of the same tokens (k1 per token,
    `sampled_reverse_kl`, the estimate Thinking Machines' on-policy distillation reports)."""
    generators = [torch.Generator().manual_seed(seed + i) for i in range(len(prompts))]
    groups = engine.generate(prompts, params, generators)
    batch = RolloutBatch.from_completions(prompts, groups, pad_id, [{} for _ in prompts])
    scored = batch_logprobs(teacher, batch, params.temperature, False, micro_batch_size)
    return sampled_reverse_kl(batch.rollout_logprobs, scored, batch.completion_mask)
