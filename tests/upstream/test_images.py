"""Images as Kiro limits them (docs/UPSTREAM.md §6): what is resized, to what, and what is refused.

Images are made with Pillow here; a decompression bomb's header is written by hand, since no
library will make one."""

from __future__ import annotations

import base64
import io
import random
import struct
import time
import zlib

import pytest
from PIL import Image

from kirod.canonical.request import (
    CanonicalRequest,
    ClientProtocol,
    ImageBlock,
    Message,
    Role,
    TextBlock,
    ToolResultBlock,
)
from kirod.canonical.token_count import image_size
from kirod.errors import ApiError
from kirod.upstream import images
from kirod.upstream.images import (
    MANY_IMAGES,
    MANY_IMAGES_SIDE,
    MAX_DECODED_PIXELS,
    MAX_IMAGE_BASE64,
    MAX_IMAGE_SIDE,
    FittedCache,
    Unfit,
    fit,
    fit_images,
    needs_fitting,
    side_limit,
)

FORMATS = {"image/png": "PNG", "image/jpeg": "JPEG", "image/gif": "GIF", "image/webp": "WEBP"}


def encoded(picture: Image.Image, media_type: str = "image/png", **options: object) -> ImageBlock:
    out = io.BytesIO()
    picture.save(out, format=FORMATS[media_type], **options)
    return ImageBlock(media_type, base64.b64encode(out.getvalue()).decode())


def gradient(width: int, height: int, mode: str = "RGB") -> Image.Image:
    return Image.linear_gradient("L").resize((width, height)).convert(mode)


def noise_png(side: int) -> ImageBlock:
    """A PNG of random pixels: it compresses to no less than its 3 bytes a pixel."""
    pixels = random.Random(side).randbytes(side * side * 3)
    return encoded(Image.frombytes("RGB", (side, side), pixels))


