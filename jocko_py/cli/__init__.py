"""The `jocko-py` command line: `main` (the console script) and `build_parser`.

One module per command family: `main` (broker, topic, cluster and the parser), `storage`,
`data` (produce/consume), `groups`, `share_groups`, `transactions`, `security` (acl/user/quota) and
`completion`. The package sits on top of the import-linter layers (pyproject.toml);
its modules import `jocko_py.admin`, `jocko_py.client` and, for `broker`, `jocko_py.app`.
"""

from jocko_py.cli.main import build_parser, main

__all__ = ["build_parser", "main"]
