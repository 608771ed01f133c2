"""Every write path of the annotation app.

Locks: every operation that takes, keeps or fills a slot of an item (claim, draft save, submit)
runs in one transaction holding the item's row lock (``SELECT ... FOR UPDATE`` on
``projects_item``) and re-reads the item's annotations under it, so the N-slot rule (see
annotation.models) is checked against committed data only. "Next item" uses
``FOR UPDATE SKIP LOCKED`` so annotators claiming at the same moment pass over each other's
item instead of queueing behind it. SQLite has no row locks: its ``IMMEDIATE`` transactions
(concord.settings) serialize the same code instead.
"""

from __future__ import annotations

from annotation.services.audit import (  # noqa: F401
    annotation_audit_assign,
)
from annotation.services.claims import (  # noqa: F401
    CLAIM_TRIES,
    PARTIAL_CANDIDATES,
    ClaimResult,
    annotation_open,
    assignment_claim_next,
    claims_release_for,
    slots_of,
)
from annotation.services.saves import (  # noqa: F401
    MAX_ACTIVE_MS_PER_SAVE,
    MAX_VALUES_BYTES,
    SKIP_REASON_KEYS,
    SKIP_REASONS,
    ItemClosed,
    NotAssigned,
    SaveResult,
    SlotTaken,
    annotation_flag_record,
    annotation_save_draft,
    annotation_skip,
    annotation_submit_record,
    assignments_release,
    item_stage_advance,
)
from annotation.services.welfare import (  # noqa: F401
    annotator_preference_update,
    content_warning_accept,
    guideline_seen,
)
