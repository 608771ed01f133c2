"""lib.hamming / lib.phash. Plain pytest, no database.

The pair search is checked against the brute force (and pybktree) on uniform and clustered
hashes, with the automatically planned strategy and with forced multi-index plans, because
small inputs are planned as brute force and would otherwise never reach the index code.
"""

from __future__ import annotations

import functools
import io
import math
from collections import deque
from pathlib import Path

import imagehash
import numpy as np
import pytest
from hypothesis import HealthCheck, settings
from PIL import Image

from lib.hamming import (
    SearchPlan,
    _split_plan,
    near_duplicate_pairs,
)
from lib.phash import (
    DRAFT_SIZE,
    _lanczos_resize,
    hamming_distance,
    phash_array,
    phash_fast,
    phash_hex,
    phash_int,
    phash_reference,
)

HYPOTHESIS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
U64 = 2**64


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def clustered(n: int, centres: int, seed: int, max_flips: int = 6, noise: float = 0.1) -> np.ndarray:
    """Members of random centres with 0..max_flips bit flips, plus uniform noise."""
    rng = np.random.default_rng(seed)
    c = rng.integers(0, U64, max(1, centres), dtype=np.uint64)
    n_noise = int(n * noise)
    h = c[rng.integers(0, len(c), n - n_noise)]
    flips = rng.integers(0, max_flips + 1, len(h))
    for k in range(max_flips):
        sel = np.flatnonzero(flips > k)
        h[sel] ^= np.left_shift(np.uint64(1), rng.integers(0, 64, len(sel)).astype(np.uint64))
    out = np.concatenate([h, rng.integers(0, U64, n_noise, dtype=np.uint64)])
    rng.shuffle(out)
    return out


def uniform(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, U64, n, dtype=np.uint64)


def mih_plans(t: int, max_masks: int = 4000) -> list[SearchPlan]:
    """Every m-substring plan for threshold t whose probe count stays small enough to test."""
    plans = []
    for m in range(1, min(t + 1, 64) + 1):
        widths, radii = _split_plan(m, t)
        masks = sum(sum(math.comb(w, k) for k in range(1, r + 1)) for w, r in zip(widths, radii))
        if masks <= max_masks:
            plans.append(SearchPlan("mih", widths, radii))
    return plans


def as_set(pairs: np.ndarray) -> set[tuple[int, int]]:
    return {(int(i), int(j)) for i, j in pairs}


def assert_pairs_format(pairs: np.ndarray) -> None:
    assert pairs.dtype == np.int64 and pairs.ndim == 2 and pairs.shape[1] == 2
    if len(pairs):
        assert (pairs[:, 0] < pairs[:, 1]).all()
        order = np.lexsort((pairs[:, 1], pairs[:, 0]))
        assert (order == np.arange(len(pairs))).all(), "not lexicographically sorted"
        assert len(np.unique(pairs, axis=0)) == len(pairs), "duplicate rows"


def components_bfs(n: int, pairs: np.ndarray) -> np.ndarray:
    adj: list[list[int]] = [[] for _ in range(n)]
    for a, b in pairs:
        adj[int(a)].append(int(b))
        adj[int(b)].append(int(a))
    label = [-1] * n
    for s in range(n):  # ascending start: the first node reached is the component minimum
        if label[s] >= 0:
            continue
        label[s] = s
        queue = deque([s])
        while queue:
            x = queue.popleft()
            for y in adj[x]:
                if label[y] < 0:
                    label[y] = s
                    queue.append(y)
    return np.array(label, dtype=np.int64)


# --------------------------------------------------------------------------------------------
# pHash
# --------------------------------------------------------------------------------------------

PHOTOS = (
    "astronaut",
    "coffee",
    "chelsea",
    "rocket",
    "hubble_deep_field",
    "immunohistochemistry",
    "retina",
    "camera",
    "moon",
    "horse",
    "coins",
)


@functools.cache
def photo(name: str) -> Image.Image:
    import skimage.data

    arr = getattr(skimage.data, name)()
    if arr.dtype == bool:
        arr = arr.astype(np.uint8) * 255
    img = Image.fromarray(arr)
    return img.convert("RGB") if arr.ndim == 3 else img


def encode(img: Image.Image, fmt: str, **kw: object) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **kw)
    return buf.getvalue()


def imagehash_int(data: bytes) -> int:
    return int(str(imagehash.phash(Image.open(io.BytesIO(data)))), 16)


def test_hex_conversions_match_imagehash() -> None:
    img = photo("astronaut")
    text = str(imagehash.phash(img))
    value = phash_int(text)
    assert phash_hex(value) == text and len(text) == 16
    assert phash_hex(0) == "0000000000000000"
    assert phash_hex(U64 - 1) == "ffffffffffffffff"
    assert phash_int("FFFFFFFFFFFFFFFF") == U64 - 1
    assert imagehash.hex_to_hash(phash_hex(value)) == imagehash.phash(img)
    assert phash_array([text, "8000000000000000"]).tolist() == [value, 1 << 63]
    assert phash_array([]).dtype == np.uint64
    bad_values = (
        "",
        "abc",
        "0x12345678901234",
        "g000000000000000",
        "00000000000000000",
        "+123456789abcdef",
        "1234_6789abcdef0",
    )
    for bad in bad_values:
        with pytest.raises(ValueError):
            phash_int(bad)
    for bad in (-1, U64):
        with pytest.raises(ValueError):
            phash_hex(bad)
    assert hamming_distance(0, U64 - 1) == 64 and hamming_distance(5, 6) == 2


