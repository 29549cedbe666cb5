"""Images as Kiro limits them (docs/UPSTREAM.md §6): resized to fit, else refused or named in text.

Behind Kiro, the model's endpoint refuses a whole request when one of its images is larger than
5 MiB of base64 (the encoded bytes are what it measures: "image exceeds 5 MB maximum: 6714372
bytes > 5242880 bytes" for a 5.04 MiB file, kirodotdev/KiroCrew#1941, kirodotdev/Kiro#11497),
has a side above 8,000 pixels, or has a side above 2,000 pixels in a request holding more than
20 images (kirodotdev/Kiro#8884, #9707; Anthropic's vision limits). Clients send the whole
history every turn, so one such image fails every later turn of its conversation as well.

So before a payload is built, each image Kiro would refuse is resized with Pillow: aspect ratio
and format kept, EXIF orientation applied (the metadata is not carried over), animated images cut
to their first frame. One that cannot be decoded, or brought within the limits, is refused with a
400 naming it ("image 4 of the request", counted in the order the request holds them) and the
limit when the request's last user message holds it; when an earlier message does, it becomes the
text "[image (…) omitted: …]" instead, so that it never fails the turns after the one that
refused it (a client that sends a message after an error keeps the refused one before it).

The threshold counts every image the conversation holds, as the request carries it, whether or
not the payload will send it raw (rule 17 keeps only recent ones): the count only grows as a
conversation does, so its images are treated alike on every turn, and downsizing to 2,000
pixels costs the model nothing, since it reads images at 1,568 pixels on the long edge at most.

The treatment is deterministic: it depends on an image's bytes and the side limit only, and is
memoised by their digest (`FITTED`, bounded by bytes), so the next turn of a conversation sends
the very same bytes (the stable prefix prompt caching keys on) without resizing again.

Cost: an image is decoded only when it must change, or when its header (`image_size`) cannot be
read. Its header's size is checked before any pixel is decoded (the decompression-bomb guard):
at most `MAX_DECODED_PIXELS`, so a decode holds at most ~256 MB (8,000² RGBA; twice that for a
moment when a palette or CMYK image is converted), one image at a time (`_DECODING`). A JPEG is
decoded at the smallest scale that still covers the target. `kirod.upstream.exchange` runs
`fit_images` in a worker thread whenever `needs_fitting` says an image may change; Pillow
releases the GIL while it decodes, resamples and encodes.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import io
import math
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

from PIL import Image, ImageOps

from kirod.canonical.request import (
    Block,
    CanonicalRequest,
    DocumentBlock,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
)
from kirod.canonical.token_count import image_size
from kirod.errors import ApiError, ErrorKind

MAX_IMAGE_BASE64: Final = 5 * 1024 * 1024
"""The most base64 characters one image may take (docs/UPSTREAM.md §6: "5 MB", measured encoded)."""
MAX_IMAGE_SIDE: Final = 8_000
MANY_IMAGES: Final = 20
"""More images than this in one request and each side must be at most `MANY_IMAGES_SIDE`."""
MANY_IMAGES_SIDE: Final = 2_000
MAX_DECODED_PIXELS: Final = MAX_IMAGE_SIDE * MAX_IMAGE_SIDE
"""The largest image kirod decodes to resize it: the largest Kiro takes at all."""
FITTED_CACHE_BYTES: Final = 64 * 1024 * 1024

_FORMATS: Final = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/jpg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WEBP",
}
_JPEG_QUALITY: Final = 85
_WEBP_QUALITY: Final = 85
_ATTEMPTS: Final = 5  # encodings tried, each smaller, to come under MAX_IMAGE_BASE64
_MARGIN: Final = 0.9  # below the side the byte ratio suggests, since compression varies
_MIN_SIDE: Final = 16
_DECODING: Final = threading.Lock()


@dataclass(frozen=True, slots=True)
class Unfit:
    """Why an image cannot be sent: a clause completing "image 4 of the request …"."""

    reason: str


def side_limit(image_count: int) -> int:
    """The most pixels a side of each image may have in a request holding `image_count`."""
    return MANY_IMAGES_SIDE if image_count > MANY_IMAGES else MAX_IMAGE_SIDE


def needs_fitting(request: CanonicalRequest) -> bool:
    """Whether `fit_images` may change an image of `request`: header reads only, no decoding."""
    images = list(_images(request))
    limit = side_limit(len(images))
    return any(_format(image) and not _within(image, limit) for image in images)


def fit_images(request: CanonicalRequest) -> CanonicalRequest:
    """`request` with each image within Kiro's limits; raises ApiError (400) for an image of its
    last user message that cannot be; one of an earlier message that cannot be becomes text."""
    limit = side_limit(sum(1 for _ in _images(request)))
    ordinal = 0
    messages: list[Message] = []
    users = [index for index, message in enumerate(request.messages) if message.role is Role.USER]
    last = users[-1] if users else -1
    for index, message in enumerate(request.messages):
        if message.role is not Role.USER:
            messages.append(message)
            continue
        content: list[Block] = []
        for block in message.content:
            if isinstance(block, ImageBlock):
                ordinal += 1
                content.append(_fitted(block, limit, ordinal, refuse=index == last))
            elif isinstance(block, ToolResultBlock) and _holds_images(block):
                parts: list[TextBlock | ImageBlock | DocumentBlock] = []
                for part in block.content:
                    if isinstance(part, ImageBlock):
                        ordinal += 1
                        parts.append(_fitted(part, limit, ordinal, refuse=index == last))
                    else:
                        parts.append(part)
                content.append(dataclasses.replace(block, content=tuple(parts)))
            else:
                content.append(block)
        messages.append(dataclasses.replace(message, content=tuple(content)))
    return dataclasses.replace(request, messages=tuple(messages))


def fit(image: ImageBlock, limit: int) -> ImageBlock | Unfit:
    """`image` as Kiro takes it in a request whose images may have `limit` pixels a side."""
    if not _format(image) or _within(image, limit):
        return image
    key = _key(image, limit)
    found = FITTED.get(key)
    if found is None:
        with _DECODING:
            found = FITTED.get(key) or _refit(image, limit)
        FITTED.put(key, found)
    return found


# -- the walk --------------------------------------------------------------------------------------


def _images(request: CanonicalRequest) -> Iterator[ImageBlock]:
    """The images of the user's messages (tool results included), in order: those Kiro gets."""
    for message in request.messages:
        if message.role is not Role.USER:
            continue
        for block in message.content:
            if isinstance(block, ImageBlock):
                yield block
            elif isinstance(block, ToolResultBlock):
                yield from (part for part in block.content if isinstance(part, ImageBlock))


