"""Perceptual hash (64-bit pHash, imagehash's algorithm) with a fast JPEG path.

Meme3W (Appendix A.3, "Split integrity") sends perceptual-hash near-duplicate *candidates* to
human review. :func:`phash_reference` is ``imagehash.phash`` (hash_size 8, highfreq_factor 4)
on a fully decoded image: grayscale, LANCZOS resize to 32x32, 2-D DCT-II (``scipy.fftpack``),
the top-left 8x8 block, bit = coefficient > median of those 64 coefficients (the DC term
included), read row-major with the first coefficient as the most significant bit.
:func:`phash_fast` runs the same algorithm but lets libjpeg decode a JPEG at 1/2..1/8 scale
straight to luma (``Image.draft``), which removes most of the decode and resize cost (about 3x
less CPU on 500x500 memes; bench/dedup.py: 3.1x imagehash). The two paths differ by a few bits
on some JPEGs (0-2 on natural photos, up to ~6 on fine textures and synthetic graphics), so
**a whole collection must be hashed with one path** -- never compare a fast hash with a
reference hash. For non-JPEG input (PNG, GIF, WEBP, decoded images) and JPEGs under 96 px the
fast path *is* the reference computation, bit for bit.

Kept instead of calling imagehash because the bench measures 3x less CPU at import, which is
per image of every project. Pure: no Django.
"""

from __future__ import annotations

import functools
import io
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Union

import numpy as np
import scipy.fftpack
from PIL import Image

__all__ = [
    "DRAFT_SIZE",
    "HASH_BITS",
    "ImageSource",
    "hamming_distance",
    "phash_array",
    "phash_fast",
    "phash_hex",
    "phash_int",
    "phash_reference",
]

HASH_BITS = 64
HASH_SIZE = 8  # imagehash.phash default: 8x8 = 64 bits
HIGHFREQ_FACTOR = 4  # imagehash.phash default: the DCT runs on a 32x32 image
IMG_SIZE = HASH_SIZE * HIGHFREQ_FACTOR
# Smallest decoded side the JPEG draft may produce. libjpeg picks the largest scale 1/8..1/2 that
# keeps both sides >= DRAFT_SIZE: 1/8 for a 500x500 meme (63x63 decoded). 32 (the resize target)
# loses up to 10 bits on small textured images; 48 keeps the skimage photos within 2 bits of the
# full decode (brick texture: 6) at the speed of 32 on typical meme sizes. 64 (1/4 scale for
# 500x500) also keeps captioned memes within 2 bits (48: up to 6) for ~20% more CPU.
DRAFT_SIZE = 48
_MASK64 = (1 << 64) - 1
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")

ImageSource = Union[Image.Image, str, "os.PathLike[str]", bytes, bytearray, memoryview, IO[bytes]]


# --------------------------------------------------------------------------------------------
# Perceptual hash
# --------------------------------------------------------------------------------------------


@contextmanager
def _open(source: ImageSource) -> Iterator[Image.Image]:
    """Yield a PIL image for any accepted source; close it afterwards only if we opened it."""
    if isinstance(source, Image.Image):
        yield source
        return
    if isinstance(source, (bytes, bytearray, memoryview)):
        img = Image.open(io.BytesIO(source))
    elif isinstance(source, (str, os.PathLike)) or hasattr(source, "read"):
        img = Image.open(source)
    else:
        raise TypeError(f"expected a PIL image, a path, bytes or a binary file, got {type(source).__name__}")
    try:
        yield img
    finally:
        img.close()


def _phash_bits(pixels: np.ndarray) -> int:
    """imagehash.phash's arithmetic on a 32x32 uint8 array, returned as a 64-bit int.

    Same calls as imagehash (``scipy.fftpack.dct`` on the uint8 array, axis 0 then axis 1) so the
    floating-point results, and therefore ties at the median, are identical. The median of 64
    values is the mean of the 32nd and 33rd smallest, which is what ``np.median`` computes
    (``(a + b) / 2``) at a third of its overhead.
    """
    dct = scipy.fftpack.dct(scipy.fftpack.dct(pixels, axis=0), axis=1)
    low = dct[:HASH_SIZE, :HASH_SIZE]
    half = HASH_SIZE * HASH_SIZE // 2
    part = np.partition(low.ravel(), (half - 1, half))
    med = (part[half - 1] + part[half]) / 2
    return int.from_bytes(np.packbits(low > med).tobytes(), "big")


