"""Image checks and hashes for imports. Uploads are hostile until Pillow has decoded them.

Nothing is stored unless Pillow identifies one of the allowed raster formats, the header's pixel
count is within the limit, and the whole image decodes (which catches truncated files). The
stored file keeps its verified bytes under a content-addressed name whose extension comes from
the detected format, never from the uploaded name, and is served only with an image content
type and ``nosniff`` (exports.views.item_image).
"""

from __future__ import annotations

import functools
import hashlib
import io
import os
import warnings
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings
from PIL import Image, ImageOps, UnidentifiedImageError

from lib.phash import phash_fast, phash_hex
from projects.image_end import trailing_data

FORMAT_EXTENSIONS = {"JPEG": "jpg", "PNG": "png", "GIF": "gif", "WEBP": "webp"}
CONTENT_TYPES = {"jpg": "image/jpeg", "png": "image/png", "gif": "image/gif", "webp": "image/webp"}
_EXIF_ORIENTATION = 0x0112


class ImageRejected(ValueError):
    """Carries the reason shown in the import report."""


@dataclass(frozen=True)
class CheckedImage:
    data: bytes
    extension: str
    image_format: str
    width: int
    height: int
    sha256: str
    pixel_hash: str
    phash: str


def pixel_hash(img: Image.Image) -> str:
    """sha256 of the decoded RGB pixels (and the size): same picture, same hash, any container.

    Hashed in bands of rows: converting and serializing the whole image at once held two more
    copies of it (~120 MB each at the 40 MP limit: 620 MB peak for one import). The bytes
    hashed are the same, so are the hashes.
    """
    width, height = img.size
    h = hashlib.sha256(f"{width}x{height}:".encode())
    band = max(1, (4 * 1024 * 1024) // (3 * width))  # ~4 MB of RGB rows at a time
    for top in range(0, height, band):
        h.update(img.crop((0, top, width, min(top + band, height))).convert("RGB").tobytes())
    return h.hexdigest()


def perceptual_hash(data: bytes) -> str:
    """64-bit pHash (imagehash's algorithm) with JPEG draft decoding (lib.phash).

    Every item of every project is hashed by this one path: near-duplicate distances are only
    meaningful between hashes made the same way (draft and full decodes differ by a few bits).
    """
    return phash_hex(phash_fast(data))


def check_image(data: bytes) -> CheckedImage:
    max_bytes = settings.CONCORD_MAX_IMAGE_BYTES
    max_pixels = settings.CONCORD_MAX_IMAGE_PIXELS
    if not data:
        raise ImageRejected("empty file")
    if len(data) > max_bytes:
        raise ImageRejected(f"file too large ({len(data):,} bytes; limit {max_bytes:,})")
    with warnings.catch_warnings():
        warnings.simplefilter("error", Image.DecompressionBombWarning)
        try:
            img = Image.open(io.BytesIO(data))
        except UnidentifiedImageError:
            raise ImageRejected("not an image (Pillow cannot identify it)") from None
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRejected(f"image over the pixel limit ({max_pixels:,} pixels)") from None
        except Exception as exc:
            raise ImageRejected(f"not an image ({type(exc).__name__})") from None
        fmt = img.format or ""
        if fmt not in FORMAT_EXTENSIONS:
            raise ImageRejected(f"unsupported format {fmt or 'unknown'} (allowed: JPEG, PNG, GIF, WEBP)")
        width, height = img.size
        if width < 1 or height < 1:
            raise ImageRejected("image has no pixels")
        if width * height > max_pixels:
            raise ImageRejected(f"image over the pixel limit ({width}x{height} > {max_pixels:,} pixels)")
        try:
            img.verify()
            img = Image.open(io.BytesIO(data))
            img.load()
        except (Image.DecompressionBombError, Image.DecompressionBombWarning):
            raise ImageRejected(f"image over the pixel limit ({max_pixels:,} pixels)") from None
        except Exception as exc:
            raise ImageRejected(f"truncated or corrupt image ({exc})") from None
    extra = trailing_data(data, fmt)
    if extra:
        # A polyglot (JPEG + zip, GIF + script, ...): the file is stored and released verbatim.
        raise ImageRejected(
            f"{extra:,} bytes of other data after the end of the image (refused: a file that is also something else)"
        )
    ext = FORMAT_EXTENSIONS[fmt]
    orientation = img.getexif().get(_EXIF_ORIENTATION, 1)
    if orientation not in (1, None):
        # Browsers honour EXIF orientation, boxes are drawn on what the browser shows: store the
        # upright pixels so that box coordinates, width and height all refer to the same image.
        img = ImageOps.exif_transpose(img)
        buf = io.BytesIO()
        img.save(buf, format="PNG")
        data, ext, fmt = buf.getvalue(), "png", "PNG"
        width, height = img.size
    digest = pixel_hash(img)
    del img  # the pHash decodes on its own: do not hold both decoded copies at once
    return CheckedImage(
        data=data,
        extension=ext,
        image_format=fmt,
        width=width,
        height=height,
        sha256=hashlib.sha256(data).hexdigest(),
        pixel_hash=digest,
        phash=perceptual_hash(data),
    )


def store_image(checked: CheckedImage) -> str:
    """Write the file under its sha256 (idempotent, atomic) and return its relative path."""
    rel = f"images/{checked.sha256[:2]}/{checked.sha256}.{checked.extension}"
    path = Path(settings.MEDIA_ROOT) / rel
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(checked.data)
        os.replace(tmp, path)
    return rel


@functools.lru_cache(maxsize=8)
def _media_root(media_root: str) -> Path:
    return Path(media_root).resolve()


def image_path(rel: str) -> Path:
    """The file of a stored image (``rel`` under MEDIA_ROOT; a path that resolves outside it,
    through ``..`` or a link, is refused). The root is resolved once per MEDIA_ROOT value."""
    root = _media_root(str(settings.MEDIA_ROOT))
    path = (root / rel).resolve()
    if root not in path.parents:
        raise ValueError("image path escapes the media root")
    return path
