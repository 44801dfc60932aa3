"""The controller's ACL, client quota and SCRAM decisions (cluster/acl_control.py,
client_quota_control.py, scram_control.py), in-process: an image in, records and a
response out. Each decision is applied to the image afterwards, as the quorum would,
to check the records do what the response says."""

from __future__ import annotations

import hashlib
import hmac
import itertools
import uuid
from typing import Any

from jocko_py.cluster.acl_control import (
    ANY,
    CLUSTER,
    LITERAL,
    MATCH,
    PREFIXED,
    TOPIC,
    AclBinding,
    AclBindingFilter,
    AclControlManager,
)
from jocko_py.cluster.client_quota_control import (
    CLIENT_ID,
    USER,
    ClientQuotaControlManager,
    QuotaAlteration,
    QuotaOp,
)
from jocko_py.cluster.controller import Controller
from jocko_py.cluster.controller_result import ControllerResult
from jocko_py.cluster.metadata import (
    AccessControlEntryRecord,
    ClientQuotaRecord,
    MetadataImage,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)
from jocko_py.cluster.scram_control import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramControlManager,
    ScramDeletion,
    ScramUpsertion,
)
from jocko_py.protocol.errors import ErrorCode

READ, WRITE, ALTER = 3, 4, 7
DENY, ALLOW = 2, 3


def _ids() -> AclControlManager:
    n = itertools.count(1)
    return AclControlManager(new_id=lambda: uuid.UUID(int=next(n)))


def _acl(name: str = "orders", *, rt: int = TOPIC, pattern: int = LITERAL,
         principal: str = "User:alice", host: str = "*", op: int = READ,
         perm: int = ALLOW) -> AclBinding:
    return AclBinding(rt, name, pattern, principal, host, op, perm)


def _filter(name: str | None = None, *, rt: int = ANY, pattern: int = ANY,
            principal: str | None = None, host: str | None = None, op: int = ANY,
            perm: int = ANY) -> AclBindingFilter:
    return AclBindingFilter(rt, name, pattern, principal, host, op, perm)


