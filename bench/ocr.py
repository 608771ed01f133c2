"""Benchmark of OCR and text-free variants on one core: lib.ocr and lib.textfree.

    .venv/bin/python bench/ocr.py [--n-images 60] [--seed 0] [--method telea] [--no-residual]

N 500x500 JPEG memes (random crops of the scikit-image sample photos, a white caption with a
black outline at the top and/or bottom, 2-6 words, quality 80-95) are written to a temp dir.
The process is pinned to one CPU, BLAS/OpenMP pools are limited to one thread before numpy
is imported, and onnxruntime runs with one intra-op thread (lib.ocr's default). Then:

* engine load: the first ``ocr_read`` (three ONNX sessions), timed apart;
* OCR: ``ocr_read(path)`` on every meme (file read and decode included);
* inpainting: ``text_free_variant(path, result)`` on every meme (decode, mask, cv2.inpaint),
  and ``encode_image(variant)`` to PNG and to JPEG (quality 90) separately;
* quality: token recall of the drawn caption words in the OCR text, and (unless
  ``--no-residual``) how many caption words OCR still finds on the text-free variants.

Rates are images per CPU-second (``time.process_time``: the machine may be shared, so this is
the per-core cost) and per wall second; peak RSS is ``ru_maxrss``. Figures only, no
assertions on time.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")
os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # lib.ocr sets it too; onnxruntime reads it on import

import argparse
import re
import resource
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lib.ocr import ocr_read
from lib.textfree import encode_image, text_free_variant

PHOTOS = ("astronaut", "coffee", "chelsea", "rocket", "hubble_deep_field", "retina", "camera", "coins", "grass")
WORDS = (
    "when",
    "the",
    "code",
    "finally",
    "works",
    "nobody",
    "me",
    "explaining",
    "why",
    "monday",
    "deadline",
    "again",
    "that",
    "feeling",
    "one",
    "does",
    "not",
    "simply",
    "merge",
    "to",
    "main",
)
FONT_CANDIDATES = (
    "/usr/share/fonts/truetype/dejavu/DejaVuSans-Bold.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Bold.ttf",
)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    for path in FONT_CANDIDATES:
        if os.path.exists(path):
            return ImageFont.truetype(path, size)
    return ImageFont.load_default(size=size)  # Pillow's bundled scalable font (FreeType builds)


def make_memes(directory: Path, n: int, seed: int) -> list[tuple[Path, list[str]]]:
    """n 500x500 JPEG memes and the words drawn on each."""
    import skimage.data

    rng = np.random.default_rng(seed)
    photos = [Image.fromarray(getattr(skimage.data, name)()).convert("RGB") for name in PHOTOS]
    font = _font(34)
    out = []
    for i in range(n):
        photo = photos[int(rng.integers(len(photos)))]
        w, h = photo.size
        side = int(min(w, h) * rng.uniform(0.5, 1.0))
        x0, y0 = int(rng.integers(0, w - side + 1)), int(rng.integers(0, h - side + 1))
        img = photo.crop((x0, y0, x0 + side, y0 + side)).resize((500, 500), Image.Resampling.BICUBIC)
        draw = ImageDraw.Draw(img)
        words: list[str] = []
        places = [y for y, keep in ((16, rng.random() < 0.85), (440, rng.random() < 0.75)) if keep] or [16]
        for y in places:
            line = [str(wd) for wd in rng.choice(WORDS, int(rng.integers(2, 6)))]
            while len(line) > 1 and draw.textlength(" ".join(line).upper(), font=font) > 470:
                line.pop()
            draw.text(
                (250, y),
                " ".join(line).upper(),
                font=font,
                fill="white",
                stroke_width=3,
                stroke_fill="black",
                anchor="mt",
            )
            words += line
        path = directory / f"meme_{i:05d}.jpg"
        img.save(path, "JPEG", quality=int(rng.integers(80, 96)))
        out.append((path, words))
    return out


def _tokens(text: str) -> Counter[str]:
    return Counter(re.findall(r"[a-z0-9']+", text.lower()))


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # kB on Linux


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n-images", type=int, default=60)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--method", choices=["telea", "ns"], default="telea")
    ap.add_argument("--no-residual", action="store_true", help="skip the OCR pass over the text-free variants")
    args = ap.parse_args()

    cpus = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []
    if cpus:
        os.sched_setaffinity(0, cpus[:1])
    print(f"CPUs available {cpus or '?'}, pinned to {cpus[:1] or '?'}, load average {os.getloadavg()[0]:.2f}")
    print(f"peak RSS before the engine: {_rss_mb():.0f} MB")

    with tempfile.TemporaryDirectory(prefix="bench-ocr-") as tmp:
        memes = make_memes(Path(tmp), args.n_images, args.seed)
        n = len(memes)

        c0, w0 = time.process_time(), time.perf_counter()
        ocr_read(Image.new("RGB", (64, 64)))  # creates the engine
        print(
            f"engine load: {time.process_time() - c0:.2f} s CPU, {time.perf_counter() - w0:.2f} s wall; "
            f"peak RSS {_rss_mb():.0f} MB"
        )

        c0, w0 = time.process_time(), time.perf_counter()
        results = [ocr_read(path) for path, _ in memes]
        ocr_cpu, ocr_wall = time.process_time() - c0, time.perf_counter() - w0
        rss_after_ocr = _rss_mb()

        c0, w0 = time.process_time(), time.perf_counter()
        variants = [text_free_variant(path, result, method=args.method) for (path, _), result in zip(memes, results)]
        inp_cpu, inp_wall = time.process_time() - c0, time.perf_counter() - w0

        c0 = time.process_time()
        sizes = [len(encode_image(v)) for v in variants]
        enc_cpu = time.process_time() - c0
        c0 = time.process_time()
        jpeg_sizes = [len(encode_image(v, "JPEG", quality=90)) for v in variants]
        jpeg_cpu = time.process_time() - c0

        want = sum((Counter(words) for _, words in memes), Counter())
        found = sum((_tokens(r.text) & Counter(words) for (_, words), r in zip(memes, results)), Counter())
        lines = sum(len(r.lines) for r in results)

        print(f"\n{n} memes of 500x500, {sum(want.values())} caption words, {lines} OCR lines")
        print(
            f"OCR:        {n / ocr_cpu:6.2f} img/s/core (CPU {1000 * ocr_cpu / n:6.1f} ms/img), "
            f"{n / ocr_wall:6.2f} img/s wall; peak RSS {rss_after_ocr:.0f} MB"
        )
        print(
            f"inpainting: {n / inp_cpu:6.2f} img/s/core (CPU {1000 * inp_cpu / n:6.1f} ms/img, decode + mask + "
            f"cv2.inpaint {args.method}), {n / inp_wall:6.2f} img/s wall"
        )
        print(
            f"PNG encode: {n / enc_cpu:6.2f} img/s/core (CPU {1000 * enc_cpu / n:6.1f} ms/img), "
            f"mean {np.mean(sizes) / 1024:.0f} kB"
        )
        print(
            f"JPEG q90:   {n / jpeg_cpu:6.2f} img/s/core (CPU {1000 * jpeg_cpu / n:6.1f} ms/img), "
            f"mean {np.mean(jpeg_sizes) / 1024:.0f} kB"
        )
        print(f"caption word recall: {sum(found.values()) / sum(want.values()):.3f}")

        if not args.no_residual:
            left = sum(
                (_tokens(ocr_read(v).text) & Counter(words) for (_, words), v in zip(memes, variants)), Counter()
            )
            print(
                f"caption words OCR still finds on the text-free variants: {sum(left.values())} "
                f"of {sum(want.values())} ({sum(left.values()) / sum(want.values()):.3%})"
            )
        print(f"peak RSS at the end: {_rss_mb():.0f} MB")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