def _holds_images(block: ToolResultBlock) -> bool:
    return any(isinstance(part, ImageBlock) for part in block.content)


def _fitted(image: ImageBlock, limit: int, ordinal: int, *, refuse: bool) -> ImageBlock | TextBlock:
    result = fit(image, limit)
    if isinstance(result, ImageBlock):
        return result
    if refuse:
        many = (
            f" in a request holding more than {MANY_IMAGES} images"
            if limit < MAX_IMAGE_SIDE
            else ""
        )
        raise ApiError(
            ErrorKind.INVALID_REQUEST,
            f"image {ordinal} of the request {result.reason}; Kiro takes images of at most "
            f"{MAX_IMAGE_BASE64:,} bytes of base64 and {limit:,} pixels a side{many}",
            code="invalid_image",
            param="messages",
        )
    return TextBlock(f"[image ({image.media_type}) omitted: it {result.reason}]")


def _format(image: ImageBlock) -> str | None:
    """Pillow's name of the format `image` says it is in; None for one Kiro takes no image of
    (the payload builder refuses it)."""
    return _FORMATS.get(image.media_type.lower())


def _within(image: ImageBlock, limit: int) -> bool:
    """Whether the header alone shows `image` within the limits (False when it cannot tell)."""
    if len(image.data_base64) > MAX_IMAGE_BASE64:
        return False
    size = image_size(image)
    return size is not None and max(size) <= limit


# -- decoding and encoding -------------------------------------------------------------------------


def _refit(image: ImageBlock, limit: int) -> ImageBlock | Unfit:
    """What `fit` answers when the header kirod reads cannot show `image` within the limits.

    An image that nothing shows beyond a limit (its bytes within it, no header kirod reads)
    and that Pillow cannot read goes as it came, as it did before kirod checked images: only
    one that must change is refused for being unreadable."""
    size = image_size(image)
    if size is not None and size[0] * size[1] > MAX_DECODED_PIXELS:
        return _too_many_pixels(*size)  # before a byte is decoded: the bomb guard
    unknown = size is None and _small(image)
    try:
        data = base64.b64decode(image.data_base64)
    except (binascii.Error, ValueError):
        return image if unknown else Unfit("is not valid base64")
    try:
        opened = Image.open(io.BytesIO(data), formats=list(set(_FORMATS.values())))
    except Exception:  # Pillow raises many types for data it cannot read (OSError, SyntaxError…)
        return image if unknown else Unfit("cannot be decoded")
    with opened:
        width, height = opened.size
        longest = max(width, height)
        if _small(image) and longest <= limit:
            return image  # the header kirod reads missed what Pillow finds
        if width * height > MAX_DECODED_PIXELS:
            return _too_many_pixels(width, height)
        side = min(longest, limit)
        if not _small(image):
            ratio = math.sqrt(MAX_IMAGE_BASE64 / len(image.data_base64))
            side = min(side, int(longest * ratio * _MARGIN))
        frame = _decoded(opened, side)
        if frame is None:
            return Unfit("cannot be decoded")
        return _shrunk(frame, image, side)


