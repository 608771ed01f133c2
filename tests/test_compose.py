from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from conftest import require

ROOT = Path(__file__).resolve().parent.parent


def test_docker_compose_file_is_valid():
    exe = shutil.which("docker-compose")
    require(exe is not None, "docker-compose (Debian package) is not installed")
    r = subprocess.run(
        [exe, "-f", str(ROOT / "docker-compose.yml"), "config", "-q"], capture_output=True, text=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    services = subprocess.run(
        [exe, "-f", str(ROOT / "docker-compose.yml"), "config", "--services"],
        capture_output=True,
        text=True,
        timeout=60,
    ).stdout.split()
    assert sorted(services) == ["beat", "postgres", "redis", "web", "worker"]
