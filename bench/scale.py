"""A synthetic 1M-item project on one box: the time of each stage (issue 18, deliverable 5).

    .venv/bin/python bench/scale.py [--items 1000000] [--db concord_bench_scale]
                                    [--presets meme3w,aha] [--skip-release] [--reuse]
                                    [--stages agreement,plan,release]
                                    [--pg postgres://postgres@127.0.0.1:5432]

Set-up (timed apart, not a goal): the database ``--db`` is dropped, created and migrated, then
per preset a project of ``--items`` items is written with PostgreSQL COPY (psycopg 3
``cursor.copy``), no image files except a few: 3% of the items are redistributable and point
at one of 8 small real PNG files shared by content hash (the release links them); the others
have plausible image fields (path, sha256, size, pixel hash, pHash) and no file. 5% of the
items are near-duplicate copies (1-3 pHash bits flipped) and 0.5% exact pixel duplicates of an
earlier item (``duplicate_of`` set, as the import does).

* meme3w: 2 submitted annotations per item from a pool of 20 annotators with per-person error
  rates (~80% agreement on the label), target fields filled only when that annotator chose
  harmful (category, entity from a small lexicon of variants, a mention, 0-2 boxes jittered
  around the item's box); a current gold record and 1 candidate per item.
* aha: 3 submitted annotations per item from the same pool; is_hateful (binary) and the three
  multi-label fields, each filled only under its condition (per-label flips per person).

Stages, each timed wall and CPU (this process; PostgreSQL's backends of ``--db`` apart, from
/proc) with the peak RSS growth (proportional set sizes of the process and its children)
sampled every 50 ms by a thread:

* agreement report (meme3w) and (aha, 3 annotators): ``quality.services.
  agreement_report_compute_now``, the code path of the report job (reads the annotations,
  computes every figure with its bootstrap CI and the dashboard, stores the cached row);
* split plan: ``exports.selectors.split_plan``;
* near-duplicate scan: ``exports.services.near_duplicates_detect`` (first scan: stores pairs);
* release build (meme3w): ``exports.services.export_job_run`` end to end (its own scan and plan,
  records JSONL + Parquet + COCO, images, annotations, candidates, agreement report from the
  cache the report stage filled, manifest, publication).

Goals (issue 18): each agreement report <= 60 s on one core; the release <= 120 s with RSS
growth <= 300 MB. The machine is shared: the load average is printed before and after, and
"within goal" is given for the wall time and for the CPU time (process + PostgreSQL), at the
goals' size only; below it (``--extrapolate-to``) a second table scales every figure linearly.

Measured on the shared 2-core dev machine (load average 4-6 from other work; 2026-12-01): a
1M run would take ~40 min there (set-up ~17 min: ~100 s per 200k items and preset), so
200,000 items, stages of a --reuse run, all on one core, bootstrap 1,000 resamples:

    stage                          wall s  CPU s  PG CPU s  RSS+ MB | linear to 1M: wall / CPU s
    agreement report (meme3w)        69.8   58.5      2.0      667  |   349 / 293  (goal 60: NO)
    agreement report (aha, 3 ann.)  127.9   97.7      2.6     1032  |   639 / 488  (goal 60: NO)
    split plan                        4.0    2.8      1.0        0  |    20 /  14
    near-duplicate scan (0 new)       3.2    2.5      0.6        0  |    16 /  12
    release build, end to end        82.2   60.6      6.2       45  |   411 / 303  (goal 120: NO;
                                                                         RSS flat: ~45 MB, goal 300)

Same machine, quiet (load average < 1), 2026-12-01 evening, 50,000 items, --reuse, before
(64b2b3d) and after this round's changes (weekly series from the per-item contributions,
visibility once per condition, orjson reads and writes, split lookups by dict):

    stage                          before wall / CPU s   after wall / CPU s   speed-up (wall)
    agreement report (meme3w)          13.4 / 12.9           7.7 /  7.0          1.74x
    agreement report (aha, 3 ann.)     21.4 / 20.9          10.8 /  9.9          1.98x
    release build, end to end          73.6 / 72.8          48.6 / 46.9          1.51x  (RSS+ 97 -> 108 MB)

Linear to 1M: ~155 s / ~215 s per report and ~970 s per release: the goals (60 s, 120 s) are
still NOT met.

Same machine, 2026-12-01 late evening, load average ~8 from other work (CPU seconds compare,
wall times do not), 50,000 items, --reuse, before (a116af6) and after the columnar report
(quality.agreement.UnitTable: each field read by PostgreSQL as its own JSON text into codes,
agreement values, conditions and pair scores once per distinct value or pair, Ratings from
arrays, confusions from codes; same report byte for byte):

    stage                          before wall / CPU s   after wall / CPU s   speed-up (CPU)
    agreement report (meme3w)          10.9 /  5.4           4.7 /  1.9          2.8x
    agreement report (aha, 3 ann.)     18.0 /  9.5           8.8 /  3.0          3.2x

PostgreSQL CPU 0.5 / 0.6 s, unchanged. Linear to 1M, CPU of this process: ~38 s / ~60 s (plus
~10 / ~12 s of PostgreSQL). Where it goes at 50k (meme3w / aha, CPU s): reading the columns
(rows from the cursor, codes, one timestamp parsed per item) 0.83 / 0.70; every field's
contributions 0.15 / 0.29; the bootstrap 0.70 / 1.09 (of which the resample draw itself,
``integers`` + ``bincount``, ~0.3); confusions 0.08 / 0.12; weekly series 0.04. After, at
200,000 items (fresh set-up, same load): 23.4 / 7.8 s (meme3w) and 38.4 / 11.6 s (aha) wall /
CPU, PostgreSQL 1.9 / 2.3 s: linear to 1M ~39 s / ~58 s CPU (+~10 / ~12 s PostgreSQL).

A REAL 1,000,000-item run (not extrapolated), same machine, quiet (load average ~1),
2026-12-02: set-up 320 s (148 s per preset), then stages on one core, before and after pausing
the cyclic garbage collector around the bulk reads (lib.gcpause; the columns' millions of row
tuples made its oldest-generation passes superlinear: 9.4 of the aha column read's 16.7 CPU s):

    stage                          before wall / CPU / PG s    after wall / CPU / PG s   RSS+ MB (after)
    agreement report (meme3w)          45.8 / 36.7 /  8.8          35.6 / 27.4 / 7.9          1095  (goal 60 s: yes)
    agreement report (aha, 3 ann.)     67.2 / 57.5 / 10.4          53.9 / 45.6 / 8.7          2072  (goal 60 s: yes)
    split plan                         13.4 /  9.7 /  4.2          10.9 /  7.7 / 3.5            81
    near-duplicate scan               (first scan, 51,466 pairs)   10.8 /  9.5 / 1.5            73  (0 new pairs)
    release build, end to end          -                          266.1 / 232.5 / 36.6         866  (goal 120 s, 300 MB: NO)

The release: 995,000 records, 1,990,000 annotations, 995,000 candidates, 48 files, 4.5 GB,
3,739 records/s. The extrapolation from 50,000 items had said ~335 s.

Then the release's second half (annotations, candidates, agreement figures) in a forked child
on the other core (core.forked), same machine and data: 169.6 s and 150.6 s wall in two runs
(from 266.1 s; goal 120 s: NO). With the child counted (this bench now adds the CPU of the
children it waited for, the RSS of the process tree, and the CPU of every PostgreSQL backend
seen during the stage, also those that ended): 208.1 s CPU, 29.7 s PostgreSQL, RSS+ 2,249 MB
summed over parent and child (pages the child shares with the parent counted twice: an upper
bound; goal 300 MB: NO). One process, by part (RSS before -> peak): scan 11.9 s, plan 11.0 s,
records 82.6 s (518 -> 1,109 MB), annotations 48.0 s (609 -> 997), candidates 22.2 s (-> 757),
agreement figures 27.5 s (611 -> 1,620).

Where the report's CPU goes at 200k (meme3w / aha, s): reading the annotations into units
(quality.reports.report_units: JSON and timestamps decoded per row by Django, grouping)
17 / 30; the per-item contributions of every field (quality.agreement._field: in_scope,
agreement_value, pair scores, Ratings.from_items, all per item in Python) 14 / 25; the
bootstrap itself (metrics.resample) 2.7 / 5.5; the dashboard's agreement over time, which
recomputes every field's per-item work once per week 14.5 / 32; confusions 2 / 2.5. The
release (cProfile at 20k): records 59% (model instances from select_related, JSON decoding,
stdlib json encoding, SplitPlan.split_of as a scalar np.searchsorted per row, Parquet, COCO),
annotations 16%, candidates 13%, progress writes ~7%.

Release, next round (issue 18 deliverable 2; same shared machine, load average ~5, 50,000
items, ``--reuse --stages release``, before = a116af6 and after run back to back; every file
of the two releases byte-identical but the archive index, which names the release number):

    release build, end to end     wall s  CPU s  PG CPU s  RSS+ MB
    before (a116af6)                50.8   30.1      1.6      169
    after                           27.8   15.6      1.7      191   (1.93x CPU)

At 200,000 items (a fresh --stages plan set-up, so no cached agreement report; /tmp script
around export_job_run, process CPU): before 212 s wall / 168 s CPU, after 140 / 76 (2.2x),
RSS+ ~520 MB both. Linear to 1M: ~310-380 s CPU: the goal (120 s, 300 MB) is still NOT met.

What changed: the gold and item columns, annotations and candidates are read as rows in
chunks (values_list, JSON as text decoded by orjson, annotation times formatted by
PostgreSQL), no model instances; every Parquet file is written from the rows as the JSONL
files are written (exports.build.tables.ParquetFamily: typed columns converted to Arrow once
and spooled, nothing re-read or decoded again: the JSONL was decoded 4 times per row before);
COCO through orjson; split counts and the annotation period kept while writing; and the
project-wide agreement report, fetched for nothing (never written; with a stale cache it was
a full computation, 21 s CPU and +345 MB at 200k: the "fixed cost" of the odd scaling), is no
longer read. Where the CPU goes now at 200k (s): records 28.5 (of which their Parquet family
~10), annotations 16.3 (~8 Parquet), candidates 8.0, the release's own agreement.json 17.1
(quality.reports.report_units + agreement_figures, bootstrap included), split plan and scan
4, archive 1. RSS: release_agreement holds every report unit (+390 MB peak at 200k, linear):
the RSS goal needs a compact or streamed report_units (quality app).

2026-12-02, a real 1,000,000-item meme3w project again (--reuse), quiet machine (load average
1.6-2.0 from this run's own two processes), release end to end with its second half forked:

    release build, end to end        wall s  CPU s  PG CPU s  RSS+ MB (PSS, parent + child)
    before this round (dc245f1)       151-170  ~196     ~27     2,249 (RSS, shared pages twice)
    after                              104.4   157.0    23.5     1,230   (goal 120 s: yes; 300 MB: NO)
    + agreement.json's table freed       103.3   155.8    22.6     1,013   (goal 300 MB: NO)
      before its bootstrap

What changed, by part (one instrumented process, RSS before -> peak, MB):
* the release's near-duplicate scan: 11.1 s -> 0 (no item since the bench's own scan: the stored
  pairs stand; a new item or a higher threshold searches again);
* splits.json: 23 s -> <1 s: its near-duplicate group list was a mask over every released item
  per group (51k groups), now one stable sort;
* the split plan: 8.6 -> 5-7 s, RSS peak +260 -> +90 (arrays per chunk, strata decoded once per
  distinct JSON text);
* records: peak 1,114 -> 604, annotations 1,001 -> 529, candidates 764 -> 502: the Parquet spools
  were memory-mapped by path (every page read stayed resident until the family closed);
* agreement.json: peak 1,624 -> 1,267 (bootstrap stack filled in place, scored ids as arrays,
  the column reader's chunks and text index dropped once coded). It is now the largest part:
  the decoded distinct values (every box list) and the dense contributions (~300 MB at 1M) with
  their float32 stack; the 300 MB goal needs those compact, not done.
The parts (forked, one run): parent plan 7.7, records 73.6, archive 5.5 s; child annotations
38.9, candidates 18.2, agreement 29.1 s. Also: this bench's RSS sampler took ~10% of a core
from the process it measured (psutil's child scan every 10 ms): now 50 ms, children rescanned
every tenth sample, sizes as PSS; 116 -> 104 s in back-to-back runs.

Same day, agreement report (meme3w) at 1M: 33.5 s wall / 30.2 CPU / 5.9 PG, RSS+ 748 MB (was
1,095); split plan 6.9 s; full near-duplicate scan (forced) 10.8 s.

2026-12-02 afternoon, same 1M project, quiet machine; the release's sampler now also prints
where its peak is (this process vs its children; BENCH_RSS_TIMELINE=path writes every sample):

    release build, end to end        wall s  CPU s  PG CPU s  RSS+ MB  peak: when, parent / children
    start of the session (e680cf2)     109.6   169.0    25.5       921
    agreement.json compact (1b0dfe9)   101.9   156.7    22.9       515  20 s, +23 / 492 (agreement)
    + one-hot as CSR (a4b6f71)          94.2   145.7    21.5       442  18 s, +25 / 417 (agreement)
    + trims, JSONL by bytes (d02a875)  108.9   169.0    25.4       413  22 s, +0 / 413 (agreement)
    + two-slot kappa (87ef389)         101.8   153.0    24.2       400  23 s, -3 / 402 (bootstrap)
    (wall times vary by +-15 s between back-to-back runs of the same code on this kind)

Agreement reports at 1M after a4b6f71: meme3w 23.8 s wall / 21.2 CPU / 5.2 PG, RSS+ 465 MB (was
33.5 s, 748 MB); aha (3 annotators) 41.5 / 41.3 / 6.2, RSS+ 972 MB (was 55.1 s, 1,753 MB).

What changed in agreement.json (one process, RSS growth at its peak: 687 -> ~237 MB): it reads
the released items only (report_table(only_items=...), no filtered copy of every column), codes
as int32, each field's column let go after its figures, completion times int64 until read;
dense contributions are columns the bootstrap reads in place (a field's mask once, 0/1 as
uint8, no float64 stack), the sparse stack is built chunk by chunk, one-hot matrices straight
as CSR; free heap pages go back to the OS between steps (lib.memory). The forked part computes
it first, while the parent streams records (+25 MB), not during their Parquet close (+210).
What is left of the 300 MB goal: at the peak the forked child holds ~+270 MB of its own pages
(smaps: Private_Dirty; ~25 MB of it copy-on-write), during the bootstrap: the figures' live
contributions and per-field arrays (~125 MB) plus the weight blocks and sparse chunks; the
parent adds its records streaming (~+80: lines, batches, heap) and the plan it shares (~+55).

2026-12-02 evening, another machine of this kind, ~1.5x slower per core (the start of the
session's code, d82d6c4, took 155.9 s here for the release, 101.8 s on the afternoon's
machine); a fresh 1M meme3w set-up (150.8 s) and a fresh 1M aha one (139.0 s):

    release build, end to end        wall s  CPU s  PG CPU s  RSS+ MB  peak: when, parent / children
    start of the session (d82d6c4)     155.9   240.3    33.8       397  36 s, -5 / 402 (agreement)
    contributions over scored rows     147.6   226.3    33.7       329  31 s, -4 / 333 (agreement)
    + batches of pair scores, int32
      ids, splits.json, row groups by
      bytes (9587d08)                  129.0   198.8    33.0       288  38 s, +6 / 282 (agreement)
    + narrow codes (fb07654)           123.6   194.1    28.9       279  39 s, +7 / 272 (agreement)
    + no times, blocks of 8 (b277ad1)  121.4   193.6    25.5       276  95 s, +30 / 246 (annotations)
    start of the session again, right after it: 153.4 s, 240.8 CPU, 27.8 PG, 391 MB
    (back-to-back runs of one commit here: 123.6-143.7 s and 279-299 MB before b277ad1)

Where it went (one process, release_agreement alone, RSS growth at each part's peak, MB):
table read 215 -> 153, label 182 -> 136, target_category 179 -> 136, visual_region 201 -> 142,
bootstrap 148 -> 140; the figures are the same (agreement.json compared whole). The fields
under one condition (Meme3W's four target fields: 37% of the units) keep their values and
the bootstrap reads their weights over those rows only; region pairs are scored in batches
of 32k distinct pairs (one call over 300k built ~60 MB of Python tuples); codes are int8 for
fields of few values. At the end of the parent: the per-split records' row groups were 256
rows (3,900 of them at 1M, most without an image), whose metadata pyarrow keeps until close:
+103 MB before close, +206 while closing in a synthetic file of that shape; they now end at
5,000 rows or 32 MB of images. splits.json's group list sorted every released item (+89 MB);
it now sorts the members of multi-member groups only (+51).

Agreement reports at 1M on this machine: meme3w 40.3 s wall / 37.1 CPU / 8.7 PG, RSS+ 461 MB at
d82d6c4 -> 32.7 s / 29.0 / 8.4, 356 MB;
aha (3 annotators) 73.4 s / 76.8 / 10.4, 987 MB at d82d6c4 -> 55.3 s / 54.7 / 10.1, 614 MB
(alpha contributions over their pairable units, contiguous; annotator pairs counted by one
int64 key instead of a row-wise unique: 3.3 s).

2026-12-02 night, another machine of this kind. This bench's own sampler was slowing what it
measured: reading both processes' PSS (smaps_rollup: the kernel walks the page tables, ~15 ms
for a 900 MB heap of Python objects) every 50 ms took ~40% of a core, in a thread of the
measured process. The same code (377fec3) back to back: 156.4 and 145.3 s with it, 96.1 s
with PSS read every 5 s. It now reads PSS once a second (and when a child starts or ends) and
RSS counters every 50 ms in between, each counted as an upper bound of its PSS (bench/common.
RssSampler); the samplers' own CPU is no longer counted. Machine speed varies here too: a
pure-Python loop (30M iterations) took 3.36-4.42 s within the hour, and so do the runs:

    release build, end to end        wall s  CPU s  PG CPU s  RSS+ MB  peak: when, parent / children
    377fec3, new sampler               116.6   163.7    25.5       301
    + split twins follow the whole
      file's types and take their rows
      from its batches; decision times
      as text (698ba55)                113.4   151.1    28.8       316  82 s, +50 / 265
    the same, machine slower (loop
      4.42 s)                          140.3   183.4    36.6       315  105 s, +39 / 277
                                                                        (largest PSS reading 305)

The records' Parquet close: 27.1 -> 15.8 s, annotations' 9.1 -> 4.4 s (same bytes: every file
of a 100k release compared by sha256). The peak is where the parent's records close (+40-50
MB) meets the child's annotations close (+37 MB: a 100k close alone is +45 MB, before and
after the change, and +70 MB for records, of which the Arrow pool holds 13 MB).

2026-12-03, another machine of this kind, fast at first (the module-level loop 2.1 s), then
slower (3.3-3.6 s) and back (2.3-2.7 s); a fresh 1M meme3w set-up. "PSS max" is the largest
exact reading, RSS+ the bench's figure (its estimates between readings included):

    release build, end to end        loop s  wall s  CPU s  PG CPU s  RSS+ MB  PSS max
    start of the session (f7368a4)    2.1-2.3    99.2   126.9    27.1      314     +289
    the same, again                      -       89.9   115.9    24.8      305     +291
    no list of every row's split code,
      no 1M-name list, no released-id
      copy for the progress              2.1      87.2   109.7    23.2      276     +253
    + the candidates to whichever half
      is free first (fb3e5c6)          3.3-3.6   159.7   202.7    50.6      272     +265
    fb3e5c6 again                        3.25    128.8   173.2    30.2      315*       -
    + values read back straight
      through orjson, no fitter where
      pyarrow takes the values (ba60e3d) 2.3-2.5  124.9   170.1    33.1      312*     +259
    + the sampler fix below            2.5-2.7   116.9   154.9    31.5      271     +262
    the same, again                      -      117.9   158.0    30.8      268     +254
    + card settings and pseudonyms
      read in a thread beside the plan     2.7   129.8   175.6    32.9      277     +269
    + candidates in 8 parts either half
      takes, merged by the parent; no
      per-row step cutting row groups
      (c153d3d)                           -*2   129.0   177.7    36.1      282     +265
    the same, plain bench (no phases)     -*2   131.2   177.8    37.3      280     +280

(*2 the bench's own loop, in a function: 1.18 -> 1.28 s and 1.10 -> 1.45 s during those runs,
against 1.08 -> 1.08 s during the 117.9 s run: the machine was slower.) The parts balance the
halves: in one run the parent took parts 0, 1, 2, 4, 6 and the child 3, 5, 7, ending 1.9 s
apart (before, one half sat idle ~16-20 s at the end). The merge costs 3.6 s in a process of
its own (1.8 s Parquet encoding, 0.7 s joining and hashing 742 MB of JSONL), 5.9-7.4 s at the
end of a release, where the 4.5 GB just written are dirty pages and the writes are throttled.

(* the sampler's exit artifact: when the forked part ended, the samples since the last reading
counted the parent with its next difference, which no longer held the pages it had shared, and
the child as well: a false +95 MB, fixed in bench.common.RssSampler.) The memory peak is no
longer the two Parquet closes meeting (now +253 to +265 where the child's agreement figures
meet the parent's records streaming). The split plan alone peaks at +256 MB (VmHWM, measured
apart: 243 MB of it traced Python and numpy memory), before the fork: the next target. The
parts at loop 2.5-2.7 s: plan 10 s, records 73 (their Parquet close 16.5), candidates in the
parent 26 (it finished first); child agreement 29, annotations 53. Every file of a release of
ba60e3d was byte-identical to one of fb3e5c6 (manifest's sha256 of all 38 data files).

2026-12-03 afternoon, another machine of this kind, fast (the bench's loop 0.77-0.85 s, against
1.08-1.45 s for the runs above); a fresh 1M set-up (meme3w 106 s; meme3w + aha 107 + ~110 s):

    stage                          wall s  CPU s  PG CPU s  RSS+ MB
    agreement report (meme3w)        28.4   19.8      6.5      310
    agreement report (aha, 3 ann.)   41.8   33.5      7.5      569
    split plan (before the scan)      6.7    4.4      2.3      216
    near-duplicate scan (first)      12.3    9.7      2.4      341
    release build, 0f11df0           83.6  117.3     26.8      263   (then 85.7, 80.5)
    release build, 7e3d8d9           77.7  114.4     24.2      274   (then 78.3 / 115.2 / 269)

The last two rows paired A B A B, the same data and machine: the end of the build (after the
last candidate part, one core's work) runs on both: the candidate JSONL files are joined in a
thread while the Parquet files are written from the spools (the merge 5.2 -> 2.9 s: reading,
writing and hashing release the GIL), and the archive's CRC-32s are computed in a thread ahead
of the sha256 pass, which hashes each entry as its CRC arrives (5.6 -> 4.2 s; hard links read
once). Where the time goes (py-spy, 20 Hz, idle included): the plan 8.3 s (of which ~3.5 s
waiting for PostgreSQL's first rows), the parent's records 55 s (their Parquet close 11 s), the
child's agreement 22 s and annotations 40 s, the candidate parts 13 s in both halves, the merge
2.9 s and the archive 4.2 s; the two halves end within ~1 s of each other.

Then core.streams (904f6e7): outside a transaction Django declares its server-side cursors
WITH HOLD, so PostgreSQL ran each whole query and stored its result before the first row (the
records' first row came after 5.2-6.3 s, measured apart); each long read now streams over a
reading connection of its own, in a transaction of its own (first row after 0.08-0.1 s). Paired
A B A B against 08cfda7, same data and machine (loop 0.76-0.84 s):

    release build, 08cfda7           77.4 / 111.0 / 26.1 / 274     78.1 / 114.2 / 24.1 / 261
    release build, 904f6e7           77.5 / 114.4 / 22.5 / 262     77.7 / 114.5 / 22.2 / 265
                                     (wall s / CPU s / PG CPU s / RSS+ MB)

PostgreSQL's CPU falls by 2-3.6 s (no stored copy of the records, annotations, candidate parts
and agreement reads), the wall time stays: both cores were busy already. Reports with it
(--reuse): meme3w 28.9 s wall / 18.1 CPU / 9.3 PG, RSS+ 360 MB; aha 41.4 / 33.5 / 7.5, 555 MB;
split plan 7.6 s; near-duplicate scan 12.3 s.
"""

