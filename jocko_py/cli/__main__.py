"""`python -m jocko_py.cli`: the same as the `jocko-py` console script."""

import sys

from jocko_py.cli.main import main

sys.exit(main())
