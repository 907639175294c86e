"""A small typed client for the control API, shared by the dashboard and `groupscope ctl`.

Stdlib only (urllib), so importing it costs nothing in Streamlit. Every refusal becomes a
ControlError carrying the HTTP status and the server's one-line message.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from backend.supervisor.auth import ControlNotFound, read_control_files
from backend.supervisor.models import PartitionChange, ReplicaInfo, ReplicaOptions, Status


class ControlError(RuntimeError):
    """The API refused a call (status 4xx/5xx) or could not be reached (status 0)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class ControlClient:
    url: str
    token: str | None = None
    timeout: float = 30.0

    @classmethod
    def discover(cls, data_dir: Path | None = None, timeout: float = 30.0) -> ControlClient:
        """From `<data_dir>/control.json` and `control.token` (written by `groupscope backend`)."""
        from backend.paths import data_dir as default_data_dir

        try:
            ep = read_control_files(data_dir or default_data_dir())
        except ControlNotFound as exc:
            raise ControlError(str(exc)) from None
        return cls(url=ep.url, token=ep.token, timeout=timeout)

    # ---- transport -------------------------------------------------------------------------

    def request(self, method: str, path: str, body: Any = None,
                raw: bytes | None = None, auth: bool = True) -> dict[str, Any]:
        data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
        if method == "POST" and data is None:
            data = b""
        headers = {"Accept": "application/json"}
        if data is not None:
            headers["Content-Type"] = "application/json"
        if auth and self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        req = urllib.request.Request(self.url.rstrip("/") + path, data=data, method=method,
                                     headers=headers)
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as resp:
                return json.loads(resp.read() or b"{}")
        except urllib.error.HTTPError as exc:
            try:
                message = json.loads(exc.read()).get("error") or exc.reason
            except (ValueError, AttributeError):
                message = str(exc.reason)
            raise ControlError(str(message), exc.code) from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ControlError(f"supervisor at {self.url} not reachable: {reason}") from None

    def _post(self, path: str, body: Any = None) -> dict[str, Any]:
        return self.request("POST", path, body)

    # ---- calls -----------------------------------------------------------------------------

    def health(self) -> bool:
        return bool(self.request("GET", "/health", auth=False).get("ok"))

    def status(self) -> Status:
        return Status.from_dict(self.request("GET", "/status"))

    def openapi(self) -> dict[str, Any]:
        return self.request("GET", "/openapi.json", auth=False)

    def start(self) -> ReplicaInfo:
        return ReplicaInfo.from_dict(self._post("/replicas")["replica"])

    def kill(self, name: str) -> ReplicaInfo:
        return ReplicaInfo.from_dict(self._post(f"/replicas/{_q(name)}/kill")["replica"])

    def stop(self, name: str) -> ReplicaInfo:
        return ReplicaInfo.from_dict(self._post(f"/replicas/{_q(name)}/stop")["replica"])

    def restart(self, name: str) -> ReplicaInfo:
        return ReplicaInfo.from_dict(self._post(f"/replicas/{_q(name)}/restart")["replica"])

    def scale(self, replicas: int) -> dict[str, list[str]]:
        out = self._post("/scale", {"replicas": replicas})
        return {"started": list(out.get("started", [])), "stopping": list(out.get("stopping", []))}

    def set_options(self, protocol: str | None = None, assignor: str | None = None,
                    exactly_once: bool | None = None) -> ReplicaOptions:
        body = {k: v for k, v in (("protocol", protocol), ("assignor", assignor),
                                  ("exactly_once", exactly_once)) if v is not None}
        return ReplicaOptions.from_dict(self._post("/options", body)["options"])

    def fleet_start(self) -> dict[str, Any]:
        return self._post("/fleet/start")["fleet"]

    def fleet_stop(self) -> dict[str, Any]:
        return self._post("/fleet/stop")["fleet"]

    def set_rate(self, rate: float) -> dict[str, Any]:
        return self._post("/fleet/rate", {"rate": rate})["fleet"]

    def set_streams(self, streams: int) -> dict[str, Any]:
        return self._post("/fleet/streams", {"streams": streams})["fleet"]

    def add_partitions(self, partitions: int) -> PartitionChange:
        return PartitionChange.from_dict(self._post("/partitions", {"partitions": partitions}))


def _q(name: str) -> str:
    from urllib.parse import quote

    return quote(name, safe="")
