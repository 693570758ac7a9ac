"""An admin invites a user on the Users page with the keyboard, the user chooses a password
through the invitation link and signs in; the admin sees the session on the Sessions page
and signs it out, and the user's next page asks them to sign in again. Screenshots of both
admin pages land in test-artifacts/."""

from __future__ import annotations

import re
from typing import Any

import pytest

from e2e.conftest import ARTIFACTS_DIR, RailyardServer, login

pytestmark = pytest.mark.e2e

INVITED = "invited.e2e@example.com"
CHOSEN = "violet ferry at noon"


def test_invite_sign_in_and_revoke_session(
    page: Any, browser: Any, railyard_server: RailyardServer
) -> None:
    server = railyard_server
    ARTIFACTS_DIR.mkdir(exist_ok=True)
    login(page, server)
    page.click('nav a[href="/admin/users"]')
    page.wait_for_url(f"{server.base_url}/admin/users")

    # keyboard only: type into the form fields and submit with Enter
    form = page.locator("#new-user-form")
    form.locator('input[name="email"]').focus()
    page.keyboard.type(INVITED)
    page.keyboard.press("Tab")
    page.keyboard.type("Invited Person")
    page.keyboard.press("Tab")
    form.locator('select[name="role"]').select_option("editor")
    form.locator('input[name="email"]').press("Enter")
    link = page.locator("#password-link")
    link.wait_for()
    url = link.inner_text().strip()
    assert re.fullmatch(rf"{re.escape(server.base_url)}/reset-password/[\w-]+", url)
    row = page.locator(f'tr[data-email="{INVITED}"]')
    assert "link pending" in row.inner_text()
    page.screenshot(path=str(ARTIFACTS_DIR / "admin-users.png"), full_page=True)

    # a weak password is refused on the same page, with the reason
    form.locator('input[name="email"]').fill("weak.e2e@example.com")
    form.locator('input[name="password"]').fill("password123456")
    form.locator('button[type="submit"]').click()
    page.locator("#admin-error").wait_for()
    assert "too common" in page.locator("#admin-error").inner_text()

    invited = browser.new_context(viewport={"width": 1280, "height": 800})
    try:
        other = invited.new_page()
        other.goto(url)
        assert INVITED in other.locator("#link-email").inner_text()
        other.fill("#password", CHOSEN)
        other.fill("#confirm", CHOSEN)
        other.click('button[type="submit"]')
        other.locator("#login-notice").wait_for()
        other.fill("#email", INVITED)
        other.fill("#password", CHOSEN)
        other.click('button[type="submit"]')
        other.wait_for_url(f"{server.base_url}/workflows**")

        page.goto(f"{server.base_url}/admin/sessions")
        session_row = page.locator("#sessions-table tr", has_text=INVITED)
        session_row.wait_for()
        page.screenshot(path=str(ARTIFACTS_DIR / "admin-sessions.png"), full_page=True)
        session_row.get_by_role("button", name=re.compile("Sign out")).click()
        page.wait_for_function(
            f"() => !document.querySelector('#sessions-table').innerText.includes('{INVITED}')"
        )

        other.goto(f"{server.base_url}/workflows")
        other.wait_for_url(re.compile(r".*/login\?next=.*"))
    finally:
        invited.close()
