"""projects.image_end finds where real images end (no false refusals) and what follows a
polyglot; projects.imaging.pixel_hash in bands equals the hash of the whole image."""

from __future__ import annotations

import hashlib
import io
import random

import pytest
from PIL import Image, ImageDraw

from projects.image_end import image_end, trailing_data
from projects.imaging import ImageRejected, check_image, pixel_hash


def _picture(mode: str = "RGB", size=(97, 61), seed: int = 0) -> Image.Image:
    rnd = random.Random(seed)
    img = Image.new("RGB", size, (rnd.randrange(256), 30, 60))
    draw = ImageDraw.Draw(img)
    for _ in range(20):
        x, y = rnd.randrange(size[0]), rnd.randrange(size[1])
        draw.rectangle([x, y, x + 15, y + 9], fill=tuple(rnd.randrange(256) for _ in range(3)))
    return img.convert(mode)


def _encode(img: Image.Image, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format=fmt, **options)
    return buf.getvalue()


CASES = [
    ("JPEG", "RGB", {}),
    ("JPEG", "RGB", {"progressive": True}),
    ("JPEG", "L", {}),
    ("JPEG", "RGB", {"restart_marker_blocks": 1}),
    ("JPEG", "RGB", {"exif": b"Exif\x00\x00" + b"\xff\xd9" * 8}),
    ("PNG", "RGBA", {}),
    ("PNG", "P", {}),
    ("GIF", "P", {}),
    ("GIF", "P", {"comment": b"\x3b" * 40}),
    ("WEBP", "RGB", {}),
    ("WEBP", "RGBA", {"lossless": True}),
]


@pytest.mark.parametrize("fmt, mode, options", CASES)
def test_real_images_end_where_their_file_ends(fmt, mode, options):
    data = _encode(_picture(mode), fmt, **options)
    assert image_end(data, fmt) == len(data)
    assert trailing_data(data, fmt) == 0
    assert trailing_data(data + b"\x00\n", fmt) == 0  # padding is tolerated
    tail = b"PK\x03\x04payload"
    assert trailing_data(data + tail, fmt) == len(tail)


def test_an_animated_gif_ends_after_its_last_frame():
    frames = [_picture("P", seed=s) for s in range(3)]
    buf = io.BytesIO()
    frames[0].save(buf, format="GIF", save_all=True, append_images=frames[1:], duration=50, loop=0)
    data = buf.getvalue()
    assert image_end(data, "GIF") == len(data)


def test_check_image_refuses_a_polyglot_and_accepts_the_image_alone():
    jpeg = _encode(_picture(), "JPEG")
    assert check_image(jpeg).width == 97
    with pytest.raises(ImageRejected, match="after the end of the image"):
        check_image(jpeg + b"PK\x05\x06" + b"\x00" * 18)


@pytest.mark.parametrize("mode", ["RGB", "RGBA", "L", "P", "CMYK", "1"])
def test_banded_pixel_hash_is_the_whole_image_hash(mode):
    img = _picture(mode, size=(1500, 1100), seed=3)  # several bands
    whole = hashlib.sha256(f"{img.width}x{img.height}:".encode() + img.convert("RGB").tobytes()).hexdigest()
    assert pixel_hash(img) == whole
