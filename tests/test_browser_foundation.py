from __future__ import annotations

import io
import zipfile

import pytest

from projects.factories import image_bytes

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_lead_logs_in_uploads_a_zip_and_reads_the_import_report(
    page, browser_login, live_server, lead, project, tmp_path
):
    browser_login(lead)
    page.click("text=P1")
    page.click("text=Import items")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr(
            "manifest.jsonl",
            '{"image": "a.jpg", "text": "first meme", "source_id": "a"}\n'
            '{"image": "broken.jpg", "text": "second", "source_id": "b"}\n',
        )
        z.writestr("a.jpg", image_bytes(1))
        z.writestr("broken.jpg", b"GIF89a not really")
    path = tmp_path / "upload.zip"
    path.write_bytes(buf.getvalue())
    page.set_input_files("input[type=file]", str(path))
    page.click("text=Upload and import")
    # Eager Celery in tests: the report is there at once; the htmx poll is exercised when pending.
    page.wait_for_selector(".job-import .imported")
    assert page.inner_text(".job-import .imported") == "1"
    assert "truncated or corrupt image" in page.inner_text(".import-errors") or "not an image" in page.inner_text(
        ".import-errors"
    )
    assert page.console_errors == []


def test_wrong_password_shows_a_message_and_outsider_sees_404(page, live_server, outsider, project):
    page.goto(f"{live_server.url}/accounts/login/")
    page.fill("#id_username", outsider.username)
    page.fill("#id_password", "wrong")
    page.click("button[type=submit]")
    assert "didn't match" in page.inner_text("main")
    from projects.factories import PASSWORD

    page.fill("#id_password", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")
    response = page.goto(f"{live_server.url}/p/{project.slug}/")
    assert response.status == 404
