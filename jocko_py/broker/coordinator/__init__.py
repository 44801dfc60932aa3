"""The coordinator runtime shared by the group coordinator (and, next, the transaction
and share coordinators): ``runtime.py`` (shards, event queues, writes, timers; pure of
I/O) and ``shell.py`` (the asyncio shell and the internal acks=all log)."""
