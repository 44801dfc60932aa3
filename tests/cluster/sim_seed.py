"""The base seed of this run's simulation campaigns (``test_simulation``).

``JOCKO_SIM_BASE_SEED`` fixes it (to replay a failure); otherwise every run draws a new
one, so that each ``make test`` explores schedules no run has tried before. The seed is
printed at the end of the run (``tests/conftest.py``) and in every
failure message.
"""

from __future__ import annotations

import os
import random

_env = os.environ.get("JOCKO_SIM_BASE_SEED")
BASE_SEED_FIXED = _env is not None
# drawn once per run by tests/conftest.py (one seed for every xdist worker)
_run = os.environ.get("JOCKO_SIM_RUN_SEED")
BASE_SEED = int(_env) if _env is not None else int(_run) if _run is not None \
    else random.SystemRandom().randrange(10**9)
