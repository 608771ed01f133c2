"""exports.ranges.parse_range (RFC 9110 byte ranges). The HTTP behaviour is in test_api.py."""

from __future__ import annotations

import pytest

from exports.ranges import UNSATISFIABLE, parse_range


@pytest.mark.parametrize(
    ("header", "expected"),
    [
        (None, None),
        ("bytes=0-9", (0, 9)),
        ("bytes=10-", (10, 99)),
        ("bytes=90-200", (90, 99)),  # end clamped to the last byte
        ("bytes=-10", (90, 99)),  # suffix
        ("bytes=-500", (0, 99)),  # suffix longer than the file: whole file
        ("BYTES= 5 - 6", (5, 6)),
        ("bytes=100-", UNSATISFIABLE),  # starts at the end
        ("bytes=150-160", UNSATISFIABLE),
        ("bytes=-0", UNSATISFIABLE),
        ("bytes=9-3", None),  # invalid spec: ignored, whole file
        ("bytes=0-1,5-6", None),  # several ranges: whole file
        ("items=0-9", None),  # other unit: ignored
        ("bytes=abc", None),
        ("bytes=-", None),
    ],
)
def test_parse_range(header, expected):
    assert parse_range(header, 100) == expected


def test_empty_file_has_no_satisfiable_range():
    assert parse_range("bytes=0-0", 0) == UNSATISFIABLE
    assert parse_range("bytes=-1", 0) == UNSATISFIABLE
