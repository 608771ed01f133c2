import pytest


@pytest.mark.django_db
def test_login_page_renders(client):
    r = client.get("/accounts/login/")
    assert r.status_code == 200
    assert b"Log in" in r.content
