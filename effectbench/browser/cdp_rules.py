"""What an agent's DevTools commands may do, decided before the browser sees them.

Pure rules over one command (its method and params) that the episode endpoint
(``cdp_proxy``) applies to every message:

- **downloads**: every download-behaviour method (``Browser.setDownloadBehavior``,
  ``Page.setDownloadBehavior``) is answered ``{}`` by the proxy and never forwarded:
  the harness set ``deny`` on the episode's context when it created it, and no agent
  can change that, page- or browser-level;
- **host files**: commands that hand the browser a host path to read (a file input's
  files, a file chooser's, a drag's files, a network resource loaded for DevTools)
  are refused, and so are the domains that install or load things from disk
  (``PWA``, ``Extensions``);
- **URLs**: a command that names a document or a request URL (``Page.navigate``,
  ``Target.createTarget``, the continue of an intercepted request) must name one the
  episode's ``OriginPolicy`` allows;
- **sessions**: on a page's session, ``Browser.*`` and every ``Target.*`` command but
  the few a page's own client needs are refused (other targets and contexts are the
  browser-level routing's to decide, ``cdp_client.CdpClient``).
"""

from __future__ import annotations

from typing import Any, Final

from effectbench.browser.policy import OriginPolicy

DOWNLOAD_BEHAVIOUR: Final = frozenset({"Browser.setDownloadBehavior", "Page.setDownloadBehavior"})
"""Answered ``{}`` and dropped: the context's ``deny`` stands."""
HOST_FILES: Final = frozenset({
    "DOM.setFileInputFiles", "Page.handleFileChooser", "Network.loadNetworkResource",
})  # fmt: skip
DENIED_DOMAINS: Final = ("Browser.", "PWA.", "Extensions.")
URL_PARAM: Final = {
    "Page.navigate": "url",
    "Target.createTarget": "url",
    "Fetch.continueRequest": "url",
    "Network.continueInterceptedRequest": "url",
}
"""Commands whose ``url`` is a document or a request the browser would load."""
SESSION_TARGET: Final = frozenset({"Target.setAutoAttach", "Target.detachFromTarget"})
"""The ``Target.*`` commands a page's session may send (its own frames and workers)."""


def url_refusal(method: str, params: dict[str, Any], policy: OriginPolicy) -> str | None:
    """Why the URL this command names is refused, None when it names none or an allowed one."""
    key = URL_PARAM.get(method)
    if key is None or key not in params:
        return None
    url = params[key]
    if method == "Target.createTarget" and url == "":
        return None  # a blank page
    reason = policy.refusal(url)
    return None if reason is None else f"{method}: {reason}"


def host_file_refusal(method: str, params: dict[str, Any]) -> str | None:
    """Why a command that would read a host file is refused (None when it would not)."""
    if method in HOST_FILES or method.startswith(DENIED_DOMAINS[1:]):
        return f"{method} is refused: an episode's browser reads no host files"
    if method == "Input.dispatchDragEvent":
        data = params.get("data")
        if isinstance(data, dict) and data.get("files"):
            return "Input.dispatchDragEvent with files is refused: it reads host files"
    return None


def session_refusal(method: str, params: dict[str, Any], policy: OriginPolicy) -> str | None:
    """Why a command on one of the agent's page sessions is refused, or None."""
    if method.startswith("Target."):
        if method in SESSION_TARGET:
            return None
        if method == "Target.getTargetInfo" and "targetId" not in params:
            return None  # its own target
        return f"{method} is not allowed on a page's session through this endpoint"
    if method.startswith(DENIED_DOMAINS):
        return f"{method} is not allowed on a page's session through this endpoint"
    return host_file_refusal(method, params) or url_refusal(method, params, policy)


__all__ = [
    "DOWNLOAD_BEHAVIOUR",
    "HOST_FILES",
    "URL_PARAM",
    "host_file_refusal",
    "session_refusal",
    "url_refusal",
]
