"""OCR of meme images: the "text inside the meme" of MemeCap (section 4.2) and the text regions
that :mod:`lib.textfree` removes before annotators write the literal image caption (section 3.2).

Engine
    PP-OCRv4 (Chinese + English, detection + 180-degree classifier + recognition) through
    ``rapidocr-onnxruntime``, whose ONNX models ship inside the wheel
    (``rapidocr_onnxruntime/models/*.onnx``): nothing is downloaded at run time. One engine per
    process, created on first use under a lock. Calls are serialized by a second lock:
    rapidocr is not documented as thread-safe and its detector assigns per-call state to the
    instance (``TextDetector.preprocess_op``); in 1.4.4 that state is the same for every
    image, so no race has been observed, but nothing promises it. Parallelism comes
    from processes (one Celery worker process per core), not threads. onnxruntime uses
    :data:`DEFAULT_INTRA_OP_THREADS` (1) intra-op thread unless :func:`configure_engine` says
    otherwise, so a worker process uses one core. Importing this module sets
    ``ORT_DISABLE_TELEMETRY=1`` unless it is set (onnxruntime's wheels queue usage telemetry).

Dependencies
    rapidocr-onnxruntime declares ``opencv-python`` (the GUI build: libGL, glib, X11/xcb
    libraries). It and ``opencv-python-headless`` install the same ``cv2/`` directory, so the
    one installed last wins and uninstalling either deletes ``cv2`` for both. Install
    rapidocr with ``--no-deps`` next to ``opencv-python-headless`` (this module needs only
    the headless build: no GUI call is made); the headless ``cv2`` links only glibc, libstdc++
    and zlib.

Pipeline (why it is not ``RapidOCR.__call__``)
    We call rapidocr's detector, crop and classifier stages, and run the recognizer's ONNX
    session ourselves so that we can read the CTC posteriors: the Chinese-English model often
    prefers "blank" over "space" between Latin words ("FIRSTTRY"), although the space class
    keeps some posterior in the gap. :func:`_ctc_decode` inserts a space between two non-CJK
    characters when the space posterior somewhere in the columns between them reaches
    :data:`SPACE_POSTERIOR`. On 100 synthetic English memes (7 fonts, 22-42 px, upper and
    lower case) this raised exact word-sequence matches from 73 to 92 and token recall from
    0.75 to 0.97; thresholds from 0.01 to 0.03 score within one caption of each other, lower
    ones start splitting words ("f riday"), higher ones merge more. Each crop is recognized alone (rapidocr pads a batch of six to its widest
    member), so a line's text does not depend on the other lines of the image.

Input decisions (shared with :mod:`lib.textfree` through :func:`load_rgb`)
    * bytes, a path, a binary file or a PIL image; anything else is a ``TypeError``.
    * The header's pixel count above ``max_pixels`` (default 40 M, the import limit
      ``CONCORD_MAX_IMAGE_PIXELS``) is refused *before* decoding (``OcrError("too_large")``).
    * Empty, unidentifiable, truncated or undecodable files raise :class:`OcrError` with a
      code (``empty``, ``not_found``, ``unreadable``, ``truncated``, ``too_large``,
      ``unsupported``) and a message naming the problem. Truncated files are refused, not read
      half grey: Pillow's global ``LOAD_TRUNCATED_IMAGES`` is left as it is (off).
    * EXIF orientation is applied (browsers show images upright, so boxes must refer to the
      upright pixels; imported images are already stored upright, see projects.imaging).
    * Animated GIF/WEBP: the first frame.
    * Modes: everything becomes 8-bit RGB. Alpha (RGBA, LA, PA, palette transparency) is
      composited over white, which is what a page shows. 16-bit and 32-bit grayscale ("I;16*",
      "I") are scaled by 1/257 when their values exceed 255 (Pillow's own ``convert`` clips
      them to 255, turning most 16-bit images white); float ("F") images in [0, 1] are scaled
      by 255, others clipped. CMYK, YCbCr and HSV use Pillow's conversion (embedded ICC
      profiles are ignored), CIELab goes through littlecms (ImageCms) to sRGB.
    * Images whose longer side exceeds :data:`OCR_MAX_SIDE` (2000, rapidocr's own limit) are
      downscaled (INTER_AREA, aspect kept) before OCR; coordinates are mapped back to the
      original pixels and :attr:`OcrResult.scale` records the factor. Images more elongated
      than 8:1 are padded (black, right or bottom) so the detector input stays below ~4.3 MP
      whatever the shape (the detector scales the shorter side up to 736 px).

Output
    Lines in reading order: grouped into rows (a line joins a row when its vertical extent
    overlaps the row's by at least half the smaller height), rows top to bottom, lines in a
    row left to right. :attr:`OcrResult.text` joins a row's lines with a space and rows with a
    newline. Polygons are integer pixel points of the (upright) input image; boxes are the
    project convention, integers in [0, 1000] normalized to width and height, rounded outward
    (floor/ceil) so that the box covers the polygon, with x1 < x2 and y1 < y2 always. Scores
    are rapidocr's (mean posterior of the emitted characters), rounded to 4 decimals, and
    lines under :data:`MIN_SCORE` are dropped. Same input, same package versions and same
    thread count: same result (onnxruntime on one CPU thread is deterministic; every sort
    has a total order).
"""