def _applied(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    image.apply_batch(result.records)
    return image


# ---------------------------------------------------------------------- ACLs


def test_create_acls_writes_one_record_per_new_acl_with_its_id() -> None:
    img = MetadataImage()
    res = _ids().create_acls(img, [_acl(), _acl(op=WRITE)])
    assert [r.error for r in res.response] == [ErrorCode.NONE, ErrorCode.NONE]
    assert res.records == [
        AccessControlEntryRecord(uuid.UUID(int=1), TOPIC, "orders", LITERAL, "User:alice",
                                 "*", READ, ALLOW),
        AccessControlEntryRecord(uuid.UUID(int=2), TOPIC, "orders", LITERAL, "User:alice",
                                 "*", WRITE, ALLOW),
    ]
    assert len(_applied(img, res).acls) == 2


def test_create_acls_duplicate_is_a_success_without_a_record() -> None:
    mgr = _ids()
    img = _applied(MetadataImage(), mgr.create_acls(MetadataImage(), [_acl()]))
    again = mgr.create_acls(img, [_acl(), _acl(op=WRITE), _acl(op=WRITE)])
    assert [r.error for r in again.response] == [ErrorCode.NONE] * 3
    # the existing one and the repeat within the request give no record
    assert [(r.resource_name, r.operation) for r in again.records
            if isinstance(r, AccessControlEntryRecord)] == [("orders", WRITE)]
    assert len(again.records) == 1


def test_create_acls_invalid_bindings_get_invalid_request_and_no_record() -> None:
    bad = {
        "Invalid resourceType": _acl(rt=1),
        "Invalid patternType": _acl(pattern=MATCH),
        "Invalid operation": _acl(op=1),
        "Invalid permissionType": _acl(perm=1),
        "Resource name should not be empty": _acl(""),
        "The only valid name for the CLUSTER resource is kafka-cluster": _acl(
            "my-cluster", rt=CLUSTER, op=ALTER),
        "Could not parse principal 'alice'": _acl(principal="alice"),
        "Invalid host": _acl(host=""),
    }
    res = _ids().create_acls(MetadataImage(), [*bad.values(), _acl()])
    assert [(r.error, r.message) for r in res.response] == [
        (ErrorCode.INVALID_REQUEST, why) for why in bad] + [(ErrorCode.NONE, None)]
    assert len(res.records) == 1  # only the valid one


def test_create_acls_is_pure() -> None:
    img = MetadataImage()
    _ids().create_acls(img, [_acl()])
    assert img.acls == {} and img.records_applied == 0


def test_delete_acls_removes_every_match_once_and_lists_it() -> None:
    mgr = _ids()
    img = _applied(MetadataImage(), mgr.create_acls(MetadataImage(), [
        _acl("orders"), _acl("orders", op=WRITE), _acl("ord", pattern=PREFIXED),
        _acl("payments")]))
    res = mgr.delete_acls(img, [_filter("orders", pattern=MATCH),
                                _filter("orders", op=WRITE), _filter(rt=TOPIC)])
    first, second, third = res.response
    assert {(r.resource_name, r.operation) for r in first.deleted} == {
        ("orders", READ), ("orders", WRITE), ("ord", READ)}
    assert second.deleted == ()  # the first filter took it already
    assert [r.resource_name for r in third.deleted] == ["payments"]
    assert all(isinstance(r, RemoveAccessControlEntryRecord) for r in res.records)
    assert len(res.records) == 4
    assert _applied(img, res).acls == {}


def test_delete_acls_of_what_does_not_exist_succeeds_with_nothing() -> None:
    res = _ids().delete_acls(MetadataImage(), [_filter("nope", rt=TOPIC, pattern=LITERAL)])
    assert [(r.error, r.deleted) for r in res.response] == [(ErrorCode.NONE, ())]
    assert res.records == []


def test_delete_acls_unknown_filter_element_is_invalid_request() -> None:
    mgr = _ids()
    img = _applied(MetadataImage(), mgr.create_acls(MetadataImage(), [_acl()]))
    res = mgr.delete_acls(img, [_filter(rt=0), _filter(op=0)])
    assert [(r.error, r.message) for r in res.response] == [
        (ErrorCode.INVALID_REQUEST, "Filter contains UNKNOWN elements")] * 2
    assert res.records == []


def test_controller_holds_the_control_managers() -> None:
    c = Controller()
    assert isinstance(c.acls, AclControlManager)
    assert isinstance(c.quotas, ClientQuotaControlManager)
    assert isinstance(c.scram, ScramControlManager)


# ---------------------------------------------------------------------- quotas


def test_alter_quotas_sorts_the_entity_and_writes_each_op() -> None:
    img = MetadataImage()
    entry = QuotaAlteration(((USER, "alice"), (CLIENT_ID, None)),
                            (QuotaOp("producer_byte_rate", 1024.0),
                             QuotaOp("consumer_byte_rate", 0.0, remove=True)))
    res = ClientQuotaControlManager().alter_client_quotas(img, [entry])
    ent = ((CLIENT_ID, None), (USER, "alice"))
    assert [(r.error, r.message) for r in res.response] == [(ErrorCode.NONE, None)]
    assert res.records == [ClientQuotaRecord(ent, "producer_byte_rate", 1024.0),
                           ClientQuotaRecord(ent, "consumer_byte_rate", 0.0, True)]
    assert _applied(img, res).quotas == {ent: {"producer_byte_rate": 1024.0}}


def test_alter_quotas_invalid_entries_fail_alone() -> None:
    ok = QuotaAlteration(((USER, "bob"),), (QuotaOp("request_percentage", 50.0),))
    bad = {
        "An entity must name at least one entity type": QuotaAlteration(
            (), (QuotaOp("producer_byte_rate", 1.0),)),
        "An entity type appears more than once": QuotaAlteration(
            ((USER, "a"), (USER, "b")), (QuotaOp("producer_byte_rate", 1.0),)),
        "Unsupported entity type ip (user and client-id are supported)": QuotaAlteration(
            (("ip", "10.0.0.1"),), (QuotaOp("connection_creation_rate", 1.0),)),
        "Unknown quota key bogus": QuotaAlteration(((USER, "a"),), (QuotaOp("bogus", 1.0),)),
        "Quota producer_byte_rate must be positive": QuotaAlteration(
            ((USER, "a"),), (QuotaOp("producer_byte_rate", 0.0),)),
        "Quota consumer_byte_rate must be positive": QuotaAlteration(
            ((USER, "a"),), (QuotaOp("consumer_byte_rate", float("nan")),)),
    }
    res = ClientQuotaControlManager().alter_client_quotas(MetadataImage(),
                                                          [*bad.values(), ok])
    assert [(r.error, r.message) for r in res.response] == [
        (ErrorCode.INVALID_REQUEST, why) for why in bad] + [(ErrorCode.NONE, None)]
    assert res.records == [ClientQuotaRecord(((USER, "bob"),), "request_percentage", 50.0)]


def test_alter_quotas_an_invalid_op_drops_the_whole_entry() -> None:
    entry = QuotaAlteration(((USER, "a"),), (QuotaOp("producer_byte_rate", 5.0),
                                             QuotaOp("bogus", 1.0)))
    res = ClientQuotaControlManager().alter_client_quotas(MetadataImage(), [entry])
    assert res.response[0].error == ErrorCode.INVALID_REQUEST
    assert res.records == []


def test_alter_quotas_validate_only_answers_without_records() -> None:
    entry = QuotaAlteration(((CLIENT_ID, "app"),), (QuotaOp("producer_byte_rate", 5.0),))
    res = ClientQuotaControlManager().alter_client_quotas(MetadataImage(), [entry],
                                                          validate_only=True)
    assert res.response[0].error == ErrorCode.NONE
    assert res.records == []


def test_alter_quotas_removing_an_unset_key_is_a_no_op() -> None:
    img = MetadataImage()
    entry = QuotaAlteration(((USER, "a"),), (QuotaOp("producer_byte_rate", 0.0, True),))
    res = ClientQuotaControlManager().alter_client_quotas(img, [entry])
    assert res.response[0].error == ErrorCode.NONE
    assert _applied(img, res).quotas == {}


# ---------------------------------------------------------------------- SCRAM


SALT, SALTED = b"salt-bytes", hashlib.pbkdf2_hmac("sha256", b"pencil", b"salt-bytes", 4096)


def _up(name: str = "alice", mech: int = 1, iterations: int = 4096, salt: bytes = SALT,
        salted: bytes = SALTED) -> ScramUpsertion:
    return ScramUpsertion(name, mech, iterations, salt, salted)


def test_scram_upsert_stores_the_rfc5802_keys_never_the_password() -> None:
    img = MetadataImage()
    res = ScramControlManager().alter_credentials(img, [], [_up()])
    assert [(r.user, r.error) for r in res.response] == [("alice", ErrorCode.NONE)]
    client_key = hmac.new(SALTED, b"Client Key", "sha256").digest()
    assert res.records == [UserScramCredentialRecord(
        "alice", 1, SALT, hashlib.sha256(client_key).digest(),
        hmac.new(SALTED, b"Server Key", "sha256").digest(), 4096)]
    assert ("alice", 1) in _applied(img, res).scram


def test_scram_iterations_bounds() -> None:
    mgr = ScramControlManager()
    res = mgr.alter_credentials(MetadataImage(), [], [
        _up("low", iterations=MIN_ITERATIONS - 1), _up("min", iterations=MIN_ITERATIONS),
        _up("max", mech=2, iterations=MAX_ITERATIONS),
        _up("high", iterations=MAX_ITERATIONS + 1)])
    assert [(r.user, r.error, r.message) for r in res.response] == [
        ("low", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too few iterations"),
        ("min", ErrorCode.NONE, None), ("max", ErrorCode.NONE, None),
        ("high", ErrorCode.UNACCEPTABLE_CREDENTIAL, "Too many iterations")]
    assert [(r.name, r.iterations) for r in res.records
            if isinstance(r, UserScramCredentialRecord)] == [("min", MIN_ITERATIONS),
                                                             ("max", MAX_ITERATIONS)]
    assert len(res.records) == 2


def test_scram_bad_upsertions() -> None:
    res = ScramControlManager().alter_credentials(MetadataImage(), [], [
        _up(""), _up("m", mech=3), _up("s", salt=b""), _up("p", salted=b"")])
    assert [(r.user, r.error) for r in res.response] == [
        ("", ErrorCode.UNACCEPTABLE_CREDENTIAL), ("m", ErrorCode.UNSUPPORTED_SASL_MECHANISM),
        ("s", ErrorCode.UNACCEPTABLE_CREDENTIAL), ("p", ErrorCode.UNACCEPTABLE_CREDENTIAL)]
    assert res.records == []


def test_scram_deleting_what_does_not_exist_is_resource_not_found() -> None:
    res = ScramControlManager().alter_credentials(MetadataImage(),
                                                  [ScramDeletion("ghost", 1)], [])
    assert [(r.user, r.error, r.message) for r in res.response] == [
        ("ghost", ErrorCode.RESOURCE_NOT_FOUND,
         "Attempt to delete a user credential that does not exist")]
    assert res.records == []


def test_scram_delete_and_replace_per_user_all_or_nothing() -> None:
    mgr = ScramControlManager()
    img = _applied(MetadataImage(), mgr.alter_credentials(MetadataImage(), [], [_up()]))
    # alice: delete SHA-256 and add SHA-512 (both apply); bob: one bad op drops his good one
    res = mgr.alter_credentials(img, [ScramDeletion("alice", 1), ScramDeletion("bob", 2)],
                                [_up("alice", mech=2), _up("bob", mech=1)])
    assert [(r.user, r.error) for r in res.response] == [
        ("alice", ErrorCode.NONE), ("bob", ErrorCode.RESOURCE_NOT_FOUND)]
    assert [type(r) for r in res.records] == [RemoveUserScramCredentialRecord,
                                              UserScramCredentialRecord]
    assert set(_applied(img, res).scram) == {("alice", 2)}


def test_scram_one_mechanism_twice_for_a_user_is_duplicate_resource() -> None:
    mgr = ScramControlManager()
    img = _applied(MetadataImage(), mgr.alter_credentials(MetadataImage(), [], [_up()]))
    res = mgr.alter_credentials(img, [ScramDeletion("alice", 1)], [_up("alice", mech=1)])
    assert [(r.user, r.error) for r in res.response] == [
        ("alice", ErrorCode.DUPLICATE_RESOURCE)]
    assert res.records == []