@pytest.mark.parametrize("name", PHOTOS)
def test_png_is_bit_identical_to_imagehash(name: str, tmp_path: Path) -> None:
    base = photo(name)
    variants = [base, base.resize((500, 500)), base.resize((333, 517)), base.convert("L")]
    if base.mode == "RGB":
        variants += [base.convert("RGBA"), base.convert("P")]
    for i, img in enumerate(variants):
        data = encode(img, "PNG")
        expected = imagehash_int(data)
        path = tmp_path / f"{i}.png"
        path.write_bytes(data)
        assert phash_fast(data) == expected
        assert phash_fast(path) == expected
        assert phash_fast(str(path)) == expected
        assert phash_fast(Image.open(io.BytesIO(data))) == expected
        assert phash_reference(data) == expected


@pytest.mark.parametrize("name", PHOTOS)
def test_jpeg_fast_within_two_bits_of_imagehash(name: str) -> None:
    base = photo(name)
    sizes = [None, (500, 500), (1000, 800), (333, 517), (1500, 1500)]
    worst = 0
    for size in sizes:
        img = base if size is None else base.resize(size, Image.Resampling.BICUBIC)
        for quality in (50, 75, 90, 95):
            data = encode(img, "JPEG", quality=quality)
            reference = imagehash_int(data)
            assert phash_reference(data) == reference
            distance = (phash_fast(data) ^ reference).bit_count()
            assert distance <= 2, (name, size, quality, distance)
            worst = max(worst, distance)
    assert worst <= 2


def test_jpeg_fast_really_drafts_and_sources_agree(tmp_path: Path) -> None:
    data = encode(photo("astronaut").resize((500, 500)), "JPEG", quality=85)
    img = Image.open(io.BytesIO(data))
    value = phash_fast(img)
    assert img.size == (63, 63) and img.mode == "L"  # decoded at 1/8 scale, luma only
    path = tmp_path / "a.jpg"
    path.write_bytes(data)
    with open(path, "rb") as fh:
        assert phash_fast(fh) == value
        assert not fh.closed
    assert phash_fast(path) == phash_fast(data) == phash_fast(memoryview(data)) == value
    loaded = Image.open(io.BytesIO(data))
    loaded.load()  # already decoded: no draft possible, so this is the reference computation
    assert phash_fast(loaded) == imagehash_int(data)
    with pytest.raises(TypeError):
        phash_fast(12345)  # type: ignore[arg-type]


def test_draft_size_parameter() -> None:
    data = encode(photo("chelsea").resize((500, 500)), "JPEG", quality=80)
    img = Image.open(io.BytesIO(data))
    value = phash_fast(img, draft_size=64)
    assert img.size == (125, 125)  # 500 // 64 = 7 -> scale 1/4
    assert (value ^ imagehash_int(data)).bit_count() <= 2
    assert phash_fast(data, draft_size=300) == imagehash_int(data)  # under 2 x 300 px: no draft


def test_small_and_grayscale_and_uniform_jpegs() -> None:
    # Under 2 x DRAFT_SIZE pixels libjpeg cannot scale: the fast path is the reference one.
    small = photo("coffee").resize((2 * DRAFT_SIZE - 1, 120))
    data = encode(small, "JPEG", quality=80)
    assert phash_fast(data) == imagehash_int(data)
    gray = encode(photo("camera").resize((640, 480)), "JPEG", quality=85)  # mode L JPEG
    assert (phash_fast(gray) ^ imagehash_int(gray)).bit_count() <= 2
    cmyk = encode(photo("rocket").convert("CMYK"), "JPEG", quality=90)
    assert (phash_fast(cmyk) ^ imagehash_int(cmyk)).bit_count() <= 2
    for colour in ((0, 0, 0), (255, 255, 255), (120, 30, 200)):
        flat = encode(Image.new("RGB", (500, 400), colour), "JPEG", quality=85)
        assert phash_fast(flat) == imagehash_int(flat)


def test_fast_hash_still_finds_reencoded_near_duplicates() -> None:
    hashes, names = [], []
    for name in PHOTOS:
        img = photo(name).resize((500, 500))
        for quality in (60, 95):
            hashes.append(phash_fast(encode(img, "JPEG", quality=quality)))
            names.append(name)
    pairs = as_set(near_duplicate_pairs(hashes, 8))
    for k in range(len(PHOTOS)):
        assert (2 * k, 2 * k + 1) in pairs  # each photo's two encodings pair up
    assert all(names[i] == names[j] for i, j in pairs)  # and distinct photos do not


def test_lanczos_resize_close_to_pillow() -> None:
    for name in ("astronaut", "moon", "coins"):
        gray = photo(name).convert("L")
        for scale in (2, 4, 8):
            small = gray.reduce(scale)
            box = (0, 0, gray.width / scale, gray.height / scale)
            expected = np.asarray(small.resize((32, 32), Image.Resampling.LANCZOS, box=box)).astype(int)
            got = _lanczos_resize(np.asarray(small), box).astype(int)
            assert np.abs(got - expected).max() <= 1
