"""The phoenix gateway, a JupyterHub service: keys outside every kernel.

On a hub the admin's provider key lives only in the gateway's process. Kernels
send their requests to it with the user's Hub token; it checks the token with
the Hub, enforces the policy's models and budgets, forwards to the admin's
upstream with the admin's key, streams the answer back unchanged and writes the
audit trail (docs/jupyterhub.md). It imports `core` (usage and prices) and
`policy`, never `notebook` or `runtime`; `jupyterhub` (the `phoenix_nb[hub]`
extra) only when run as a service, for `HubAuth`.
"""

from phoenix_nb.hub.audit import AuditLog, AuditSink, Ledger, Spent
from phoenix_nb.hub.gateway import (
    CONVERSATION_HEADER,
    Gateway,
    HubTokenAuth,
    HubUnreachable,
    TokenAuth,
    main,
    make_app,
)
from phoenix_nb.hub.usage import Metered, UsageMeter

__all__ = [
    "CONVERSATION_HEADER",
    "AuditLog",
    "AuditSink",
    "Gateway",
    "HubTokenAuth",
    "HubUnreachable",
    "Ledger",
    "Metered",
    "Spent",
    "TokenAuth",
    "UsageMeter",
    "main",
    "make_app",
]
