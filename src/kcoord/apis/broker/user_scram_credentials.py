"""DescribeUserScramCredentials (key 50) and AlterUserScramCredentials (key 51), version 0 each.

What confluent-kafka's ``describe_user_scram_credentials`` / ``alter_user_scram_credentials`` and
kafka-python's admin client send. Describe lists mechanisms and iteration counts (never keys);
a named user without credentials is RESOURCE_NOT_FOUND, a name given twice DUPLICATE_RESOURCE.
Alter takes salted passwords computed by the client (the server derives and stores only
StoredKey and ServerKey); every change of the request is written durably before the answer.
Checks follow Kafka's: unknown mechanism UNSUPPORTED_SASL_MECHANISM, an empty user or an
iteration count outside 4096..16384 UNACCEPTABLE_CREDENTIAL, a user both deleted and upserted
or named twice DUPLICATE_RESOURCE, deleting what does not exist RESOURCE_NOT_FOUND.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import structlog

from kcoord.apis.access import Op, may_cluster
from kcoord.protocol.api_keys import ApiKey
from kcoord.protocol.errors import ErrorCode, KafkaError
from kcoord.protocol.registry import ApiSpec
from kcoord.security.authorizer import Authorizer
from kcoord.security.credentials import CredentialStore
from kcoord.security.scram import MAX_ITERATIONS, ScramCredential, ScramMechanism
from kcoord.server.context import RequestContext

log = structlog.get_logger(__name__)


def describe_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    return {"throttle_time": 0, "error_code": code, "error_message": None, "results": []}


def alter_error_response(request: Any, code: ErrorCode) -> dict[str, Any]:
    users = {d.name for d in request.deletions} | {u.name for u in request.upsertions}
    return {
        "throttle_time": 0,
        "results": [{"user": u, "error_code": code, "error_message": None} for u in sorted(users)],
    }


def describe_api(store: CredentialStore, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_describe, store=store, authorizer=authorizer)
    return ApiSpec(
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        "DescribeUserScramCredentials",
        0,
        0,
        handler,
        describe_error_response,
    )


def alter_api(store: CredentialStore, *, authorizer: Authorizer) -> ApiSpec:
    handler = functools.partial(handle_alter, store=store, authorizer=authorizer)
    return ApiSpec(
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS, "AlterUserScramCredentials", 0, 0, handler, alter_error_response
    )


def _result(user: str, code: ErrorCode = ErrorCode.none, message: str | None = None) -> dict[str, Any]:
    return {"user": user, "error_code": code, "error_message": message}


async def handle_describe(
    ctx: RequestContext, request: Any, *, store: CredentialStore, authorizer: Authorizer
) -> dict[str, Any]:
    """Cluster DESCRIBE, as Kafka asks (else CLUSTER_AUTHORIZATION_FAILED)."""
    await _load_if_authorized(ctx, authorizer, Op.DESCRIBE, store)
    if request.users is None:  # null asks for every user; an empty list for none (as Kafka)
        names, named = store.users(), False
    else:
        names, named = [u.name for u in request.users], True
    counts = Counter(names)
    results = []
    for name in dict.fromkeys(names):
        if counts[name] > 1:
            results.append(
                {**_result(name, ErrorCode.duplicate_resource, "user named twice"), "credential_infos": []}
            )
            continue
        credentials = store.credentials_of(name)
        if not credentials and named:
            message = "Attempt to describe a user credential that does not exist"
            results.append({**_result(name, ErrorCode.resource_not_found, message), "credential_infos": []})
            continue
        infos = [
            {"mechanism": m.kafka_type, "iterations": c.iterations}
            for m, c in sorted(credentials.items(), key=lambda kv: kv[0].kafka_type)
        ]
        results.append({**_result(name), "credential_infos": infos})
    return {"throttle_time": 0, "error_code": ErrorCode.none, "error_message": None, "results": results}


async def handle_alter(
    ctx: RequestContext, request: Any, *, store: CredentialStore, authorizer: Authorizer
) -> dict[str, Any]:
    """Cluster ALTER, as Kafka asks (else CLUSTER_AUTHORIZATION_FAILED for every user)."""
    await _load_if_authorized(ctx, authorizer, Op.ALTER, store)
    errors: dict[str, tuple[ErrorCode, str]] = {}
    mentions = Counter(
        [(d.name, d.mechanism) for d in request.deletions]
        + [(u.name, u.mechanism) for u in request.upsertions]
    )
    for (user, _), count in mentions.items():
        if count > 1:
            errors.setdefault(user, (ErrorCode.duplicate_resource, "a user and mechanism appear twice"))
    deletions: list[tuple[str, ScramMechanism]] = []
    for deletion in request.deletions:
        mechanism = _mechanism_of(deletion)
        if isinstance(mechanism, tuple):
            errors.setdefault(deletion.name, mechanism)
        elif store.lookup(deletion.name, mechanism) is None:
            message = "Attempt to delete a user credential that does not exist"
            errors.setdefault(deletion.name, (ErrorCode.resource_not_found, message))
        else:
            deletions.append((deletion.name, mechanism))
    upserts: list[tuple[str, ScramMechanism, ScramCredential]] = []
    for upsertion in request.upsertions:
        mechanism = _mechanism_of(upsertion)
        if isinstance(mechanism, tuple):
            errors.setdefault(upsertion.name, mechanism)
        elif not mechanism.min_iterations <= upsertion.iterations <= MAX_ITERATIONS:
            message = f"iterations must be {mechanism.min_iterations}..{MAX_ITERATIONS}"
            errors.setdefault(upsertion.name, (ErrorCode.unacceptable_credential, message))
        else:
            credential = ScramCredential.from_salted_password(
                mechanism, bytes(upsertion.salted_password), bytes(upsertion.salt), upsertion.iterations
            )
            upserts.append((upsertion.name, mechanism, credential))
    applied_upserts = [u for u in upserts if u[0] not in errors]
    applied_deletions = [d for d in deletions if d[0] not in errors]
    await store.apply(applied_upserts, applied_deletions)
    if applied_upserts or applied_deletions:
        log.info(
            "scram_credentials.altered",
            upserted=sorted({user for user, _, _ in applied_upserts}),
            deleted=sorted({user for user, _ in applied_deletions}),
            location=store.location,
        )
    users = dict.fromkeys([d.name for d in request.deletions] + [u.name for u in request.upsertions])
    return {
        "throttle_time": 0,
        "results": [_result(user, *errors[user]) if user in errors else _result(user) for user in users],
    }


async def _load_if_authorized(
    ctx: RequestContext, authorizer: Authorizer, op: Op, store: CredentialStore
) -> None:
    """Raise CLUSTER_AUTHORIZATION_FAILED unless the caller may ``op`` the cluster, then load the store."""
    if not may_cluster(ctx, authorizer, op):
        raise KafkaError(ErrorCode.cluster_authorization_failed)
    await store.load()


def _mechanism_of(entry: Any) -> ScramMechanism | tuple[ErrorCode, str]:
    """A deletion's or upsertion's mechanism, or the error that refuses it before anything else."""
    mechanism = ScramMechanism.from_kafka_type(entry.mechanism)
    if not entry.name:
        return ErrorCode.unacceptable_credential, "empty user name"
    if mechanism is None:
        return ErrorCode.unsupported_sasl_mechanism, "unknown SCRAM mechanism"
    return mechanism
