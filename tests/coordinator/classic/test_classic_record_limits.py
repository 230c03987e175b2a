"""A JoinGroup whose ids could not be written to the group's record is refused before the group changes.

Record strings have int16 lengths. Before this check a 40,000-character instance id reached the
append, whose encoding failed outside its error path: no answer, and the group hung until its
rebalance timed out.
"""

from __future__ import annotations

from tests.coordinator.classic.classic_harness import Harness, form_group

from kcoord.protocol.errors import ErrorCode


def test_group_id_too_long_is_invalid_group_id() -> None:
    """A 100 KB group id is answered INVALID_GROUP_ID and creates no group and no record."""
    h = Harness()
    _, answer = h.join(group="g" * 100_000)
    assert answer.error_code is ErrorCode.invalid_group_id
    assert h.records == []
    assert h.state("g" * 100_000) is None


def test_instance_id_too_long_is_invalid_request() -> None:
    """A 40,000-character group.instance.id is answered INVALID_REQUEST at once, leaving the group alone."""
    h = Harness()
    form_group(h, 1)
    records_before = list(h.records)
    state_before = h.state()
    _, answer = h.join(instance="i" * 40_000)
    assert answer.error_code is ErrorCode.invalid_request
    assert h.records == records_before
    assert h.state() == state_before


def test_client_id_that_makes_a_member_id_too_long_is_invalid_request() -> None:
    """A client id that fits alone but not with the ``-<uuid>`` of a new member id is refused."""
    h = Harness()
    _, answer = h.join(client_id="c" * 32_760)
    assert answer.error_code is ErrorCode.invalid_request
    assert h.records == []


def test_multibyte_ids_are_counted_in_bytes() -> None:
    """The limit is in UTF-8 bytes: 10,000 three-byte characters do not fit, 10,000 ASCII ones do."""
    h = Harness()
    _, refused = h.join(protocol_type="\u20ac" * 11_000)
    assert refused.error_code is ErrorCode.invalid_request
    _, fits = h.join(protocol_type="p" * 11_000, version=3)
    assert fits is None or fits.error_code is not ErrorCode.invalid_request
