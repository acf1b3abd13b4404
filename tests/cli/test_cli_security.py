"""The real ``bolide`` binary against a real ``bolide standalone`` with aclEnable=true and
enforced TLS: commands sign with --access-key/--secret-key (or the environment), non-admins
and unsigned commands are refused, ``bolide acl`` manages accounts, and TLS is required."""

from __future__ import annotations

import http.cookiejar
import re
import signal
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.cli.conftest import BOLIDE, PROCESS_GUARD_S, _read_ready_line, run_bolide
from tests.remoting.tls_certs import CertificateFiles, make_certificates

pytestmark = pytest.mark.timeout(240)

ACCOUNTS = """
accounts:
  - accessKey: cliAdmin1
    secretKey: admin-secret
    admin: true
  - accessKey: cliUser01
    secretKey: user-secret
    defaultTopicPerm: SUB
    defaultGroupPerm: SUB
"""
ADMIN = ["--access-key", "cliAdmin1", "--secret-key", "admin-secret"]


@dataclass(frozen=True)
class Secured:
    namesrv: str
    certs: CertificateFiles
    acl_file: Path
    dashboard: str = ""

    @property
    def tls(self) -> list[str]:
        return ["--tls", "--tls-trust-cert", str(self.certs.ca)]


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    root = tmp_path_factory.mktemp("secured")
    certs = make_certificates(root / "certs")
    acl_file = root / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    conf = root / "broker.conf"
    conf.write_text(
        f"aclEnable=true\naclFile={acl_file}\ntls.server.mode=enforcing\n"
        f"tls.server.certPath={certs.server_cert}\ntls.server.keyPath={certs.server_key}\n"
    )
    process = subprocess.Popen(
        [BOLIDE, "standalone", "--namesrv-port", "0", "--broker-port", "0", "--proxy-port", "0",
         "--metrics-port", "0", "--dashboard-port", "0",
         "--data-dir", str(root / "data"), "-c", str(conf)],
        cwd=root,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        ready = _read_ready_line(process)
        fields = dict(part.split("=", 1) for part in ready.split()[2:])
        yield Secured(fields["namesrv"], certs, acl_file, fields["dashboard"])
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(PROCESS_GUARD_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_admin_commands_need_an_admin_account(secured: Secured) -> None:
    unsigned = run_bolide("topic", "create", "CliSecure", *secured.tls, namesrv=secured.namesrv)
    assert unsigned.code == 1
    assert "AclException: No accessKey is configured" in unsigned.stderr
    user = run_bolide("topic", "create", "CliSecure", *secured.tls, "--access-key", "cliUser01",
                      "--secret-key", "user-secret", namesrv=secured.namesrv)  # fmt: skip
    assert user.code == 1
    assert "is not admin" in user.stderr
    admin = run_bolide("topic", "create", "CliSecure", *secured.tls, *ADMIN,
                       namesrv=secured.namesrv)  # fmt: skip
    assert admin.code == 0, admin.stderr
    # the options may also come first, and the keys from the environment
    user_env = {"BOLIDE_ACCESS_KEY": "cliUser01", "BOLIDE_SECRET_KEY": "user-secret"}
    listed = run_bolide(*secured.tls, "topic", "list", "--json", namesrv=secured.namesrv,
                        env=user_env)  # fmt: skip
    assert listed.code == 0, listed.stderr
    assert "CliSecure" in listed.stdout


def test_plain_command_is_refused_by_enforced_tls(secured: Secured) -> None:
    plain = run_bolide("topic", "list", *ADMIN, "--timeout-ms", "3000", namesrv=secured.namesrv)
    assert plain.code == 4
    wrong_ca = run_bolide("topic", "list", *ADMIN, "--tls", "--tls-trust-cert",
                          str(secured.certs.other_ca), namesrv=secured.namesrv)  # fmt: skip
    assert wrong_ca.code == 4
    assert "CERTIFICATE_VERIFY_FAILED" in wrong_ca.stderr


def test_acl_commands_manage_accounts(secured: Secured) -> None:
    created = run_bolide("acl", "update", "cliWriter1", "--account-secret", "writer-secret",
                         "--default-topic-perm", "DENY", "--topic-perm", "CliWrites=PUB",
                         *secured.tls, *ADMIN, "--json", namesrv=secured.namesrv)  # fmt: skip
    assert created.code == 0, created.stderr
    assert created.json() == {"account": "cliWriter1", "brokers": ["broker-a"]}
    assert "cliWriter1" in secured.acl_file.read_text()  # written to the accounts file
    assert run_bolide("topic", "create", "CliWrites", *secured.tls, *ADMIN,
                      namesrv=secured.namesrv).code == 0  # fmt: skip
    writer = ["--access-key", "cliWriter1", "--secret-key", "writer-secret"]
    sent = run_bolide("message", "send", "CliWrites", "hello", *secured.tls, *writer,
                      namesrv=secured.namesrv)  # fmt: skip
    assert sent.code == 0, sent.stderr
    listed = run_bolide("acl", "list", "--json", *secured.tls, *ADMIN, namesrv=secured.namesrv)
    accounts = {a["accessKey"]: a for a in listed.json()["broker-a"]["accounts"]}
    assert accounts["cliWriter1"]["topicPerms"] == ["CliWrites=PUB"]
    assert accounts["cliWriter1"]["secretKey"] == "******"
    versions = run_bolide("acl", "version", "--json", *secured.tls, *ADMIN,
                          namesrv=secured.namesrv)  # fmt: skip
    assert '"counter":1' in versions.json()["broker-a"]["version"].replace(" ", "")
    white = run_bolide("acl", "white-list", "10.9.8.*", *secured.tls, *ADMIN,
                       namesrv=secured.namesrv)  # fmt: skip
    assert white.code == 0, white.stderr
    bad = run_bolide("acl", "white-list", "10.9.8", *secured.tls, *ADMIN, namesrv=secured.namesrv)
    assert bad.code == 1
    assert "address pattern '10.9.8'" in bad.stderr
    deleted = run_bolide("acl", "delete", "cliWriter1", *secured.tls, *ADMIN,
                         namesrv=secured.namesrv)  # fmt: skip
    assert deleted.code == 0, deleted.stderr
    refused = run_bolide("message", "send", "CliWrites", "again", *secured.tls, *writer,
                         namesrv=secured.namesrv)  # fmt: skip
    assert refused.code == 1
    assert "No acl config for cliWriter1" in refused.stderr
    denied = run_bolide("acl", "list", *secured.tls, "--access-key", "cliUser01",
                        "--secret-key", "user-secret", namesrv=secured.namesrv)  # fmt: skip
    assert denied.code == 1
    assert "is not admin" in denied.stderr


def test_name_server_refuses_to_start_without_a_working_acl_file(tmp_path: Path) -> None:
    missing = run_bolide("namesrv", "--port", "0", "--data-dir", str(tmp_path),
                         "--acl-file", str(tmp_path / "none.yml"), namesrv=None)  # fmt: skip
    assert missing.code == 1
    assert "name server ACL file cannot be used" in missing.stderr
    bad_mode = run_bolide("namesrv", "--port", "0", "--data-dir", str(tmp_path),
                          "--tls-mode", "strict", namesrv=None)  # fmt: skip
    assert bad_mode.code == 2
    no_cert = run_bolide("namesrv", "--port", "0", "--data-dir", str(tmp_path),
                         "--tls-mode", "enforcing", namesrv=None)  # fmt: skip
    assert no_cert.code == 1
    assert "needs tls.server.certPath" in no_cert.stderr


def test_broker_refuses_to_start_with_acl_on_and_no_accounts_file(tmp_path: Path) -> None:
    conf = tmp_path / "broker.conf"
    conf.write_text(f"aclEnable=true\naclFile={tmp_path / 'absent.yml'}\n")
    result = run_bolide("broker", "-c", str(conf), "--port", "0", "--data-dir",
                        str(tmp_path / "data"), namesrv=None)  # fmt: skip
    assert result.code == 1
    assert "aclEnable=true but the ACL file cannot be used" in result.stderr


def test_name_server_with_tls_and_acl_from_the_command_line(tmp_path: Path) -> None:
    certs = make_certificates(tmp_path / "certs")
    acl_file = tmp_path / "plain_acl.yml"
    acl_file.write_text(ACCOUNTS)
    process = subprocess.Popen(
        [BOLIDE, "namesrv", "--port", "0", "--data-dir", str(tmp_path / "data"),
         "--acl-file", str(acl_file), "--tls-mode", "enforcing",
         "--tls-cert", str(certs.server_cert), "--tls-key", str(certs.server_key)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        address = _read_ready_line(process).split("namesrv=", 1)[1]
        tls = ["--tls", "--tls-trust-cert", str(certs.ca)]
        signed = run_bolide("cluster", "list", "--json", *tls, *ADMIN, namesrv=address)
        assert signed.code == 0, signed.stderr
        unsigned = run_bolide("cluster", "list", *tls, namesrv=address)
        assert unsigned.code == 1
        assert "No accessKey is configured" in unsigned.stderr
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(PROCESS_GUARD_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_the_dashboard_asks_for_an_account_and_signs_with_it(secured: Secured) -> None:
    """ACL and enforced TLS on: the standalone's dashboard wants a login, checked against the
    broker's accounts, and then reaches the TLS-only broker signed with that account."""
    opener = urllib.request.build_opener(
        urllib.request.HTTPCookieProcessor(http.cookiejar.CookieJar())
    )
    base = f"http://{secured.dashboard}"
    with opener.open(base + "/", timeout=PROCESS_GUARD_S) as first:  # redirected to log in
        assert first.url.endswith("/login?next=/")
        token = re.search(r'name="csrf" value="([^"]+)"', first.read().decode())
    assert token is not None
    form = urllib.parse.urlencode(
        {"access_key": "cliUser01", "secret_key": "user-secret", "csrf": token.group(1)}
    ).encode()
    with opener.open(base + "/login?next=/", data=form, timeout=PROCESS_GUARD_S) as page:
        html = page.read().decode()
    assert "cliUser01 (read-only)" in html
    assert "broker-a" in html and "unavailable" not in html
