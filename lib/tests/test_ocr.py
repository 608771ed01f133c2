"""lib.ocr on synthetic memes: photo backgrounds (skimage's bundled images and a noisy gradient)
with white, black-outlined TrueType captions at the top and bottom, like a meme.

The ground truth is what we drew: the words and their pixel bounding boxes (Pillow's
``textbbox``, outline included). Real OCR runs on every test (no mocks): the PP-OCRv4 models
ship inside rapidocr-onnxruntime.
"""

from __future__ import annotations

import io
import os
import re
import socket
import struct
import subprocess
import sys
import threading
import zlib
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageDraw, ImageFont
from skimage import data as skdata

from lib import ocr
from lib.ocr import OcrError, OcrResult, load_rgb, normalized_box, ocr_read

FONT_DIRS = ["/usr/share/fonts", "/usr/local/share/fonts"]
LATIN_FONTS = ["DejaVuSans-Bold.ttf", "LiberationSans-Bold.ttf", "DejaVuSans.ttf"]
# WenQuanYi Micro Hei is Debian's fonts-wqy-microhei (1.6 MB); Noto CJK is fonts-noto-cjk.
CJK_FONTS = [
    "wqy-microhei.ttc",
    "wqy-zenhei.ttc",
    "NotoSansCJK-Regular.ttc",
    "NotoSansCJK-Bold.ttc",
    "DroidSansFallbackFull.ttf",
]


def find_font(names: Sequence[str]) -> str | None:
    """First font file named in ``names`` (in that order) under the system font directories."""
    found: dict[str, str] = {}
    for root in FONT_DIRS:
        for dirpath, _, files in os.walk(root):
            for f in files:
                found.setdefault(f, os.path.join(dirpath, f))
    for name in names:
        if name in found:
            return found[name]
    return None


LATIN_FONT = find_font(LATIN_FONTS)
CJK_FONT = find_font(CJK_FONTS)
needs_latin_font = pytest.mark.skipif(
    LATIN_FONT is None, reason=f"no TrueType font among {LATIN_FONTS} (apt-get install fonts-dejavu-core)"
)


def gradient_noise(size: tuple[int, int] = (500, 500), seed: int = 0) -> np.ndarray:
    """A photo-like background that no OCR model has seen: colour gradients plus noise."""
    w, h = size
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    base = np.stack(
        [120 + 80 * np.sin(xx / 90), 100 + 70 * np.cos(yy / 70), 140 + 60 * np.sin((xx + yy) / 120)], axis=2
    )
    return np.clip(base + rng.normal(0, 10, base.shape), 0, 255).astype(np.uint8)


BACKGROUNDS = {
    "astronaut": skdata.astronaut,
    "chelsea": skdata.chelsea,
    "rocket": skdata.rocket,
    "gradient": gradient_noise,
}


@dataclass
class Meme:
    image: Image.Image  # with captions
    background: Image.Image  # the same pixels without them
    captions: list[tuple[str, tuple[int, int, int, int]]]  # text, drawn pixel bbox (outline included)

    @property
    def words(self) -> list[str]:
        return [w for text, _ in self.captions for w in tokens(text)]


