"""Test tiers: every test is marked by the most expensive thing it starts.

A test's tier is found from its code, not written by hand: the test function, its
class's methods and every fixture in its closure are read (their code objects, not
their text), following each name they use into the helpers defined under ``tests/``
(``tests.support.broker.BrokerProcess``, ``tests.groups.harness.Worker``, ...) until
something that starts a process is met. So a new test, or a new helper, falls into
its tier by what it does.

=========  ===================================================================
tier       what the test starts
=========  ===================================================================
inprocess  nothing outside this Python process: codecs, storage, state machines,
           simulations, an in-process broker (``EmbeddedBroker``, ``app.run``)
           on loopback sockets
processes  subprocesses: ``jocko-py broker`` processes and clusters, the CLI, kcat,
           Go programs (``subprocess``, ``os.fork``, asyncio subprocesses)
jvm        a JVM: the Java clients, Kafka's command-line tools, Apache Kafka
           itself (a ``"java"`` command line, ``tests.support.kafka44``)
spark      PySpark (``pyspark``, ``jocko_py.spark_session``)
netns      the fault lab: brokers in network namespaces on tmpfs disks (root)
=========  ===================================================================

Each test gets one marker, its tier's name (``-m inprocess``, ``-m "not netns"``).
A test parametrized over clients (``"java"`` among other kinds) is ``jvm`` only for
the cases whose parameters name Java.

`make test-fast` runs ``-m inprocess`` with ``JOCKO_TEST_TIER_GUARD=1``: a test of that
tier that starts a process anyway fails, saying so (what the reading above missed;
add the launcher to ``_LAUNCHERS`` below).

Under pytest-xdist (``make test`` runs ``-n 2``), `scheduler` keeps every module on
one worker (module-scoped brokers, tests that read what an earlier test wrote),
keeps each of the ``netns`` and ``spark`` tiers on one worker (one fault lab at a
time; one SparkSession), and hands out the longest groups first, by the durations of
the last measured run (``tests/durations.json``, ``make test-durations``).
"""

from __future__ import annotations

import inspect
import json
import os
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import pytest

TIERS = ("inprocess", "processes", "jvm", "spark", "netns")
RANK = {t: i for i, t in enumerate(TIERS)}
DESCRIPTIONS = {
    "inprocess": "tier: nothing outside the test process (tests/support/tiers.py)",
    "processes": "tier: starts subprocesses (brokers, clusters, CLI, kcat, Go)",
    "jvm": "tier: starts a JVM (Java clients, Kafka tools, Apache Kafka)",
    "spark": "tier: starts PySpark",
    "netns": "tier: the fault lab (network namespaces, tmpfs; root)",
}
# tiers whose tests run one at a time on one xdist worker
SERIAL_TIERS = ("netns", "spark")

# Names whose use is the evidence (module names, attribute names, qualified names of
# objects under tests/ or jocko_py/). A qualified name listed here is not read further.
_LAUNCHERS: dict[str, str] = {
    # modules
    "subprocess": "processes",
    "multiprocessing": "processes",
    "pyspark": "spark",
    "jocko_py.spark_session": "spark",
    "tests.support.kafka44": "jvm",
    "tests.faults.lab": "netns",
    # objects
    "tests.support.kafka44.ApacheKafka44": "jvm",
    "tests.faults.lab.Lab": "netns",
    "tests.faults.lab.open_lab": "netns",
    "jocko_py.embedded.BrokerCluster": "processes",
    # TargetBroker runs reference Kafka only when asked to (JOCKO_TEST_KAFKA_REF=1)
    "tests.support.e2e.TargetBroker": "processes",
    "tests.support.e2e.KafkaRefProcess": "jvm",
}
# attribute names that start a process whatever object they are read from
_LAUNCH_ATTRS = {
    "create_subprocess_exec": "processes",
    "create_subprocess_shell": "processes",
    "fork": "processes",
    "forkpty": "processes",
    "posix_spawn": "processes",
    "Popen": "processes",
}
# the program name in a command line
_JAVA_WORDS = {"java"}