from __future__ import annotations

import contextlib
import io
import math
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING, Any, Union

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

if TYPE_CHECKING:  # the engine import costs ~0.3 s (cv2, onnxruntime, shapely): done lazily
    from rapidocr_onnxruntime import RapidOCR

# onnxruntime's Linux wheels (1.32 here) carry Microsoft's 1DS telemetry: importing onnxruntime
# writes a device id and a "ProcessInfo" event to ~/.cache/Microsoft/DeveloperTools/.onnxruntime/
# (a queue for https://mobile.events.data.microsoft.com), sessions add events. The variable
# is read when onnxruntime is imported, so it must be set before that; ``setdefault`` leaves
# an operator's explicit choice alone. Deployments should also set it in the environment,
# in case something imports onnxruntime before this module.
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")

__all__ = [
    "DEFAULT_INTRA_OP_THREADS",
    "DEFAULT_MAX_PIXELS",
    "MIN_SCORE",
    "OCR_MAX_SIDE",
    "SPACE_POSTERIOR",
    "ImageSource",
    "OcrError",
    "OcrLine",
    "OcrResult",
    "configure_engine",
    "load_rgb",
    "normalized_box",
    "ocr_read",
]

ImageSource = Union[Image.Image, str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]

DEFAULT_MAX_PIXELS = 40_000_000  # = CONCORD_MAX_IMAGE_PIXELS: nothing larger is ever imported
OCR_MAX_SIDE = 2000  # rapidocr's max_side_len; we resize ourselves to keep the aspect exact
MAX_ASPECT = 8  # rapidocr letterboxes wide images to 8:1; we pad wide and tall ones ourselves
MIN_SCORE = 0.5  # rapidocr's text_score default
SPACE_POSTERIOR = 0.02  # chosen on synthetic memes, see the module docstring
DEFAULT_INTRA_OP_THREADS = 1
BOX_SCALE = 1000
WHITE = (255, 255, 255)