from __future__ import annotations

import os

for _var in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS"):
    os.environ[_var] = "1"

import argparse
import hashlib
import io
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

# The bench folder would shadow the quality app (bench/quality.py): the repository root instead.
ROOT = Path(__file__).resolve().parent.parent
sys.path[:] = [str(ROOT)] + [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]

from bench.common import CATEGORIES, MB, WORDS, PostgresCpu, RssSampler

POOL = 20
COPY_ROWS = 20_000
STAGES = {"agreement", "plan", "release"}
GOAL_ITEMS = 1_000_000  # the goals' project size
GOALS = {"agreement_s": 60.0, "release_s": 120.0, "release_rss_mb": 300.0}
ENTITIES = (
    ("Zorgians", "people from Planet Zorg", "Zorg people"),
    ("Muslims", "Muslim people", "muslims"),
    ("women", "Women", "women in general"),
    ("immigrants", "migrants", "immigrant people"),
    ("politicians", "the politicians", "politicians"),
)
MENTIONS = ("planet zorg", "zorg", "people from planet zorg", "the people")
HATEFUL_TYPES = ("Mocking", "Incitement", "Dehumanization", "Slurs", "Contempt", "Inferiority", "Exclusion", "Other")
HATEFUL_P = (0.55, 0.12, 0.15, 0.1, 0.2, 0.12, 0.02, 0.03)
TARGETS = (
    "ethnicity",
    "race",
    "nationality",
    "immigration status",
    "religion",
    "caste",
    "sex",
    "gender identity",
    "sexual orientation",
    "disability or disease",
)
TARGETS_P = (0.2, 0.1, 0.15, 0.05, 0.25, 0.03, 0.15, 0.05, 0.08, 0.06)
NON_HATEFUL = ("Humor", "Sarcasm", "Other")
NON_HATEFUL_P = (0.45, 0.45, 0.2)
TS0 = 1_780_000_000  # 2026-05-28: submissions spread over the 12 weeks after it


