"""``append_soon`` with an :class:`EncodedBatch`: the encoder's header facts replace a re-parse, and the
log stores exactly what appending the same bytes stores; plain bytes keep the header checks."""

from __future__ import annotations

import asyncio

import pytest

from kcoord.protocol.plain_batch import encode_for_log, iter_plain_records
from kcoord.protocol.record_batch import iter_batches, parse_header
from kcoord.storage import LogConfig

from .helpers import T0_MS, ManualClock, StoreFactory

ENTRIES = [(b"k1", b"v1"), (b"k2", None), (None, b"v3")]


@pytest.mark.parametrize("timestamp_type", ["CreateTime", "LogAppendTime"])
async def test_an_encoded_batch_is_stored_as_its_bytes_would_be(
    open_engine: StoreFactory, clock: ManualClock, timestamp_type: str
) -> None:
    """Two logs, one fed the encoded batch and one its bytes: same stored bytes, offsets and timestamps."""
    config = LogConfig(
        message_timestamp_type="LogAppendTime" if timestamp_type == "LogAppendTime" else "CreateTime"
    )
    store = await open_engine(config, clock)
    encoded_log, bytes_log = await store.create("encoded", 0), await store.create("bytes", 0)
    clock.advance(7)
    for round_number in range(3):
        batch = encode_for_log(ENTRIES, T0_MS + round_number)
        written = encoded_log.append_soon(batch)
        assert written is not None
        await written
        await bytes_log.append(batch.data)
    stored = encoded_log.read(0, 1 << 20)
    assert stored == bytes_log.read(0, 1 << 20)
    headers = [header for _, header in iter_batches(stored, verify_crc=True)]
    assert [(h.base_offset, h.last_offset) for h in headers] == [(0, 2), (3, 5), (6, 8)]
    if timestamp_type == "LogAppendTime":
        assert {h.max_timestamp for h in headers} == {T0_MS + 7}
        assert encoded_log.max_timestamp() == (0, T0_MS + 7)
    else:
        assert [h.max_timestamp for h in headers] == [T0_MS, T0_MS + 1, T0_MS + 2]
        assert encoded_log.max_timestamp() == (6, T0_MS + 2)
    assert list(iter_plain_records(stored, 0)) == [(0, b"k1", b"v1"), (1, b"k2", None), (2, None, b"v3")]
    assert encoded_log.log_end_offset == 9


async def test_plain_bytes_given_to_append_soon_are_still_checked(open_engine: StoreFactory) -> None:
    """Bytes whose header disagrees with their length fail the returned future and take no offsets."""
    store = await open_engine()
    log = await store.create("t", 0)
    data = encode_for_log(ENTRIES, T0_MS).data
    failed = log.append_soon(data + b"\x00")
    assert failed is not None
    with pytest.raises(ValueError, match="expected one batch"):
        await failed
    written = log.append_soon(data)
    assert written is not None
    await written
    assert parse_header(log.read(0, 1 << 20)).base_offset == 0
    assert log.log_end_offset == 3


async def test_on_written_is_called_once_per_append_after_the_batch_is_readable(
    open_engine: StoreFactory,
) -> None:
    """Every engine calls ``on_written`` once per append with its done future, the batch already
    readable; a batch refused at planning gets it with the failed future."""
    store = await open_engine()
    log = await store.create("t", 0)
    seen: list[tuple[bool, int, BaseException | None]] = []

    def on_written(done: asyncio.Future[None]) -> None:
        seen.append((done.done(), log.log_end_offset, done.exception()))

    futures = [log.append_soon(encode_for_log(ENTRIES, T0_MS), on_written) for _ in range(3)]
    assert all(future is not None for future in futures)
    await asyncio.gather(*(future for future in futures if future is not None))
    await asyncio.sleep(0)  # engines without a writer of their own call it as a done-callback
    assert [(done, error) for done, _, error in seen] == [(True, None)] * 3
    assert [end for _, end, _ in seen][-1] == 9 and all(end >= 3 for _, end, _ in seen)
    refused = log.append_soon(encode_for_log(ENTRIES, T0_MS).data + b"\x00", on_written)
    assert refused is not None
    with pytest.raises(ValueError):
        await refused
    await asyncio.sleep(0)
    assert len(seen) == 4 and isinstance(seen[3][2], ValueError)