class OcrError(ValueError):
    """An image that cannot be read. ``code`` is stable (for job failure reports), the message
    is for people."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code

    def __reduce__(self) -> tuple[Any, ...]:  # picklable across Celery's result backend
        return (type(self), (self.code, str(self)))


@dataclass(frozen=True)
class OcrLine:
    """One detected text region.

    ``polygon``: 4 integer pixel points (clockwise from top-left) in the input image.
    ``box``: ``(x1, y1, x2, y2)`` integers in [0, 1000], normalized to the image size.
    """

    text: str
    score: float
    polygon: tuple[tuple[int, int], ...]
    box: tuple[int, int, int, int]

    def as_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "score": self.score,
            "polygon": [list(p) for p in self.polygon],
            "box": list(self.box),
        }


@dataclass(frozen=True)
class OcrResult:
    """Lines in reading order, their joined ``text``, and the (upright) image size.

    ``scale`` is the factor the image was resized by before OCR (1.0: full size); coordinates
    are always in the input image's pixels regardless.
    """

    lines: tuple[OcrLine, ...]
    text: str
    width: int
    height: int
    scale: float = 1.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "lines": [line.as_dict() for line in self.lines],
            "text": self.text,
            "width": self.width,
            "height": self.height,
            "scale": self.scale,
        }


# --------------------------------------------------------------------------------------------
# Reading images
# --------------------------------------------------------------------------------------------


def _open(source: ImageSource) -> Image.Image:
    if isinstance(source, (bytes, bytearray, memoryview)):
        if len(source) == 0:
            raise OcrError("empty", "empty image data (0 bytes)")
        return Image.open(io.BytesIO(bytes(source)))
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        try:
            if os.path.getsize(path) == 0:
                raise OcrError("empty", f"empty image file (0 bytes): {path}")
        except FileNotFoundError:
            raise OcrError("not_found", f"no such image file: {path}") from None
        return Image.open(path)
    if hasattr(source, "read"):
        return Image.open(source)  # type: ignore[arg-type]
    raise TypeError(f"expected a PIL image, a path, bytes or a binary file, got {type(source).__name__}")


def _to_rgb(img: Image.Image) -> Image.Image:
    """8-bit RGB, alpha composited over white (see the module docstring for each mode)."""
    mode = img.mode
    if mode == "RGB":
        return img
    if mode in ("I;16", "I;16B", "I;16L", "I;16N", "I", "F"):
        arr = np.asarray(img)
        if mode == "F":
            arr = arr.astype(np.float64)
            arr = np.nan_to_num(arr, nan=0.0, posinf=255.0, neginf=0.0)
            if arr.size and arr.min() >= 0.0 and arr.max() <= 1.0:
                arr = arr * 255.0
        elif arr.size and arr.max() > 255:
            arr = arr.astype(np.float64) / 257.0  # 65535 -> 255; values beyond 16 bits clip
        gray = np.clip(np.rint(arr), 0, 255).astype(np.uint8)
        return Image.fromarray(gray, "L").convert("RGB")
    has_alpha = mode in ("RGBA", "LA", "PA", "La", "RGBa") or "transparency" in img.info
    if has_alpha:
        rgba = img.convert("RGBA") if mode not in ("La",) else img.convert("LA").convert("RGBA")
        background = Image.new("RGBA", rgba.size, WHITE + (255,))
        return Image.alpha_composite(background, rgba).convert("RGB")
    try:
        if mode == "LAB":
            # Pillow's plain convert() would copy L, a, b into R, G, B; CIELab (TIFF) needs a
            # colour transform, which littlecms (bundled with Pillow's wheels) provides.
            from PIL import ImageCms

            transform = ImageCms.buildTransform(
                ImageCms.createProfile("LAB"), ImageCms.createProfile("sRGB"), "LAB", "RGB"
            )
            return ImageCms.applyTransform(img, transform)  # type: ignore[return-value]
        return img.convert("RGB")
    except (ValueError, OSError, ImportError) as exc:  # ImageCms.PyCMSError is an OSError
        raise OcrError("unsupported", f"cannot convert image mode {mode} to RGB ({exc})") from None


def load_rgb(source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> Image.Image:
    """Decode ``source`` into an upright 8-bit RGB image (decisions: module docstring).

    A PIL image passed in is read at its current frame and never modified; a new image is
    returned. Sources opened here are closed before returning.
    """
    if max_pixels < 1:
        raise ValueError("max_pixels must be positive")
    opened_here = not isinstance(source, Image.Image)
    try:
        img = source if isinstance(source, Image.Image) else _open(source)
    except UnidentifiedImageError:
        raise OcrError("unreadable", "not an image, or a format Pillow cannot identify") from None
    except Image.DecompressionBombError as exc:
        raise OcrError("too_large", f"image over Pillow's decompression-bomb limit ({exc})") from None
    except OSError as exc:
        raise OcrError("unreadable", f"cannot open image ({exc})") from None
    try:
        width, height = img.size
        if width < 1 or height < 1:
            raise OcrError("unreadable", f"image has no pixels ({width}x{height})")
        if width * height > max_pixels:
            # Checked on the header, before decoding: a 1 kB PNG can declare 1e10 pixels.
            raise OcrError("too_large", f"image over the pixel limit ({width}x{height} > {max_pixels:,} pixels)")
        if opened_here:
            with contextlib.suppress(EOFError, AttributeError):
                img.seek(0)  # first frame of an animation (no-op otherwise)
        try:
            img.load()
        except Image.DecompressionBombError as exc:
            raise OcrError("too_large", f"image over Pillow's decompression-bomb limit ({exc})") from None
        except (OSError, SyntaxError, ValueError, EOFError) as exc:
            # Pillow says "image file is truncated (N bytes not processed)" or names the
            # decoder error; SyntaxError is what some plugins raise for a broken header.
            code = "truncated" if "truncat" in str(exc).lower() else "unreadable"
            raise OcrError(code, f"cannot decode image: {exc}") from None
        upright = ImageOps.exif_transpose(img)
        return _to_rgb(upright if upright is not None else img)
    finally:
        if opened_here:
            img.close()


# --------------------------------------------------------------------------------------------
# Engine
# --------------------------------------------------------------------------------------------

_engine: RapidOCR | None = None
_engine_lock = threading.Lock()  # guards creation and replacement of _engine
_run_lock = threading.Lock()  # rapidocr is not documented thread-safe (module docstring)
_intra_op_threads = DEFAULT_INTRA_OP_THREADS


def configure_engine(*, intra_op_threads: int = DEFAULT_INTRA_OP_THREADS) -> None:
    """Set onnxruntime's intra-op thread count for this process.

    Drops the current engine, if any; the next call creates one with the new setting. Values
    above ``os.cpu_count()`` are clamped to it: rapidocr would silently ignore them and
    onnxruntime would then use every core.
    """
    global _engine, _intra_op_threads
    threads = int(intra_op_threads)
    if threads != intra_op_threads or threads < 1:
        raise ValueError(f"intra_op_threads must be a positive integer, got {intra_op_threads!r}")
    threads = min(threads, os.cpu_count() or 1)
    with _engine_lock, _run_lock:
        _intra_op_threads = threads
        _engine = None


def _get_engine() -> RapidOCR:
    global _engine
    engine = _engine
    if engine is not None:
        return engine
    with _engine_lock:
        if _engine is None:
            from rapidocr_onnxruntime import RapidOCR

            # inter-op threads only matter for parallel graph execution, which rapidocr does not
            # enable; 1 keeps onnxruntime from creating an idle pool per session.
            _engine = RapidOCR(
                intra_op_num_threads=_intra_op_threads,
                inter_op_num_threads=1,
                print_verbose=False,
            )
        return _engine


# --------------------------------------------------------------------------------------------
# Geometry
# --------------------------------------------------------------------------------------------


def normalized_box(points: Sequence[Sequence[float]], width: int, height: int) -> tuple[int, int, int, int]:
    """Integer ``(x1, y1, x2, y2)`` in [0, 1000] covering ``points`` (pixels) of a width x height image.

    Rounded outward (floor for the low side, ceil for the high side) so the box never cuts the
    region; a region thinner than one unit is widened to one unit, towards the inside of the
    image at its borders, so that x1 < x2 and y1 < y2 always hold (the schema rejects others).
    """
    xs = [float(p[0]) for p in points]
    ys = [float(p[1]) for p in points]
    if not xs:
        raise ValueError("a box needs at least one point")

    def span(lo: float, hi: float, size: int) -> tuple[int, int]:
        a = min(max(math.floor(lo * BOX_SCALE / size), 0), BOX_SCALE)
        b = min(max(math.ceil(hi * BOX_SCALE / size), 0), BOX_SCALE)
        if b <= a:
            if a < BOX_SCALE:
                b = a + 1
            else:
                a = b - 1
        return a, b

    x1, x2 = span(min(xs), max(xs), width)
    y1, y2 = span(min(ys), max(ys), height)
    return x1, y1, x2, y2


def _prepare(rgb: np.ndarray) -> tuple[np.ndarray, float, float]:
    """BGR array for the engine plus the x and y factors from input pixels to engine pixels."""
    import cv2

    height, width = rgb.shape[:2]
    sx = sy = 1.0
    if max(width, height) > OCR_MAX_SIDE:
        factor = OCR_MAX_SIDE / max(width, height)
        new_w = max(1, round(width * factor))
        new_h = max(1, round(height * factor))
        rgb = cv2.resize(rgb, (new_w, new_h), interpolation=cv2.INTER_AREA)
        sx, sy = new_w / width, new_h / height
    h, w = rgb.shape[:2]
    # Pad the short side (bottom or right, so coordinates need no shift) to keep the detector
    # input bounded: it scales the short side up to 736 px, so a 30x2000 strip would become
    # 736x49000. 32 px is the detector's stride; smaller images are padded up to it.
    pad_h = max(32, math.ceil(w / MAX_ASPECT)) - h
    pad_w = max(32, math.ceil(h / MAX_ASPECT)) - w
    bgr = np.ascontiguousarray(rgb[:, :, ::-1])
    if pad_h > 0 or pad_w > 0:
        bgr = cv2.copyMakeBorder(bgr, 0, max(pad_h, 0), 0, max(pad_w, 0), cv2.BORDER_CONSTANT, value=(0, 0, 0))
    return bgr, sx, sy


def _reading_order(items: list[tuple[str, float, np.ndarray]]) -> tuple[list[list[int]], list[int]]:
    """Rows of item indices (top to bottom, each left to right) and the flattened order."""
    boxes = [
        (float(p[:, 0].min()), float(p[:, 1].min()), float(p[:, 0].max()), float(p[:, 1].max())) for _, _, p in items
    ]
    order = sorted(
        range(len(items)), key=lambda i: ((boxes[i][1] + boxes[i][3]) / 2, boxes[i][0], boxes[i][2], items[i][0])
    )
    rows: list[list[int]] = []
    spans: list[tuple[float, float]] = []
    for i in order:
        _, top, _, bottom = boxes[i]
        if rows:
            row_top, row_bottom = spans[-1]
            overlap = min(bottom, row_bottom) - max(top, row_top)
            if overlap >= 0.5 * min(bottom - top, row_bottom - row_top):
                rows[-1].append(i)
                spans[-1] = (min(top, row_top), max(bottom, row_bottom))
                continue
        rows.append([i])
        spans.append((top, bottom))
    for row in rows:
        row.sort(key=lambda i: (boxes[i][0], boxes[i][1], boxes[i][2], items[i][0]))
    return rows, [i for row in rows for i in row]


# --------------------------------------------------------------------------------------------
# Recognition
# --------------------------------------------------------------------------------------------


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return (
        0x3040 <= code <= 0x30FF  # kana
        or 0x3400 <= code <= 0x4DBF  # CJK extension A
        or 0x4E00 <= code <= 0x9FFF  # CJK unified ideographs
        or 0xF900 <= code <= 0xFAFF  # compatibility ideographs
        or 0xAC00 <= code <= 0xD7AF  # hangul syllables
        or 0x3000 <= code <= 0x303F  # CJK punctuation
        or 0xFF00 <= code <= 0xFFEF  # full-width forms
    )


def _ctc_decode(probs: np.ndarray, characters: Sequence[str], space_index: int) -> tuple[str, float]:
    """Greedy CTC decoding of one (T, C) posterior matrix, with spaces recovered from posteriors.

    Like rapidocr: argmax per column, repeats collapsed, blank (index 0) dropped, score = mean
    posterior of the emitted characters (0.0 when none). In addition, between two emitted
    non-space, non-CJK characters a space is inserted when the space posterior of some column
    strictly between them reaches :data:`SPACE_POSTERIOR`.
    """
    idx = probs.argmax(axis=1)
    keep = idx != 0
    keep[1:] &= idx[1:] != idx[:-1]
    columns = np.flatnonzero(keep)
    if len(columns) == 0:
        return "", 0.0
    score = float(probs[columns, idx[columns]].mean())
    out: list[str] = []
    prev_col = -1
    prev_char = ""
    for col in columns:
        char = characters[idx[col]]
        if (
            out
            and char != " "
            and prev_char != " "
            and not _is_cjk(char)
            and not _is_cjk(prev_char)
            and col - prev_col > 1
            and probs[prev_col + 1 : col, space_index].max() >= SPACE_POSTERIOR
        ):
            out.append(" ")
        out.append(char)
        prev_col, prev_char = int(col), char
    return " ".join("".join(out).split()), score


def _recognize(engine: RapidOCR, crops: list[np.ndarray]) -> list[tuple[str, float]]:
    rec = engine.text_rec
    characters = rec.postprocess_op.character
    space_index = characters.index(" ")
    _, img_h, img_w = rec.rec_image_shape
    results = []
    for crop in crops:
        h, w = crop.shape[:2]
        ratio = max(img_w / img_h, w / max(h, 1))
        batch = rec.resize_norm_img(crop, ratio)[np.newaxis].astype(np.float32)
        probs = rec.session(batch)[0][0]
        results.append(_ctc_decode(probs, characters, space_index))
    return results


def ocr_read(source: ImageSource, *, max_pixels: int = DEFAULT_MAX_PIXELS) -> OcrResult:
    """OCR one image: lines with text, score, pixel polygon and normalized box, in reading order.

    Raises :class:`OcrError` for unreadable or oversized input (see the module docstring); an
    image without text gives an empty result, not an error. CPU on one core: ~0.25 s for a
    500x500 meme (``bench/ocr.py``), ~0.5 s at 1000x1000, ~4 s at 2000x2000; peak RSS of a
    process that OCRs 500x500 memes ~400 MB (the detector runs at 736x736 or more).
    """
    rgb_image = load_rgb(source, max_pixels=max_pixels)
    width, height = rgb_image.size
    bgr, sx, sy = _prepare(np.asarray(rgb_image))
    engine = _get_engine()
    with _run_lock:
        boxes, _ = engine.text_det(bgr)
        if boxes is None or len(boxes) == 0:
            recognized: list[tuple[str, float]] = []
            boxes = []
        else:
            crops = engine.get_crop_img_list(bgr, list(boxes))
            if engine.use_cls:
                crops, _, _ = engine.text_cls(crops)
            recognized = _recognize(engine, crops)
    items: list[tuple[str, float, np.ndarray]] = []
    for (text, score), box in zip(recognized, boxes):
        if score < MIN_SCORE or not text:
            continue
        points = np.asarray(box, dtype=np.float64).reshape(-1, 2) / (sx, sy)
        points[:, 0] = np.clip(points[:, 0], 0, width)
        points[:, 1] = np.clip(points[:, 1], 0, height)
        items.append((text, score, points))
    rows, order = _reading_order(items)
    lines = []
    for i in order:
        text, score, points = items[i]
        polygon = tuple((round(x), round(y)) for x, y in points.tolist())
        lines.append(
            OcrLine(text=text, score=round(score, 4), polygon=polygon, box=normalized_box(points, width, height))
        )
    joined = "\n".join(" ".join(items[i][0] for i in row) for row in rows)
    scale = 1.0 if (sx, sy) == (1.0, 1.0) else round(min(sx, sy), 6)
    return OcrResult(lines=tuple(lines), text=joined, width=width, height=height, scale=scale)