def _too_many_pixels(width: int, height: int) -> Unfit:
    return Unfit(f"has {width}x{height} pixels, more than the {MAX_DECODED_PIXELS:,} kirod decodes")


def _small(image: ImageBlock) -> bool:
    return len(image.data_base64) <= MAX_IMAGE_BASE64


def _decoded(opened: Image.Image, side: int) -> Image.Image | None:
    """The first frame's pixels, in a mode every encoder here takes; a JPEG at the smallest
    scale of at least `side` on its long edge."""
    width, height = opened.size
    scale = side / max(width, height)
    try:
        opened.draft("RGB", (math.ceil(width * scale), math.ceil(height * scale)))
        opened.load()
        frame: Image.Image = opened
        if frame.mode not in ("L", "LA", "RGB", "RGBA"):
            transparent = frame.mode in ("PA", "La", "RGBa") or "transparency" in frame.info
            frame = frame.convert("RGBA" if transparent else "RGB")
    except Exception:  # a truncated or corrupt image fails here, after its header read well
        return None
    return frame


def _shrunk(frame: Image.Image, image: ImageBlock, side: int) -> ImageBlock | Unfit:
    """`frame` resized to `side` pixels on its long edge and encoded in `image`'s format,
    smaller each attempt until it takes at most `MAX_IMAGE_BASE64` characters."""
    image_format = _FORMATS[image.media_type.lower()]
    icc = frame.info.get("icc_profile")
    for _ in range(_ATTEMPTS):
        encoded = base64.b64encode(_encoded(_resized(frame, side), image_format, icc)).decode()
        if len(encoded) <= MAX_IMAGE_BASE64:
            return ImageBlock(image.media_type, encoded)
        side = int(side * math.sqrt(MAX_IMAGE_BASE64 / len(encoded)) * _MARGIN)
        if side < _MIN_SIDE:
            break
    return Unfit(f"cannot be brought under {MAX_IMAGE_BASE64:,} bytes of base64")


def _resized(frame: Image.Image, side: int) -> Image.Image:
    width, height = frame.size
    scale = min(1.0, side / max(width, height))
    size = (max(1, round(width * scale)), max(1, round(height * scale)))
    resized = frame.resize(size, Image.Resampling.LANCZOS, reducing_gap=3.0)
    # Orientation last, on the small image: it commutes with scaling, and the box is square.
    return ImageOps.exif_transpose(resized)


def _encoded(frame: Image.Image, image_format: str, icc: object) -> bytes:
    out = io.BytesIO()
    options: dict[str, object] = {"icc_profile": icc} if isinstance(icc, bytes) else {}
    if image_format == "JPEG":
        frame = frame.convert("L" if frame.mode in ("L", "LA") else "RGB")
        options["quality"] = _JPEG_QUALITY
    elif image_format == "WEBP":
        options["quality"] = _WEBP_QUALITY
    frame.save(out, format=image_format, **options)
    return out.getvalue()


# -- the memo --------------------------------------------------------------------------------------


def _key(image: ImageBlock, limit: int) -> bytes:
    digest = hashlib.sha256(image.data_base64.encode("utf-8", "surrogatepass"))
    digest.update(f"\0{image.media_type}\0{limit}".encode())
    return digest.digest()


class FittedCache:
    """Fitted images by the digest of the image and its limit, least recently used out, bounded
    by the base64 characters they hold. A pure-function cache, shared by worker threads."""

    def __init__(self, max_bytes: int) -> None:
        self._max_bytes = max_bytes
        self._bytes = 0
        self._entries: dict[bytes, ImageBlock | Unfit] = {}
        self._lock = threading.Lock()

    def get(self, key: bytes) -> ImageBlock | Unfit | None:
        with self._lock:
            found = self._entries.pop(key, None)
            if found is not None:
                self._entries[key] = found
            return found

    def put(self, key: bytes, value: ImageBlock | Unfit) -> None:
        with self._lock:
            if key in self._entries:
                return
            self._entries[key] = value
            self._bytes += _cost(value)
            while self._bytes > self._max_bytes:
                oldest = next(iter(self._entries))
                self._bytes -= _cost(self._entries.pop(oldest))


def _cost(value: ImageBlock | Unfit) -> int:
    return len(value.data_base64) if isinstance(value, ImageBlock) else len(value.reason)


FITTED: Final = FittedCache(FITTED_CACHE_BYTES)
