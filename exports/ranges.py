"""File downloads with ETag and HTTP Range (RFC 9110 sections 8.8.3, 13.1, 14).

Django's FileResponse streams a whole file and ignores ``Range``; resumable downloads of large
releases need ``206 Partial Content``. One byte range is served; a request for several ranges
gets the whole file (RFC 9110 14.2 lets a server ignore Range), a range that starts past the
end gets ``416`` with ``Content-Range: bytes */size``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

from django.http import FileResponse, HttpResponse, StreamingHttpResponse
from django.utils.http import content_disposition_header

CHUNK = 64 * 1024
_RANGE = re.compile(r"^\s*(\d*)\s*-\s*(\d*)\s*$")
UNSATISFIABLE = "unsatisfiable"


def parse_range(header: str | None, size: int):
    """``(start, end)`` inclusive, None (ignore: serve the whole file) or UNSATISFIABLE."""
    if not header:
        return None
    unit, _, spec = header.partition("=")
    if unit.strip().lower() != "bytes" or not spec:
        return None
    if "," in spec:
        return None  # several ranges: serve the whole representation instead of multipart
    match = _RANGE.match(spec)
    if not match:
        return None
    first, last = match.groups()
    if first == "" and last == "":
        return None
    if first == "":  # suffix: the last N bytes
        length = int(last)
        if length == 0 or size == 0:
            return UNSATISFIABLE
        return max(0, size - length), size - 1
    start = int(first)
    end = int(last) if last != "" else size - 1
    if last != "" and end < start:
        return None  # invalid range-spec: ignore the header
    if start >= size:
        return UNSATISFIABLE
    return start, min(end, size - 1)


def _etag_matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    if header.strip() == "*":
        return True
    tags = [t.strip() for t in header.split(",")]
    return any(t == etag or t == f"W/{etag}" for t in tags)


def _read(path: Path, start: int, length: int):
    with open(path, "rb") as fh:
        fh.seek(start)
        remaining = length
        while remaining > 0:
            block = fh.read(min(CHUNK, remaining))
            if not block:
                break
            remaining -= len(block)
            yield block


def ranged_file_response(
    request, path: Path, *, sha256: str, content_type: str, filename: str, attachment: bool = True
):
    """Serve ``path`` with ETag = its sha256, conditional GET and single byte ranges."""
    return ranged_response(
        request,
        size=path.stat().st_size,
        sha256=sha256,
        content_type=content_type,
        filename=filename,
        attachment=attachment,
        whole=lambda: FileResponse(open(path, "rb"), content_type=content_type),
        part=lambda start, length: _read(path, start, length),
    )


def ranged_response(
    request,
    *,
    size: int,
    sha256: str,
    content_type: str,
    filename: str,
    whole: Callable[[], HttpResponse | StreamingHttpResponse],
    part: Callable[[int, int], Iterator[bytes]],
    attachment: bool = True,
):
    """Conditional GET and single byte ranges for any representation of known ``size`` and
    sha256: ``whole()`` makes the full response, ``part(start, length)`` yields a range (a
    file, or a release archive streamed from its files: exports.archive)."""
    etag = f'"{sha256}"'
    common = {
        "ETag": etag,
        "Accept-Ranges": "bytes",
        "Cache-Control": "private, max-age=3600",
        "X-Content-Type-Options": "nosniff",
        "Content-Disposition": content_disposition_header(attachment, filename),
    }
    if _etag_matches(request.headers.get("If-None-Match"), etag):
        response = HttpResponse(status=304)
        for k in ("ETag", "Cache-Control"):
            response[k] = common[k]
        return response
    byte_range = parse_range(request.headers.get("Range"), size)
    if_range = request.headers.get("If-Range")
    if byte_range is not None and if_range is not None and if_range.strip() != etag:
        byte_range = None  # the client's copy is another version: send the whole file (RFC 9110 13.1.5)
    if byte_range == UNSATISFIABLE:
        response = HttpResponse(
            f"Range not satisfiable: the file has {size} bytes.\n", status=416, content_type="text/plain; charset=utf-8"
        )
        response["Content-Range"] = f"bytes */{size}"
        response["Accept-Ranges"] = "bytes"
        return response
    if byte_range is None:
        response = whole()
        response["Content-Length"] = str(size)
    else:
        start, end = byte_range
        response = StreamingHttpResponse(part(start, end - start + 1), status=206, content_type=content_type)
        response["Content-Length"] = str(end - start + 1)
        response["Content-Range"] = f"bytes {start}-{end}/{size}"
    for k, v in common.items():
        response[k] = v
    return response
