"""Read paths of the exports app: review queue, split plan, pseudonyms, releases, diffs.

``split_plan`` is the one place that turns the database into the arrays of exports.splitting;
the release build, the splits page and the tests all go through it.
"""

from __future__ import annotations

from exports.selectors.contents import (  # noqa: F401
    CANDIDATE_COLUMNS,
    PSEUDONYM_PREFIX,
    annotator_pseudonyms,
    audit_for_export,
    candidates_by_item,
)
from exports.selectors.duplicates import (  # noqa: F401
    candidate_groups,
    dedup_scan_latest,
    items_not_scanned,
    pair_counts,
    pair_get_for_project,
    pairs_for_review,
)
from exports.selectors.releases import (  # noqa: F401
    PRESET_TASKS,
    ReleaseFile,
    construction_counts,
    exclusions_by_reason,
    export_job_get_for_project,
    export_jobs_for_project,
    hub_pushes_for_release,
    release_archive_layout,
    release_card_settings,
    release_diff,
    release_dir,
    release_file_get,
    release_files,
    release_get_for_project,
    release_latest_at,
    release_records,
    release_settings_get,
    released_file_name,
    releases_for_project,
    releases_root,
)
from exports.selectors.splits import (  # noqa: F401
    NONE_LABEL,
    SplitPlan,
    coco_fields,
    order_key,
    released_gold_queryset,
    split_plan,
    strata_fields,
)
