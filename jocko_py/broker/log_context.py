"""Context for log lines: who a request came from, set once per connection task.

`LOG_CONTEXT` holds the fields (peer, client_id) of the request being served on the
current asyncio task (each connection runs on its own task, so its own context);
`jocko_py/logfmt.py` adds them to every log record emitted meanwhile, whatever module
logs it. Set from the connection only; nothing else should need to.
"""

from __future__ import annotations

from contextvars import ContextVar

LOG_CONTEXT: ContextVar[dict[str, str] | None] = ContextVar("jocko_log_context", default=None)
