"""lib.textfree: the mask, the inpainting contract (only masked pixels change, size kept, RGB
out) and the end result that matters for MemeCap annotators: OCR no longer finds the caption."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from lib.ocr import OcrError, OcrLine, OcrResult, load_rgb, ocr_read
from lib.tests.test_ocr import (
    LATIN_FONT,
    Meme,
    gradient_noise,
    make_meme,
    png_bytes,
    token_recall,
    tokens,
)
from lib.textfree import (
    AUTO_DILATE_MIN_PX,
    encode_image,
    text_free_from_ocr,
    text_free_variant,
    text_mask,
)

needs_latin_font = pytest.mark.skipif(LATIN_FONT is None, reason="no TrueType font (apt-get install fonts-dejavu-core)")


def drawn_pixels(meme: Meme) -> np.ndarray:
    """Boolean (h, w): pixels the caption drawing changed (glyphs, outline, anti-aliasing)."""
    diff = np.abs(np.asarray(meme.image, dtype=np.int16) - np.asarray(meme.background, dtype=np.int16))
    return diff.max(axis=2) > 0


@pytest.fixture(scope="module")
def memes() -> dict[str, tuple[Meme, OcrResult]]:
    if LATIN_FONT is None:
        pytest.skip("no TrueType font")
    out = {}
    for name in ("astronaut", "rocket", "gradient"):
        meme = make_meme(name, "WHEN THE CODE WORKS", "ON THE FIRST TRY")
        out[name] = (meme, ocr_read(meme.image))
    return out


# --------------------------------------------------------------------------------------------
# End to end
# --------------------------------------------------------------------------------------------


@needs_latin_font
@pytest.mark.parametrize("name", ["astronaut", "rocket", "gradient"])
def test_variant_has_no_caption_left(name: str, memes: dict[str, tuple[Meme, OcrResult]]) -> None:
    meme, result = memes[name]
    assert token_recall(meme.words, result.text) >= 0.8  # the precondition: OCR saw the caption
    variant = text_free_variant(meme.image, result)
    after = ocr_read(variant)
    # (Almost) no text: no caption word comes back, and at most a stray character or two
    # from inpainting texture (Telea's smear can look like "1" or "0" to the recognizer).
    assert not set(tokens(after.text)) & {w for w in meme.words if len(w) >= 2}, after.text
    assert sum(c.isalnum() for c in after.text) <= 2, after.text


@needs_latin_font
@pytest.mark.parametrize("method", ["telea", "ns"])
def test_only_masked_pixels_change(method: str, memes: dict[str, tuple[Meme, OcrResult]]) -> None:
    meme, result = memes["astronaut"]
    variant = text_free_variant(meme.image, result, method=method)
    mask = text_mask(meme.image.size, result) > 0
    before = np.asarray(meme.image)
    after = np.asarray(variant)
    assert variant.mode == "RGB" and variant.size == meme.image.size
    assert np.array_equal(after[~mask], before[~mask])
    # Inside the mask the caption is gone: the drawn pixels now look like the background
    # much more than like the caption (white glyphs, black outline).
    drawn = drawn_pixels(meme)
    background = np.asarray(meme.background).astype(np.int16)
    err_before = np.abs(before.astype(np.int16) - background)[drawn].mean()
    err_after = np.abs(after.astype(np.int16) - background)[drawn].mean()
    assert err_after < 0.5 * err_before, (err_before, err_after)


@needs_latin_font
@pytest.mark.parametrize("size,font_size", [((500, 500), None), ((1000, 1000), 72)])
def test_default_mask_covers_every_drawn_caption_pixel(size: tuple[int, int], font_size: int | None) -> None:
    meme = make_meme("chelsea", size=size, font_size=font_size)
    result = ocr_read(meme.image)
    drawn = drawn_pixels(meme)
    covered = (text_mask(meme.image.size, result) > 0)[drawn].mean()
    assert covered >= 0.999, covered
    # Without dilation the detector's polygons miss the outline's outer edge.
    assert (text_mask(meme.image.size, result, dilate_px=0) > 0)[drawn].mean() < 0.995


@needs_latin_font
def test_text_free_from_ocr_returns_variant_and_result(
    tmp_path: Path, memes: dict[str, tuple[Meme, OcrResult]]
) -> None:
    meme, expected = memes["gradient"]
    path = tmp_path / "meme.png"
    path.write_bytes(png_bytes(meme.image))
    variant, result = text_free_from_ocr(path)
    assert result.as_dict() == expected.as_dict()
    assert np.array_equal(np.asarray(variant), np.asarray(text_free_variant(meme.image, expected)))


def test_mode_and_size_are_kept_as_rgb() -> None:
    gray = Image.fromarray(gradient_noise((120, 80))).convert("L")
    region = [[(10, 10), (60, 10), (60, 30), (10, 30)]]
    out = text_free_variant(gray, region)
    assert out.mode == "RGB" and out.size == (120, 80)
    rgba = Image.fromarray(gradient_noise((90, 70))).convert("RGBA")
    rgba.putalpha(128)
    out = text_free_variant(rgba, region)
    assert out.mode == "RGB" and out.size == (90, 70)
    # Outside the mask: exactly the image that OCR saw (alpha composited over white).
    mask = text_mask((90, 70), region) > 0
    assert np.array_equal(np.asarray(out)[~mask], np.asarray(load_rgb(rgba))[~mask])


def test_no_regions_gives_an_identical_copy() -> None:
    img = Image.fromarray(gradient_noise((64, 48)))
    out = text_free_variant(img, [])
    assert out is not img and np.array_equal(np.asarray(out), np.asarray(img))
    empty = OcrResult(lines=(), text="", width=64, height=48)
    assert np.array_equal(np.asarray(text_free_variant(img, empty)), np.asarray(img))


def test_bad_image_raises_ocr_error() -> None:
    with pytest.raises(OcrError):
        text_free_variant(b"", [])
    with pytest.raises(OcrError):
        text_free_from_ocr(b"\x89PNG\r\n\x1a\n broken")


# --------------------------------------------------------------------------------------------
# The mask
# --------------------------------------------------------------------------------------------


def test_mask_from_polygon_box_and_line() -> None:
    size = (200, 100)
    poly = text_mask(size, [[(20, 10), (80, 10), (80, 40), (20, 40)]], dilate_px=0)
    assert poly.shape == (100, 200) and poly.dtype == np.uint8
    ys, xs = np.nonzero(poly)
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (20, 80, 10, 40)
    # A flat box is the project's normalized [0, 1000] convention: 100..400 of 200 px = 20..80.
    box = text_mask(size, [[100, 100, 400, 400]], dilate_px=0)
    assert np.array_equal(box, poly)
    line = OcrLine(text="x", score=1.0, polygon=((20, 10), (80, 10), (80, 40), (20, 40)), box=(100, 100, 400, 400))
    assert np.array_equal(text_mask(size, [line], dilate_px=0), poly)
    assert np.array_equal(text_mask(size, OcrResult(lines=(line,), text="x", width=200, height=100), dilate_px=0), poly)


def test_dilation_grows_the_mask_and_the_default_scales_with_text_height() -> None:
    size = (400, 400)
    small = [[(100, 100), (300, 100), (300, 120), (100, 120)]]  # 20 px high
    big = [[(50, 150), (350, 150), (350, 250), (50, 250)]]  # 100 px high
    ys, xs = np.nonzero(text_mask(size, small, dilate_px=5))
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (95, 305, 95, 125)
    ys, _ = np.nonzero(text_mask(size, small))  # 12% of 20 px is 2: the 4 px floor applies
    assert (ys.min(), ys.max()) == (100 - AUTO_DILATE_MIN_PX, 120 + AUTO_DILATE_MIN_PX)
    ys, _ = np.nonzero(text_mask(size, big))  # 12% of 100 px = 12
    assert (ys.min(), ys.max()) == (138, 262)


def test_regions_at_or_past_the_border() -> None:
    size = (100, 100)
    # Reaching past the right edge: dilation still covers the pixels inside up to the edge.
    mask = text_mask(size, [[(90, 40), (130, 40), (130, 60), (90, 60)]], dilate_px=3)
    ys, xs = np.nonzero(mask)
    assert (xs.min(), xs.max(), ys.min(), ys.max()) == (87, 99, 37, 63)
    # Entirely outside: nothing, no error.
    assert not text_mask(size, [[(200, 200), (300, 200), (300, 250)]], dilate_px=3).any()


@pytest.mark.parametrize(
    "region",
    [
        [10, 20, 5, 30],  # x2 < x1
        [0, 0, 1001, 10],  # beyond the normalized scale
        [(1, 2), (3, 4)],  # two points are no polygon
        [1, 2, 3],
        [(0, 0), (float("nan"), 1), (2, 2)],
    ],
)
def test_malformed_regions_are_refused(region: list) -> None:
    with pytest.raises(ValueError):
        text_mask((100, 100), [region])


def test_bad_arguments_are_refused() -> None:
    img = Image.new("RGB", (10, 10))
    with pytest.raises(ValueError):
        text_free_variant(img, [], method="lama")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        text_free_variant(img, [], radius=0)
    with pytest.raises(ValueError):
        text_mask((10, 10), [], dilate_px=-1)


# --------------------------------------------------------------------------------------------
# Encoding
# --------------------------------------------------------------------------------------------


def test_encode_png_is_lossless_and_jpeg_decodes() -> None:
    img = Image.fromarray(gradient_noise((80, 60)))
    png = encode_image(img)
    assert png.startswith(b"\x89PNG")
    assert np.array_equal(np.asarray(Image.open(io.BytesIO(png))), np.asarray(img))
    jpeg = encode_image(img, "JPEG", quality=85)
    decoded = Image.open(io.BytesIO(jpeg))
    assert decoded.format == "JPEG" and decoded.size == (80, 60) and decoded.mode == "RGB"
    assert not decoded.getexif()  # no orientation tag can rotate the upright pixels
    assert np.abs(np.asarray(decoded, dtype=np.int16) - np.asarray(img, dtype=np.int16)).mean() < 8
    assert Image.open(io.BytesIO(encode_image(img.convert("RGBA"), "PNG"))).mode == "RGB"
    with pytest.raises(ValueError):
        encode_image(img, "GIF")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        encode_image(img, "JPEG", quality=0)
