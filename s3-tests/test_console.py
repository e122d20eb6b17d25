"""The web console in a real browser: headless Chromium driven by Selenium
against the console of the session's `tessera server`.

What the browser does is checked from outside it: objects with boto3, bucket
settings with boto3, downloads byte for byte, share links with a plain
HTTP client. Forged forms are sent with `requests`, as another site's page
would send them. Each page is saved as a screenshot under
target/console-screenshots (or $CONSOLE_SCREENSHOTS).

Needs Debian's chromium and chromium-driver; under CI a missing one fails
the tests instead of skipping them."""

from __future__ import annotations

import hashlib
import os
import re
import shutil
from pathlib import Path

import axe_core_python
import pytest
import requests
from botocore.exceptions import ClientError
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support import expected_conditions as ready
from selenium.webdriver.support.ui import Select, WebDriverWait

from tessera_clients import MIB, console_session, empty_and_delete, new_bucket_name, s3_client
from tessera_procs import Proc, find_key, process_env, start_server
from tessera_procs import wait_for as wait_until

pytestmark = pytest.mark.tessera

ROOT = Path(__file__).resolve().parent.parent
SCREENSHOTS = Path(os.environ.get("CONSOLE_SCREENSHOTS", ROOT / "target" / "console-screenshots"))
WAIT_S = 60


def browser_binaries() -> tuple[str, str]:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium and driver:
        return chromium, driver
    reason = "the console tests need chromium and chromium-driver (apt-get install chromium chromium-driver)"
    if os.environ.get("CI"):
        pytest.fail(reason, pytrace=False)
    pytest.skip(reason)


def replaced(element):
    """A wait condition: `element`'s page was replaced. Chromium reports a
    node of a page that is gone either as stale or, while the next page
    loads, as not belonging to the document; both mean gone."""

    def gone(_driver) -> bool:
        try:
            element.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as exc:
            if "does not belong to the document" in str(exc):
                return True
            raise
        return False

    return gone


class Browser:
    """One headless Chromium with its own download folder."""

    def __init__(self, console: str, downloads: Path):
        chromium, driver = browser_binaries()
        options = Options()
        options.binary_location = chromium
        for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1000"):
            options.add_argument(arg)
        options.add_experimental_option(
            "prefs", {"download.default_directory": str(downloads), "download.prompt_for_download": False}
        )
        self.driver = webdriver.Chrome(service=Service(driver), options=options)
        self.console = console
        self.downloads = downloads

    def open(self, path: str) -> None:
        self.driver.get(self.console + path)

    def find(self, css: str):
        return WebDriverWait(self.driver, WAIT_S).until(ready.presence_of_element_located((By.CSS_SELECTOR, css)))

    def text(self) -> str:
        return self.driver.find_element(By.TAG_NAME, "body").text

    def path(self) -> str:
        return "/" + self.driver.current_url.split("/", 3)[3]

    def shot(self, name: str) -> None:
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        self.driver.save_screenshot(str(SCREENSHOTS / f"{name}.png"))

    def sign_in(self, access_key: str, secret_key: str, *, refused: bool = False) -> None:
        """Signs in through the form and waits for the page it leads to."""
        self.driver.delete_all_cookies()
        self.open("/login")
        form = self.find("form.card")
        self.find("#access_key").send_keys(access_key)
        self.find("#secret_key").send_keys(secret_key)
        self.find("form.card button[type=submit]").click()
        WebDriverWait(self.driver, WAIT_S).until(replaced(form))
        self.find("p.error" if refused else "form.signout")

    def submit(self, form_css: str, *, confirm: bool | None = None) -> str | None:
        """Submits the form and waits until the page it leads to replaced
        this one. A form that asks first (a destructive one) is answered
        with `confirm`: yes sends it, no leaves the page as it is. Returns
        the question asked."""
        button = self.find(f"{form_css} button[type=submit]")
        button.click()
        question = None
        if confirm is not None:
            alert = WebDriverWait(self.driver, WAIT_S).until(ready.alert_is_present())
            question = alert.text
            if not confirm:
                alert.dismiss()
                return question
            alert.accept()
        WebDriverWait(self.driver, WAIT_S).until(replaced(button))
        return question

    def has_navigation(self) -> bool:
        """Whether the page is framed as a signed-in user's: the main
        navigation and the sign-out form."""
        nav = self.driver.find_elements(By.CSS_SELECTOR, "header.top nav a[href='/buckets']")
        return bool(nav) and bool(self.driver.find_elements(By.CSS_SELECTOR, "form.signout"))

    def submit_text(self, css: str, text: str) -> None:
        """Types `text` into the field and submits its form, waiting for the
        next page."""
        field = self.find(css)
        field.send_keys(text)
        field.submit()
        WebDriverWait(self.driver, WAIT_S).until(replaced(field))

    def quit(self) -> None:
        self.driver.quit()


