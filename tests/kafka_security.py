"""A secured embedded broker for tests of least-privilege and TLS clients: SASL users with
ACLs enforced, TLS listeners, SCRAM credentials.

groupscope itself never runs a secured broker (its own node speaks PLAINTEXT on loopback, plus
a workshop room's listener), so none of this is in the product: `SecureBroker` extends
`EmbeddedBroker` (backend/broker/embedded.py) through its `server_properties`, `settings`,
`prepare` and `answers`, and words a failed format without the passwords it was given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from confluent_kafka.admin import (
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from backend.broker.embedded import BrokerStartError, EmbeddedBroker
from backend.kafka.clients import quiet_admin
from backend.kafka.settings import KafkaSettings
from backend.netutil import ensure_port_free, free_port

# the SCRAM mechanism every SASL user gets (besides PLAIN), and Kafka's minimum iterations
SCRAM_MECHANISM = "SCRAM-SHA-256"
SCRAM_ITERATIONS = 4096


@dataclass(frozen=True)
class TlsMaterial:
    """The broker's side of TLS: its key store and the CAs it trusts.

    A store's type follows its suffix: `.p12`/`.pfx` PKCS12, `.jks` JKS, anything else PEM.
    The simple pair with the `openssl` CLI is a PKCS12 key store (`openssl pkcs12 -export`,
    whose key the store password protects) and a PEM trust store (the CA's certificate, no
    password). A PEM key store would need its encrypted key in a scheme Java 17 reads, which
    the PBES2 keys OpenSSL 3 writes are not. The passwords go into server.properties (mode
    0600) and nowhere else: not the command line, not a log.
    """

    keystore: Path
    key_password: str | None = field(default=None, repr=False)
    keystore_password: str | None = field(default=None, repr=False)  # PKCS12 / JKS only
    truststore: Path | None = None  # CAs for client certificates; None: the JVM's defaults
    truststore_password: str | None = field(default=None, repr=False)  # PKCS12 / JKS only
    # the SSL listener's demand for a client certificate; the SASL_SSL listener asks none
    client_auth: Literal["required", "requested", "none"] = "required"

    def __post_init__(self) -> None:
        # server.properties is a Java properties file: a backslash or line break would change
        # what the broker reads (the message names no value, which may be a password)
        for value in (str(self.keystore), str(self.truststore or ""), *self.secrets()):
            if "\n" in value or "\\" in value:
                raise ValueError("TLS store paths and passwords must not hold line breaks or "
                                 "backslashes")
        if self.client_auth not in ("required", "requested", "none"):
            raise ValueError(f"client_auth must be required, requested or none, "
                             f"not {self.client_auth!r}")

    def secrets(self) -> list[str]:
        return [s for s in (self.key_password, self.keystore_password,
                            self.truststore_password) if s]

    def properties(self) -> dict[str, str]:
        """The broker-wide `ssl.*` settings (both TLS listeners share one certificate)."""
        props = {"ssl.keystore.type": _store_type(self.keystore),
                 "ssl.keystore.location": str(Path(self.keystore).resolve())}
        if self.keystore_password:
            props["ssl.keystore.password"] = self.keystore_password
        if self.key_password:
            props["ssl.key.password"] = self.key_password
        if self.truststore is not None:
            props["ssl.truststore.type"] = _store_type(self.truststore)
            props["ssl.truststore.location"] = str(Path(self.truststore).resolve())
            if self.truststore_password:
                props["ssl.truststore.password"] = self.truststore_password
        return props


def _store_type(path: Path) -> str:
    suffix = Path(path).suffix.lower()
    return {".p12": "PKCS12", ".pfx": "PKCS12", ".jks": "JKS"}.get(suffix, "PEM")


@dataclass
class SecureBroker(EmbeddedBroker):
    """One KRaft node with security: SASL users and ACLs, TLS listeners, or both.

    With `sasl_users` (user -> password) the client port speaks SASL_PLAINTEXT (PLAIN and
    SCRAM-SHA-256 for every user) and ACLs are enforced by StandardAuthorizer; `sasl_admin`
    is the super user the broker itself uses, and `settings` log in as it. With `tls`, an SSL
    listener (client certificates as `client_auth` says; a certificate's CN is its principal)
    and, with `sasl_users` too, a SASL_SSL listener, each on its own port (free ones unless
    given), advertised on `host`. The plain (or SASL_PLAINTEXT) port stays the broker's own and
    `settings`' listener. A single node only: no cluster voters, no workshop room.
    """

    sasl_users: dict[str, str] | None = field(default=None, repr=False)
    sasl_admin: str = "admin"
    tls: TlsMaterial | None = field(default=None, repr=False)
    ssl_port: int | None = None
    sasl_ssl_port: int | None = None
    # the SCRAM credentials still to write in this start (see answers)
    _unwritten: dict[str, str] = field(init=False, repr=False, default_factory=dict)

    def __post_init__(self) -> None:
        if self.sasl_users is not None:
            if self.sasl_admin not in self.sasl_users:
                raise ValueError(f"sasl_users must include the broker's own user "
                                 f"{self.sasl_admin!r}")
            for user, pw in self.sasl_users.items():
                if not pw or any(c in user + pw for c in '"=,[] \\\n;'):
                    raise ValueError(f"SASL user {user!r}: name and password must be non-empty "
                                     "without quotes, brackets, commas, '=', ';' or spaces")
        if self.voters is not None or self.room_address:
            raise ValueError("a secured broker is one node on loopback: no voters, no room")
        super().__post_init__()
        if self.tls is not None:
            if self.sasl_users is not None and self.tls.client_auth != "required":
                # ANONYMOUS is a super user here (the controller's own traffic): an SSL client
                # without a certificate would be one too
                raise ValueError("with sasl_users, the SSL listener must require client "
                                 "certificates (client_auth='required')")
            self.ssl_port = self.ssl_port or free_port(self.host)
            if self.sasl_users is not None:
                self.sasl_ssl_port = self.sasl_ssl_port or free_port(self.host)

    # ---- connecting --------------------------------------------------------------------

    @property
    def settings(self) -> KafkaSettings:
        """How to connect; with SASL enabled, as the super user."""
        if self.sasl_users is not None:
            return self.settings_for(self.sasl_admin)
        return super().settings

    def settings_for(self, user: str, mechanism: str = "PLAIN") -> KafkaSettings:
        """Client settings for one SASL user (`PLAIN` or `SCRAM-SHA-256`)."""
        if self.sasl_users is None:
            raise ValueError("this broker has no SASL users")
        props = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": mechanism,
            "sasl.username": user,
            "sasl.password": self.sasl_users[user],
        }
        return KafkaSettings(bootstrap=f"{self.host}:{self.port}", client_properties=props,
                             external=True)

    @property
    def ssl_bootstrap(self) -> str:
        """host:port of the SSL listener (with `tls=`)."""
        if self.ssl_port is None:
            raise ValueError("this broker has no TLS listener (pass tls=TlsMaterial(...))")
        return f"{self.host}:{self.ssl_port}"

    @property
    def sasl_ssl_bootstrap(self) -> str:
        """host:port of the SASL_SSL listener (with `tls=` and `sasl_users=`)."""
        if self.sasl_ssl_port is None:
            raise ValueError("this broker has no SASL_SSL listener (needs tls= and sasl_users=)")
        return f"{self.host}:{self.sasl_ssl_port}"

    def secrets(self) -> list[str]:
        """Every password this broker's server.properties holds."""
        return [*(self.sasl_users or {}).values(), *(self.tls.secrets() if self.tls else [])]

    # ---- configuration -----------------------------------------------------------------

    def server_properties(self) -> dict[str, str]:
        """The plain node's settings with SASL's listener in place of PLAINTEXT and the TLS
        listeners added; `extra_properties` still have the last word."""
        props = super().server_properties()
        if self.sasl_users is not None:
            props.update(self._sasl_properties())
        if self.tls is not None:
            self._add_tls_listeners(props)
        props.update(self.extra_properties)
        return props

    def _add_tls_listeners(self, props: dict[str, str]) -> None:
        assert self.tls is not None
        names = ["SSL"] + (["SASL_SSL"] if self.sasl_ssl_port is not None else [])
        ports = {"SSL": self.ssl_port, "SASL_SSL": self.sasl_ssl_port}
        for name in names:
            props["listeners"] += f",{name}://{self.host}:{ports[name]}"
            props["advertised.listeners"] += f",{name}://{self.host}:{ports[name]}"
            props["listener.security.protocol.map"] += f",{name}:{name}"
        props.update(self.tls.properties())
        props["listener.name.ssl.ssl.client.auth"] = self.tls.client_auth
        # the principal of a client certificate is its CN ("watcher"), as for a SASL user,
        # so one ACL covers a user whichever way it logs in
        props["ssl.principal.mapping.rules"] = "RULE:^CN=([^,]+).*$/$1/,DEFAULT"
        if "SASL_SSL" in names:
            props["listener.name.sasl_ssl.ssl.client.auth"] = "none"
            for mech in ("plain", "scram-sha-256"):
                props[f"listener.name.sasl_ssl.{mech}.sasl.jaas.config"] = \
                    props[f"listener.name.sasl_plaintext.{mech}.sasl.jaas.config"]

    def _sasl_properties(self) -> dict[str, str]:
        assert self.sasl_users is not None
        users = " ".join(f'user_{u}="{pw}"' for u, pw in self.sasl_users.items())
        admin_pw = self.sasl_users[self.sasl_admin]
        plain = ("org.apache.kafka.common.security.plain.PlainLoginModule required "
                 f'username="{self.sasl_admin}" password="{admin_pw}" {users};')
        return {
            "listeners": f"SASL_PLAINTEXT://{self.host}:{self.port},"
            f"CONTROLLER://{self.host}:{self.controller_port}",
            "advertised.listeners": f"SASL_PLAINTEXT://{self.host}:{self.port}",
            "listener.security.protocol.map": "SASL_PLAINTEXT:SASL_PLAINTEXT,"
            "CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name": "SASL_PLAINTEXT",
            "sasl.enabled.mechanisms": f"PLAIN,{SCRAM_MECHANISM}",
            "sasl.mechanism.inter.broker.protocol": "PLAIN",
            "listener.name.sasl_plaintext.plain.sasl.jaas.config": plain,
            "listener.name.sasl_plaintext.scram-sha-256.sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;",
            "authorizer.class.name":
                "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            # the controller listener only listens on this host and carries the broker's own
            # (unauthenticated) controller traffic
            "super.users": f"User:{self.sasl_admin};User:ANONYMOUS",
            "allow.everyone.if.no.acl.found": "false",
        }

    def _format_storage(self, config: Path) -> None:
        """The plain node's format, its failure worded without a password: the tool may quote
        server.properties. No --add-scram: it takes each password as an argument, which `ps`
        shows to every user of the machine; SCRAM users are created through the admin API
        once the broker answers (`answers`)."""
        try:
            super()._format_storage(config)
        except BrokerStartError as exc:
            text = str(exc)
            for secret in self.secrets():
                text = text.replace(secret, "***")
            raise BrokerStartError(text) from None

    # ---- lifecycle ---------------------------------------------------------------------

    def prepare(self) -> Path:
        """The TLS listeners' ports checked too, before anything is written."""
        for port, what in ((self.ssl_port, "SSL"), (self.sasl_ssl_port, "SASL_SSL")):
            if port is not None:
                ensure_port_free(self.host, port, f"Kafka {what} listener")
        return super().prepare()

    def wait_ready(self, timeout: float) -> None:
        """With `sasl_users`, ready also means every user logs in with SCRAM (callers do so
        right after start): their credentials are written once per start (`answers`)."""
        self._unwritten = dict(self.sasl_users or {})
        super().wait_ready(timeout)

    def answers(self) -> bool:
        """The SCRAM credentials are written once the broker answers, by its admin logged in
        with PLAIN (whose users live in the JAAS config of the 0600 server.properties), so no
        password is ever an argument of a process. A credential reaches the broker's
        authenticator only after the controller has committed it, hence the login probe."""
        if not super().answers():
            return False
        if self._unwritten:
            self._write_scram_credentials(self._unwritten)
            self._unwritten = {}  # once per start: a rewrite (new salt) races the logins
        return all(self.settings_for(user, SCRAM_MECHANISM).check_reachable(timeout=1.0)
                   for user in self.sasl_users or {})

    def _write_scram_credentials(self, users: dict[str, str]) -> None:
        """Create (or replace) a SCRAM-SHA-256 credential for every user in one request."""
        info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_256, SCRAM_ITERATIONS)
        upserts = [UserScramCredentialUpsertion(user, info, pw.encode())
                   for user, pw in users.items()]
        admin = quiet_admin(self.settings)
        for future in admin.alter_user_scram_credentials(upserts).values():
            future.result(10)