def bomb(side: int) -> ImageBlock:
    """A PNG whose header claims `side` x `side` pixels, with next to no data behind it."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        crc = struct.pack(">I", zlib.crc32(kind + data))
        return struct.pack(">I", len(data)) + kind + data + crc

    header = chunk(b"IHDR", struct.pack(">IIBBBBB", side, side, 8, 2, 0, 0, 0))
    data = chunk(b"IDAT", zlib.compress(b"\0" * 1024))
    png = b"\x89PNG\r\n\x1a\n" + header + data + chunk(b"IEND", b"")
    return ImageBlock("image/png", base64.b64encode(png).decode())


def opened(image: ImageBlock) -> Image.Image:
    return Image.open(io.BytesIO(base64.b64decode(image.data_base64)))


def request(*messages: Message) -> CanonicalRequest:
    return CanonicalRequest(
        request_id="req_1",
        protocol=ClientProtocol.ANTHROPIC_MESSAGES,
        model="sonnet",
        messages=messages,
    )


def user(*blocks: TextBlock | ImageBlock | ToolResultBlock) -> Message:
    return Message(Role.USER, blocks)


def assistant(text: str = "ok") -> Message:
    return Message(Role.ASSISTANT, (TextBlock(text),))


# -- the decision ----------------------------------------------------------------------------------


def test_more_than_twenty_images_limit_each_side_to_2000_pixels() -> None:
    assert side_limit(MANY_IMAGES) == MAX_IMAGE_SIDE == 8_000
    assert side_limit(MANY_IMAGES + 1) == MANY_IMAGES_SIDE == 2_000


def test_an_image_within_the_limits_is_sent_as_it_came() -> None:
    image = encoded(gradient(MAX_IMAGE_SIDE, 2))
    assert fit(image, MAX_IMAGE_SIDE) is image
    assert not needs_fitting(request(user(image)))


@pytest.mark.parametrize("media_type", list(FORMATS))
def test_a_side_over_the_limit_is_resized_in_its_format_and_aspect(media_type: str) -> None:
    image = encoded(gradient(2_500, 400), media_type)
    fitted = fit(image, MANY_IMAGES_SIDE)
    assert isinstance(fitted, ImageBlock)
    assert fitted.media_type == media_type
    assert opened(fitted).format == FORMATS[media_type]
    assert image_size(fitted) == (2_000, 320)


def test_an_image_over_5_mib_of_base64_is_shrunk_under_it() -> None:
    image = noise_png(1_450)  # 6.3 MB decoded, 8.4 MB of base64
    assert len(image.data_base64) > MAX_IMAGE_BASE64
    fitted = fit(image, MAX_IMAGE_SIDE)
    assert isinstance(fitted, ImageBlock)
    assert len(fitted.data_base64) <= MAX_IMAGE_BASE64
    width, height = opened(fitted).size
    assert width == height
    assert width > 900  # shrunk about as much as the bytes needed, not to a thumbnail


def test_the_limit_is_on_base64_not_decoded_bytes() -> None:
    """4.5 MB of PNG is under 5 MiB decoded but over it as base64 (kirodotdev/Kiro#11497)."""
    image = noise_png(1_230)
    assert len(base64.b64decode(image.data_base64)) < MAX_IMAGE_BASE64 < len(image.data_base64)
    assert fit(image, MAX_IMAGE_SIDE) != image


def test_a_jpeg_turned_by_exif_is_turned_in_its_pixels() -> None:
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90° to show
    image = encoded(gradient(3_000, 1_000), "image/jpeg", exif=exif.tobytes())
    fitted = fit(image, MANY_IMAGES_SIDE)
    assert isinstance(fitted, ImageBlock)
    assert image_size(fitted) == (667, 2_000)
    assert opened(fitted).getexif().get(0x0112) is None


def test_an_undecodable_image_is_refused_only_when_it_must_change() -> None:
    blob = base64.b64encode(random.Random(0).randbytes(4_000_000)).decode()
    assert fit(ImageBlock("image/png", blob), MAX_IMAGE_SIDE) == Unfit("cannot be decoded")
    small = ImageBlock("image/png", "iVBORw0KGgo=")  # a signature and nothing after it
    assert fit(small, MANY_IMAGES_SIDE) is small


def test_a_decompression_bomb_is_refused_from_its_header() -> None:
    started = time.perf_counter()
    refused = fit(bomb(100_000), MAX_IMAGE_SIDE)
    assert time.perf_counter() - started < 0.1
    assert refused == Unfit(
        f"has 100000x100000 pixels, more than the {MAX_DECODED_PIXELS:,} kirod decodes"
    )


def test_the_treatment_is_deterministic_and_remembered() -> None:
    image = encoded(gradient(2_600, 300))
    first = fit(image, MANY_IMAGES_SIDE)
    assert fit(image, MANY_IMAGES_SIDE) is first  # the memo
    assert images._refit(image, MANY_IMAGES_SIDE) == first  # what computing afresh answers


def test_the_memo_is_bounded_by_the_base64_it_holds() -> None:
    cache = FittedCache(max_bytes=10)
    cache.put(b"a", ImageBlock("image/png", "x" * 6))
    cache.put(b"b", ImageBlock("image/png", "y" * 6))
    assert cache.get(b"a") is None
    assert cache.get(b"b") == ImageBlock("image/png", "y" * 6)


# -- a request's images ----------------------------------------------------------------------------


def test_21_images_are_each_brought_to_2000_pixels_and_history_too() -> None:
    wide = encoded(gradient(2_500, 100))
    before = request(user(*[wide] * 20), assistant(), user(TextBlock("and this"), wide))
    assert needs_fitting(before)
    after = fit_images(before)
    sent = [b for m in after.messages for b in m.content if isinstance(b, ImageBlock)]
    assert len(sent) == 21
    assert {image_size(image) for image in sent} == {(2_000, 80)}
    assert fit_images(before) == after


def test_an_image_inside_a_tool_result_is_fitted_where_it_is() -> None:
    shot = encoded(gradient(9_000, 10))
    result = ToolResultBlock("t1", (TextBlock("screenshot"), shot))
    after = fit_images(request(user(TextBlock("look")), assistant(), user(result)))
    (fitted_result,) = after.messages[-1].content
    assert isinstance(fitted_result, ToolResultBlock)
    text, image = fitted_result.content
    assert text == TextBlock("screenshot")
    assert isinstance(image, ImageBlock)
    assert image_size(image) == (8_000, 9)


def test_the_last_user_message_s_unfit_image_is_a_400_naming_it() -> None:
    ok = encoded(gradient(10, 10))
    with pytest.raises(ApiError) as caught:
        fit_images(request(user(TextBlock("two"), ok, bomb(50_000)), assistant("prefill")))
    assert caught.value.status == 400
    assert caught.value.code == "invalid_image"
    assert caught.value.message.startswith("image 2 of the request has 50000x50000 pixels")
    assert f"at most {MAX_IMAGE_BASE64:,} bytes of base64 and 8,000 pixels a side" in (
        caught.value.message
    )


def test_an_earlier_message_s_unfit_image_becomes_text() -> None:
    """The refused image is still in the history the client sends: it must not fail again."""
    refused = bomb(50_000)
    after = fit_images(request(user(TextBlock("see"), refused), user(TextBlock("anything?"))))
    assert after.messages[0].content == (
        TextBlock("see"),
        TextBlock(
            "[image (image/png) omitted: it has 50000x50000 pixels, more than the "
            f"{MAX_DECODED_PIXELS:,} kirod decodes]"
        ),
    )
