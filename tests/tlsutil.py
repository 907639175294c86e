"""Test certificates made with the `openssl` CLI: a CA, a broker certificate, client certificates.

Everything lands in the directory the test passes (its tmp dir), nothing is cached or shared
between runs, and no Python crypto package is needed. Keys are EC P-256 (quick to make, read by
Java and librdkafka alike) and, when given a passphrase, stored as encrypted PKCS#8 PEM with
AES-256-CBC, the form both Kafka's PEM key store and librdkafka's `ssl.key.location` +
`ssl.key.password` read (`openssl req -newkey` would pick 3DES, which Java 17 cannot parse).

Passphrases reach openssl through its environment (`-passin env:`/`-passout env:`), never its
command line, so they cannot show up in `ps` while a certificate is being made. Each call has a
timeout, so a wedged openssl fails the test instead of hanging it.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from backend.proc import run
from tests.kafka_security import TlsMaterial

OPENSSL = "openssl"
OPENSSL_TIMEOUT_S = 30.0
VALID_DAYS = 2  # a test run's certificates need not outlive it
_PASS_ENV = "GS_TLS_PASS"  # the passphrase of the key being written
_CA_PASS_ENV = "GS_TLS_CA_PASS"  # the CA key's, when signing


class OpenSSLError(RuntimeError):
    """openssl exited non-zero; the message carries its stderr (which never holds a
    passphrase: those travel in the environment)."""


def new_secret(label: str) -> str:
    """A fresh, recognisable secret (hex only, so safe in properties and JAAS files); the
    label makes a leak found by a test easy to trace to what leaked."""
    return f"{label}-{secrets.token_hex(10)}"


def openssl(*args: str, cwd: Path, env: dict[str, str] | None = None) -> str:
    """Run `openssl ARGS` in `cwd` with a timeout; stdout, or OpenSSLError with stderr."""
    result = run([OPENSSL, *args], timeout=OPENSSL_TIMEOUT_S, cwd=cwd, capture_output=True,
                 text=True, stdin=subprocess.DEVNULL, env={**os.environ, **(env or {})})
    if result.returncode != 0:
        raise OpenSSLError(f"openssl {args[0]} failed ({result.returncode}): "
                           f"{result.stderr.strip()}")
    return result.stdout


def new_key(path: Path, passphrase: str | None) -> Path:
    """An EC P-256 private key at `path` (mode 0600), AES-256 encrypted with `passphrase`."""
    path.touch(mode=0o600)
    cipher = ["-aes-256-cbc", "-pass", f"env:{_PASS_ENV}"] if passphrase else []
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", *cipher,
            "-out", path.name, cwd=path.parent, env={_PASS_ENV: passphrase or ""})
    return path


@dataclass(frozen=True)
class Certificate:
    """A certificate and its key; `passphrase` is None when the key is stored unencrypted."""

    cert: Path
    key: Path
    passphrase: str | None = field(default=None, repr=False)


@dataclass(frozen=True)
class CertAuthority:
    """A throw-away CA: `cert` is what clients and the broker trust (`ssl.ca.location`)."""

    directory: Path
    cert: Path
    key: Path
    passphrase: str = field(repr=False)

    def issue(self, name: str, *, common_name: str, sans: tuple[str, ...] = (),
              passphrase: str | None = None, server: bool = False) -> Certificate:
        """`<name>.pem` + `<name>.key`, signed by this CA. `sans` are subjectAltName entries
        (`IP:127.0.0.1`, `DNS:localhost`); `server` allows TLS server use (a broker),
        otherwise client use only. A passphrase encrypts the key (PKCS#8, AES-256)."""
        key, csr, cert = (self.directory / f"{name}{s}" for s in (".key", ".csr", ".pem"))
        new_key(key, passphrase)
        key_in = ["-passin", f"env:{_PASS_ENV}"] if passphrase else []
        openssl("req", "-new", "-key", key.name, *key_in, "-out", csr.name,
                "-subj", f"/CN={common_name}", cwd=self.directory,
                env={_PASS_ENV: passphrase or ""})
        usage = "serverAuth,clientAuth" if server else "clientAuth"
        ext = ["basicConstraints=critical,CA:FALSE",
               "keyUsage=critical,digitalSignature,keyEncipherment",
               f"extendedKeyUsage={usage}"]
        if sans:
            ext.append("subjectAltName=" + ",".join(sans))
        ext_file = self.directory / f"{name}.ext"
        ext_file.write_text("\n".join(ext) + "\n")
        openssl("x509", "-req", "-in", csr.name, "-CA", self.cert.name, "-CAkey", self.key.name,
                "-passin", f"env:{_CA_PASS_ENV}", "-set_serial", str(secrets.randbits(63)),
                "-days", str(VALID_DAYS), "-extfile", ext_file.name, "-out", cert.name,
                cwd=self.directory, env={_CA_PASS_ENV: self.passphrase})
        csr.unlink()
        ext_file.unlink()
        return Certificate(cert, key, passphrase)


def make_ca(directory: Path, name: str = "ca", common_name: str = "groupscope test CA"
            ) -> CertAuthority:
    """A new self-signed CA in `directory` (`<name>.pem`, `<name>.key`, key encrypted)."""
    directory.mkdir(parents=True, exist_ok=True)
    passphrase = new_secret(f"{name}-key")
    cert = directory / f"{name}.pem"
    key = new_key(directory / f"{name}.key", passphrase)
    openssl("req", "-x509", "-key", key.name, "-passin", f"env:{_PASS_ENV}",
            "-out", cert.name, "-days", str(VALID_DAYS), "-subj", f"/CN={common_name}",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            cwd=directory, env={_PASS_ENV: passphrase})
    return CertAuthority(directory, cert, key, passphrase)


def broker_tls(directory: Path, ca: CertAuthority | None = None,
               client_auth: str = "required") -> tuple[TlsMaterial, CertAuthority]:
    """TLS for a SecureBroker (tests/kafka_security.py) on 127.0.0.1: a certificate for IP
    127.0.0.1 and localhost with a passphrase-protected key, bundled with the CA into a
    password-protected PKCS12 key store, and `ca` (a new one by default) as the PEM trust
    store for client certificates. Returns the material and the CA.

    PKCS12 rather than a PEM key store: Kafka reads an encrypted PEM key through
    `EncryptedPrivateKeyInfo`, which on Java 17 cannot open the PBES2 keys OpenSSL 3 writes,
    while Java 17 reads OpenSSL 3's PKCS12 files (AES-256, PBKDF2) as they come.
    """
    ca = ca or make_ca(directory)
    cert = ca.issue("broker", common_name="localhost", sans=("IP:127.0.0.1", "DNS:localhost"),
                    passphrase=new_secret("broker-key"), server=True)
    keystore = directory / "broker.p12"
    keystore.touch(mode=0o600)
    store_password = new_secret("broker-store")
    openssl("pkcs12", "-export", "-in", cert.cert.name, "-inkey", cert.key.name,
            "-passin", f"env:{_PASS_ENV}", "-certfile", ca.cert.name, "-name", "broker",
            "-out", keystore.name, "-passout", f"env:{_CA_PASS_ENV}", cwd=directory,
            env={_PASS_ENV: cert.passphrase or "", _CA_PASS_ENV: store_password})
    # a PKCS12 file from openssl protects its key with the store's password, which Kafka
    # uses when no separate key password is set
    return TlsMaterial(keystore=keystore, keystore_password=store_password, truststore=ca.cert,
                       client_auth=client_auth), ca
