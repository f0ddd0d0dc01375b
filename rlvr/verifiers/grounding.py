"""Rewards for visual tasks: the IoU of predicted boxes against the reference (grounding, detection), an exact count,
and a multiple-choice letter. Each is a plain reward function `f(prompt, completion, answer, **fields)` returning a
`Verdict`, usable as a task's verifier or in `rewards.functions` (e.g. `rlvr.verifiers.grounding:iou_reward`), beside
the format rewards of rlvr.rewards.shaping.

The answer is read from the completion's last `<answer>...</answer>` when it has one, else from the whole completion
(the convention of the visual RFT papers: Liu et al. 2025, Visual-RFT; Shen et al. 2025, VLM-R1).
"""

from __future__ import annotations

import re
from typing import Any

from rlvr.verifiers.extraction import THINK_BLOCK, turn_text
from rlvr.verifiers.verdict import Verdict

NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)"
BOX = re.compile(rf"\[\s*({NUMBER})\s*,\s*({NUMBER})\s*,\s*({NUMBER})\s*,\s*({NUMBER})\s*\]")
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
Box = tuple[float, float, float, float]


def answer_region(completion: str) -> str:
    """The text an answer is read from, by the final-answer rule (rlvr.verifiers.extraction): in the reply up to the
    end of its turn, `<think>` blocks aside, the last closed <answer>...</answer>, else the whole reply."""
    reply = THINK_BLOCK.sub("", turn_text(completion)[0])
    tagged = ANSWER_TAG.findall(reply)
    return tagged[-1] if tagged else reply


def parse_boxes(text: Any) -> list[Box]:
    """Every `[x1, y1, x2, y2]` in `text` (a string, or a list of boxes) whose corners are ordered (x1 <= x2,
    y1 <= y2); boxes with reversed corners are malformed and left out."""
    if isinstance(text, (list, tuple)):
        text = str(list(text))
    boxes = [tuple(float(v) for v in m.groups()) for m in BOX.finditer(str(text))]
    return [b for b in boxes if b[0] <= b[2] and b[1] <= b[3]]


def box_iou(a: Box, b: Box) -> float:
    """Intersection over union of two boxes [x1, y1, x2, y2] (0 when either has no area)."""
    w = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    h = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = w * h
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def matched_iou(predicted: list[Box], reference: list[Box]) -> float:
    """Mean IoU over a one-to-one matching of predicted to reference boxes, greedy by highest IoU first (as detection
    evaluation matches), divided by the larger of the two counts: a missing or an extra box counts as IoU 0."""
    if not predicted or not reference:
        return 0.0
    pairs = sorted(((box_iou(p, r), i, j) for i, p in enumerate(predicted) for j, r in enumerate(reference)),
                   reverse=True)
    used_p, used_r, total = set(), set(), 0.0
    for iou, i, j in pairs:
        if i not in used_p and j not in used_r:
            used_p.add(i)
            used_r.add(j)
            total += iou
    return total / max(len(predicted), len(reference))


def iou_reward(prompt: Any, completion: str, answer: Any, truncated: bool = False, **_: Any) -> Verdict:
    """IoU of the completion's boxes against the reference boxes (`answer`: '[x1, y1, x2, y2]', several such, or a
    list), both in the coordinates the task states (normalised to [0, 1] or pixels: IoU does not depend on the scale);
    several boxes are matched one to one (`matched_iou`). No box, malformed boxes or a truncated completion: 0."""
    boxes = parse_boxes(answer_region(completion))
    shown = " ".join(f"[{', '.join(f'{v:g}' for v in b)}]" for b in boxes) or None
    if truncated:
        return Verdict(0.0, shown)
    return Verdict(matched_iou(boxes, parse_boxes(answer)), shown)


def stated_count(completion: str) -> str | None:
    """The last whole number of the completion's answer, or None."""
    numbers = re.findall(r"(?<![\d.])\d+(?![\d.])", answer_region(completion))
    return numbers[-1] if numbers else None


def stated_choice(completion: str) -> str | None:
    """The last option letter (A, (B), C.) the completion's answer names, or None."""
    letters = re.findall(r"(?<![A-Za-z])\(?([A-J])\)?(?![A-Za-z])", answer_region(completion))
    return letters[-1] if letters else None


def count_reward(prompt: Any, completion: str, answer: Any, truncated: bool = False, **_: Any) -> Verdict:
    """1.0 when the last whole number of the answer equals the reference count, else 0."""
    stated = stated_count(completion)
    return Verdict(float(stated is not None and not truncated and int(stated) == int(str(answer).strip())), stated)


def choice_reward(prompt: Any, completion: str, answer: Any, truncated: bool = False, **_: Any) -> Verdict:
    """1.0 when the last option letter the answer names is the reference letter, else 0."""
    stated = stated_choice(completion)
    return Verdict(float(stated is not None and not truncated and stated == str(answer).strip().strip("()").upper()),
                   stated)
