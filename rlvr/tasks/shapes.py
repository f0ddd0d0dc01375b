"""A procedural visual task family drawn with PIL: coloured circles, squares and triangles on a plain background, and
three kinds of question about them:

- count: how many shapes of one colour (`rlvr.verifiers.grounding:count_reward`);
- ground: the box [x1, y1, x2, y2] of the one shape of a named kind, in normalised or pixel coordinates
  (`iou_reward`);
- choice: which shape, or which colour, sits in a named quarter of the image, as a multiple-choice letter
  (`choice_reward`).

Shapes sit in distinct cells of a grid (2x2 up to 4 shapes, 3x3 up to 9), each with a random size and offset inside
its cell, so they never overlap and every box is exact. Difficulty: shapes per image (`min_shapes`, `max_shapes`),
`image_size`, and `colours`, how many of the palette's colours are drawn (1: counting the named colour is counting
every shape). The train split is an unbounded stream, deterministic in (seed, index); the held-out set depends on
`eval_seed` only. Images travel in the prompt as PNG bytes (rlvr.models.images).
"""

from __future__ import annotations

import io
import random
from dataclasses import dataclass

from rlvr.errors import ConfigError
from rlvr.tasks.base import TASKS, Problem, Task
from rlvr.verifiers.grounding import answer_region, parse_boxes, stated_choice, stated_count

COLOURS = {"red": (220, 40, 40), "green": (40, 170, 60), "blue": (40, 80, 220), "yellow": (230, 200, 30)}
SHAPES = ("circle", "square", "triangle")
QUESTIONS = {"count": "rlvr.verifiers.grounding:count_reward", "ground": "rlvr.verifiers.grounding:iou_reward",
             "choice": "rlvr.verifiers.grounding:choice_reward"}
QUARTERS = {"top-left": (0, 0), "top-right": (1, 0), "bottom-left": (0, 1), "bottom-right": (1, 1)}
LETTERS = "ABCD"


@dataclass(frozen=True)
class Shape:
    kind: str
    colour: str
    box: tuple[int, int, int, int]  # pixels, x1 y1 x2 y2 (x2, y2 exclusive)


def draw(shapes: list[Shape], size: int) -> bytes:
    """The shapes on a light grey background, as PNG bytes."""
    from PIL import Image, ImageDraw

    image = Image.new("RGB", (size, size), (235, 235, 235))
    pen = ImageDraw.Draw(image)
    for s in shapes:
        x1, y1, x2, y2 = s.box
        fill = COLOURS[s.colour]
        if s.kind == "circle":
            pen.ellipse((x1, y1, x2 - 1, y2 - 1), fill=fill)
        elif s.kind == "square":
            pen.rectangle((x1, y1, x2 - 1, y2 - 1), fill=fill)
        else:
            pen.polygon([((x1 + x2 - 1) / 2, y1), (x1, y2 - 1), (x2 - 1, y2 - 1)], fill=fill)
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