class _Reader:
    """Reads code objects and follows names into tests/ helpers; memoized."""

    def __init__(self) -> None:
        self._memo: dict[int, tuple[str, bool]] = {}

    def tier_of(self, obj: Any) -> tuple[str, bool]:
        """(tier, whether the jvm evidence is only a "java" string) of a function/class."""
        key = id(obj)
        if key in self._memo:
            return self._memo[key]
        self._memo[key] = ("inprocess", False)  # cycles: provisional
        result = self._read(obj)
        self._memo[key] = result
        return result

    def _read(self, obj: Any) -> tuple[str, bool]:
        tier, java_word = "inprocess", False
        for name, glb in self._names(obj):
            t, jw = self._evidence(name, glb)
            if RANK[t] > RANK[tier]:
                tier, java_word = t, jw
            elif t == tier and t == "jvm":
                java_word = java_word and jw
        for v in self._closures(obj):
            t, jw = self.tier_of(v)
            if RANK[t] > RANK[tier]:
                tier, java_word = t, jw
        return tier, java_word

    def _names(self, obj: Any) -> Iterable[tuple[str, dict[str, Any]]]:
        if isinstance(obj, type):
            for base in obj.__mro__:
                if _ours(base):
                    for member in vars(base).values():
                        fn = _function(member)
                        if fn is not None:
                            yield from self._names(fn)
            return
        fn = _function(obj)
        if fn is None:
            return
        glb = getattr(fn, "__globals__", {})
        for code in _codes(fn.__code__):
            for n in code.co_names:
                yield n, glb
            for c in code.co_consts:
                if isinstance(c, str) and c in _JAVA_WORDS:
                    yield "\0java", glb
                elif isinstance(c, tuple):
                    for s in c:
                        if isinstance(s, str) and s in _JAVA_WORDS:
                            yield "\0java", glb

    def _closures(self, obj: Any) -> Iterable[Any]:
        """Functions and classes a function closes over (decorated helpers)."""
        fn = _function(obj) if not isinstance(obj, type) else None
        for cell in (fn.__closure__ or ()) if fn is not None else ():
            try:
                v = cell.cell_contents
            except ValueError:
                continue
            if inspect.isfunction(v) or isinstance(v, type):
                yield v

    def _evidence(self, name: str, glb: dict[str, Any]) -> tuple[str, bool]:
        if name == "\0java":
            return "jvm", True
        if name in _LAUNCH_ATTRS:
            return _LAUNCH_ATTRS[name], False
        if name not in glb:
            # a function-level `import subprocess` / `from pyspark.sql import ...`
            return _module_tier(name), False
        val = glb[name]
        if isinstance(val, types.ModuleType):
            return _module_tier(val.__name__), False
        qual = _qualname(val)
        if qual is not None and qual in _LAUNCHERS:
            return _LAUNCHERS[qual], False
        mod = getattr(val, "__module__", None) or ""
        if mod in _LAUNCHERS:
            return _LAUNCHERS[mod], False
        if mod.startswith("pyspark"):
            return "spark", False
        if (inspect.isfunction(val) or isinstance(val, type)) and _ours(val):
            return self.tier_of(val)
        return "inprocess", False


def _module_tier(name: str) -> str:
    for prefix, tier in _LAUNCHERS.items():
        if name == prefix or name.startswith(prefix + "."):
            return tier
    return "inprocess"


def _ours(obj: Any) -> bool:
    mod = getattr(obj, "__module__", None) or ""
    return mod == "tests" or mod.startswith("tests.") or mod.startswith("conftest")


def _qualname(obj: Any) -> str | None:
    mod = getattr(obj, "__module__", None)
    q = getattr(obj, "__qualname__", None)
    if isinstance(mod, str) and isinstance(q, str):
        return f"{mod}.{q}"
    return None


def _function(obj: Any) -> types.FunctionType | None:
    if isinstance(obj, (staticmethod, classmethod)):
        obj = obj.__func__
    if isinstance(obj, property):
        obj = obj.fget
    obj = inspect.unwrap(obj) if callable(obj) else obj
    return obj if isinstance(obj, types.FunctionType) else None


def _codes(code: types.CodeType) -> Iterable[types.CodeType]:
    yield code
    for c in code.co_consts:
        if isinstance(c, types.CodeType):
            yield from _codes(c)


def _names_java(params: dict[str, object], callspec_id: str) -> bool:
    return "java" in callspec_id.lower() or any(
        "java" in str(v).lower() for v in params.values())


def classify(items: list[pytest.Item]) -> dict[str, str]:
    """nodeid -> tier, and one tier marker added to each item."""
    reader = _Reader()
    out: dict[str, str] = {}
    # functions parametrized over client kinds: does any case name Java?
    java_cases: dict[Any, bool] = {}
    for item in items:
        cs = getattr(item, "callspec", None)
        if cs is not None:
            fn = getattr(item, "function", None)
            java_cases[fn] = java_cases.get(fn, False) or _names_java(cs.params, cs.id)
    for item in items:
        tier, java_word = "inprocess", True
        roots: list[Any] = []
        fn = getattr(item, "function", None)
        if fn is not None:
            roots.append(fn)
        cls = getattr(item, "cls", None)
        if cls is not None:
            roots.append(cls)
        info = getattr(item, "_fixtureinfo", None)
        if info is not None:
            for defs in info.name2fixturedefs.values():
                for d in defs:
                    roots.append(d.func)
        for r in roots:
            t, jw = reader.tier_of(r)
            if RANK[t] > RANK[tier]:
                tier, java_word = t, jw
            elif t == tier == "jvm":
                java_word = java_word and jw
        if tier == "jvm" and java_word:
            cs = getattr(item, "callspec", None)
            if cs is not None and java_cases.get(fn) and not _names_java(cs.params, cs.id):
                tier = "processes"  # the other clients' cases of a Java-or-not test
        # a directory's conftest may have marked the whole directory (tests/spark)
        for t in ("spark", "netns"):
            if item.get_closest_marker(t) is not None and RANK[t] > RANK[tier]:
                tier = t
        item.add_marker(getattr(pytest.mark, tier))
        out[item.nodeid] = tier
    return out


