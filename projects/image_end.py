"""Where an image file's own data ends, so that files carrying something after it are refused.

A polyglot is one file that two parsers accept: a JPEG with a zip archive appended (Pillow
decodes the JPEG, unzip finds the archive), a GIF followed by script. Pillow stops at the
image's end and never looks further, and imports store and release images byte for byte, so
projects.imaging.check_image asks here where the image ends and refuses any data after it.

Each function walks its container's structure (segments, chunks, blocks), never a search for
an end marker, which may occur inside the data. ``None`` means the structure could not be
walked to its end; the caller then keeps Pillow's verdict (the file decoded).
"""

from __future__ import annotations

#: Bytes tolerated after the end: padding some tools add, which no parser gives a meaning.
PADDING = b"\x00\t\n\r "


def _jpeg_end(data: bytes) -> int | None:
    n, i = len(data), 2  # after SOI
    while i < n:
        if data[i] != 0xFF:
            return None
        while i < n and data[i] == 0xFF:  # fill bytes before a marker
            i += 1
        if i >= n:
            return None
        marker = data[i]
        i += 1
        if marker == 0xD9:  # EOI
            return i
        if marker == 0x01 or 0xD0 <= marker <= 0xD7:  # TEM, RSTn: no length
            continue
        if i + 2 > n:
            return None
        i += int.from_bytes(data[i : i + 2], "big")
        if marker == 0xDA:  # SOS: entropy-coded data up to the next marker that is not RSTn or stuffing
            while True:
                j = data.find(b"\xff", i)
                if j < 0 or j + 1 >= n:
                    return None
                follower = data[j + 1]
                if follower == 0x00 or 0xD0 <= follower <= 0xD7:
                    i = j + 2
                elif follower == 0xFF:
                    i = j + 1
                else:
                    i = j
                    break
    return None


def _png_end(data: bytes) -> int | None:
    n, i = len(data), 8  # after the signature
    while i + 8 <= n:
        length = int.from_bytes(data[i : i + 4], "big")
        kind = data[i + 4 : i + 8]
        i += 12 + length  # length, type, data, CRC
        if kind == b"IEND":
            return i if i <= n else None
    return None


def _gif_sub_blocks(data: bytes, i: int) -> int | None:
    n = len(data)
    while i < n:
        size = data[i]
        i += 1
        if size == 0:
            return i
        i += size
    return None


def _gif_end(data: bytes) -> int | None:
    n = len(data)
    if n < 13:
        return None
    packed = data[10]
    i = 13 + (3 * 2 ** ((packed & 7) + 1) if packed & 0x80 else 0)  # header, screen descriptor, colour table
    while i < n:
        block = data[i]
        if block == 0x3B:  # trailer
            return i + 1
        if block == 0x21:  # extension: label, then sub-blocks
            end = _gif_sub_blocks(data, i + 2)
        elif block == 0x2C:  # image descriptor, local colour table, LZW code size, sub-blocks
            if i + 10 > n:
                return None
            local = data[i + 9]
            start = i + 10 + (3 * 2 ** ((local & 7) + 1) if local & 0x80 else 0) + 1
            end = _gif_sub_blocks(data, start)
        else:
            return None
        if end is None:
            return None
        i = end
    return None


def _webp_end(data: bytes) -> int | None:
    if len(data) < 12 or data[:4] != b"RIFF":
        return None
    size = int.from_bytes(data[4:8], "little")
    end = 8 + size + (size & 1)
    return end if end <= len(data) + (size & 1) else None


_ENDS = {"JPEG": _jpeg_end, "PNG": _png_end, "GIF": _gif_end, "WEBP": _webp_end}


def image_end(data: bytes, image_format: str) -> int | None:
    """Offset just past the image's last byte, per its container; None when not found."""
    find = _ENDS.get(image_format)
    return find(data) if find is not None else None


def trailing_data(data: bytes, image_format: str) -> int:
    """Bytes after the image's end that are not padding (0 when the end cannot be found)."""
    end = image_end(data, image_format)
    if end is None:
        return 0
    return len(data[end:].strip(PADDING))
