"""Feature flags (KIP-584, KIP-1022) as this broker supports and finalizes them.

Each feature is a `FeatureSpec` in `SUPPORTED_FEATURES` (added with `register`): the
levels this broker supports, the level a new cluster finalizes, and what each level
depends on (Kafka's `FeatureVersion.dependencies`). `SUPPORTED` (name -> (min, max))
is what ApiVersions reports. Levels are Kafka 4.4.0's:

- `metadata.version` 3.3-IV3 (7) to 4.4-IV2 (33): the release whose metadata and
  inter-broker protocol a cluster speaks. jocko-py's behaviour is the same at every
  level in that range, so an upgrade is only recorded; a downgrade is refused.
- `kraft.version` 0: a static voter set (`controller.quorum.voters`).
- `transaction.version` 0-2: 2 is KIP-890 part 2 (Produce v12 and TxnOffsetCommit v5
  add their partition to the transaction, EndTxn v5 bumps the epoch of every
  transaction). Below 2 those request versions keep their older meaning (see
  `txn_v2`): a Kafka 4.x client checks the finalized level before using them.
- `group.version` 0-1 (the KIP-848 consumer protocol needs 1) and
  `eligible.leader.replicas.version` 0-1 (ELR 1 needs metadata.version 4.0-IV1, 23;
  recorded and reported).
- `streams.version` 0-1: KIP-1071 streams groups need 1.
- `share.version` 0-2: KIP-932 share groups need 1 (ShareGroupHeartbeat,
  ShareGroupDescribe and the share partition APIs answer UNSUPPORTED_VERSION at 0);
  Kafka 4.4.0 finalizes 2 on a new cluster (its default for metadata.version 4.4).

A new cluster (an empty metadata log) bootstraps at `BOOTSTRAP`, as `kafka-storage
format` does for Kafka 4.4.0: the controller writes those FeatureLevelRecords first
(`ControllerConfig.bootstrap_features`). A log that holds no FeatureLevelRecord for
`metadata.version` was written before features were recorded and keeps the level it
ran at, 3.9-IV0 (21), with `group.version` 1 (earlier jocko-py served KIP-848
groups whatever the level, and an upgrade must not take them away) and every other
feature at 0 (`LEGACY`); `kafka-features upgrade` moves it on. Level 0 means disabled and is not listed as finalized.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from jocko_py.protocol.errors import ErrorCode

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"
TRANSACTION_VERSION = "transaction.version"
GROUP_VERSION = "group.version"
ELR_VERSION = "eligible.leader.replicas.version"
STREAMS_VERSION = "streams.version"
SHARE_VERSION = "share.version"

#: metadata.version levels named by Kafka's MetadataVersion (the ones used here)
MV_3_3_IV3, MV_3_9_IV0, MV_4_0_IV1, MV_4_4_IV2 = 7, 21, 23, 33


@dataclass(frozen=True)
class FeatureSpec:
    name: str
    min_level: int
    max_level: int
    #: the level a new cluster finalizes
    bootstrap: int
    #: level -> {feature: minimum finalized level it needs}
    dependencies: Mapping[int, Mapping[str, int]] = field(default_factory=dict)


#: every feature this broker knows, by name
SUPPORTED_FEATURES: dict[str, FeatureSpec] = {}
#: feature -> (min, max) level this broker supports (ApiVersions' supported features)
SUPPORTED: dict[str, tuple[int, int]] = {}
#: the finalized levels a new cluster starts with
BOOTSTRAP: dict[str, int] = {}
#: the levels of a metadata log that records none (written before features existed)
LEGACY: dict[str, int] = {METADATA_VERSION: MV_3_9_IV0, GROUP_VERSION: 1}


def register(spec: FeatureSpec) -> None:
    """Add a feature (its supported range, bootstrap level and dependencies)."""
    SUPPORTED_FEATURES[spec.name] = spec
    SUPPORTED[spec.name] = (spec.min_level, spec.max_level)
    if spec.bootstrap > 0:
        BOOTSTRAP[spec.name] = spec.bootstrap


register(FeatureSpec(METADATA_VERSION, MV_3_3_IV3, MV_4_4_IV2, MV_4_4_IV2))
register(FeatureSpec(KRAFT_VERSION, 0, 0, 0))
register(FeatureSpec(TRANSACTION_VERSION, 0, 2, 2))
register(FeatureSpec(GROUP_VERSION, 0, 1, 1))
register(FeatureSpec(ELR_VERSION, 0, 1, 1, {1: {METADATA_VERSION: MV_4_0_IV1}}))
# KIP-1071 streams groups (1: StreamsGroupHeartbeat served)
register(FeatureSpec(STREAMS_VERSION, 0, 1, 1))
# KIP-932 share groups (1: 4.2-IV0's, 2: 4.4-IV0's; neither depends on another feature)
register(FeatureSpec(SHARE_VERSION, 0, 2, 2))

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def finalized(features: Mapping[str, int]) -> dict[str, int]:
    """Finalized levels (level 0 means disabled and is not listed, as in Kafka)."""
    out = dict(LEGACY) if METADATA_VERSION not in features else {}
    out.update(features)
    return {k: v for k, v in out.items() if v > 0}


def level(features: Mapping[str, int], name: str) -> int:
    """The finalized level of one feature (0 when disabled)."""
    return finalized(features).get(name, 0)


def txn_v2(features: Mapping[str, int]) -> bool:
    """transaction.version 2 (KIP-890 part 2) is finalized."""
    return level(features, TRANSACTION_VERSION) >= 2


def _invalid(name: str, level: int, why: str) -> tuple[ErrorCode, str]:
    return (ErrorCode.INVALID_UPDATE_VERSION,
            f"Invalid update version {level} for feature {name}. {why}")


def check_update(features: Mapping[str, int], name: str, level: int,
                 upgrade_type: int, proposed: Mapping[str, int] | None = None,
                 controller_id: int | None = None) -> tuple[ErrorCode, str | None]:
    """Kafka's answer (FeatureControlManager.updateFeature) to one feature update
    against the current finalized levels; ``proposed`` is every level after the whole
    request (the current ones with the request's updates), which dependencies are
    checked against (Kafka's Feature.validateVersion). ``controller_id`` is named in
    the unsupported-level message, as Kafka's controller names itself."""
    spec = SUPPORTED_FEATURES.get(name)
    current = finalized(features).get(name, 0)
    if upgrade_type not in (UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE):
        return _invalid(name, level, "The controller does not support the given upgrade type.")
    if level < 0:
        return _invalid(name, level, "A feature version cannot be less than 0.")
    if spec is None:
        if level == 0:
            return ErrorCode.NONE, None
        return _invalid(name, level, "The broker does not support this feature.")
    if level != 0 and not spec.min_level <= level <= spec.max_level \
            or level == 0 and name == METADATA_VERSION:
        me = "" if controller_id is None else f" {controller_id}"
        return _invalid(name, level, f"Local controller{me} only supports versions "
                        f"{spec.min_level}-{spec.max_level}")
    if level < current and upgrade_type == UPGRADE:
        return _invalid(name, level, "Can't downgrade the version of this feature without "
                        "setting the upgrade type to either safe or unsafe downgrade.")
    if level > current and upgrade_type != UPGRADE:
        return _invalid(name, level, "Can't downgrade to a newer version.")
    if name == METADATA_VERSION:
        if level < current:
            return (ErrorCode.INVALID_UPDATE_VERSION,
                    f"Invalid metadata.version {level}. Downgrading metadata.version is "
                    "not supported by this broker.")
        return ErrorCode.NONE, None
    if name == KRAFT_VERSION:
        return ErrorCode.NONE, None
    levels = dict(finalized(features))
    levels.update(proposed or {})
    mv = levels.get(METADATA_VERSION, 0)
    if level >= 1 and mv < MV_3_3_IV3:
        return _invalid(name, level, f"{name} could not be set to {level} because it "
                        f"depends on metadata.version={MV_3_3_IV3} (3.3-IV3)")
    for dep, need in sorted(spec.dependencies.get(level, {}).items()):
        if levels.get(dep, 0) < need:
            return _invalid(name, level, f"{name} could not be set to {level} because it "
                            f"depends on {dep} level {need}")
    return ErrorCode.NONE, None