# --------------------------------------------------------------------------- guard


def install_guard(item_tier: Callable[[], str | None]) -> None:
    """Under JOCKO_TEST_TIER_GUARD=1: a test of the in-process tier that starts a
    process fails (the tier reading missed a launcher)."""
    import subprocess

    real_init = subprocess.Popen.__init__

    def guarded(self: subprocess.Popen[Any], args: Any, *a: Any, **kw: Any) -> None:
        if item_tier() == "inprocess":
            raise AssertionError(
                f"this test is in the in-process tier but starts a process ({args!r}): "
                "add what starts it to _LAUNCHERS in tests/support/tiers.py")
        real_init(self, args, *a, **kw)

    subprocess.Popen.__init__ = guarded  # type: ignore[method-assign]


# --------------------------------------------------------------------------- xdist

DURATIONS = Path(__file__).resolve().parents[1] / "durations.json"
# seconds a module of a tier takes when the durations file does not know it yet
_DEFAULT_MODULE_S = {"inprocess": 2.0, "processes": 20.0, "jvm": 40.0, "spark": 60.0,
                     "netns": 60.0}


def groups(tiers: dict[str, str]) -> dict[str, str]:
    """nodeid -> xdist group: its module, or the tier for the serial tiers (a module
    with one test of a serial tier goes whole into that tier's group)."""
    module_serial: dict[str, str] = {}
    for nodeid, tier in tiers.items():
        mod = nodeid.split("::", 1)[0]
        if tier in SERIAL_TIERS:
            prev = module_serial.get(mod)
            if prev is None or RANK[tier] > RANK[prev]:
                module_serial[mod] = tier
    out = {}
    for nodeid in tiers:
        mod = nodeid.split("::", 1)[0]
        out[nodeid] = module_serial.get(mod, mod)
    return out


def _module_durations() -> dict[str, float]:
    try:
        data = json.loads(DURATIONS.read_text())
    except (OSError, ValueError):
        return {}
    return {str(k): float(v) for k, v in data.get("modules", {}).items()}


def write_durations(path: Path, seconds: dict[str, float]) -> None:
    """Seconds per module (setup, call and teardown of its tests) of a whole run."""
    path.write_text(json.dumps({
        "about": "seconds per test module in the last measured run (make test-durations); "
                 "tests/support/tiers.py orders the xdist groups by them, longest first",
        "modules": {m: round(s, 1) for m, s in sorted(seconds.items())},
    }, indent=1) + "\n")


def group_weights(tiers: dict[str, str], grouping: dict[str, str]) -> dict[str, float]:
    known = _module_durations()
    module_tier: dict[str, str] = {}
    for nodeid, tier in tiers.items():
        mod = nodeid.split("::", 1)[0]
        if RANK[tier] > RANK.get(module_tier.get(mod, "inprocess"), 0):
            module_tier[mod] = tier
        module_tier.setdefault(mod, tier)
    weights: dict[str, float] = {}
    seen: set[str] = set()
    for nodeid, group in grouping.items():
        mod = nodeid.split("::", 1)[0]
        if mod in seen:
            continue
        seen.add(mod)
        w = known.get(mod, _DEFAULT_MODULE_S[module_tier[mod]])
        weights[group] = weights.get(group, 0.0) + w
    return weights


def write_plan(path: str, tiers: dict[str, str]) -> None:
    grouping = groups(tiers)
    tmp = f"{path}.{os.getpid()}"
    with open(tmp, "w") as f:
        json.dump({"groups": grouping, "weights": group_weights(tiers, grouping)}, f)
    os.replace(tmp, path)


def order(items: list[pytest.Item], tiers: dict[str, str]) -> None:
    """Heaviest group first (longest-processing-time first: the two workers finish
    together); a group's tests keep their order, and stay together."""
    grouping = groups(tiers)
    weights = group_weights(tiers, grouping)
    first: dict[str, int] = {}
    for i in items:
        first.setdefault(grouping.get(i.nodeid, ""), len(first))

    def key(i: pytest.Item) -> tuple[float, int]:
        g = grouping.get(i.nodeid, "")
        return (-weights.get(g, 0.0), first[g])

    items.sort(key=key)


def make_scheduler(config: pytest.Config, log: Any, plan_path: str) -> Any:
    from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

    class TierScheduling(LoadScopeScheduling):  # type: ignore[misc]
        """LoadScope with our groups, in the order of the collection."""

        _plan: dict[str, Any] | None = None

        def _load(self) -> dict[str, Any]:
            if self._plan is None:
                try:
                    self._plan = json.loads(Path(plan_path).read_text())
                except (OSError, ValueError):
                    self._plan = {"groups": {}, "weights": {}}
            return self._plan

        def _split_scope(self, nodeid: str) -> str:
            group: str | None = self._load()["groups"].get(nodeid)
            return group if group is not None else nodeid.split("::", 1)[0]

        def schedule(self) -> None:
            # the workers' collection is already in plan order (`order`): keep it
            self.config.option.loadscopereorder = False
            super().schedule()

    return TierScheduling(config, log)
