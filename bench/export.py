"""Benchmark of release building (issue 8): streaming writers on 1M records, and a DB end to end.

    .venv/bin/python bench/export.py [--records 1000000] [--db-items 20000] [--skip-db]

(a) Writers, no database: a generator of ``--records`` synthetic gold records shaped like
    ``records.jsonl`` (meme3w schema; 40% harmful with 1-2 boxes, ~80-character texts, a
    provenance object) goes through ``exports.writers.JsonlWriter`` and, separately, through
    ``ParquetRecordsWriter`` (row groups of 50k). Each run is timed (wall and CPU) and a thread
    samples the RSS (PSS) every 50 ms: "peak RSS growth" is the peak minus the RSS before the first run
    of that format, so it includes the library's one-time set-up (about 50 MB for pyarrow's
    Parquet writer, measured with a 100-row warm-up). Each format is written twice and the two
    files must be byte-identical.
    Goals: JSONL <= 30 s, Parquet <= 45 s, peak RSS growth <= 150 MB.

(b) End to end, with the database named by DATABASE_URL (use PostgreSQL: your own database,
    migrated): a project of ``--db-items`` items with current gold records, 2 submitted
    annotations and 1 candidate each, 5% near-duplicate copies (1-3 bit pHash flips), 0.5% exact
    pixel duplicates and 10% redistributable images is inserted with bulk_create (set-up speed;
    the services are exercised by the test suite), then ``exports.services.export_job_run``
    runs the whole job: near-duplicate scan, split plan, all files, publication.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import argparse
import random
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import CATEGORIES, MB, WORDS, RssSampler

GOALS = {"jsonl_s": 30.0, "parquet_s": 45.0, "rss_mb": 150.0}


def synthetic_records(n: int, seed: int = 0):
    """Records shaped like records.jsonl, generated lazily (nothing kept). Texts, boxes and
    hashes come from small precomputed pools mixed by index, so generating costs little next to
    the writers being measured."""
    rnd = random.Random(seed)
    texts = [" ".join(rnd.choice(WORDS) for _ in range(rnd.randint(8, 18))) for _ in range(4096)]
    hexes = [f"{rnd.getrandbits(64):016x}" for _ in range(4096)]
    box_pool = []
    for _ in range(1024):
        x1, y1 = rnd.randint(0, 600), rnd.randint(0, 600)
        box_pool.append([x1, y1, x1 + rnd.randint(50, 399), y1 + rnd.randint(50, 399)])
    splits = ("train",) * 17 + ("val",) + ("test",) * 2
    mask = 4095
    for i in range(1, n + 1):
        h = (i * 2654435761) & 0xFFFFFFFF
        harmful = h % 5 < 2
        sha = hexes[h & mask] + hexes[(h >> 12) & mask] + hexes[(h >> 4) & mask] + f"{i:016x}"
        redistributable = i % 10 == 0
        yield {
            "item_id": i,
            "source_id": f"src-{i:07d}",
            "source_dataset": "bench",
            "import_key": hexes[(h >> 8) & mask] + f"{i:048x}",
            "text": texts[h & mask],
            "title": "",
            "language": "en",
            "domain": "bench",
            "metadata": {"template": h % 500},
            "split": splits[h % 20],
            "near_duplicate_group": i,
            "image": {
                "file": f"images/{sha}.jpg" if redistributable else None,
                "format": "JPEG",
                "height": 500,
                "phash": hexes[(h >> 3) & mask],
                "pixel_hash": hexes[(h >> 5) & mask] * 3 + f"{i:016x}",
                "redistributable": redistributable,
                "sha256": sha,
                "width": 500,
            },
            "gold": {
                "label": "harmful" if harmful else "non-harmful",
                "target_category": CATEGORIES[h % 4] if harmful else None,
                "target_entity": "people from Planet Zorg" if harmful else None,
                "text_mention": "planet zorg" if harmful and h % 3 else None,
                "visual_region": box_pool[(h >> 7) & 1023 : ((h >> 7) & 1023) + 1 + h % 2] if harmful else [],
            },
            "provenance": {
                "label": {"source": "identical"},
                "target_category": {"source": "reviewer", "from_annotator": 1, "decided_by": "reviewer-01"},
            },
            "gold_revision": 1,
            "schema_version": 1,
            "lexicon_version": 1,
        }


def _writer_run(kind: str, n: int, path: Path):
    from exports.writers import JsonlWriter, ParquetRecordsWriter
    from projects.presets import MEME3W_SCHEMA

    writer = JsonlWriter(path) if kind == "jsonl" else ParquetRecordsWriter(path, MEME3W_SCHEMA["fields"])
    with RssSampler() as sampler:
        for record in synthetic_records(n):
            writer.write(record)
        digest = writer.close()
    return sampler, digest


def writers_benchmark(n: int) -> list[str]:
    lines, ok = [], True
    with tempfile.TemporaryDirectory(prefix="concord-bench-export-") as tmp:
        gen_t0, gen_c0 = time.perf_counter(), time.process_time()
        for _ in synthetic_records(n):
            pass
        gen_wall = time.perf_counter() - gen_t0
        lines.append(
            f"(a) {n:,} synthetic records; generating them alone: {gen_wall:.1f} s wall "
            f"({time.process_time() - gen_c0:.1f} s CPU), included in the times below"
        )
        for kind, goal in (("jsonl", GOALS["jsonl_s"]), ("parquet", GOALS["parquet_s"])):
            first, d1 = _writer_run(kind, n, Path(tmp) / f"a.{kind}")
            _, d2 = _writer_run(kind, n, Path(tmp) / f"b.{kind}")
            identical = d1 == d2 and (Path(tmp) / f"a.{kind}").read_bytes() == (Path(tmp) / f"b.{kind}").read_bytes()
            passed = first.wall <= goal and first.growth_mb <= GOALS["rss_mb"] and identical
            ok &= passed
            lines.append(
                f"    {kind:<8} {first.wall:6.1f} s wall {first.cpu:6.1f} s CPU  {n / first.wall:9,.0f} rec/s  "
                f"{d1.bytes / MB:8.1f} MB  peak RSS growth {first.growth_mb:6.1f} MB  "
                f"second run byte-identical: {'yes' if identical else 'NO'}  "
                f"(goal <= {goal:.0f} s, <= {GOALS['rss_mb']:.0f} MB) {'PASS' if passed else 'FAIL'}"
            )
            for p in Path(tmp).glob(f"*.{kind}"):
                p.unlink()
    return lines if ok else [*lines, "    at least one writer goal missed"]


# ------------------------------------------------------------------------------------------
# (b) end to end
# ------------------------------------------------------------------------------------------


def _setup_db(n: int, media_root: Path):
    import hashlib

    import numpy as np
    from django.contrib.auth import get_user_model
    from django.db import transaction

    from adjudication.models import GoldRecord
    from annotation.models import Annotation
    from candidates.models import Candidate, Provider
    from projects.models import Item, Project, Stage
    from projects.services import membership_add, project_create

    slug = f"bench-export-{n}"
    Project.objects.filter(slug=slug).delete()
    User = get_user_model()
    lead, _ = User.objects.get_or_create(username="bench-export-lead")
    annotators = [User.objects.get_or_create(username=f"bench-export-ann{k}")[0] for k in (1, 2)]
    project = project_create(name=f"Bench export {n}", slug=slug, preset="meme3w", lead=lead)
    for a in annotators:
        membership_add(project=project, user=a, role="annotator")
    rng = np.random.default_rng(0)
    rnd = random.Random(0)
    phashes = rng.integers(0, 2**64, n, dtype=np.uint64)
    n_near = n // 20
    src = rng.integers(0, n - n_near, n_near)
    for k, s in enumerate(src):
        flips = rng.choice(64, rnd.randint(1, 3), replace=False)
        h = int(phashes[s])
        for f in flips:
            h ^= 1 << int(f)
        phashes[n - n_near + k] = np.uint64(h)
    image_dir = media_root / "images" / "be"
    image_dir.mkdir(parents=True, exist_ok=True)
    jpeg = (ROOT / "static" / "favicon.svg").read_bytes()  # any bytes: the bench only links files
    items = []
    for i in range(n):
        sha = hashlib.sha256(f"bench-img-{n}-{i}".encode()).hexdigest()
        rel = f"images/be/{sha}.jpg"
        redistributable = i % 10 == 0
        if redistributable:
            (media_root / rel).write_bytes(jpeg)
        pixel = hashlib.sha256(f"bench-px-{n}-{i}".encode()).hexdigest()
        items.append(
            Item(
                project=project,
                import_key=f"bench-{i}",
                image=rel,
                image_sha256=sha,
                image_format="JPEG",
                width=500,
                height=500,
                pixel_hash=pixel,
                phash=f"{int(phashes[i]):016x}",
                text=" ".join(rnd.choice(WORDS) for _ in range(12)),
                source_id=f"bench-{i:06d}",
                source_dataset="bench",
                language="en",
                redistributable=redistributable,
                stage=Stage.GOLD,
            )
        )
    with transaction.atomic():
        Item.objects.bulk_create(items, batch_size=2000)
        ids = list(Item.objects.filter(project=project).order_by("id").values_list("id", flat=True))
        # 0.5% exact pixel duplicates of an earlier item
        dups = []
        for k in range(n // 200):
            i = n - n_near - 1 - k
            j = rnd.randrange(0, i)
            dups.append((ids[i], ids[j], items[j].pixel_hash, items[j].phash))
        for i, j, pixel, ph in dups:
            Item.objects.filter(pk=i).update(duplicate_of_id=j, pixel_hash=pixel, phash=ph)
        golds, anns, cands = [], [], []
        provider = Provider.objects.create(project=project, name="bench-model", kind="replay", model="bench-vl-1")
        for idx, item_id in enumerate(ids):
            harmful = idx % 5 < 2
            values = (
                {
                    "label": "harmful",
                    "target_category": CATEGORIES[idx % 4],
                    "target_entity": "Zorgians",
                    "text_mention": None,
                    "visual_region": [[100, 100, 600, 700]],
                }
                if harmful
                else {
                    "label": "non-harmful",
                    "target_category": None,
                    "target_entity": None,
                    "text_mention": None,
                    "visual_region": [],
                }
            )
            golds.append(
                GoldRecord(
                    item_id=item_id,
                    revision=1,
                    is_current=True,
                    values=values,
                    provenance={k: {"source": "identical"} for k in values},
                    schema_version=1,
                    lexicon_version=1,
                )
            )
            for a in annotators:
                anns.append(
                    Annotation(
                        item_id=item_id, annotator=a, kind="annotation", status="submitted", values=values, version=1
                    )
                )
            cands.append(
                Candidate(
                    item_id=item_id,
                    provider=provider,
                    prompt_version="v1",
                    model_name="bench-vl-1",
                    raw_reply="{}",
                    fields=values,
                )
            )
        GoldRecord.objects.bulk_create(golds, batch_size=2000)
        Annotation.objects.bulk_create(anns, batch_size=2000)
        Candidate.objects.bulk_create(cands, batch_size=2000)
    return project, lead


def db_benchmark(n: int) -> list[str]:
    import django

    django.setup()
    from django.conf import settings
    from django.db import connection

    from exports.models import ExportJob
    from exports.selectors import release_dir, split_plan
    from exports.services import export_job_run, export_job_start, near_duplicates_detect

    with (
        tempfile.TemporaryDirectory(prefix="concord-bench-media-") as media,
        tempfile.TemporaryDirectory(prefix="concord-bench-releases-") as releases,
    ):
        settings.MEDIA_ROOT = Path(media)
        settings.CONCORD_RELEASES_DIR = releases
        t0 = time.perf_counter()
        project, lead = _setup_db(n, Path(media))
        lines = [
            f"(b) end to end on {connection.vendor} ({settings.DATABASES['default'].get('NAME')}): "
            f"{n:,} items set up in {time.perf_counter() - t0:.1f} s"
        ]
        with RssSampler() as scan:
            result = near_duplicates_detect(project=project)
        lines.append(
            f"    near-duplicate scan {scan.wall:6.2f} s wall  {result.pairs_new:,} pairs stored  "
            f"peak RSS growth {scan.growth_mb:5.1f} MB"
        )
        with RssSampler() as plan_run:
            plan = split_plan(project=project)
        lines.append(
            f"    split plan          {plan_run.wall:6.2f} s wall  sizes {plan.sizes}  excluded "
            f"{len(plan.excluded)}  integrity {'ok' if plan.integrity.ok else 'FAILED'}  "
            f"peak RSS growth {plan_run.growth_mb:5.1f} MB"
        )
        job = export_job_start(project=project, user=lead, enqueue=False)
        with RssSampler() as run:
            release = export_job_run(job=job)
        job.refresh_from_db()
        if release is None:
            return [*lines, f"    build FAILED: {job.error}"]
        size = sum(p.stat().st_size for p in release_dir(release).rglob("*") if p.is_file())
        lines.append(
            f"    whole job (scan + plan + files + publish) {run.wall:6.2f} s wall {run.cpu:6.2f} s CPU  "
            f"{release.record_count / run.wall:7,.0f} rec/s  {size / MB:.1f} MB  "
            f"peak RSS growth {run.growth_mb:5.1f} MB"
        )
        job2 = export_job_start(project=project, user=lead, enqueue=False)
        release2 = export_job_run(job=job2)
        lines.append(
            f"    second build of the same state byte-identical: "
            f"{'yes' if release2 and release2.manifest_sha256 == release.manifest_sha256 else 'NO'}"
        )
        ExportJob.objects.filter(project=project).delete()
        project.delete()
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--db-items", type=int, default=20_000)
    parser.add_argument("--skip-db", action="store_true")
    args = parser.parse_args()
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "concord.settings")
    import django

    django.setup()
    print(f"bench/export.py: {os.cpu_count()} CPUs, pid {os.getpid()}", flush=True)
    for line in writers_benchmark(args.records):
        print(line, flush=True)
    if not args.skip_db:
        for line in db_benchmark(args.db_items):
            print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
