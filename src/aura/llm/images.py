"""Images in chat messages: files -> OpenAI ``image_url`` content parts with data URLs.

Images travel inside the request as ``data:<mime>;base64,...`` URLs; nothing is uploaded anywhere
else. A file is accepted when Pillow reads it as PNG, JPEG, WebP or GIF (by its magic bytes, not
its name) and it is no larger than ``llm.max_image_bytes``; a message carries 1 to 4 images.
Every refusal is one line naming the file.

Cache keys and logs never carry the base64 text: `redact_images` replaces each data URL by
``sha256:<hex of the image bytes>``, so a key changes with the bytes and not with the file name.
"""
from __future__ import annotations

import base64
import hashlib
import io
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import UserError
from .errors import StageFailed

MAX_IMAGE_BYTES = 5 * 1024 * 1024  # default of config llm.max_image_bytes
MAX_IMAGES = 4  # per message
MIME = {"PNG": "image/png", "JPEG": "image/jpeg", "WEBP": "image/webp", "GIF": "image/gif"}
DATA_URL_PREFIX = "data:"


class ImageError(UserError):
    """An image file that cannot be sent: missing, not PNG/JPEG/WebP/GIF, too large, too many."""


class NoVision(StageFailed):
    """An image-bearing request for a model without `vision: true` (a stage must skip it first)."""


@dataclass
class ImageRequest:
    """One prompt for the images endpoint (LLMClient.generate_images). `params` (e.g. quality) go
    to the API as given; size, n, params and the sample index all enter the cache key. `image` (PNG
    bytes, e.g. the previous frame) makes it an edit (openai `images.edit`, the image uploaded as a
    multipart file) conditioned on that image; its sha256 enters the cache key."""

    item_id: str
    prompt: str
    prompt_name: str
    prompt_sha256: str
    size: str = "256x256"
    n: int = 1
    sample_index: int = 0
    params: dict[str, Any] | None = None
    image: bytes | None = None


@dataclass
class ImageResult:
    item_id: str
    model: str
    status: str  # ok | failed
    images: list[bytes] = field(default_factory=list)  # image file bytes (PNG: response_format b64_json)
    error: str | None = None
    calls: list = field(default_factory=list)  # accounting.CallRecord

    def to_row(self) -> dict:
        """A JSON row: the images by hash (the bytes belong in files, not in JSONL)."""
        return {"item_id": self.item_id, "model": self.model, "status": self.status, "error": self.error,
                "images_sha256": [hashlib.sha256(b).hexdigest() for b in self.images],
                "cache_keys": [c.key for c in self.calls]}


def max_image_bytes(raw_config: dict) -> int:
    """The configured cap (config `llm.max_image_bytes`)."""
    return int((raw_config.get("llm") or {}).get("max_image_bytes", MAX_IMAGE_BYTES))


def image_part(path: str | Path, max_bytes: int = MAX_IMAGE_BYTES) -> dict:
    """One ``image_url`` content part holding the file as a data URL."""
    path = Path(path)
    try:
        size = path.stat().st_size
        if size > max_bytes:
            raise ImageError(f"{path}: image is {size} bytes, over the cap of {max_bytes} (llm.max_image_bytes)")
        data = path.read_bytes()
    except OSError as exc:
        raise ImageError(f"{path}: cannot read image: {exc.strerror or exc}") from None
    from PIL import Image, UnidentifiedImageError  # here: a job that sends no image never imports Pillow

    try:
        with Image.open(io.BytesIO(data)) as img:
            fmt = img.format
            img.verify()  # a truncated or garbled file fails here, not at the model
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as exc:
        raise ImageError(f"{path}: not a readable PNG, JPEG, WebP or GIF image ({' '.join(str(exc).split())[:120]})") from None
    if fmt not in MIME:
        raise ImageError(f"{path}: image format {fmt} is not accepted (PNG, JPEG, WebP or GIF)")
    url = f"data:{MIME[fmt]};base64,{base64.b64encode(data).decode('ascii')}"
    return {"type": "image_url", "image_url": {"url": url}}


def user_content(text: str, image_paths, max_bytes: int = MAX_IMAGE_BYTES) -> list[dict]:
    """Content of one user message: the text part, then 1-4 image parts in the order given."""
    paths = [Path(image_paths)] if isinstance(image_paths, (str, Path)) else [Path(p) for p in image_paths]
    if not paths:
        raise ImageError("a message with images needs at least one image file")
    if len(paths) > MAX_IMAGES:
        raise ImageError(f"{paths[MAX_IMAGES]}: {len(paths)} images in one message, at most {MAX_IMAGES} "
                         f"({', '.join(str(p) for p in paths)})")
    return [{"type": "text", "text": text}, *(image_part(p, max_bytes) for p in paths)]


def _is_image_part(part: Any) -> bool:
    return isinstance(part, dict) and part.get("type") == "image_url"


def has_images(messages) -> bool:
    """Whether any message carries an image part (such a request needs a model with vision)."""
    return any(isinstance(m.get("content"), list) and any(_is_image_part(p) for p in m["content"])
               for m in messages)


def data_url_digest(url: str) -> str:
    """``sha256:<hex>`` of the bytes a base64 data URL holds (of the URL text for any other URL)."""
    if url.startswith(DATA_URL_PREFIX) and ";base64," in url:
        payload = base64.b64decode(url.split(";base64,", 1)[1])
    else:
        payload = url.encode("utf-8")
    return "sha256:" + hashlib.sha256(payload).hexdigest()


def redact_images(messages: list[dict]) -> list[dict]:
    """The messages with each data URL replaced by the hash of its bytes (for cache keys and logs).

    Messages without image parts come back unchanged (the same objects), so text-only cache keys
    are what they were before images existed.
    """
    if not has_images(messages):
        return messages
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list) and any(_is_image_part(p) for p in content):
            parts = []
            for p in content:
                url = (p.get("image_url") or {}).get("url") if _is_image_part(p) else None
                if isinstance(url, str) and url.startswith(DATA_URL_PREFIX):
                    p = {**p, "image_url": {**p["image_url"], "url": data_url_digest(url)}}
                parts.append(p)
            m = {**m, "content": parts}
        out.append(m)
    return out


def content_text(content) -> str:
    """The text of a message's content, string or parts (image parts left out)."""
    if isinstance(content, list):
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return content or ""
