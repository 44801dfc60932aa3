"""The base seed of this run's simulation campaigns (``test_simulation``).

``JOCKO_SIM_BASE_SEED`` fixes it (to replay a failure); otherwise every run draws a new
one, so that each ``make test`` explores schedules no run has tried before. The seed is
printed at the end of the run (``tests/conftest.py``) and in every
failure message.
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable

_env = os.environ.get("JOCKO_SIM_BASE_SEED")
BASE_SEED_FIXED = _env is not None
# drawn once per run by tests/conftest.py (one seed for every xdist worker)
_run = os.environ.get("JOCKO_SIM_RUN_SEED")
BASE_SEED = int(_env) if _env is not None else int(_run) if _run is not None \
    else random.SystemRandom().randrange(10**9)


def seed_chunks(offset: int, total: int, chunk: int) -> list[tuple[int, int]]:
    """A campaign's (first seed, count) chunks: ``total`` seeds from ``BASE_SEED +
    offset`` (each campaign its own offset, apart from the others' seeds), or the one
    seed ``JOCKO_SIM_SEED`` names, to replay it."""
    only = os.environ.get("JOCKO_SIM_SEED")
    if only is not None:
        return [(int(only), 1)]
    base = BASE_SEED + offset
    return [(base + s, min(chunk, total - s)) for s in range(0, max(total, 1), chunk)]


def run_seeds(start: int, count: int, run: Callable[[int], object],
              violation: type[BaseException], *, what: str, replay: str,
              stop_after: int = 2, width: int = 4000) -> None:
    """Run schedules ``start`` .. ``start + count - 1`` with ``run(seed)``; an invariant
    ``violation`` or any other exception (a crash in a core) fails its seed; after
    ``stop_after`` failures the chunk stops and the test fails, naming the run's base
    seed and how to replay (``replay``: the test module's path)."""
    failures: list[str] = []
    for seed in range(start, start + count):
        try:
            run(seed)
        except violation as e:
            failures.append(str(e))
        except Exception as e:
            failures.append(f"seed={seed}: {type(e).__name__}: {e}")
        if len(failures) >= stop_after:
            break
    if failures:
        import pytest

        pytest.fail(
            f"{what}: failing schedule(s) of the run with base seed {BASE_SEED}; replay one "
            f"with JOCKO_SIM_SEED=<seed> pytest {replay} -k schedules\n"
            + "\n".join(f[:width] for f in failures))
