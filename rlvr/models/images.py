"""Images inside conversational prompts, as data: reading an image value (path, bytes, `datasets` Image dict, PIL
image), finding and filling a conversation's `{"type": "image"}` parts, and the thumbnails rows and reports show.
No torch here: the reward workers and the data layer read prompts through this module (rlvr.models.vision turns
them into model inputs)."""

from __future__ import annotations

import base64
import io
from pathlib import Path
from typing import Any

from rlvr.errors import DataError
from rlvr.models.prompts import Prompt, is_conversation


def load_image(value: Any, base_dir: Path | None = None):
    """`value` as an RGB PIL image: a file path (relative ones resolved against `base_dir`), bytes, a `datasets`
    Image dict ({'bytes', 'path'}) or a PIL image. Raises DataError saying what is wrong (missing file, unreadable,
    wrong type); the caller adds where the value came from."""
    from PIL import Image, UnidentifiedImageError

    if isinstance(value, dict) and ("bytes" in value or "path" in value):
        value = value.get("bytes") or value.get("path")
    if isinstance(value, Image.Image):
        image = value
    elif isinstance(value, (bytes, bytearray)):
        try:
            image = Image.open(io.BytesIO(value))
        except (OSError, UnidentifiedImageError) as e:
            raise DataError(f"{len(value)} bytes that are not an image PIL can read ({e})") from None
    elif isinstance(value, (str, Path)):
        path = Path(value).expanduser()
        if not path.is_absolute() and base_dir is not None:
            path = base_dir / path
        if not path.is_file():
            raise DataError(f"image file '{value}' does not exist" + (f" (looked for {path})" if path != Path(value)
                                                                       else ""))
        try:
            image = Image.open(path)
        except (OSError, UnidentifiedImageError) as e:
            raise DataError(f"image file '{value}' cannot be read as an image ({e})") from None
    else:
        raise DataError(f"an image must be a file path, bytes or a PIL image, not a {type(value).__name__} "
                        f"({str(value)[:60]!r})")
    try:
        image.load()
    except (OSError, ValueError) as e:
        raise DataError(f"image {str(value)[:80]!r} is truncated or corrupt ({e})") from None
    return image.convert("RGB")


def image_parts(prompt: Prompt) -> list[dict[str, Any]]:
    """The `{"type": "image"}` parts of a conversation's messages, in order."""
    if not is_conversation(prompt):
        return []
    return [part for m in prompt if isinstance(m.get("content"), list) for part in m["content"]
            if isinstance(part, dict) and part.get("type") == "image"]


def with_images(prompt: Prompt, images: list[Any]) -> list[dict[str, Any]]:
    """`prompt` with `images` put into its image parts in order (a new conversation). A text prompt becomes one user
    turn with the images first, then the text."""
    if not is_conversation(prompt):
        return [{"role": "user", "content": [*({"type": "image", "image": im} for im in images),
                                             {"type": "text", "text": prompt}]}]
    it = iter(images)
    out = []
    for m in prompt:
        if isinstance(m.get("content"), list):
            m = {**m, "content": [{**part, "image": next(it)} if isinstance(part, dict) and part.get("type") == "image"
                                  else part for part in m["content"]]}
        out.append(m)
    return out


def thumbnail_uri(value: Any, size: int = 96) -> str:
    """A small PNG of an image as a data URI (for completion rows and reports); '' when it cannot be read."""
    try:
        image = load_image(value)
    except DataError:
        return ""
    image.thumbnail((size, size))
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return "data:image/png;base64," + base64.b64encode(buffer.getvalue()).decode()


def without_pixels(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The conversation with its image parts reduced to `{"type": "image"}` (what templates and JSON rows see)."""
    return [{**m, "content": [{"type": "image"} if isinstance(p, dict) and p.get("type") == "image" else p
                              for p in m["content"]]} if isinstance(m.get("content"), list) else m
            for m in messages]


def loggable_prompt(prompt: Prompt) -> tuple[Prompt, list[str]]:
    """A prompt as a JSON row holds it: image parts without their pixels, and the images as thumbnail data URIs."""
    parts = image_parts(prompt)
    if not parts:
        return prompt, []
    return without_pixels(prompt), [thumbnail_uri(part.get("image")) for part in parts]
