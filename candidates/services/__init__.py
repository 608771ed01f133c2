"""Every write path of the candidates app: providers, jobs, task execution, stage moves."""

from __future__ import annotations

from candidates.services.execution import (  # noqa: F401
    LATE_SLOT_TOLERANCE,
    LEASE_MARGIN,
    MAX_INLINE_WAIT,
    SLOT_LEAD,
    Outcome,
    candidate_job_run_inline,
    candidate_store,
    candidate_task_execute,
    candidate_task_fail,
    candidate_task_release,
)
from candidates.services.jobs import (  # noqa: F401
    PENDING_STATES,
    candidate_job_finish_if_complete,
    candidate_job_retry_failed,
    candidate_job_start,
    item_advance_if_complete,
    items_start_annotation,
    parse_item_ids,
)
from candidates.services.setup import (  # noqa: F401
    ENV_NAME,
    MAX_TIMEOUT_SECONDS,
    provider_create,
    provider_set_enabled,
    provider_update,
    replay_file_save,
)