def phash_fast(source: ImageSource, *, draft_size: int = DRAFT_SIZE) -> int:
    """64-bit pHash (imagehash's algorithm) with reduced-scale JPEG decoding.

    For a JPEG that is not decoded yet and has both sides >= 2 x ``draft_size`` (96 px),
    ``Image.draft("L", (draft_size, draft_size))`` makes libjpeg output luma only, at the
    largest of the scales 1/8, 1/4, 1/2 that keeps both sides >= ``draft_size``: the inverse
    DCT, chroma upsampling, colour conversion and most of the 32x32 LANCZOS resize disappear
    (entropy decoding remains and is then ~80% of the cost). The
    resize covers the box returned by ``draft`` (the original extent in drafted pixels), so
    the sampling grid is the one of the full-size image; without it the hash drifts by several
    bits on sizes that are not multiples of 8 x scale. The resize is LANCZOS with Pillow's
    geometry as one cached matrix product (:func:`_lanczos_resize`): on a 63x63 draft Pillow
    spends more time recomputing its coefficients than filtering.

    The DCT, median and bit order are imagehash's own code path (:func:`_phash_bits`). Every
    other input -- PNG/GIF/WEBP, small or already decoded JPEGs -- goes through exactly
    ``imagehash.phash``'s steps and gets a bit-identical hash. Drafted JPEG hashes are within
    about 2 bits of it on natural photos and up to ~6 bits on fine textures and captioned
    memes (``draft_size=64`` decodes 500x500 memes at 1/4 instead of 1/8 scale: at most 2
    bits on the benchmark memes, ~20% more CPU). Hash a whole collection with ONE function and
    one ``draft_size`` -- record them with the hashes -- and never mix paths.

    A PIL image passed in is used as is: if it is a not-yet-loaded JPEG it is drafted **in
    place** (its size and mode change); pass a path or bytes to avoid that. EXIF orientation
    is not applied (neither does imagehash). Cost on the development VM: ~0.83 ms of CPU for
    a 54 kB 500x500 JPEG read from disk (0.6 ms of it libjpeg's entropy decoding, which no
    scale factor avoids), versus ~3 ms for the reference path.
    """
    with _open(source) as img:
        drafted = None
        if min(img.size) >= 2 * draft_size:  # smaller: libjpeg could not scale, decode fully
            drafted = img.draft("L", (draft_size, draft_size))  # None unless an undecoded JPEG
        if drafted is None:
            small = img.convert("L").resize((IMG_SIZE, IMG_SIZE), Image.Resampling.LANCZOS)
            return _phash_bits(np.asarray(small))
        gray = img if img.mode == "L" else img.convert("L")  # CMYK JPEGs are not drafted to L
        gray.load()
        width, height = gray.size
        pixels = np.frombuffer(gray.tobytes(), dtype=np.uint8).reshape(height, width)
        return _phash_bits(_lanczos_resize(pixels, drafted[1]))


@functools.lru_cache(maxsize=512)
def _lanczos_weights(in_size: int, in0: float, in1: float, out_size: int = IMG_SIZE) -> np.ndarray:
    """(out_size, in_size) LANCZOS (a = 3) resampling matrix with Pillow's geometry.

    Same centres, support (3 x scale when reducing), window bounds and per-row normalization
    as Pillow's ``precompute_coeffs`` for the input interval [in0, in1), in float64 and
    without Pillow's 22-bit fixed-point rounding. Cached: memes come in few sizes.
    """
    scale = (in1 - in0) / out_size
    filterscale = max(scale, 1.0)
    support = 3.0 * filterscale
    matrix = np.zeros((out_size, in_size), dtype=np.float64)
    for xx in range(out_size):
        center = in0 + (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = min(int(center + support + 0.5), in_size)
        x = (np.arange(xmin, xmax) - center + 0.5) / filterscale
        w = np.where((x >= -3.0) & (x < 3.0), np.sinc(x) * np.sinc(x / 3.0), 0.0)
        total = w.sum()
        matrix[xx, xmin:xmax] = w / total if total != 0.0 else w
    matrix.setflags(write=False)
    return matrix


def _lanczos_resize(pixels: np.ndarray, box: tuple[float, float, float, float]) -> np.ndarray:
    """Resize the region ``box`` of a grayscale array to 32x32 uint8 with LANCZOS weights.

    Two passes like Pillow -- horizontal, rounded and clipped to 0..255, then vertical -- as
    two small matrix products in float64. The intermediate clip matters: LANCZOS overshoots
    next to saturated edges (white caption text), and Pillow clips there. Pillow's 22-bit
    fixed-point weights (and, for some shapes, its vertical-first pass order) are not
    reproduced: on photos a pixel differs by at most one grey level from ``Image.resize``,
    far below what the reduced-scale decode itself changes. ~15 us on a 63x63 draft versus ~70 us for
    ``Image.resize``, which recomputes its coefficients on every call.
    """
    height, width = pixels.shape
    x0, y0, x1, y1 = (float(v) for v in box)
    rows = _lanczos_weights(height, y0, y1)
    cols = _lanczos_weights(width, x0, x1)
    tmp = np.clip(np.floor(pixels.astype(np.float64) @ cols.T + 0.5), 0, 255)
    return np.clip(np.floor(rows @ tmp + 0.5), 0, 255).astype(np.uint8)


def phash_reference(source: ImageSource) -> int:
    """``imagehash.phash`` on the fully decoded image, as a 64-bit int (the slow, canonical path).

    This is what ``projects.imaging.perceptual_hash`` stores at import. ~2.6 ms of CPU for a
    500x500 JPEG: the full RGB decode and the LANCZOS resize from full size dominate.
    """
    import imagehash

    with _open(source) as img:
        return phash_int(str(imagehash.phash(img)))


def phash_hex(value: int) -> str:
    """The 16-character lower-case hex form, identical to ``str(imagehash.phash(img))``."""
    value = int(value)
    if not 0 <= value <= _MASK64:
        raise ValueError(f"not a 64-bit unsigned hash: {value}")
    return f"{value:016x}"


def phash_int(hex_str: str) -> int:
    """Inverse of :func:`phash_hex`: parse the 16 hex digits imagehash prints."""
    text = hex_str.strip()
    if len(text) != 16 or not _HEX_DIGITS.issuperset(text):  # int() would accept "0x", "_", "+"
        raise ValueError(f"a 64-bit pHash is 16 hex digits, got {hex_str!r}")
    return int(text, 16)


def phash_array(hex_strings: Iterable[str]) -> np.ndarray:
    """Hex pHashes (as stored on ``Item.phash``) to a ``uint64`` array for the pair search."""
    return np.fromiter((phash_int(h) for h in hex_strings), dtype=np.uint64)


def hamming_distance(a: int, b: int) -> int:
    """Number of differing bits between two 64-bit hashes."""
    return ((int(a) ^ int(b)) & _MASK64).bit_count()