def pg_ts(seconds: int) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S+00", time.gmtime(seconds))


# ------------------------------------------------------------------------------------------
# Database and set-up
# ------------------------------------------------------------------------------------------


def database_recreate(pg: str, db: str, env: dict) -> None:
    import psycopg

    with psycopg.connect(f"{pg}/postgres", autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
        conn.execute(f'CREATE DATABASE "{db}"')
    py = ROOT / ".venv" / "bin" / "python"
    subprocess.run(
        [str(py if py.exists() else sys.executable), "manage.py", "migrate", "--no-input", "-v", "0"],
        cwd=ROOT,
        env=env,
        check=True,
    )


def copy_rows(table: str, columns: tuple[str, ...], blocks) -> int:
    """COPY ``blocks`` (iterables of tab-separated lines, no escapes needed) into ``table``."""
    from django.db import connection

    n = 0
    with connection.cursor() as cur, cur.cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for lines in blocks:
            buf = "\n".join(lines) + "\n"
            copy.write(buf)
            n += len(lines)
    return n


def identity_after(table: str) -> None:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"SELECT setval(pg_get_serial_sequence('{table}', 'id'), (SELECT max(id) FROM {table}))")


def next_id(table: str) -> int:
    from django.db import connection

    with connection.cursor() as cur:
        cur.execute(f"SELECT coalesce(max(id), 0) + 1 FROM {table}")
        return cur.fetchone()[0]


