"""Build the files of a release into a folder (SPEC section 5). Called by
exports.services.export_job_run, which publishes the folder atomically.

Streaming: the database is read in chunks as PostgreSQL produces them (core.streams: a
server-side cursor of a reading connection of its own) and every file is written
incrementally (exports.writers), so memory is flat in the number of records apart from the
split plan's few numpy arrays per item. Deterministic: records in item order, canonical JSON,
fixed Parquet settings, and the only date in the files is ``data_as_of``, the time of the
newest released gold decision.
"""

from __future__ import annotations

from exports.build.datasheet import (  # noqa: F401
    datasheet,
)
from exports.build.release import (  # noqa: F401
    BuildResult,
    ReleaseInputs,
    release_build,
)
