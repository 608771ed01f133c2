"""Text-free image variants: the meme with its text painted out (MemeCap section 3.2).

MemeCap's annotators write the *literal image caption* on the meme with its text removed, so
that the caption describes the picture and is not biased by the text; the paper used LaMa. We
have no model hub, so the removal is OpenCV's classical inpainting (``cv2.inpaint``: Telea's
fast marching method, or Navier-Stokes) over a mask made from the OCR polygons of
:mod:`lib.ocr`. It fills thin caption strokes well and smears across large text blocks; for an
annotator the point is that the words are gone, not that the fill is photographic.

Decisions
    * Regions are :class:`~lib.ocr.OcrResult` / :class:`~lib.ocr.OcrLine` objects (their
      polygons), polygons (3 or more ``(x, y)`` points in pixels of the upright image), or
      flat 4-number boxes ``[x1, y1, x2, y2]`` in the project's normalized convention
      (integers in [0, 1000]). A pixel rectangle is passed as a 4-point polygon: a flat
      box is never guessed to be pixels.
    * The mask is the filled polygons, each dilated (an elliptical kernel) by ``dilate_px``
      or, by default, by 12% of its text height (at least 4 px): the detector's box cuts
      the anti-aliased glyph edges and part of a meme's black outline, and both grow with
      the font size (see :func:`text_mask`).
      Inpainting then fills only mask pixels: **every pixel outside the mask is unchanged**
      (of the decoded RGB image; alpha was composited over white by :func:`lib.ocr.load_rgb`).
    * Output is always an RGB image of the input's upright size. No regions: a copy of the
      image.
    * ``radius`` is the inpainting neighbourhood (OpenCV's ``inpaintRadius``); cost grows with
      mask area x radius^2: ~35 ms of one core for a one-line top and bottom caption on a
      500x500 meme (decode included, ``bench/ocr.py``), ~100 ms when 16% of it is masked.
    * Text that OCR did not detect (small or curved print, logos) stays: the variant is only
      as text-free as the OCR result it is given.
"""

from __future__ import annotations

import io
from collections.abc import Iterable, Sequence
from typing import Literal

import cv2
import numpy as np
from PIL import Image

from lib.ocr import (
    BOX_SCALE,
    DEFAULT_MAX_PIXELS,
    ImageSource,
    OcrLine,
    OcrResult,
    load_rgb,
    ocr_read,
)

__all__ = [
    "AUTO_DILATE_FRACTION",
    "AUTO_DILATE_MIN_PX",
    "DEFAULT_RADIUS",
    "Region",
    "encode_image",
    "text_free_from_ocr",
    "text_free_variant",
    "text_mask",
]

# Automatic dilation: 12% of the text height, at least 4 px. Measured on outlined captions
# (stroke = 1/12 of the font size, like Impact memes) drawn on skimage photos: a fixed 4 px
# covers every drawn pixel at 500 px / 32 px-high lines but leaves 0.02-0.2% uncovered at
# 1000-1600 px / 64-106 px lines, where 8 px is needed.
AUTO_DILATE_FRACTION = 0.12
AUTO_DILATE_MIN_PX = 4
DEFAULT_RADIUS = 5
_METHODS = {"telea": cv2.INPAINT_TELEA, "ns": cv2.INPAINT_NS}

Region = OcrLine | Sequence[Sequence[float]] | Sequence[float]


def _polygons(regions: OcrResult | Iterable[Region], width: int, height: int) -> list[np.ndarray]:
    if isinstance(regions, OcrResult):
        regions = regions.lines
    polygons = []
    for region in regions:
        if isinstance(region, OcrLine):
            pts = np.asarray(region.polygon, dtype=np.float64)
        else:
            arr = np.asarray(region, dtype=np.float64)
            if arr.ndim == 1 and arr.shape == (4,):
                x1, y1, x2, y2 = arr
                if not (0 <= x1 < x2 <= BOX_SCALE and 0 <= y1 < y2 <= BOX_SCALE):
                    raise ValueError(
                        f"a box is [x1, y1, x2, y2] in [0, {BOX_SCALE}] with x1 < x2, y1 < y2, got {list(region)}"
                    )  # type: ignore[arg-type]
                sx, sy = width / BOX_SCALE, height / BOX_SCALE
                pts = np.array([[x1 * sx, y1 * sy], [x2 * sx, y1 * sy], [x2 * sx, y2 * sy], [x1 * sx, y2 * sy]])
            elif arr.ndim == 2 and arr.shape[1] == 2 and arr.shape[0] >= 3:
                pts = arr
            else:
                raise ValueError(
                    f"a region is an OcrLine, a polygon of >= 3 (x, y) points or a normalized box, got shape {arr.shape}"
                )
        if not np.isfinite(pts).all():
            raise ValueError("region coordinates must be finite")
        polygons.append(np.rint(pts).astype(np.int32).reshape(-1, 1, 2))
    return polygons