def distinct_raters(rng: np.random.Generator, n: int, per_item: int) -> np.ndarray:
    """Per item ``per_item`` distinct annotators of the pool (indices 0..POOL-1)."""
    first = rng.integers(0, POOL, n)
    if per_item == 2:
        return np.column_stack([first, (first + rng.integers(1, POOL, n)) % POOL])
    d1 = rng.integers(1, POOL - 1, n)
    d2 = rng.integers(d1 + 1, POOL)
    return np.column_stack([first, (first + d1) % POOL, (first + d2) % POOL])


def small_images(media_root: Path, k: int = 8) -> list[tuple[str, str]]:
    """``k`` small real PNG files, content-addressed under MEDIA_ROOT: [(relative path, sha256)]."""
    from PIL import Image

    out = []
    for i in range(k):
        buf = io.BytesIO()
        Image.new("RGB", (64, 64), (30 * i % 256, 80, 200 - 20 * i)).save(buf, "PNG")
        data = buf.getvalue()
        sha = hashlib.sha256(data).hexdigest()
        rel = f"images/{sha[:2]}/{sha}.png"
        (media_root / rel).parent.mkdir(parents=True, exist_ok=True)
        (media_root / rel).write_bytes(data)
        out.append((rel, sha))
    return out


ITEM_COLUMNS = (
    "id",
    "project_id",
    "import_key",
    "image",
    "image_sha256",
    "image_format",
    "width",
    "height",
    "pixel_hash",
    "phash",
    "text",
    "text_from_ocr",
    "title",
    "source_dataset",
    "source_id",
    "language",
    "domain",
    "redistributable",
    "metadata",
    "stage",
    "workflow_stage",
    "split",
    "excluded_reason",
    "duplicate_of_id",
    "created_at",
)