@TASKS.register("shapes")
class ShapesTask(Task):
    """Questions about procedurally drawn shapes (args: question count | ground | choice, min_shapes, max_shapes,
    image_size, colours 1-4, coordinates normalized | pixel for ground, eval_size, eval_seed)."""

    name = "shapes"

    def __init__(self, seed: int = 0, question: str = "count", min_shapes: int = 1, max_shapes: int = 4,
                 image_size: int = 64, colours: int = len(COLOURS), coordinates: str = "normalized",
                 eval_size: int = 100, eval_seed: int = 0):
        if question not in QUESTIONS:
            raise ConfigError(f"data.tasks[].args.question must be one of {', '.join(QUESTIONS)}, got {question!r}.")
        if coordinates not in ("normalized", "pixel"):
            raise ConfigError(f"data.tasks[].args.coordinates must be normalized or pixel, got {coordinates!r}.")
        if not 1 <= min_shapes <= max_shapes <= 9:
            raise ConfigError(f"data.tasks[].args: need 1 <= min_shapes <= max_shapes <= 9, got {min_shapes}, "
                              f"{max_shapes}.")
        if not 1 <= colours <= len(COLOURS):
            raise ConfigError(f"data.tasks[].args.colours must be 1 to {len(COLOURS)}, got {colours}.")
        if image_size < 16:
            raise ConfigError(f"data.tasks[].args.image_size must be at least 16 pixels, got {image_size}.")
        self.seed, self.question, self.coordinates = seed, question, coordinates
        self.min_shapes, self.max_shapes, self.image_size = min_shapes, max_shapes, image_size
        self.eval_size, self.eval_seed = eval_size, eval_seed
        self.palette = list(COLOURS)[:colours]
        self.verifier = QUESTIONS[question]

    @property
    def default_label(self) -> str:
        return f"shapes-{self.question}"

    def size(self, split: str) -> int | None:
        return self.eval_size if split == "eval" else None

    def _scene(self, rng: random.Random, count: int, kinds: list[str] | None = None) -> list[Shape]:
        grid = 2 if count <= 4 else 3
        cell = self.image_size // grid
        cells = rng.sample(range(grid * grid), count)
        out = []
        for i, c in enumerate(cells):
            side = rng.randint(max(4, cell // 2), max(4, cell - 2))
            x = (c % grid) * cell + rng.randint(0, cell - side)
            y = (c // grid) * cell + rng.randint(0, cell - side)
            kind = kinds[i] if kinds else rng.choice(SHAPES)
            out.append(Shape(kind, rng.choice(self.palette), (x, y, x + side, y + side)))
        return out

    def _box_text(self, box: tuple[int, int, int, int]) -> str:
        if self.coordinates == "pixel":
            return "[" + ", ".join(str(v) for v in box) + "]"
        return "[" + ", ".join(f"{v / self.image_size:.2f}" for v in box) + "]"

    def problem(self, split: str, index: int) -> Problem:
        key = f"eval-{self.eval_seed}-{index}" if split == "eval" else f"train-{self.seed}-{index}"
        rng = random.Random(f"shapes-{self.question}-{key}")
        count = rng.randint(self.min_shapes, self.max_shapes)
        if self.question == "count":
            shapes = self._scene(rng, count)
            colour = rng.choice(self.palette)
            text = f"How many {colour} shapes are in the image? Answer with a number."
            answer = str(sum(s.colour == colour for s in shapes))
        elif self.question == "ground":
            target = rng.choice(SHAPES)
            others = [k for k in SHAPES if k != target]
            shapes = self._scene(rng, count, [target, *(rng.choice(others) for _ in range(count - 1))])
            unit = "pixels" if self.coordinates == "pixel" else "fractions of the image size, 0 to 1"
            text = f"Where is the {target}? Give its box as [x1, y1, x2, y2] in {unit}."
            answer = self._box_text(shapes[0].box)
        else:
            shapes = self._scene(rng, min(count, 4))
            quarter, (qx, qy) = rng.choice(list(QUARTERS.items()))
            half = self.image_size // 2
            inside = [s for s in shapes if s.box[0] // half == qx and s.box[1] // half == qy]
            attribute = rng.choice(("shape", "colour"))
            options = list(SHAPES) + ["nothing"] if attribute == "shape" else list(COLOURS)  # every colour an option
            truth = "nothing" if not inside and attribute == "shape" else \
                (inside[0].kind if attribute == "shape" else inside[0].colour) if inside else None
            if truth is None:  # a colour question about an empty quarter: ask about a filled one
                s = shapes[0]
                quarter = next(q for q, (x, y) in QUARTERS.items() if (x, y) == (s.box[0] // half, s.box[1] // half))
                truth = s.colour
            listed = " ".join(f"({letter}) {o}" for letter, o in zip(LETTERS, options))
            text = f"Which {attribute} is in the {quarter} quarter of the image? {listed}. Answer with the letter."
            answer = LETTERS[options.index(truth)]
        prompt = [{"role": "user", "content": [{"type": "image", "image": draw(shapes, self.image_size)},
                                               {"type": "text", "text": text}]}]
        return Problem(uid=f"{self.default_label}-{key}", prompt=prompt, answer=answer, solution=answer)

    def final_answer(self, completion: str) -> str | None:
        """What the verifier reads: the last box, count or option letter of the answer."""
        if self.question == "ground":
            boxes = parse_boxes(answer_region(completion))
            return "[" + ", ".join(f"{v:g}" for v in boxes[-1]) + "]" if boxes else None
        return stated_count(completion) if self.question == "count" else stated_choice(completion)
