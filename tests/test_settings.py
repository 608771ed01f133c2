from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.exceptions import ImproperlyConfigured

from concord import env

ROOT = Path(__file__).resolve().parent.parent


def test_env_helpers_refuse_bad_values(monkeypatch):
    monkeypatch.setenv("X_BOOL", "maybe")
    with pytest.raises(ImproperlyConfigured, match="X_BOOL"):
        env.env_bool("X_BOOL")
    monkeypatch.setenv("X_INT", "ten")
    with pytest.raises(ImproperlyConfigured, match="X_INT must be an integer"):
        env.env_int("X_INT", 1)
    monkeypatch.setenv("X_INT", "-3")
    with pytest.raises(ImproperlyConfigured, match=">= 0"):
        env.env_int("X_INT", 1, minimum=0)
    monkeypatch.setenv("X_BOOL", "Yes")
    assert env.env_bool("X_BOOL") is True
    monkeypatch.setenv("X_LIST", "a, b,,c")
    assert env.env_list("X_LIST", []) == ["a", "b", "c"]


def test_secret_key_is_generated_once_into_a_0600_file(tmp_path):
    path = tmp_path / "secret_key"
    key = env.secret_key_from_file(path)
    assert len(key) >= 50
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert env.secret_key_from_file(path) == key
    path.chmod(0o644)
    with pytest.raises(ImproperlyConfigured, match="readable by other users"):
        env.secret_key_from_file(path)


def _manage(*args, **extra_env):
    environment = {
        k: v for k, v in os.environ.items() if k not in ("DEBUG", "CONCORD_PRODUCTION", "DJANGO_ALLOW_ASYNC_UNSAFE")
    }
    environment.update(extra_env)
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=environment, capture_output=True, text=True, timeout=120
    )


def test_check_deploy_is_clean_with_production_settings(tmp_path):
    r = _manage("check", "--deploy", "--fail-level", "WARNING", CONCORD_PRODUCTION="1", CONCORD_VAR_DIR=str(tmp_path))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "no issues" in r.stdout


def test_a_typo_in_a_boolean_setting_stops_start_up(tmp_path):
    r = _manage("check", DEBUG="ture", CONCORD_VAR_DIR=str(tmp_path))
    assert r.returncode != 0 and "DEBUG must be one of" in r.stderr


def test_debug_is_off_unless_asked():
    from django.conf import settings

    assert settings.DEBUG is False or os.environ.get("DEBUG")


def test_celery_settings_reached_the_app():
    from django.conf import settings

    from concord.celery import app

    assert app.conf.task_acks_late is True
    assert app.conf.task_reject_on_worker_lost is True
    assert app.conf.worker_prefetch_multiplier == 1
    assert app.conf.task_time_limit == settings.CELERY_TASK_TIME_LIMIT
    assert app.conf.broker_url == settings.CELERY_BROKER_URL
    from projects.tasks import import_job_task

    assert import_job_task.acks_late is True and import_job_task.time_limit == 6900
    assert app.conf.beat_schedule["sweep-jobs"]["task"] == "core.sweep_jobs"
