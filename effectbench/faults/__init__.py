"""Fault injection for real products: a reverse proxy that applies C1-C7 at the HTTP layer."""

from __future__ import annotations

from effectbench.faults.forms import Form, parse_form
from effectbench.faults.proxy import FaultKind, FaultProxy, ProxyPlan, ProxyRecord

__all__ = ["FaultKind", "FaultProxy", "Form", "ProxyPlan", "ProxyRecord", "parse_form"]