def _dilation(polygon: np.ndarray, dilate_px: int | None) -> int:
    if dilate_px is not None:
        return dilate_px
    # The text height is the short side of the region's minimum-area rectangle (a rotated
    # line's bounding box would overstate it).
    (_, _), (w, h), _ = cv2.minAreaRect(polygon.astype(np.float32))
    return max(AUTO_DILATE_MIN_PX, round(AUTO_DILATE_FRACTION * min(w, h)))


def text_mask(
    size: tuple[int, int], regions: OcrResult | Iterable[Region], *, dilate_px: int | None = None
) -> np.ndarray:
    """uint8 mask (255 = to inpaint) of shape (height, width) for ``regions`` on a ``size`` image.

    Each region is filled and dilated by ``dilate_px`` pixels (an ellipse), or, when it is
    ``None``, by :data:`AUTO_DILATE_FRACTION` of that region's text height (at least
    :data:`AUTO_DILATE_MIN_PX`). Each region is dilated in its own window, so a region that
    reaches past the border still dilates the pixels inside the image as it would if the
    image were larger.
    """
    width, height = size
    if dilate_px is not None and (int(dilate_px) != dilate_px or dilate_px < 0):
        raise ValueError(f"dilate_px must be None or a non-negative integer, got {dilate_px!r}")
    mask = np.zeros((height, width), dtype=np.uint8)
    for polygon in _polygons(regions, width, height):
        d = int(_dilation(polygon, dilate_px))
        x, y, w, h = cv2.boundingRect(polygon)
        x0, y0, x1, y1 = x - d, y - d, x + w + d, y + h + d  # window in image coordinates
        cx0, cy0, cx1, cy1 = max(x0, 0), max(y0, 0), min(x1, width), min(y1, height)
        if cx1 <= cx0 or cy1 <= cy0:
            continue  # entirely outside the image
        window = np.zeros((y1 - y0, x1 - x0), dtype=np.uint8)
        cv2.fillPoly(window, [polygon - np.array([x0, y0], dtype=np.int32)], 255)
        if d > 0:
            window = cv2.dilate(window, cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * d + 1, 2 * d + 1)))
        mask[cy0:cy1, cx0:cx1] |= window[cy0 - y0 : cy1 - y0, cx0 - x0 : cx1 - x0]
    return mask


def text_free_variant(
    image: ImageSource,
    regions: OcrResult | Iterable[Region],
    *,
    dilate_px: int | None = None,
    method: Literal["telea", "ns"] = "telea",
    radius: int = DEFAULT_RADIUS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> Image.Image:
    """``image`` with ``regions`` inpainted away, as an RGB image of the same size.

    ``image`` is anything :func:`lib.ocr.load_rgb` reads (the same EXIF/alpha/mode decisions,
    so OCR coordinates and the inpainted pixels refer to the same upright image). Raises
    ``ValueError`` for an unknown ``method`` or a malformed region, :class:`lib.ocr.OcrError`
    for an unreadable image.
    """
    if method not in _METHODS:
        raise ValueError(f"method must be one of {sorted(_METHODS)}, got {method!r}")
    if radius < 1:
        raise ValueError("radius must be >= 1")
    rgb = load_rgb(image, max_pixels=max_pixels)
    mask = text_mask(rgb.size, regions, dilate_px=dilate_px)
    if not mask.any():
        return rgb.copy()
    # Inpainting is per channel, so RGB order goes in and comes out unchanged.
    filled = cv2.inpaint(np.asarray(rgb), mask, float(radius), _METHODS[method])
    return Image.fromarray(filled, "RGB")


def text_free_from_ocr(
    source: ImageSource,
    *,
    dilate_px: int | None = None,
    method: Literal["telea", "ns"] = "telea",
    radius: int = DEFAULT_RADIUS,
    max_pixels: int = DEFAULT_MAX_PIXELS,
) -> tuple[Image.Image, OcrResult]:
    """Decode once, OCR, inpaint every detected line: ``(text-free RGB image, OCR result)``."""
    rgb = load_rgb(source, max_pixels=max_pixels)
    result = ocr_read(rgb, max_pixels=max_pixels)
    variant = text_free_variant(rgb, result, dilate_px=dilate_px, method=method, radius=radius, max_pixels=max_pixels)
    return variant, result


def encode_image(image: Image.Image, format: Literal["PNG", "JPEG"] = "PNG", *, quality: int = 90) -> bytes:
    """PNG (lossless, default) or JPEG bytes of an RGB/L image, without metadata.

    No EXIF is written, so the upright pixels display upright. JPEG ``quality`` is 1-95
    (Pillow's useful range); other modes are converted to RGB first.
    """
    fmt = format.upper()
    if fmt not in ("PNG", "JPEG"):
        raise ValueError(f"format must be PNG or JPEG, got {format!r}")
    if image.mode not in ("RGB", "L"):
        image = image.convert("RGB")
    buf = io.BytesIO()
    if fmt == "PNG":
        image.save(buf, format="PNG")
    else:
        if not 1 <= quality <= 95:
            raise ValueError("JPEG quality must be in 1..95")
        image.save(buf, format="JPEG", quality=quality)
    return buf.getvalue()