@pytest.fixture(scope="module")
def browser(server, tmp_path_factory):
    assert server.console, "the server printed no console address"
    b = Browser(server.console, tmp_path_factory.mktemp("downloads"))
    yield b
    b.quit()


@pytest.fixture
def console_bucket(s3):
    name = new_bucket_name("console")
    yield name
    try:
        empty_and_delete(s3, name)
    except ClientError:
        pass


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def wait_for(what: str, check, timeout: float = WAIT_S):
    return wait_until(what, check, timeout)


def test_a_wrong_secret_is_refused(server, browser):
    browser.sign_in(server.access_key, server.secret_key + "x", refused=True)
    alert = browser.find("p.error")
    assert "Wrong access key or secret key" in alert.text
    assert browser.path() == "/login"
    browser.shot("login-refused")
    # No session was made: the bucket list sends the browser back to sign in.
    browser.open("/buckets")
    browser.find("#secret_key")
    assert browser.path() == "/login"


def test_buckets_and_objects_end_to_end(server, browser, s3, console_bucket, tmp_path):
    browser.sign_in(server.access_key, server.secret_key)
    assert browser.path() == "/buckets"
    browser.shot("buckets")

    # A bucket with versioning and SSE-S3 by default, from the form.
    browser.find("#name").send_keys(console_bucket)
    browser.find("input[name=versioning]").click()
    Select(browser.find("#encryption")).select_by_value("AES256")
    browser.submit("form[action='/buckets']")
    browser.find("form.upload")
    assert browser.path() == f"/buckets/{console_bucket}"
    assert s3.get_bucket_versioning(Bucket=console_bucket)["Status"] == "Enabled"
    rule = s3.get_bucket_encryption(Bucket=console_bucket)["ServerSideEncryptionConfiguration"]["Rules"][0]
    assert rule["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"

    # Uploads: a small file in one PUT, a 20 MiB one in 8 MiB parts.
    small = tmp_path / "notes & plans.txt"
    small.write_bytes(os.urandom(3000))
    big = tmp_path / "big.bin"
    big.write_bytes(os.urandom(20 * MIB + 123))
    browser.find("#files").send_keys(f"{small}\n{big}")
    listed = browser.driver.find_elements
    wait_for("both objects listed", lambda: listed(By.LINK_TEXT, "big.bin") and listed(By.LINK_TEXT, small.name))
    browser.shot("objects")
    stored_small = s3.get_object(Bucket=console_bucket, Key=small.name)
    assert stored_small["Body"].read() == small.read_bytes()
    assert stored_small["ServerSideEncryption"] == "AES256"
    stored_big = s3.get_object(Bucket=console_bucket, Key="big.bin")
    assert stored_big["ETag"].endswith('-3"'), "20 MiB in 8 MiB parts is a three-part upload"
    assert sha256(stored_big["Body"].read()) == sha256(big.read_bytes())

    # Folders and breadcrumbs.
    s3.put_object(Bucket=console_bucket, Key="docs/2026/report.txt", Body=b"report")
    browser.open(f"/buckets/{console_bucket}")
    browser.find("a[href*='prefix=docs%2F']").click()
    browser.find("a[href*='prefix=docs%2F2026%2F']").click()
    browser.find("a[href*='key=docs%2F2026%2Freport.txt']")
    crumbs = browser.find("ol.breadcrumbs").text
    assert "docs" in crumbs and "2026" in crumbs

    # Details of the big object, its download and a share link.
    browser.open(f"/buckets/{console_bucket}/object?key=big.bin")
    assert browser.find("#object-etag").text == stored_big["ETag"]
    browser.shot("object")
    browser.find("a.button[href*='/download']").click()
    downloaded = browser.downloads / "big.bin"
    wait_for("the download", lambda: downloaded.exists() and downloaded.stat().st_size == big.stat().st_size)
    assert sha256(downloaded.read_bytes()) == sha256(big.read_bytes())

    Select(browser.find("#expires")).select_by_value("900")
    browser.submit("form[action$='/share']")
    link = browser.find("#share-link").get_attribute("value")
    assert "X-Amz-Expires=900" in link and server.secret_key not in link
    browser.shot("share")
    shared = requests.get(link, timeout=30)
    assert shared.status_code == 200
    assert sha256(shared.content) == sha256(big.read_bytes())
    tampered = requests.get(link.replace("X-Amz-Expires=900", "X-Amz-Expires=901"), timeout=30)
    assert tampered.status_code == 403

    # Delete two objects at once from the listing, after saying yes.
    browser.open(f"/buckets/{console_bucket}")
    for key in (small.name, "big.bin"):
        browser.find(f"input[name=key][value='{key}']").click()
    question = browser.submit("form[action$='/delete-objects']", confirm=True)
    assert question.startswith(f"Delete 2 of the listed objects from bucket {console_bucket}?")
    assert "older version" in question, "a versioned bucket keeps what is deleted"
    browser.find("form.upload")
    assert "big.bin" not in browser.text()
    for key in (small.name, "big.bin"):
        with pytest.raises(ClientError) as err:
            s3.head_object(Bucket=console_bucket, Key=key)
        assert err.value.response["Error"]["Code"] == "404"
    # Versioning keeps the deleted objects as versions, which the details list.
    versions = s3.list_object_versions(Bucket=console_bucket, Prefix="big.bin")
    assert len(versions["Versions"]) == 1 and len(versions["DeleteMarkers"]) == 1
    # A version's own page deletes that version for good.
    version = versions["Versions"][0]["VersionId"]
    browser.open(f"/buckets/{console_bucket}/object?key=big.bin&version={version}")
    question = browser.submit("form[action$='/delete-objects']", confirm=True)
    assert question == f"Delete version {version} of big.bin from bucket {console_bucket} for good? This cannot be undone."
    versions = s3.list_object_versions(Bucket=console_bucket, Prefix="big.bin")
    assert "Versions" not in versions and len(versions["DeleteMarkers"]) == 1


def version_rows(browser: Browser) -> set[tuple[str, str, bool, bool]]:
    """The versions view's rows: key, version id, latest, delete marker."""
    rows = set()
    for row in browser.find("table#versions").find_elements(By.CSS_SELECTOR, "tbody tr"):
        cells = [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        rows.add((cells[1], cells[2], cells[3] == "latest", cells[4] == "delete marker"))
    return rows


def listed_versions(s3, bucket: str) -> set[tuple[str, str, bool, bool]]:
    """What ListObjectVersions says, as the versions view shows it."""
    listed = s3.list_object_versions(Bucket=bucket)
    versions = {(v["Key"], v["VersionId"], v["IsLatest"], False) for v in listed.get("Versions", [])}
    markers = {(m["Key"], m["VersionId"], m["IsLatest"], True) for m in listed.get("DeleteMarkers", [])}
    return versions | markers


def deleted_twice_over(s3, bucket: str, key: str) -> tuple[str, str, str]:
    """Two versions of `key` in versioned `bucket`, then a delete marker:
    their version ids, oldest first."""
    s3.create_bucket(Bucket=bucket)
    s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
    first = s3.put_object(Bucket=bucket, Key=key, Body=b"first")["VersionId"]
    second = s3.put_object(Bucket=bucket, Key=key, Body=b"second!")["VersionId"]
    marker = s3.delete_object(Bucket=bucket, Key=key)["VersionId"]
    return first, second, marker


def test_a_versioned_bucket_shows_its_versions_and_is_emptied_and_deleted(server, browser, s3, console_bucket):
    key = "notes v2.txt"
    first, second, marker = deleted_twice_over(s3, console_bucket, key)
    browser.sign_in(server.access_key, server.secret_key)

    # Nothing is current, but the plain view says what remains and links to it.
    browser.open(f"/buckets/{console_bucket}")
    hint = browser.find("#hidden-versions")
    assert "Nothing here yet" not in browser.text()
    browser.shot("hidden-versions")
    link = hint.find_element(By.TAG_NAME, "a")
    link.click()
    WebDriverWait(browser.driver, WAIT_S).until(replaced(link))
    assert browser.path() == f"/buckets/{console_bucket}?versions=1"
    expected = {(key, first, False, False), (key, second, False, False), (key, marker, True, True)}
    assert listed_versions(s3, console_bucket) == expected
    assert version_rows(browser) == expected
    browser.shot("versions")
    sizes = [cell.text for cell in browser.driver.find_elements(By.CSS_SELECTOR, "#versions td.num")]
    assert sorted(sizes) == ["", "5 B", "7 B"]

    # An old version downloads as it was written.
    browser.find(f"a[href*='/download'][href$='version={first}']").click()
    downloaded = browser.downloads / key
    wait_for("the old version's download", lambda: downloaded.exists() and downloaded.read_bytes() == b"first")

    # Deleting one version removes exactly that one, for good.
    browser.find(f"input[name=entry][value='{second} {key}']").click()
    question = browser.submit("#delete-versions", confirm=True)
    assert question == (
        f"Delete 1 of the listed versions and delete markers from bucket {console_bucket} for good? "
        "This cannot be undone."
    )
    expected = {(key, first, False, False), (key, marker, True, True)}
    assert listed_versions(s3, console_bucket) == expected
    assert browser.path() == f"/buckets/{console_bucket}?versions=1"
    assert version_rows(browser) == expected

    # Everything else, then the bucket, all through the console.
    browser.find("input.select-all").click()
    question = browser.submit("#delete-versions", confirm=True)
    assert question.startswith("Delete 2 of the listed versions and delete markers")
    assert listed_versions(s3, console_bucket) == set()
    settings = browser.find("#no-versions a[href$='/settings']")
    settings.click()
    WebDriverWait(browser.driver, WAIT_S).until(replaced(settings))
    question = browser.submit(f"form[action='/buckets/{console_bucket}/delete']", confirm=True)
    assert question == f"Delete bucket {console_bucket}? This cannot be undone."
    assert browser.path() == "/buckets"
    with pytest.raises(ClientError) as err:
        s3.head_bucket(Bucket=console_bucket)
    assert err.value.response["Error"]["Code"] == "404"


def test_a_bucket_that_is_not_empty_says_what_it_still_holds(server, browser, s3, console_bucket):
    key = "kept.txt"
    first, second, marker = deleted_twice_over(s3, console_bucket, key)
    browser.sign_in(server.access_key, server.secret_key)
    browser.open(f"/buckets/{console_bucket}/settings")
    browser.submit(f"form[action='/buckets/{console_bucket}/delete']", confirm=True)
    assert browser.find("p.error").text == (
        f"bucket {console_bucket} still holds 2 object versions and 1 delete marker; "
        "delete them first, then delete the bucket"
    )
    assert browser.find("main h1").text == f"Bucket {console_bucket} is not empty"
    assert browser.has_navigation(), "the error page keeps the navigation"
    browser.shot("bucket-not-empty")
    s3.head_bucket(Bucket=console_bucket)
    # The page links to the versions that keep the bucket.
    link = browser.find(f"main a[href='/buckets/{console_bucket}?versions=1']")
    link.click()
    WebDriverWait(browser.driver, WAIT_S).until(replaced(link))
    assert version_rows(browser) == {(key, first, False, False), (key, second, False, False), (key, marker, True, True)}

    # A bucket that never had versioning counts objects, and links to them.
    plain = new_bucket_name("console")
    s3.create_bucket(Bucket=plain)
    try:
        s3.put_object(Bucket=plain, Key="a.txt", Body=b"a")
        browser.open(f"/buckets/{plain}/settings")
        browser.submit(f"form[action='/buckets/{plain}/delete']", confirm=True)
        assert browser.find("p.error").text.startswith(f"bucket {plain} still holds 1 object; delete it first")
        browser.find(f"main a[href='/buckets/{plain}']")
        assert browser.has_navigation()
    finally:
        empty_and_delete(s3, plain)

    # Every other error is a page with the navigation too: an unknown page,
    # a malformed address, an S3 refusal.
    cookies = session_cookies(browser)
    for path, status in (
        ("/no-such-page", 404),
        (f"/buckets/{console_bucket}/object", 400),
        (f"/buckets/{console_bucket}/object?key=missing.txt", 404),
    ):
        browser.open(path)
        assert browser.find("p.error").text, path
        assert browser.has_navigation(), path
        assert requests.get(server.console + path, cookies=cookies, timeout=30).status_code == status, path


def test_deleting_asks_first(server, browser, s3, console_bucket):
    s3.create_bucket(Bucket=console_bucket)
    s3.put_object(Bucket=console_bucket, Key="keep.txt", Body=b"keep")
    browser.sign_in(server.access_key, server.secret_key)
    browser.open(f"/buckets/{console_bucket}")
    browser.find("input[name=key][value='keep.txt']").click()

    # No: nothing is sent, the object stays.
    question = browser.submit("form[action$='/delete-objects']", confirm=False)
    assert question == (
        f"Delete 1 of the listed objects from bucket {console_bucket}? "
        "The bucket keeps no versions: this cannot be undone."
    )
    assert browser.path() == f"/buckets/{console_bucket}"
    s3.head_object(Bucket=console_bucket, Key="keep.txt")

    # Yes: it is deleted.
    browser.submit("form[action$='/delete-objects']", confirm=True)
    browser.find("form.upload")
    assert "keep.txt" not in browser.text()
    with pytest.raises(ClientError) as err:
        s3.head_object(Bucket=console_bucket, Key="keep.txt")
    assert err.value.response["Error"]["Code"] == "404"


def test_bucket_settings_change_what_s3_answers(server, browser, s3, console_bucket):
    s3.create_bucket(Bucket=console_bucket)
    browser.sign_in(server.access_key, server.secret_key)
    browser.open(f"/buckets/{console_bucket}/settings")
    assert browser.find("#versioning-status").text == "Off"
    browser.submit("form[action$='/settings/versioning']")
    assert browser.find("#versioning-status").text == "Enabled"
    assert s3.get_bucket_versioning(Bucket=console_bucket)["Status"] == "Enabled"

    cors = (
        "<CORSConfiguration><CORSRule><AllowedOrigin>https://app.example</AllowedOrigin>"
        "<AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>"
    )
    browser.submit_text("#doc-cors", cors)
    rules = s3.get_bucket_cors(Bucket=console_bucket)["CORSRules"]
    assert rules[0]["AllowedOrigins"] == ["https://app.example"]
    browser.shot("settings")

    # A malformed document is refused with S3's own error, shown on the page.
    browser.submit_text("#doc-lifecycle", "<LifecycleConfiguration><Rule>")
    assert "MalformedXML" in browser.find("p.error").text
    with pytest.raises(ClientError):
        s3.get_bucket_lifecycle_configuration(Bucket=console_bucket)


def test_a_user_sees_only_what_s3_lets_them(server, browser, make_user, s3, console_bucket):
    s3.create_bucket(Bucket=console_bucket)
    user = make_user("console")
    own = new_bucket_name("own")
    user.client.create_bucket(Bucket=own)
    try:
        browser.sign_in(user.access_key, user.secret_key)
        listed = browser.text()
        assert own in listed and console_bucket not in listed
        assert "Cluster" not in browser.find("header.top nav").text
        browser.open(f"/buckets/{console_bucket}")
        assert "AccessDenied" in browser.find("p.error").text
        browser.open("/cluster")
        assert "root user and the admin token" in browser.find("p.error").text
        status = requests.get(server.console + "/cluster", cookies=session_cookies(browser), timeout=30).status_code
        assert status == 403
    finally:
        empty_and_delete(user.client, own)


def session_cookies(browser: Browser) -> dict[str, str]:
    return {c["name"]: c["value"] for c in browser.driver.get_cookies()}


def test_the_cluster_and_users_pages(server, browser):
    browser.sign_in(server.access_key, server.secret_key)
    browser.open("/cluster")
    rows = browser.find("#datanodes").find_elements(By.CSS_SELECTOR, "tbody tr")
    assert len(rows) == 5
    assert all("Healthy" in row.text for row in rows)
    # tessera server's datanodes stand on its host.
    assert all("/127.0.0.1" in row.text for row in rows)
    assert browser.find("#balancer").text.split(" ")[0] in ("waiting", "balanced")

    # The charts draw the server's own metrics (sampled every second here):
    # requests made now show in the request rate.
    s3 = s3_client(server.endpoint, server.access_key, server.secret_key)

    def drawn() -> bool:
        for _ in range(20):
            s3.list_buckets()
        browser.open("/cluster")
        line = browser.find("figure polyline").get_attribute("points")
        label = browser.find("figure svg").get_attribute("aria-label")
        return line.count(",") >= 2 and "all no data" not in label and "all 0.0/s" not in label

    wait_for("a drawn request rate", drawn)
    browser.shot("cluster")
    browser.driver.execute_script("document.querySelector('.charts').scrollIntoView()")
    browser.shot("cluster-charts")

    name = new_bucket_name("user")
    browser.open("/users")
    browser.find("#user-name").send_keys(name)
    browser.submit("form[action='/users']")
    access_key = browser.find("#new-access-key").text
    secret_key = browser.find("#new-secret-key").text
    browser.shot("users")
    made = s3_client(server.endpoint, access_key, secret_key)
    assert made.list_buckets()["Buckets"] == []
    users = server.admin("user", "list")
    assert name in str(users)

    # Deleting the key, then the user, asks first and names what is lost.
    delete_key = f"form[action='/keys/{access_key}/delete']"
    question = browser.submit(delete_key, confirm=True)
    assert question.startswith(f"Delete access key {access_key} of user {name}?")

    def refused() -> bool:
        try:
            made.list_buckets()
        except ClientError as err:
            return err.response["Error"]["Code"] == "InvalidAccessKeyId"
        return False

    # The gateway trusts a key it looked up for a few seconds.
    wait_for("the deleted key refused", refused)
    question = browser.submit(f"form[action='/users/{name}/delete']", confirm=False)
    assert question == f"Delete user {name}? It has no access keys."
    assert name in str(server.admin("user", "list"))
    browser.submit(f"form[action='/users/{name}/delete']", confirm=True)
    assert name not in str(server.admin("user", "list"))


def test_a_limited_root_key_is_no_admin(server, browser, console_bucket, s3):
    """A root key limited to one bucket does not open the admin pages, which
    could make it an unlimited key."""
    s3.create_bucket(Bucket=console_bucket)
    created = server.admin("key", "create", "root")
    access_key, secret_key = find_key(created, "access_key"), find_key(created, "secret_key")
    server.admin("key", "limit", access_key, "--bucket", f"{console_bucket}:read")
    browser.sign_in(access_key, secret_key)
    assert "Cluster" not in browser.find("header.top nav").text
    cookies = session_cookies(browser)
    assert requests.get(server.console + "/users", cookies=cookies, timeout=30).status_code == 403
    server.admin("key", "delete", access_key)


def test_odd_names_and_hosts_are_refused(server):
    http, csrf = signed_in_session(server)
    # An empty key would name the bucket itself.
    assert http.get(server.console + "/buckets/b/download?key=", timeout=30).status_code == 400
    answer = http.post(server.console + "/buckets/b/delete-objects", data={"csrf": csrf, "key": ""}, timeout=30)
    assert answer.status_code == 400
    # Names in paths are checked before any link or redirect is made of them.
    answer = http.post(server.console + "/buckets/a%0Ab/delete-objects", data={"csrf": csrf}, timeout=30)
    assert answer.status_code == 400
    # A name rebound to this address by another site is not the console.
    answer = requests.get(server.console + "/login", headers={"Host": "evil.example"}, timeout=30)
    assert answer.status_code == 421
    # A change without a session is refused as such, not sent to the sign-in page.
    answer = requests.post(server.console + "/buckets/b/upload?key=k", data=b"x", timeout=30, allow_redirects=False)
    assert answer.status_code == 401


def test_the_admin_token_reaches_the_admin_pages_only(server, browser):
    browser.sign_in("", server.admin_token)
    assert "no S3 keys" in browser.text()
    browser.open("/cluster")
    assert len(browser.find("#datanodes").find_elements(By.CSS_SELECTOR, "tbody tr")) == 5


def signed_in_session(server) -> tuple[requests.Session, str]:
    return console_session(server.console, server.access_key, server.secret_key)


def test_forged_forms_are_refused(server, s3):
    http, csrf = signed_in_session(server)
    _other, other_csrf = signed_in_session(server)
    url = server.console + "/buckets"
    attempts = {
        "no token": {"name": new_bucket_name("forged")},
        "another session's token": {"name": new_bucket_name("forged"), "csrf": other_csrf},
    }
    for why, form in attempts.items():
        answer = http.post(url, data=form, timeout=30, allow_redirects=False)
        assert answer.status_code == 403, why
        assert "was not sent by this console" in answer.text, why
        with pytest.raises(ClientError):
            s3.head_bucket(Bucket=form["name"])
    # The right token from another origin: a page elsewhere posting to us.
    name = new_bucket_name("forged")
    answer = http.post(url, data={"name": name, "csrf": csrf}, headers={"Origin": "http://evil.example"}, timeout=30)
    assert answer.status_code == 403
    with pytest.raises(ClientError):
        s3.head_bucket(Bucket=name)
    # An upload without the header token.
    answer = http.post(server.console + f"/buckets/{name}/upload?key=x", data=b"abc", timeout=30)
    assert answer.status_code == 403
    # Sign-in without the form's cookie (a login forced from elsewhere).
    answer = requests.post(
        server.console + "/login",
        data={"csrf": csrf, "access_key": server.access_key, "secret_key": server.secret_key},
        timeout=30,
    )
    assert answer.status_code == 403
    # The session's own token goes through.
    answer = http.post(url, data={"name": name, "csrf": csrf}, timeout=30)
    assert answer.status_code == 200
    s3.head_bucket(Bucket=name)
    s3.delete_bucket(Bucket=name)
    # Signing out ends the session on the server: its cookie is worth nothing.
    cookies = http.cookies.copy()
    http.post(server.console + "/logout", data={"csrf": csrf}, timeout=30)
    answer = requests.get(server.console + "/buckets", cookies=cookies, allow_redirects=False, timeout=30)
    assert answer.status_code == 303 and answer.headers["location"] == "/login"


def test_the_session_cookie_is_http_only_and_same_site(server):
    http, _ = signed_in_session(server)
    cookie = next(c for c in http.cookies if c.name == "tessera_console")
    assert cookie.has_nonstandard_attr("HttpOnly")
    assert cookie.get_nonstandard_attr("SameSite") == "Strict"
    # The cookie is signed: another value is not a session.
    forged = requests.get(
        server.console + "/buckets", cookies={"tessera_console": "0" * 64}, allow_redirects=False, timeout=30
    )
    assert forged.status_code == 303
    assert not cookie.secure
    page = http.get(server.console + "/buckets", timeout=30)
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"


AXE = (Path(axe_core_python.__file__).parent / "axe.min.js").read_text()


def accessibility_violations(browser: Browser) -> list[str]:
    """What axe-core (the WCAG 2 A and AA rules) finds on the current page."""
    browser.driver.execute_script(AXE)
    results = browser.driver.execute_async_script(
        "const done = arguments[arguments.length - 1];"
        "axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}}).then(done);"
    )
    return [
        f"{v['id']} ({v['impact']}): {v['help']}: {[n['target'] for n in v['nodes']][:3]}"
        for v in results["violations"]
    ]


def test_every_page_passes_the_wcag_checks_of_axe(server, browser, s3, console_bucket):
    s3.create_bucket(Bucket=console_bucket)
    s3.put_object(Bucket=console_bucket, Key="docs/a.txt", Body=b"a", Tagging="k=v")
    s3.put_object(Bucket=console_bucket, Key="b.txt", Body=b"b")
    browser.driver.delete_all_cookies()
    browser.open("/login")
    browser.find("#secret_key")
    found = {"/login": accessibility_violations(browser)}
    browser.sign_in(server.access_key, server.secret_key)
    for path in (
        "/buckets",
        f"/buckets/{console_bucket}",
        f"/buckets/{console_bucket}?prefix=docs%2F",
        f"/buckets/{console_bucket}/object?key=docs%2Fa.txt",
        f"/buckets/{console_bucket}?versions=1",
        f"/buckets/{console_bucket}/settings",
        "/no-such-page",
        "/cluster",
        "/users",
    ):
        browser.open(path)
        browser.find("main h1")
        found[path] = accessibility_violations(browser)
    assert {path: v for path, v in found.items() if v} == {}
    # The checker bites: a field without a label is found.
    browser.driver.execute_script("document.querySelector('main').append(document.createElement('input'))")
    assert any(v.startswith("label ") for v in accessibility_violations(browser))


def test_pages_fit_a_phone(server, browser):
    browser.sign_in(server.access_key, server.secret_key)
    browser.driver.set_window_size(390, 844)
    try:
        for path, name in (("/buckets", "phone-buckets"), ("/cluster", "phone-cluster")):
            browser.open(path)
            browser.find("main h1")
            overflow = browser.driver.execute_script(
                "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
            )
            assert overflow <= 0, f"{path} is {overflow} px wider than a phone (tables must scroll inside)"
            browser.shot(name)
    finally:
        browser.driver.set_window_size(1280, 1000)


def test_the_console_role_in_front_of_a_gateway(server, s3, bucket, tessera_bin, tmp_path):
    """`tessera console` as its own process: the gateway, meta and metrics
    of the session's server, reached over TCP."""
    s3.put_object(Bucket=bucket, Key="seen-by-the-role.txt", Body=b"x")
    argv = [
        str(tessera_bin),
        "console",
        "--console-listen",
        "127.0.0.1:0",
        "--console-sample-interval",
        "1s",
        "--gateway",
        server.endpoint,
        "--meta",
        server.meta,
        "--metrics",
        server.ops + "/metrics",
    ]
    proc = Proc("console", argv, process_env({"TESSERA_ADMIN_TOKEN": server.admin_token}), tmp_path)
    try:
        console = proc.wait_ready()["console"]
        http, _ = console_session(console, server.access_key, server.secret_key)
        assert bucket in http.get(console + "/buckets", timeout=30).text
        listing = http.get(console + f"/buckets/{bucket}", timeout=30).text
        assert "seen-by-the-role.txt" in listing

        def charted() -> bool:
            s3.list_buckets()
            page = http.get(console + "/cluster", timeout=30).text
            return page.count("<tr>") >= 6 and "all no data" not in page

        wait_for("the cluster page with a drawn request rate", charted)
    finally:
        proc.terminate()


def test_cookies_are_secure_behind_a_tls_proxy(server):
    """A TLS proxy in front of the console says so in X-Forwarded-Proto:
    the cookies are then sent over HTTPS only."""
    proxied = {"X-Forwarded-Proto": "https"}
    form = requests.get(server.console + "/login", headers=proxied, timeout=30)
    assert "Secure" in form.headers["set-cookie"]
    token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text).group(1)
    answer = requests.post(
        server.console + "/login",
        data={"csrf": token, "access_key": server.access_key, "secret_key": server.secret_key},
        cookies={c.name: c.value for c in form.cookies},
        headers=proxied,
        allow_redirects=False,
        timeout=30,
    )
    assert answer.status_code == 303
    session = [c for c in answer.headers["set-cookie"].split(", ") if c.startswith("tessera_console=")]
    assert session and "Secure" in session[0] and "HttpOnly" in session[0], answer.headers["set-cookie"]


def test_guessing_secrets_is_slowed_down(tessera_bin, tmp_path):
    """Five failed sign-ins from one address within a minute: the next
    attempt from it, even with the right secret, waits (429). A server of
    its own, so that the session server's console still takes sign-ins."""
    server = start_server(tessera_bin, tmp_path, name="guessed")
    try:

        def attempt(secret: str) -> requests.Response:
            http = requests.Session()
            form = http.get(server.console + "/login", timeout=30)
            token = re.search(r'name="csrf" value="([0-9a-f]+)"', form.text).group(1)
            return http.post(
                server.console + "/login",
                data={"csrf": token, "access_key": server.access_key, "secret_key": secret},
                timeout=30,
            )

        for i in range(5):
            assert attempt(f"guess-{i}").status_code == 403
        refused = attempt(server.secret_key)
        assert refused.status_code == 429
        assert "too many failed sign-ins" in refused.text
        # The admin token is counted in the same way.
        assert attempt("").status_code == 429
    finally:
        server.proc.terminate()
