"""The base seed of this run's simulation campaigns (``test_simulation``).

``JOCKO_SIM_BASE_SEED`` fixes it (to replay a failure); otherwise every run draws a new
one, so that each ``make test`` explores schedules no run has tried before. The seed is
printed at the end of the run (``conftest.pytest_terminal_summary``) and in every
failure message.
"""

from __future__ import annotations

import os
import random

_env = os.environ.get("JOCKO_SIM_BASE_SEED")
BASE_SEED_FIXED = _env is not None
BASE_SEED = int(_env) if _env is not None else random.SystemRandom().randrange(10**9)
