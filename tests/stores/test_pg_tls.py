"""libpq's ``sslmode`` on both PostgreSQL drivers, against a PostgreSQL with TLS the
tests start: psycopg (libpq itself) says what each mode means, and pg8000 (the
store makes its connections follow the mode) must do the same."""
from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from pathlib import Path
from typing import Iterator, Optional, Tuple

import pytest

from a2a_flask.stores import StoreError, open_store

from tests.support.dbservers import PostgresServer
from tests.support.helpers import wait_until

sa = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")
pytest.importorskip("pg8000")
pytest.importorskip("cryptography")

pytestmark = [pytest.mark.timeout(180), pytest.mark.server, pytest.mark.slow]

DRIVERS = ["psycopg", "pg8000"]


# ------------------------------------------------------------------ certificates


def _certificate(subject: str, key, issuer: Optional[Tuple[str, object]] = None,
                 names: Tuple[str, ...] = ()):
    """A certificate for ``key``: a self-signed CA, or (``issuer``: name and key)
    a server certificate for ``names``."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.timezone.utc)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)])
    issuer_name, signer = (name, key) if issuer is None else (
        x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, issuer[0])]), issuer[1])
    builder = (x509.CertificateBuilder().subject_name(name).issuer_name(issuer_name)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(hours=1))
               .not_valid_after(now + datetime.timedelta(days=1)))
    if issuer is None:
        builder = (builder.add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
                   .add_extension(x509.KeyUsage(True, False, False, False, False, True, True,
                                                False, False), True)
                   .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()),
                                  False))
    else:
        builder = (builder.add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
                   .add_extension(x509.SubjectAlternativeName([x509.DNSName(n) for n in names]),
                                  False)
                   .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]),
                                  False)
                   .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(
                       signer.public_key()), False))
    return builder.sign(signer, hashes.SHA256())


def _write_certificates(folder: Path) -> None:
    """``ca.pem`` (the CA that signed the server's certificate), ``other-ca.pem`` (a CA
    that did not), and the server's ``server.pem`` and ``server.key``, made out
    to ``localhost`` only (so that verify-full to 127.0.0.1 fails on the name)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    ca_key, other_key, server_key = (ec.generate_private_key(ec.SECP256R1()) for _ in range(3))
    pem = serialization.Encoding.PEM
    folder.mkdir()
    (folder / "ca.pem").write_bytes(_certificate("a2a test CA", ca_key).public_bytes(pem))
    (folder / "other-ca.pem").write_bytes(
        _certificate("another CA", other_key).public_bytes(pem))
    (folder / "server.pem").write_bytes(_certificate(
        "localhost", server_key, ("a2a test CA", ca_key), ("localhost",)).public_bytes(pem))
    (folder / "server.key").write_bytes(server_key.private_bytes(
        pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    os.chmod(folder / "server.key", 0o600)  # the server refuses a key others may read


#: Who may connect how: ``tls_only`` only over TLS, everyone else either way.
HBA = """local all all trust
hostssl all tls_only 127.0.0.1/32 trust
hostnossl all tls_only 127.0.0.1/32 reject
host all all 127.0.0.1/32 trust
"""


class TLSServer:
    def __init__(self, server: PostgresServer, tls: Path) -> None:
        self.server, self.tls = server, tls

    def url(self, driver: str, mode: str, rootcert: Optional[str] = None,
            user: str = "postgres", host: str = "127.0.0.1") -> str:
        query = f"sslmode={mode}" + (f"&sslrootcert={self._cert(rootcert)}" if rootcert else "")
        return (f"postgresql+{driver}://{user}@{host}:{self.server.port}/postgres?{query}")

    def _cert(self, name: str) -> str:
        return name if name == "system" else str(self.tls / name)

    def admin(self, sql: str) -> object:
        """Run ``sql`` as postgres over the server's Unix socket (whatever TLS is doing)."""
        import psycopg

        with psycopg.connect(host=str(self.server.directory), port=self.server.port,
                             user="postgres", dbname="postgres", autocommit=True) as conn:
            cursor = conn.execute(sql)
            return cursor.fetchone()[0] if cursor.description else None

    def set_ssl(self, on: bool) -> None:
        """Turn TLS on or off, and wait until new connections see it."""
        value = "on" if on else "off"
        self.admin(f"ALTER SYSTEM SET ssl = {value}")
        self.admin("SELECT pg_reload_conf()")
        wait_until(lambda: self.admin("SHOW ssl") == value, 10, f"ssl = {value}")


@pytest.fixture(scope="module")
def tls_server() -> Iterator[TLSServer]:
    """A PostgreSQL of the test's own with TLS on (``ssl`` set with ALTER SYSTEM, so that
    a test may turn it off and on again), its certificates and ``pg_hba.conf``."""
    directory = Path(tempfile.mkdtemp(prefix="a2a-pgtls-"))
    try:
        tls = directory / "tls"
        _write_certificates(tls)
        (directory / "pg_hba.conf").write_text(HBA)
        if os.geteuid() == 0:  # the server runs as postgres: its files must be its own
            for path in [tls, *tls.iterdir(), directory / "pg_hba.conf"]:
                shutil.chown(path, "postgres", "postgres")
        options = (f"-c ssl_cert_file={tls}/server.pem -c ssl_key_file={tls}/server.key "
                   f"-c hba_file={directory}/pg_hba.conf")
        with PostgresServer(directory, options=options) as server:
            found = TLSServer(server, tls)
            found.admin("CREATE ROLE tls_only LOGIN SUPERUSER")
            found.set_ssl(True)
            yield found
    finally:
        shutil.rmtree(directory, ignore_errors=True)


ENCRYPTED = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"


def outcome(url: str) -> object:
    """True (TLS) or False (plain text) for a new connection of the store's engine;
    "refused at start" for a URL the store refuses; "fails" for a connection that fails."""
    try:
        store = open_store(url)
    except StoreError:
        return "refused at start"
    try:
        with store.engine.connect() as conn:
            return conn.execute(sa.text(ENCRYPTED)).scalar()
    except Exception:  # the drivers' own errors (and ssl's, through pg8000)
        return "fails"
    finally:
        store.close()


# (sslmode, sslrootcert, user, host) -> what libpq does: TLS, plain text, or fails.
CASES = [
    ("disable", None, "postgres", "127.0.0.1", False),
    ("disable", None, "tls_only", "127.0.0.1", "fails"),
    ("allow", None, "postgres", "127.0.0.1", False),
    ("allow", None, "tls_only", "127.0.0.1", True),  # plain text refused: TLS next
    ("allow", "other-ca.pem", "tls_only", "127.0.0.1", "fails"),
    ("prefer", None, "postgres", "127.0.0.1", True),
    ("prefer", "ca.pem", "postgres", "127.0.0.1", True),
    ("prefer", "other-ca.pem", "postgres", "127.0.0.1", False),  # handshake failed: plain
    ("prefer", "other-ca.pem", "tls_only", "127.0.0.1", "fails"),
    ("require", None, "postgres", "127.0.0.1", True),
    ("require", "ca.pem", "postgres", "127.0.0.1", True),
    ("require", "other-ca.pem", "postgres", "127.0.0.1", "fails"),  # the chain is verified
    ("verify-ca", "ca.pem", "postgres", "127.0.0.1", True),
    ("verify-ca", "other-ca.pem", "postgres", "127.0.0.1", "fails"),
    ("verify-full", "ca.pem", "postgres", "localhost", True),
    ("verify-full", "ca.pem", "postgres", "127.0.0.1", "fails"),  # not the certificate's name
    ("verify-full", "other-ca.pem", "postgres", "localhost", "fails"),
]


@pytest.mark.parametrize("driver", DRIVERS)
@pytest.mark.parametrize("mode, rootcert, user, host, expected", CASES,
                         ids=[f"{c[0]}-{c[1] or 'no-ca'}-{c[2]}-{c[3]}" for c in CASES])
def test_each_sslmode_means_what_it_means_to_libpq(tls_server, driver, mode, rootcert, user,
                                                   host, expected):
    assert outcome(tls_server.url(driver, mode, rootcert, user, host)) == expected


@pytest.mark.parametrize("mode, rootcert", [("verify-ca", None), ("verify-full", None),
                                            ("require", "system"), ("verify-ca", "system")])
def test_what_libpq_refuses_pg8000_refuses_at_start(tls_server, mode, rootcert, monkeypatch,
                                                    tmp_path):
    """No CA to verify against (libpq reads ~/.postgresql/root.crt: an empty home
    here), or the system's CAs below verify-full: libpq fails every connection;
    the pg8000 store does not start."""
    monkeypatch.setenv("HOME", str(tmp_path))
    assert outcome(tls_server.url("psycopg", mode, rootcert)) == "fails"
    assert outcome(tls_server.url("pg8000", mode, rootcert)) == "refused at start"


def test_pg8000_refuses_what_it_cannot_honour_at_start(tls_server):
    url = tls_server.url("pg8000", "require") + "&sslcert=/tmp/client.pem"
    with pytest.raises(StoreError, match="pg8000 cannot honour sslcert.*psycopg"):
        open_store(url)
    with pytest.raises(StoreError, match="sslrootcert file /nowhere/ca.pem does not exist"):
        open_store(tls_server.url("pg8000", "require") + "&sslrootcert=/nowhere/ca.pem")


def test_prefer_asks_for_tls_on_every_new_connection(tls_server):
    """A server that had no TLS when the pool's first connection was made gets TLS
    on the next one, once it has it (libpq asks each time; pg8000 engines used to
    remember the first refusal for good)."""
    store = open_store(tls_server.url("pg8000", "prefer"))
    try:
        tls_server.set_ssl(False)
        with store.engine.connect() as first:
            assert first.execute(sa.text(ENCRYPTED)).scalar() is False
            tls_server.set_ssl(True)
            with store.engine.connect() as second:  # a new one: the first is checked out
                assert second.execute(sa.text(ENCRYPTED)).scalar() is True
    finally:
        tls_server.set_ssl(True)
        store.close()
