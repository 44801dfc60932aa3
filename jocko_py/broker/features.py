"""Feature flags (KIP-584) as this broker supports and finalizes them.

`metadata.version` names the Kafka release whose metadata and inter-broker protocol
a cluster speaks (levels are Kafka's MetadataVersion feature levels). jocko-py speaks
3.3-IV3 (7, the oldest Kafka 4.x accepts) to 3.9-IV0 (21); a cluster whose metadata log
holds no FeatureLevelRecord runs at 21, the level it bootstraps with. Its behaviour is
the same at every level in that range, so an upgrade within it is only recorded; a
downgrade is refused (as Kafka refuses unsafe metadata downgrades). `kraft.version` is 0
(a static voter set, `controller.quorum.voters`). Features this broker does not know
(group.version, transaction.version, ...) cannot be enabled: KIP-848 groups and
transactions are not implemented.
"""

from __future__ import annotations

from collections.abc import Mapping

from jocko_py.protocol.errors import ErrorCode

METADATA_VERSION = "metadata.version"
KRAFT_VERSION = "kraft.version"

#: feature -> (min, max) level this broker supports
SUPPORTED: dict[str, tuple[int, int]] = {
    METADATA_VERSION: (7, 21),
    KRAFT_VERSION: (0, 0),
    "streams.version": (0, 1),  # KIP-1071 streams groups (1: StreamsGroupHeartbeat served)
}
#: finalized level when the metadata log holds none
BOOTSTRAP: dict[str, int] = {METADATA_VERSION: 21, "streams.version": 1}

UPGRADE, SAFE_DOWNGRADE, UNSAFE_DOWNGRADE = 1, 2, 3


def finalized(features: Mapping[str, int]) -> dict[str, int]:
    """Finalized levels (level 0 means disabled and is not listed, as in Kafka)."""
    out = dict(BOOTSTRAP)
    out.update(features)
    return {k: v for k, v in out.items() if v > 0}


def check_update(features: Mapping[str, int], name: str, level: int,
                 upgrade_type: int) -> tuple[ErrorCode, str | None]:
    """Kafka's answer to one feature update against the current finalized levels."""
    lo, hi = SUPPORTED.get(name, (0, 0))
    current = finalized(features).get(name, 0)
    if level == current:
        return ErrorCode.NONE, None
    if name not in SUPPORTED and level != 0:
        return (ErrorCode.INVALID_UPDATE_VERSION,
                f"Invalid update version {level} for feature {name}. The broker does not "
                "support this feature.")
    if level != 0 and not lo <= level <= hi:
        return (ErrorCode.INVALID_UPDATE_VERSION,
                f"Invalid update version {level} for feature {name}. Local controller "
                f"only supports versions {lo}-{hi}")
    if level < current:
        if upgrade_type == UPGRADE:
            return (ErrorCode.INVALID_UPDATE_VERSION,
                    f"Invalid update version {level} for feature {name}. Can't downgrade "
                    "the version of this feature without setting the upgrade type to "
                    "either safe or unsafe downgrade.")
        if name == METADATA_VERSION:
            return (ErrorCode.INVALID_UPDATE_VERSION,
                    f"Invalid metadata.version {level}. Downgrading metadata.version is "
                    "not supported by this broker.")
    return ErrorCode.NONE, None
