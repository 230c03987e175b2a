"""ListTransactions (key 66), versions 0-2: operators list the transactional ids this node holds.

- v0: state filters and producer id filters -> the ids (with producer id and state) and the
  filters that name no state.
- v1: ``duration_filter``: only transactions running longer than this many milliseconds.
- v2 (KIP-1152): ``transactional_id_pattern``: only the ids this regular expression matches in
  full (empty or null: all); one that does not compile answers INVALID_REGULAR_EXPRESSION.
  kafka-python 3's ``KafkaAdminClient.list_transactions(transactional_id_pattern=...)`` sends it
  (and refuses the argument when the broker's maximum is below 2).

Each node lists the ids of the ``__transaction_state`` partitions it holds (admin clients ask
every broker). While some of them still load the answer carries COORDINATOR_LOAD_IN_PROGRESS.

Authorization: the ids the principal may DESCRIBE (TransactionalId), as Kafka filters them.

The id pattern is compiled first (a refusal lists nothing), then applied to what the other filters
listed on the app's :class:`~kcoord.runtime.pattern_worker.PatternWorker`: RE2 matches in linear
time and lets go of the GIL, but a crafted pattern costs about a second per 32 KiB id, which must
hold neither the event loop nor the default executor's threads that storage uses.
"""

from __future__ import annotations

from typing import Any

from kcoord.apis.access import Op
from kcoord.apis.error_answers import code_and_empty
from kcoord.apis.transactions.common import may_transactional_id
from kcoord.apis.wiring import own_api
from kcoord.coordinator.transactions import ListTransactionsRequest, views
from kcoord.protocol.api_keys import ApiKey
from kcoord.runtime.pattern_worker import PatternWorker
from kcoord.runtime.transaction_coordinator import TransactionCoordinator
from kcoord.security.authorizer import Authorizer
from kcoord.server.context import RequestContext


async def handle_list_transactions(
    ctx: RequestContext,
    request: Any,
    *,
    transactions: TransactionCoordinator,
    patterns: PatternWorker,
    authorizer: Authorizer,
) -> dict[str, Any]:
    ids = views.id_pattern(getattr(request, "transactional_id_pattern", None))
    error, listed = transactions.list_transactions(
        ListTransactionsRequest(
            states=frozenset(request.state_filters),
            producer_ids=frozenset(int(p) for p in request.producer_id_filters),
            min_duration_ms=int(getattr(request, "duration_filter", -1)),
        )
    )
    if ids is not None:
        listed = await patterns.run(views.matching, listed, ids)
    return {
        "error_code": error,
        "unknown_state_filters": list(listed.unknown_state_filters),
        "transaction_states": [
            {"transactional_id": tid, "producer_id": producer_id, "transaction_state": state}
            for tid, producer_id, state in listed.transactions
            if may_transactional_id(ctx, authorizer, Op.DESCRIBE, tid)
        ],
    }


api = own_api(
    ApiKey.LIST_TRANSACTIONS,
    "ListTransactions",
    0,
    2,
    handle_list_transactions,
    code_and_empty("unknown_state_filters", "transaction_states"),
)