def items_copy(*, project, n: int, stage: str, media_root: Path, seed: int) -> np.ndarray:
    """COPY ``n`` items of ``project``; returns their ids (ascending)."""
    rng = np.random.default_rng(seed)
    base = next_id("projects_item")
    ids = np.arange(base, base + n, dtype=np.int64)
    phash = rng.integers(0, 2**63, n, dtype=np.int64).astype(np.uint64) * np.uint64(2) + rng.integers(0, 2, n).astype(
        np.uint64
    )
    pixel = [f"{x:016x}" for x in rng.integers(0, 2**63, n, dtype=np.int64).tolist()]
    dup_of = np.full(n, -1, dtype=np.int64)
    n_near, n_exact = n // 20, n // 200
    if n_near:  # the last 5%: near copies of earlier items (1-3 pHash bits flipped)
        src = rng.integers(0, n - n_near - n_exact, n_near)
        flips = np.zeros(n_near, dtype=np.uint64)
        for _ in range(3):
            bit = rng.integers(0, 64, n_near).astype(np.uint64)
            use = rng.random(n_near) < 0.7
            flips ^= np.where(use, np.uint64(1) << bit, np.uint64(0))
        flips[flips == 0] = np.uint64(1)
        phash[n - n_near :] = phash[src] ^ flips
    if n_exact:  # the 0.5% before them: the same decoded pixels as an earlier item
        lo = n - n_near - n_exact
        src = rng.integers(0, lo, n_exact)
        dup_of[lo : lo + n_exact] = ids[src]
        phash[lo : lo + n_exact] = phash[src]
        for k, s in enumerate(src.tolist()):
            pixel[lo + k] = pixel[s]
    shared = small_images(media_root)
    texts = [
        " ".join(WORDS[(k * 7 + j * 3) % len(WORDS)] for j in range(6 + k % 9)) + " planet zorg" for k in range(997)
    ]
    now = pg_ts(TS0)
    pid = project.pk
    preset = project.preset

    def blocks():
        for start in range(0, n, COPY_ROWS):
            lines = []
            for i in range(start, min(n, start + COPY_ROWS)):
                px = pixel[i]
                if i % 33 == 0:
                    rel, sha = shared[(i // 33) % len(shared)]
                    red, fmt = "t", "PNG"
                else:
                    sha = f"{px}{i:016x}{px}{int(phash[i]):016x}"
                    rel, red, fmt = f"images/{sha[:2]}/{sha}.jpg", "f", "JPEG"
                dup = int(dup_of[i])
                lines.append(
                    f"{ids[i]}\t{pid}\t{preset}-{i}\t{rel}\t{sha}\t{fmt}\t{500 + i % 7 * 20}\t{480 + i % 5 * 16}\t"
                    f"{px * 4}\t{int(phash[i]):016x}\t{texts[i % 997]}\tf\t\tbench\tbench-{preset}-{i:07d}\ten\t\t"
                    f'{red}\t{{"template": {i % 500}}}\t{stage}\t0\t\t\t{dup if dup >= 0 else chr(92) + "N"}\t{now}'
                )
            yield lines

    copy_rows("projects_item", ITEM_COLUMNS, blocks())
    identity_after("projects_item")
    return ids


ANNOTATION_COLUMNS = (
    "item_id",
    "annotator_id",
    "kind",
    "status",
    "values",
    "version",
    "schema_version",
    "provenance",
    "time_spent_ms",
    "opened_at",
    "submitted_at",
    "first_submitted_at",
    "created_at",
    "updated_at",
    "skip_reason",
    "stage",
)


def annotations_copy(item_ids: np.ndarray, raters: np.ndarray, user_ids: list[int], values_of) -> int:
    """COPY one submitted annotation per (item, slot); ``values_of(start, stop)`` gives the JSON
    texts of those items' slots ([item][slot]). Submissions spread over 12 weeks."""
    n, slots = raters.shape
    stamps = [pg_ts(TS0 + k * 613) for k in range(12 * 7 * 24 * 6)]
    users = np.asarray(user_ids, dtype=np.int64)[raters]

    def blocks():
        for start in range(0, n, COPY_ROWS):
            stop = min(n, start + COPY_ROWS)
            values = values_of(start, stop)
            lines = []
            for i in range(start, stop):
                t0 = (i * 12 * 7 * 24 * 6) // n
                for s in range(slots):
                    ts = stamps[min(t0 + s, len(stamps) - 1)]
                    lines.append(
                        f"{item_ids[i]}\t{users[i, s]}\tannotation\tsubmitted\t{values[i - start][s]}\t1\t1\t{{}}\t"
                        f"{20_000 + (i * 7919 + s * 104_729) % 90_000}\t{ts}\t{ts}\t{ts}\t{ts}\t{ts}\t\t0"
                    )
            yield lines

    return copy_rows("annotation_annotation", ANNOTATION_COLUMNS, blocks())


def meme3w_values(rng: np.random.Generator, n: int, raters: np.ndarray):
    """Truth per item and, per slot, each annotator's record as JSON text (built from pools)."""
    harmful = rng.random(n) < 0.45
    cat = rng.choice(4, n, p=[0.33, 0.25, 0.24, 0.18])
    ent = rng.integers(0, len(ENTITIES), n)
    mention = rng.integers(-1, len(MENTIONS), n)  # -1: the text does not name the target
    box_n = rng.choice(3, n, p=[0.25, 0.6, 0.15])
    boxes = []
    for _ in range(512):
        x, y = int(rng.integers(0, 600)), int(rng.integers(0, 600))
        boxes.append((x, y, x + int(rng.integers(80, 400)), y + int(rng.integers(80, 400))))
    box_of = rng.integers(0, 512, n)
    err_label = rng.uniform(0.04, 0.17, POOL)
    err_cat = rng.uniform(0.05, 0.2, POOL)

    def box_json(b: int, k: int, jitter: int) -> str:
        out = []
        for m in range(k):
            x1, y1, x2, y2 = boxes[(b + m * 97) % 512]
            d = (jitter * 13 + m * 7) % 41 - 20
            out.append(f"[{max(0, x1 + d)}, {max(0, y1 - d)}, {min(1000, x2 + d)}, {min(1000, y2 + d // 2)}]")
        return "[" + ", ".join(out) + "]"

    def record(h: bool, c: int, e: str, m: int, b: int, k: int, jitter: int) -> str:
        if not h:
            return (
                '{"label": "non-harmful", "target_category": null, "target_entity": null, '
                '"text_mention": null, "visual_region": []}'
            )
        mtext = "null" if m < 0 else f'"{MENTIONS[m]}"'
        return (
            f'{{"label": "harmful", "target_category": "{CATEGORIES[c]}", "target_entity": "{e}", '
            f'"text_mention": {mtext}, "visual_region": {box_json(b, k, jitter)}}}'
        )

    def gold(i: int) -> str:
        return record(
            bool(harmful[i]), int(cat[i]), ENTITIES[ent[i]][0], int(mention[i]), int(box_of[i]), int(box_n[i]), 20
        )

    def values_of(start: int, stop: int) -> list[list[str]]:
        r = np.random.default_rng([start, 7])
        rr = raters[start:stop]
        m = stop - start
        said = harmful[start:stop, None] ^ (r.random((m, 2)) < err_label[rr])
        c = np.where(r.random((m, 2)) < err_cat[rr], r.integers(0, 4, (m, 2)), cat[start:stop, None])
        variant = np.where(r.random((m, 2)) < 0.75, 0, r.integers(1, 3, (m, 2)))
        ment = np.where(r.random((m, 2)) < 0.8, mention[start:stop, None], r.integers(-1, len(MENTIONS), (m, 2)))
        k = np.where(r.random((m, 2)) < 0.85, box_n[start:stop, None], r.integers(0, 3, (m, 2)))
        jit = r.integers(0, 41, (m, 2))
        out = []
        for j in range(m):
            i = start + j
            e = ENTITIES[ent[i]]
            out.append(
                [
                    record(
                        bool(said[j, s]),
                        int(c[j, s]),
                        e[variant[j, s]],
                        int(ment[j, s]),
                        int(box_of[i]),
                        int(k[j, s]),
                        int(jit[j, s]),
                    )
                    for s in range(2)
                ]
            )
        return out

    return gold, values_of


def aha_values(rng: np.random.Generator, n: int, raters: np.ndarray):
    hateful = rng.random(n) < 0.37
    err = rng.uniform(0.01, 0.08, POOL)
    flip_rate = rng.uniform(0.02, 0.08, POOL)
    fields = []
    for name, labels, p, when in (
        ("hateful_type", HATEFUL_TYPES, HATEFUL_P, True),
        ("targeted_categories", TARGETS, TARGETS_P, True),
        ("non_hateful_type", NON_HATEFUL, NON_HATEFUL_P, False),
    ):
        truth = rng.random((n, len(labels))) < np.asarray(p)
        bits = truth.astype(np.int64) @ (1 << np.arange(len(labels)))
        texts = [
            "[" + ", ".join(f'"{labels[b]}"' for b in range(len(labels)) if mask >> b & 1) + "]"
            for mask in range(1 << len(labels))
        ]
        fields.append((name, len(labels), bits, texts, when))

    def values_of(start: int, stop: int) -> list[list[str]]:
        r = np.random.default_rng([start, 11])
        rr = raters[start:stop]
        m = stop - start
        said = hateful[start:stop, None] ^ (r.random((m, 3)) < err[rr])
        parts = []
        for name, k, bits, texts, when in fields:
            flips = (r.random((m, 3, k)) < flip_rate[rr][..., None]).astype(np.int64) @ (1 << np.arange(k))
            mask = bits[start:stop, None] ^ flips
            if name == "hateful_type":
                other = 1 << (k - 1)
                mask = np.where(mask & (other - 1), mask & (other - 1), mask)  # Other is exclusive
            mask = np.where(mask == 0, 1, mask)  # required: at least one label
            applies = said if when else ~said
            parts.append((name, np.where(applies, mask, 0), texts))
        out = []
        for j in range(m):
            row = []
            for s in range(3):
                body = ", ".join(f'"{name}": {texts[mask[j, s]]}' for name, mask, texts in parts)
                label = "Hateful" if said[j, s] else "Not-Hateful"
                row.append(f'{{"is_hateful": "{label}", {body}}}')
            out.append(row)
        return out

    return values_of


GOLD_COLUMNS = ("item_id", "revision", "is_current", "values", "provenance", "note", "schema_version", "created_at")
CANDIDATE_COLUMNS = (
    "item_id",
    "provider_id",
    "prompt_version",
    "model_name",
    "raw_reply",
    "think",
    "fields",
    "removed",
    "parse_error",
    "latency_ms",
    "prompt_tokens",
    "completion_tokens",
    "created_at",
)


def project_build(*, preset: str, n: int, lead, annotators: list, media_root: Path, seed: int):
    from django.db import transaction

    from candidates.models import Provider
    from projects.models import Stage
    from projects.services import membership_add, project_create

    per_item = 2 if preset == "meme3w" else 3
    project = project_create(
        name=f"Bench scale {preset} {n}",
        slug=f"bench-scale-{preset}",
        preset=preset,
        lead=lead,
        annotators_per_item=per_item,
    )
    for a in annotators:
        membership_add(project=project, user=a, role="annotator")
    rng = np.random.default_rng([seed, per_item])
    raters = distinct_raters(rng, n, per_item)
    user_ids = [a.pk for a in annotators]
    with transaction.atomic():
        stage = Stage.GOLD if preset == "meme3w" else Stage.ADJUDICATION
        ids = items_copy(project=project, n=n, stage=stage, media_root=media_root, seed=seed + per_item)
        if preset == "meme3w":
            gold, values_of = meme3w_values(rng, n, raters)
            annotations_copy(ids, raters, user_ids, values_of)
            provider = Provider.objects.create(project=project, name="bench-model", kind="replay", model="bench-vl-1")
            ts = pg_ts(TS0)
            prov = '{"label": {"source": "identical"}, "target_category": {"source": "identical"}}'

            def gold_blocks():
                for start in range(0, n, COPY_ROWS):
                    yield [
                        f"{ids[i]}\t1\tt\t{gold(i)}\t{prov}\t\t1\t{ts}" for i in range(start, min(n, start + COPY_ROWS))
                    ]

            def candidate_blocks():
                for start in range(0, n, COPY_ROWS):
                    lines = []
                    for i in range(start, min(n, start + COPY_ROWS)):
                        g = gold(i)
                        lines.append(
                            f"{ids[i]}\t{provider.pk}\tv1\tbench-vl-1\t{g}\t\t{g}\t[]\t\t{800 + i % 900}\t900\t120\t{ts}"
                        )
                    yield lines

            copy_rows("adjudication_goldrecord", GOLD_COLUMNS, gold_blocks())
            copy_rows("candidates_candidate", CANDIDATE_COLUMNS, candidate_blocks())
        else:
            annotations_copy(ids, raters, user_ids, aha_values(rng, n, raters))
    return project


def setup(args, media_root: Path):
    from django.contrib.auth import get_user_model
    from django.db import connection

    User = get_user_model()
    lead = User.objects.create(username="bench-scale-lead")
    annotators = [User.objects.create(username=f"bench-scale-ann{k:02d}") for k in range(POOL)]
    projects = {}
    for preset in args.presets:
        t0 = time.perf_counter()
        projects[preset] = project_build(
            preset=preset, n=args.items, lead=lead, annotators=annotators, media_root=media_root, seed=args.seed
        )
        print(f"  set-up {preset}: {args.items:,} items written in {time.perf_counter() - t0:.1f} s", flush=True)
    t0 = time.perf_counter()
    with connection.cursor() as cur:
        for table in ("projects_item", "annotation_annotation", "adjudication_goldrecord", "candidates_candidate"):
            cur.execute(f"VACUUM ANALYZE {table}")
    print(f"  set-up VACUUM ANALYZE: {time.perf_counter() - t0:.1f} s", flush=True)
    return lead, projects


# ------------------------------------------------------------------------------------------
# Stages
# ------------------------------------------------------------------------------------------


@dataclass
class Row:
    stage: str
    items: int
    wall: float
    cpu: float
    pg_cpu: float
    rss_mb: float
    goal: str
    goal_s: float | None = None
    goal_rss: float | None = None
    note: str = ""

    def within(self) -> str:
        if self.goal_s is None:
            return "-"
        if self.items != GOAL_ITEMS:
            return f"n/a (goals are for {GOAL_ITEMS:,})"
        rss_ok = self.goal_rss is None or self.rss_mb <= self.goal_rss
        wall = "yes" if self.wall <= self.goal_s and rss_ok else "NO"
        cpu = "yes" if self.cpu + self.pg_cpu <= self.goal_s and rss_ok else "NO"
        return f"{wall} / {cpu}"


class Timed:
    """Wall, process CPU, PostgreSQL CPU (backends of the database) and peak RSS growth."""

    def __init__(self, db: str):
        self.db = db

    def __enter__(self):
        self.pg_cpu = PostgresCpu(self.db).__enter__()
        self.rss = RssSampler().__enter__()
        return self

    def __exit__(self, *exc):
        self.rss.__exit__(*exc)
        self.pg_cpu.__exit__(*exc)
        self.pg = self.pg_cpu.seconds
        self.rss.cpu -= self.pg_cpu.sampler_cpu  # the samplers are threads of this process


def plan_and_scan(args, project) -> list[Row]:
    """The split plan and the near-duplicate scan (both also run inside the release build)."""
    from exports.selectors import split_plan
    from exports.services import near_duplicates_detect

    rows: list[Row] = []
    n = args.items
    with Timed(args.db) as t:
        plan = split_plan(project=project)
    print(
        f"  split plan: sizes {plan.sizes}, excluded {len(plan.excluded):,}, "
        f"integrity {'ok' if plan.integrity.ok else 'FAILED'}",
        flush=True,
    )
    rows.append(
        Row("split plan (meme3w, before the scan)", n, t.rss.wall, t.rss.cpu, t.pg, t.rss.growth_mb, "part of release")
    )
    with Timed(args.db) as t:
        scan = near_duplicates_detect(project=project, full=True)  # the search itself, also on --reuse
    scan.refresh_from_db()
    print(f"  near-duplicate scan: {scan.items_scanned:,} items, {scan.pairs_new:,} pairs stored", flush=True)
    rows.append(Row("near-duplicate scan (meme3w)", n, t.rss.wall, t.rss.cpu, t.pg, t.rss.growth_mb, "part of release"))
    return rows


def run_stages(args, lead, projects: dict, releases: Path) -> list[Row]:
    from django.db import connection

    from exports.selectors import release_dir
    from exports.services import export_job_run, export_job_start
    from quality.models import AgreementReport
    from quality.services import agreement_report_compute_now

    connection.ensure_connection()
    rows: list[Row] = []
    n = args.items
    for preset in args.presets if "agreement" in args.stages else ():
        project = projects[preset]
        label = f"agreement report ({preset}{', 3 annotators' if preset == 'aha' else ''})"
        AgreementReport.objects.filter(project=project).delete()  # a --reuse run computes it again
        with Timed(args.db) as t:
            report = agreement_report_compute_now(project=project, filters={}, user=lead)
        result = (report.result or {}).get("agreement", {})
        head = ", ".join(
            f"{h['field']} {h['metric']} {h['value']:.3f} [{h['ci'][0]:.3f}, {h['ci'][1]:.3f}]"
            for h in result.get("headline", [])
            if h.get("value") is not None and h.get("ci")
        )
        print(
            f"  {label}: status {report.status}, {result.get('n_items', 0):,} items, "
            f"{result.get('method', {}).get('resamples')} resamples; {head}",
            flush=True,
        )
        rows.append(
            Row(
                label,
                n,
                t.rss.wall,
                t.rss.cpu,
                t.pg,
                t.rss.growth_mb,
                "<= 60 s",
                GOALS["agreement_s"],
                note=f"status {report.status}",
            )
        )
    if "meme3w" not in projects:
        return rows
    project = projects["meme3w"]
    if "plan" in args.stages:
        rows += plan_and_scan(args, project)
    if args.skip_release or "release" not in args.stages:
        return rows
    job = export_job_start(project=project, user=lead, enqueue=False)
    with Timed(args.db) as t:
        release = export_job_run(job=job)
    job.refresh_from_db()
    if release is None:
        print(f"  release FAILED: {job.error}", flush=True)
        note = "FAILED"
    else:
        files = [p for p in release_dir(release).rglob("*") if p.is_file()]
        size = sum(p.stat().st_size for p in files)
        note = f"{release.record_count:,} records, {size / MB:,.0f} MB"
        print(
            f"  release v{release.number}: {release.record_count:,} records, "
            f"{release.manifest['counts']['annotations']:,} annotations, "
            f"{release.manifest['counts']['candidates']:,} candidates, {len(files)} files, {size / MB:,.0f} MB "
            f"({release.record_count / t.rss.wall:,.0f} records/s); RSS {t.rss.peak_text}",
            flush=True,
        )
    rows.append(
        Row(
            "release build (meme3w, end to end)",
            n,
            t.rss.wall,
            t.rss.cpu,
            t.pg,
            t.rss.growth_mb,
            "<= 120 s, <= 300 MB",
            GOALS["release_s"],
            GOALS["release_rss_mb"],
            note,
        )
    )
    return rows


def extrapolated(rows: list[Row], target: int) -> list[Row]:
    """Every figure scaled linearly from the measured size to ``target`` items (RSS too, which
    over-states stages whose memory is flat in the number of items)."""
    out = []
    for r in rows:
        f = target / r.items
        out.append(
            Row(
                r.stage, target, r.wall * f, r.cpu * f, r.pg_cpu * f, r.rss_mb * f, r.goal, r.goal_s, r.goal_rss, r.note
            )
        )
    return out


def print_table(rows: list[Row]) -> None:
    head = f"{'stage':40s}{'items':>11s}{'wall s':>9s}{'CPU s':>8s}{'PG CPU s':>10s}{'RSS+ MB':>9s}  {'goal':22s}within (wall / CPU+PG)"
    print(head)
    print("-" * len(head))
    for r in rows:
        print(
            f"{r.stage:40s}{r.items:>11,}{r.wall:>9.1f}{r.cpu:>8.1f}{r.pg_cpu:>10.1f}{r.rss_mb:>9.0f}  "
            f"{r.goal:22s}{r.within()}"
        )


def loadavg() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def machine_speed() -> str:
    """Seconds of a fixed pure-Python loop (30M additions in a function): this kind's speed
    varies within an hour (the same loop at module level took 2.1 to 4.4 s on one machine,
    and the stages' times moved with it), so figures of different runs compare only beside it."""
    t = time.perf_counter()
    x = 0
    for i in range(30_000_000):
        x += i
    return f"a 30M-iteration Python loop took {time.perf_counter() - t:.2f} s"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--items", type=int, default=1_000_000)
    ap.add_argument("--db", default="concord_bench_scale")
    ap.add_argument("--pg", default="postgres://postgres@127.0.0.1:5432")
    ap.add_argument("--presets", default="meme3w,aha", type=lambda s: [p for p in s.split(",") if p])
    ap.add_argument("--skip-release", action="store_true")
    ap.add_argument(
        "--stages",
        default="agreement,plan,release",
        type=lambda s: {p for p in s.split(",") if p},
        help="stages to time: agreement (reports), plan (split plan and near-duplicate scan), release",
    )
    ap.add_argument("--reuse", action="store_true", help="keep the database and projects of an earlier run")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--extrapolate-to",
        type=int,
        default=1_000_000,
        help="below this many items, also print every figure scaled linearly to it (clearly marked)",
    )
    args = ap.parse_args()
    if args.stages - STAGES:
        ap.error(f"unknown stages: {', '.join(sorted(args.stages - STAGES))}")
    unknown = set(args.presets) - {"meme3w", "aha"}
    if unknown:
        ap.error(f"unknown presets: {', '.join(sorted(unknown))}")
    var = Path(os.environ.get("CONCORD_VAR_DIR", ROOT / "var" / "bench-scale"))
    env = {
        **os.environ,
        "DATABASE_URL": f"{args.pg}/{args.db}",
        "CONCORD_VAR_DIR": str(var),
        "DJANGO_SETTINGS_MODULE": "concord.settings",
        "LOG_LEVEL": "WARNING",
    }
    print(
        f"bench/scale.py: {'the stored' if args.reuse else f'{args.items:,}'} items per project "
        f"({', '.join(args.presets)}), database {args.db}, "
        f"{os.cpu_count()} CPUs, load average before {loadavg()}; machine speed: {machine_speed()}",
        flush=True,
    )
    t_setup = time.perf_counter()
    if not args.reuse:
        shutil.rmtree(var / "media" / "images", ignore_errors=True)
        database_recreate(args.pg, args.db, env)
        print(f"  set-up: database created and migrated in {time.perf_counter() - t_setup:.1f} s", flush=True)
    os.environ.update(env)
    import django

    django.setup()
    from django.conf import settings
    from django.contrib.auth import get_user_model

    from projects.models import Project

    media_root = Path(settings.MEDIA_ROOT)
    if args.reuse:
        lead = get_user_model().objects.get(username="bench-scale-lead")
        projects = {p: Project.objects.get(slug=f"bench-scale-{p}") for p in args.presets}
        args.items = projects[args.presets[0]].items.count()
        print(f"  reusing the projects of an earlier run ({args.items:,} items each)", flush=True)
    else:
        lead, projects = setup(args, media_root)
    print(f"set-up total {time.perf_counter() - t_setup:.1f} s (not a goal)\n", flush=True)
    releases = Path(tempfile.mkdtemp(prefix="concord-bench-scale-releases-"))
    settings.CONCORD_RELEASES_DIR = str(releases)
    try:
        rows = run_stages(args, lead, projects, releases)
    finally:
        shutil.rmtree(releases, ignore_errors=True)
    from quality import agreement

    print(
        f"\nload average after {loadavg()}; machine speed after: {machine_speed()}; "
        f"bootstrap resamples per CI: {agreement.RESAMPLES:,} "
        f"(quality.agreement.RESAMPLES, the same at every size)\n"
    )
    print(f"MEASURED at {args.items:,} items:")
    print_table(rows)
    if args.items < args.extrapolate_to:
        print(
            f"\nEXTRAPOLATED linearly from {args.items:,} to {args.extrapolate_to:,} items (not measured; "
            f"x{args.extrapolate_to / args.items:g}; RSS scaled too, an upper bound for streaming stages):"
        )
        print_table(extrapolated(rows, args.extrapolate_to))
    return 0


if __name__ == "__main__":
    sys.exit(main())