def draw_caption(
    img: Image.Image,
    text: str,
    *,
    center_x: int,
    top: int,
    font_path: str,
    font_size: int,
    max_width: int,
    from_bottom: bool = False,
) -> tuple[int, int, int, int]:
    """White text with a black outline (stroke = 1/12 of the size, as in Impact memes), wrapped
    onto several lines like a meme generator does when it is wider than ``max_width`` (shrunk
    only if one word does not fit). ``top`` is the first line's top, or with ``from_bottom``
    the last line's bottom. Returns the drawn bbox in pixels (outline included)."""
    draw = ImageDraw.Draw(img)
    size = font_size
    while True:
        font = ImageFont.truetype(font_path, size)
        stroke = max(2, size // 12)
        lines: list[str] = []
        for word in text.split():
            trial = f"{lines[-1]} {word}" if lines else word
            if lines and draw.textlength(trial, font=font) + 2 * stroke <= max_width:
                lines[-1] = trial
            else:
                lines.append(word)
        if max(draw.textlength(line, font=font) for line in lines) + 2 * stroke <= max_width or size <= 10:
            break
        size -= 2
    step = round(size * 1.15)
    first_top = top - step * (len(lines) - 1) - size if from_bottom else top
    boxes = []
    for k, line in enumerate(lines):
        y = first_top + k * step
        boxes.append(draw.textbbox((center_x, y), line, font=font, anchor="mt", stroke_width=stroke))
        draw.text((center_x, y), line, font=font, anchor="mt", fill="white", stroke_width=stroke, stroke_fill="black")
    return union_box(boxes)  # type: ignore[return-value]


def make_meme(
    background: str | np.ndarray = "astronaut",
    top: str = "WHEN THE CODE WORKS",
    bottom: str = "ON THE FIRST TRY",
    *,
    size: tuple[int, int] = (500, 500),
    font_path: str | None = None,
    font_size: int | None = None,
) -> Meme:
    font_path = font_path or LATIN_FONT
    assert font_path is not None
    w, h = size
    pixels = BACKGROUNDS[background]() if isinstance(background, str) else background
    base = Image.fromarray(pixels).convert("RGB").resize(size, Image.Resampling.BILINEAR)
    img = base.copy()
    fs = font_size or max(12, round(min(w, h) * 0.072))
    captions = []
    margin = max(8, h // 25)
    if top:
        captions.append(
            (
                top,
                draw_caption(
                    img, top, center_x=w // 2, top=margin, font_path=font_path, font_size=fs, max_width=w - 2 * margin
                ),
            )
        )
    if bottom:
        captions.append(
            (
                bottom,
                draw_caption(
                    img,
                    bottom,
                    center_x=w // 2,
                    top=h - margin - fs // 4,
                    font_path=font_path,
                    font_size=fs,
                    max_width=w - 2 * margin,
                    from_bottom=True,
                ),
            )
        )
    return Meme(image=img, background=base, captions=captions)


def tokens(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def token_recall(expected: Sequence[str], got: str) -> float:
    want = Counter(expected)
    have = Counter(tokens(got))
    return sum((want & have).values()) / max(sum(want.values()), 1)


def iou(a: Sequence[float], b: Sequence[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


def iou_parts(a: Sequence[float], b: Sequence[float]) -> float:
    """Intersection area of two boxes."""
    return max(0.0, min(a[2], b[2]) - max(a[0], b[0])) * max(0.0, min(a[3], b[3]) - max(a[1], b[1]))


def to_norm(box: Sequence[float], width: int, height: int) -> tuple[float, float, float, float]:
    return (box[0] * 1000 / width, box[1] * 1000 / height, box[2] * 1000 / width, box[3] * 1000 / height)


def union_box(boxes: Sequence[Sequence[float]]) -> tuple[float, float, float, float]:
    return (min(b[0] for b in boxes), min(b[1] for b in boxes), max(b[2] for b in boxes), max(b[3] for b in boxes))  # type: ignore[return-value]


def png_bytes(img: Image.Image, **params: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="PNG", **params)
    return buf.getvalue()


def jpeg_bytes(img: Image.Image, **params: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=92, **params)
    return buf.getvalue()


CAPTIONS = [
    ("WHEN THE CODE WORKS", "ON THE FIRST TRY"),
    ("Me trying to sleep", "my brain at 3 am"),
    ("NOBODY:", "LITERALLY EVERYONE ON MONDAY"),
]


@pytest.fixture(scope="module")
def astronaut_meme() -> Meme:
    if LATIN_FONT is None:
        pytest.skip("no TrueType font")
    return make_meme("astronaut")


@pytest.fixture(scope="module")
def astronaut_result(astronaut_meme: Meme) -> OcrResult:
    return ocr_read(astronaut_meme.image)


# --------------------------------------------------------------------------------------------
# Reading the caption
# --------------------------------------------------------------------------------------------


@needs_latin_font
@pytest.mark.parametrize("background", sorted(BACKGROUNDS))
@pytest.mark.parametrize("top,bottom", CAPTIONS)
def test_reads_caption_words(background: str, top: str, bottom: str) -> None:
    meme = make_meme(background, top, bottom)
    result = ocr_read(meme.image)
    assert token_recall(meme.words, result.text) >= 0.8, (meme.words, result.text)
    # No invented text: the image holds only these words (the backgrounds have no text).
    assert len(tokens(result.text)) <= len(meme.words) + 1, result.text


@needs_latin_font
def test_result_shape_and_box_convention(astronaut_meme: Meme, astronaut_result: OcrResult) -> None:
    result = astronaut_result
    assert (result.width, result.height) == astronaut_meme.image.size
    assert result.scale == 1.0
    assert len(result.lines) >= 2
    for line in result.lines:
        x1, y1, x2, y2 = line.box
        assert all(isinstance(v, int) for v in line.box)
        assert 0 <= x1 < x2 <= 1000 and 0 <= y1 < y2 <= 1000
        assert 0.5 <= line.score <= 1.0
        assert len(line.polygon) == 4
        for x, y in line.polygon:
            assert isinstance(x, int) and isinstance(y, int)
            assert 0 <= x <= result.width and 0 <= y <= result.height
        # The normalized box covers the polygon (rounded outward).
        xs = [p[0] * 1000 / result.width for p in line.polygon]
        ys = [p[1] * 1000 / result.height for p in line.polygon]
        assert x1 <= min(xs) and max(xs) <= x2 and y1 <= min(ys) and max(ys) <= y2
    as_dict = result.as_dict()
    assert as_dict["text"] == result.text and len(as_dict["lines"]) == len(result.lines)
    assert isinstance(as_dict["lines"][0]["box"], list)


@needs_latin_font
@pytest.mark.parametrize("background", ["astronaut", "gradient"])
def test_boxes_lie_over_the_drawn_text(background: str) -> None:
    meme = make_meme(background)
    result = ocr_read(meme.image)
    w, h = meme.image.size
    for text, drawn in meme.captions:
        truth = to_norm(drawn, w, h)
        # Lines whose centre falls inside this caption's drawn box: the detector may split a
        # caption into several lines; together they must cover it.
        mine = [
            line.box
            for line in result.lines
            if truth[0] <= (line.box[0] + line.box[2]) / 2 <= truth[2]
            and truth[1] <= (line.box[1] + line.box[3]) / 2 <= truth[3]
        ]
        assert mine, f"no line over {text!r}: {result.lines}"
        assert iou(union_box(mine), truth) >= 0.7, (text, union_box(mine), truth)
    # And every line lies over some caption: 95% of its box inside a drawn box grown by 2% of
    # the image (the detector's boxes are unclipped a few pixels beyond the glyphs).
    for line in result.lines:
        area = (line.box[2] - line.box[0]) * (line.box[3] - line.box[1])
        grown = [(b[0] - 20, b[1] - 20, b[2] + 20, b[3] + 20) for b in (to_norm(d, w, h) for _, d in meme.captions)]
        inside = max(iou_parts(line.box, g) for g in grown)
        assert inside >= 0.95 * area, line


@needs_latin_font
def test_reading_order_top_to_bottom_then_left_to_right() -> None:
    img = Image.fromarray(gradient_noise((600, 400), seed=3)).convert("RGB")
    # "RIGHT" is drawn 6 px higher than "LEFT" on the same row: sorting by y alone would put
    # it first. Then a lower row of two words, and a top row drawn last.
    assert LATIN_FONT is not None
    draw_caption(img, "LEFT", center_x=150, top=166, font_path=LATIN_FONT, font_size=40, max_width=250)
    draw_caption(img, "RIGHT", center_x=450, top=160, font_path=LATIN_FONT, font_size=40, max_width=250)
    draw_caption(img, "BOTTOM", center_x=150, top=320, font_path=LATIN_FONT, font_size=40, max_width=250)
    draw_caption(img, "CORNER", center_x=450, top=316, font_path=LATIN_FONT, font_size=40, max_width=250)
    draw_caption(img, "TITLE", center_x=300, top=20, font_path=LATIN_FONT, font_size=40, max_width=250)
    result = ocr_read(img)
    assert result.text.split("\n") == ["TITLE", "LEFT RIGHT", "BOTTOM CORNER"], result.text
    assert [line.text for line in result.lines] == ["TITLE", "LEFT", "RIGHT", "BOTTOM", "CORNER"]


@pytest.mark.skipif(
    CJK_FONT is None, reason=f"no CJK font among {CJK_FONTS} (Debian: apt-get install fonts-wqy-microhei)"
)
def test_chinese_caption() -> None:
    top, bottom = "我们的代码终于运行了", "太好了"
    meme = make_meme("chelsea", top, bottom, font_path=CJK_FONT)
    result = ocr_read(meme.image)
    want = Counter(top + bottom)
    got = Counter(result.text.replace("\n", "").replace(" ", ""))
    assert sum((want & got).values()) / sum(want.values()) >= 0.8, result.text
    rows = result.text.split("\n")
    assert len(rows) == 2 and " " not in result.text, result.text  # no spaces recovered between ideographs
    assert Counter(rows[0]) & Counter(top) and Counter(rows[1]) & Counter(bottom)


def test_image_without_text_gives_an_empty_result() -> None:
    result = ocr_read(Image.fromarray(gradient_noise((300, 200), seed=5)))
    assert result.lines == () and result.text == ""
    assert (result.width, result.height) == (300, 200)
    blank = ocr_read(Image.new("RGB", (64, 64), (200, 30, 30)))
    assert blank.lines == () and blank.text == ""


# --------------------------------------------------------------------------------------------
# Sources, modes, orientation
# --------------------------------------------------------------------------------------------


@needs_latin_font
def test_same_input_same_result_from_every_source(
    tmp_path: Path, astronaut_meme: Meme, astronaut_result: OcrResult
) -> None:
    data = png_bytes(astronaut_meme.image)
    path = tmp_path / "meme.png"
    path.write_bytes(data)
    expected = astronaut_result.as_dict()
    assert ocr_read(astronaut_meme.image).as_dict() == expected  # repeated call
    assert ocr_read(data).as_dict() == expected
    assert ocr_read(bytearray(data)).as_dict() == expected
    assert ocr_read(memoryview(data)).as_dict() == expected
    assert ocr_read(str(path)).as_dict() == expected
    assert ocr_read(path).as_dict() == expected
    with open(path, "rb") as fh:
        assert ocr_read(fh).as_dict() == expected


@needs_latin_font
@pytest.mark.parametrize("mode", ["L", "RGBA", "P", "CMYK", "LA", "I;16", "I", "F"])
def test_other_modes_are_read(mode: str, astronaut_meme: Meme) -> None:
    rgb = astronaut_meme.image
    if mode == "I;16":
        gray = np.asarray(rgb.convert("L")).astype(np.uint16) * 257  # full 16-bit range
        img = Image.fromarray(gray)
        assert img.mode == "I;16"
        img = Image.open(io.BytesIO(png_bytes(img)))  # as a 16-bit PNG decodes
    elif mode == "I":
        img = Image.fromarray(np.asarray(rgb.convert("L")).astype(np.int32) * 257)
    elif mode == "F":
        img = Image.fromarray(np.asarray(rgb.convert("L")).astype(np.float32) / 255.0)
    elif mode == "P":
        img = rgb.quantize(64)
    else:
        img = rgb.convert(mode)
    assert img.mode == mode
    result = ocr_read(img)
    assert token_recall(astronaut_meme.words, result.text) >= 0.8, (mode, result.text)


def test_sixteen_bit_gray_is_scaled_not_clipped() -> None:
    # Pillow's convert("L") clips 16-bit values to 255: this image would come out white.
    values = np.array([[0, 257 * 40, 257 * 128, 65535]], dtype=np.uint16)
    rgb = np.asarray(load_rgb(Image.fromarray(values)))
    assert rgb.shape == (1, 4, 3)
    assert rgb[0, :, 0].tolist() == [0, 40, 128, 255]
    # An "I" image whose values fit in 8 bits is taken as is.
    small = np.asarray(load_rgb(Image.fromarray(np.array([[3, 200]], dtype=np.int32))))
    assert small[0, :, 0].tolist() == [3, 200]
    bilevel = np.asarray(load_rgb(Image.fromarray(np.array([[0, 255]], dtype=np.uint8)).convert("1")))
    assert bilevel[0, :, 0].tolist() == [0, 255]
    floats = np.asarray(load_rgb(Image.fromarray(np.array([[0.0, 0.5, 1.0]], dtype=np.float32))))
    assert floats[0, :, 0].tolist() == [0, 128, 255]


def test_every_pillow_mode_becomes_rgb_with_the_right_colour() -> None:
    white = {
        "L": 255,
        "LA": (255, 255),
        "La": (255, 255),
        "RGBA": (255, 255, 255, 255),
        "RGBa": (255, 255, 255, 255),
        "RGBX": (255, 255, 255, 0),
        "CMYK": (0, 0, 0, 0),
        "YCbCr": (255, 128, 128),
        "HSV": (0, 0, 255),
        "LAB": (255, 128, 128),
        "1": 1,
        "I;16": 65535,
        "I;16B": 65535,
        "I": 65535,
        "F": 1.0,
    }
    for mode, value in white.items():
        rgb = load_rgb(Image.new(mode, (2, 2), value))  # type: ignore[arg-type]
        assert rgb.mode == "RGB" and rgb.size == (2, 2)
        assert all(abs(c - 255) <= 2 for c in rgb.getpixel((0, 0))), (mode, rgb.getpixel((0, 0)))
    # CIELab is a colour space, not three channels to copy: L=0 is black whatever a and b.
    assert max(load_rgb(Image.new("LAB", (1, 1), (0, 128, 128))).getpixel((0, 0))) <= 2


def test_ocr_error_survives_pickling() -> None:
    import pickle

    err = pickle.loads(pickle.dumps(OcrError("truncated", "cannot decode image: truncated")))
    assert isinstance(err, OcrError) and err.code == "truncated" and str(err) == "cannot decode image: truncated"


@needs_latin_font
def test_transparent_background_is_composited_over_white() -> None:
    # Black text on a fully transparent canvas: its RGB channels under alpha 0 are black too,
    # so dropping alpha (or inverting, as rapidocr's own loader may) leaves nothing to read.
    img = Image.new("RGBA", (700, 200), (0, 0, 0, 0))
    assert LATIN_FONT is not None
    ImageDraw.Draw(img).text(
        (350, 70), "BLACK ON CLEAR GLASS", font=ImageFont.truetype(LATIN_FONT, 40), anchor="mt", fill=(0, 0, 0, 255)
    )
    rgb = load_rgb(img)
    assert rgb.mode == "RGB" and rgb.getpixel((5, 5)) == (255, 255, 255)
    result = ocr_read(img)
    assert token_recall(["black", "on", "clear", "glass"], result.text) >= 0.75, result.text
    # Palette image with a transparent index (as GIFs and small PNGs have), same rule.
    pal = Image.new("P", (10, 10), 0)
    pal.putpalette([0, 0, 0, 255, 0, 0])
    pal.putpixel((9, 9), 1)
    decoded = Image.open(io.BytesIO(png_bytes(pal, transparency=0)))
    assert decoded.mode == "P" and decoded.info.get("transparency") == 0
    rgb_pal = load_rgb(decoded)
    assert rgb_pal.getpixel((5, 5)) == (255, 255, 255) and rgb_pal.getpixel((9, 9)) == (255, 0, 0)


@needs_latin_font
def test_exif_orientation_is_applied(astronaut_meme: Meme) -> None:
    # Store the meme rotated on disk with orientation 6 ("rotate 90 CW to display"): OCR must
    # see the upright picture and report the upright size, as the browser shows it.
    stored = astronaut_meme.image.transpose(Image.Transpose.ROTATE_90)
    exif = Image.Exif()
    exif[0x0112] = 6
    data = jpeg_bytes(stored, exif=exif.tobytes())
    result = ocr_read(data)
    assert (result.width, result.height) == astronaut_meme.image.size
    assert token_recall(astronaut_meme.words, result.text) >= 0.8, result.text
    assert result.lines[0].box[1] < 200  # the top caption is at the top


# --------------------------------------------------------------------------------------------
# Bad and bounded input
# --------------------------------------------------------------------------------------------


def test_empty_input_is_refused(tmp_path: Path) -> None:
    with pytest.raises(OcrError) as err:
        ocr_read(b"")
    assert err.value.code == "empty" and "0 bytes" in str(err.value)
    empty = tmp_path / "empty.jpg"
    empty.write_bytes(b"")
    with pytest.raises(OcrError) as err:
        ocr_read(empty)
    assert err.value.code == "empty" and str(empty) in str(err.value)


def test_missing_file_and_garbage_are_refused(tmp_path: Path) -> None:
    with pytest.raises(OcrError) as err:
        ocr_read(tmp_path / "nope.png")
    assert err.value.code == "not_found"
    with pytest.raises(OcrError) as err:
        ocr_read(b"this is not an image, just text pretending" * 10)
    assert err.value.code == "unreadable"
    with pytest.raises(TypeError):
        ocr_read(12345)  # type: ignore[arg-type]


@needs_latin_font
@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_truncated_file_is_refused(fmt: str, astronaut_meme: Meme) -> None:
    data = jpeg_bytes(astronaut_meme.image) if fmt == "JPEG" else png_bytes(astronaut_meme.image)
    with pytest.raises(OcrError) as err:
        ocr_read(data[: len(data) // 2])
    assert err.value.code in ("truncated", "unreadable")
    assert "truncat" in str(err.value).lower() or "decode" in str(err.value).lower()
    assert ocr_read(data).lines  # the whole file is fine


def _png_with_declared_size(width: int, height: int) -> bytes:
    """A valid 1x1 PNG whose IHDR claims width x height (a decompression bomb's header)."""
    data = png_bytes(Image.new("L", (1, 1)))
    ihdr = struct.pack(">II", width, height) + data[24:29]
    chunk = b"IHDR" + ihdr
    return data[:8] + struct.pack(">I", 13) + chunk + struct.pack(">I", zlib.crc32(chunk)) + data[33:]


def test_huge_image_is_refused_before_decoding() -> None:
    bomb = _png_with_declared_size(50_000, 50_000)  # 2.5 G pixels declared in 70 bytes
    with pytest.raises(OcrError) as err:
        ocr_read(bomb)
    assert err.value.code == "too_large"
    just_over = _png_with_declared_size(8000, 5001)  # 40,008,000 > 40,000,000
    assert Image.open(io.BytesIO(just_over)).size == (8000, 5001)  # the header is what we made
    with pytest.raises(OcrError) as err:
        ocr_read(just_over)
    assert err.value.code == "too_large" and "8000x5001" in str(err.value)
    with pytest.raises(OcrError):
        ocr_read(Image.new("RGB", (200, 200)), max_pixels=39_999)


@needs_latin_font
def test_large_image_is_downscaled_and_mapped_back() -> None:
    meme = make_meme("rocket", size=(3000, 1500))
    result = ocr_read(meme.image)
    assert (result.width, result.height) == (3000, 1500)
    assert result.scale == pytest.approx(2000 / 3000, abs=1e-4)
    assert token_recall(meme.words, result.text) >= 0.8, result.text
    for _, drawn in meme.captions:
        truth = to_norm(drawn, 3000, 1500)
        mine = [line.box for line in result.lines if iou(line.box, truth) > 0.1]
        assert mine and iou(union_box(mine), truth) >= 0.7
    assert max(x for line in result.lines for x, _ in line.polygon) > 2000  # original pixels


def test_elongated_and_tiny_images_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    # The detector scales the short side up to 736 px: a 40x4000 strip would reach it as
    # 736x73600 (54 M pixels, minutes of CPU). Record what the detector really receives.
    engine = ocr._get_engine()
    seen: list[tuple[int, ...]] = []
    detect = engine.text_det

    def recording_detector(img: np.ndarray) -> object:
        seen.append(img.shape)
        return detect(img)

    monkeypatch.setattr(engine, "text_det", recording_detector)
    for size in [(40, 4000), (4000, 40), (1, 1)]:
        result = ocr_read(Image.fromarray(gradient_noise(size, seed=1)))
        assert (result.width, result.height) == size
        h, w = seen[-1][:2]
        assert max(h, w) <= 8 * min(h, w) and min(h, w) >= 32 and max(h, w) <= ocr.OCR_MAX_SIDE, (size, seen[-1])
    assert ocr_read(Image.new("RGB", (1, 1), (255, 255, 255))).lines == ()


def test_normalized_box_rounds_outward_and_is_never_degenerate() -> None:
    assert normalized_box([(0, 0), (500, 250)], 500, 500) == (0, 0, 1000, 500)
    assert normalized_box([(10.2, 3.3), (20.7, 9.9)], 100, 100) == (102, 33, 207, 99)
    # 2/3 of the width is 666.7 -> 666 (floor), 1/3 of the height is 333.3 -> 334 (ceil).
    assert normalized_box([(2, 0), (3, 1)], 3, 3) == (666, 0, 1000, 334)
    assert normalized_box([(1, 1), (1, 1)], 5000, 5000) == (0, 0, 1, 1)  # a point: one unit
    assert normalized_box([(5000, 5000), (5000, 5000)], 5000, 5000) == (999, 999, 1000, 1000)
    assert normalized_box([(-5, -5), (600, 700)], 500, 500) == (0, 0, 1000, 1000)  # clamped


# --------------------------------------------------------------------------------------------
# Decoding
# --------------------------------------------------------------------------------------------


def _posteriors(columns: list[tuple[int, float]], n_classes: int, space_at: dict[int, float]) -> np.ndarray:
    """(T, C) matrix: each column's argmax is the given class with the given probability."""
    probs = np.zeros((len(columns), n_classes))
    for t, (cls, p) in enumerate(columns):
        probs[t, cls] = p
        probs[t, 0 if cls else 1] += 1 - p - space_at.get(t, 0.0)
        probs[t, -1] += space_at.get(t, 0.0)
    return probs


def test_ctc_decode_recovers_spaces_from_the_posterior() -> None:
    characters = ["blank", "A", "B", "我", "们", " "]
    space = len(characters) - 1
    # A A _ _ B  (A repeated: collapsed; blank columns between A and B)
    cols = [(1, 0.9), (1, 0.9), (0, 0.9), (0, 0.9), (2, 0.8)]
    text, score = ocr._ctc_decode(_posteriors(cols, len(characters), {3: 0.08}), characters, space)
    assert text == "A B" and score == pytest.approx((0.9 + 0.8) / 2)
    text, _ = ocr._ctc_decode(_posteriors(cols, len(characters), {3: 0.005}), characters, space)
    assert text == "AB"
    # Between ideographs no space is inserted, however likely.
    cjk = [(3, 0.9), (0, 0.5), (4, 0.9)]
    assert ocr._ctc_decode(_posteriors(cjk, len(characters), {1: 0.4}), characters, space)[0] == "我们"
    # All blank: nothing, score 0.
    assert ocr._ctc_decode(_posteriors([(0, 0.99)] * 4, len(characters), {}), characters, space) == ("", 0.0)
    # Emitted spaces are kept once, leading/trailing ones dropped.
    spaced = [(5, 0.9), (1, 0.9), (5, 0.9), (0, 0.9), (5, 0.9), (2, 0.9), (5, 0.9)]
    assert ocr._ctc_decode(_posteriors(spaced, len(characters), {}), characters, space)[0] == "A B"


# --------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------


def _session_threads(engine: object) -> set[int]:
    sessions = [engine.text_det.infer.session, engine.text_cls.infer.session, engine.text_rec.session.session]  # type: ignore[attr-defined]
    return {s.get_session_options().intra_op_num_threads for s in sessions}


def test_engine_uses_one_intra_op_thread_by_default_and_is_configurable() -> None:
    try:
        ocr.configure_engine()
        assert _session_threads(ocr._get_engine()) == {1}
        if (os.cpu_count() or 1) >= 2:
            ocr.configure_engine(intra_op_threads=2)
            assert _session_threads(ocr._get_engine()) == {2}
        with pytest.raises(ValueError):
            ocr.configure_engine(intra_op_threads=0)
        with pytest.raises(ValueError):
            ocr.configure_engine(intra_op_threads=1.5)  # type: ignore[arg-type]
    finally:
        ocr.configure_engine()


def test_models_ship_in_the_package_and_no_socket_is_opened(monkeypatch: pytest.MonkeyPatch) -> None:
    import rapidocr_onnxruntime

    models = Path(rapidocr_onnxruntime.__file__).parent / "models"
    names = sorted(p.name for p in models.glob("*.onnx"))
    assert names == ["ch_PP-OCRv4_det_infer.onnx", "ch_PP-OCRv4_rec_infer.onnx", "ch_ppocr_mobile_v2.0_cls_infer.onnx"]

    def no_network(*args: object, **kwargs: object) -> None:
        raise AssertionError("OCR tried to open a socket")

    ocr.configure_engine()  # the next call creates a fresh engine, with sockets forbidden
    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    result = ocr_read(Image.new("RGB", (100, 100), (255, 255, 255)))
    assert result.lines == ()


def test_onnxruntime_telemetry_is_off(tmp_path: Path) -> None:
    # In a fresh interpreter whose HOME is empty: importing onnxruntime after lib.ocr and
    # running OCR must not create onnxruntime's telemetry queue under ~/.cache/Microsoft.
    env = {k: v for k, v in os.environ.items() if k != "ORT_DISABLE_TELEMETRY"}
    env.update(HOME=str(tmp_path), XDG_CACHE_HOME=str(tmp_path / ".cache"))
    code = "from PIL import Image; from lib.ocr import ocr_read; print(ocr_read(Image.new('RGB', (64, 64))).text == '')"
    root = Path(__file__).resolve().parents[2]
    done = subprocess.run(
        [sys.executable, "-c", code], cwd=root, env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0 and done.stdout.strip() == "True", done.stderr
    assert not (tmp_path / ".cache" / "Microsoft").exists()


@needs_latin_font
def test_concurrent_calls_share_one_engine_and_agree(astronaut_meme: Meme, astronaut_result: OcrResult) -> None:
    other = make_meme("gradient", "THREADS ARE FINE", "ONE ENGINE")
    expected_other = ocr_read(other.image).as_dict()
    ocr.configure_engine()  # drop the engine so that the threads race to create it
    engines: list[int] = []
    results: list[tuple[int, dict]] = []
    errors: list[BaseException] = []
    barrier = threading.Barrier(4)

    def work(k: int) -> None:
        try:
            barrier.wait()
            engines.append(id(ocr._get_engine()))
            img = astronaut_meme.image if k % 2 == 0 else other.image
            results.append((k, ocr_read(img).as_dict()))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    assert len(set(engines)) == 1
    for k, got in results:
        assert got == (astronaut_result.as_dict() if k % 2 == 0 else expected_other)
