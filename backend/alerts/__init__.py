"""Alert rules over the cluster overview: rules file → engine → sinks (see service.py)."""

from backend.alerts.rules import AlertRulesError
from backend.alerts.service import AlertService, load_alerts

__all__ = ["AlertRulesError", "AlertService", "load_alerts"]
