"""Celery tasks of evaluation: thin, idempotent, one service call each (options asserted in
evaluation/tests/test_tasks.py)."""

from __future__ import annotations

from celery import shared_task

from core.jobs import job_run
from evaluation.judge_runs import judge_run_work
from evaluation.models import JudgeRun, ProviderRun
from evaluation.services import provider_run_work

RUN_OPTIONS = {
    "acks_late": True,
    "reject_on_worker_lost": True,
    "max_retries": 0,
    "soft_time_limit": 6600,
    "time_limit": 6900,
    "ignore_result": True,
}


@shared_task(name="evaluation.run_provider", **RUN_OPTIONS)
def provider_run_task(run_id: int) -> None:
    """Run one queued provider evaluation; a finished one, or one alive in another worker, is
    left alone (core.jobs.job_claim), and a taken-over one resumes from its saved replies."""
    job_run(ProviderRun, run_id, provider_run_work)


@shared_task(name="evaluation.run_judges", **RUN_OPTIONS)
def judge_run_task(run_id: int) -> None:
    """Run one queued judge run; a taken-over one resumes from its stored verdicts."""
    job_run(JudgeRun, run_id, judge_run_work)
