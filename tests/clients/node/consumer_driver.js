// One kafkajs consumer-group member driven from a test; speaks the same JSON-lines protocol as
// tests/groups/consumer_driver.py: "started", "assigned" (full assignment), "revoked", "consumed",
// "committed", "error", "closed" on stdout; the command "close" (or EOF) on stdin disconnects
// gracefully, which leaves the group.
//
// Usage: node consumer_driver.js --bootstrap H:P --topic T --group G
//        [--session-timeout-ms 6000] [--heartbeat-ms 1000] [--client-id ID]
'use strict';

const readline = require('readline');
const { Kafka, logLevel } = require('kafkajs');

function parseArgs(argv) {
  const args = { sessionTimeoutMs: 6000, heartbeatMs: 1000, clientId: 'kafkajs-driver' };
  const names = {
    '--bootstrap': 'bootstrap',
    '--topic': 'topic',
    '--group': 'group',
    '--session-timeout-ms': 'sessionTimeoutMs',
    '--heartbeat-ms': 'heartbeatMs',
    '--client-id': 'clientId',
  };
  for (let i = 0; i < argv.length; i += 2) {
    const name = names[argv[i]];
    if (!name) throw new Error(`unknown argument ${argv[i]}`);
    args[name] = typeof args[name] === 'number' ? Number(argv[i + 1]) : argv[i + 1];
  }
  return args;
}

function emit(event, fields = {}) {
  process.stdout.write(JSON.stringify({ event, ...fields }) + '\n');
}

function stderrLogger() {
  return ({ namespace, level, log }) => {
    const { message, ...extra } = log;
    process.stderr.write(`${level} ${namespace}: ${message} ${JSON.stringify(extra)}\n`);
  };
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  const kafka = new Kafka({
    clientId: args.clientId,
    brokers: [args.bootstrap],
    logLevel: logLevel.WARN,
    logCreator: stderrLogger,
    retry: { initialRetryTime: 100, retries: 20 },
  });
  const consumer = kafka.consumer({
    groupId: args.group,
    sessionTimeout: args.sessionTimeoutMs,
    heartbeatInterval: args.heartbeatMs,
    rebalanceTimeout: 10000,
    // kafkajs learns of a rebalance only between fetches: keep the long-poll short.
    maxWaitTimeInMs: 500,
  });
  let owned = [];
  consumer.on(consumer.events.GROUP_JOIN, ({ payload }) => {
    owned = (payload.memberAssignment[args.topic] || []).slice().sort((a, b) => a - b);
    emit('assigned', { partitions: owned, generation: null, member_id: payload.memberId });
  });
  consumer.on(consumer.events.REBALANCING, () => {
    emit('revoked', { partitions: owned });
    owned = [];
  });
  consumer.on(consumer.events.CRASH, ({ payload }) => {
    emit('error', { message: `crash: ${payload.error && payload.error.message}` });
  });

  let closing = false;
  const close = async () => {
    if (closing) return;
    closing = true;
    await consumer.disconnect();
    emit('closed');
    process.exit(0);
  };
  readline.createInterface({ input: process.stdin }).on('line', (line) => {
    if (line.trim() === 'close') close();
  }).on('close', close);

  await consumer.connect();
  emit('started');
  await consumer.subscribe({ topics: [args.topic], fromBeginning: true });
  await consumer.run({
    autoCommit: true,
    autoCommitThreshold: 1,
    eachBatchAutoResolve: false,
    eachBatch: async ({ batch, resolveOffset, commitOffsetsIfNecessary, heartbeat }) => {
      if (batch.messages.length === 0) return;
      emit('consumed', { records: batch.messages.map((m) => [batch.partition, Number(m.offset)]) });
      for (const message of batch.messages) resolveOffset(message.offset);
      await commitOffsetsIfNecessary();
      const next = Number(batch.messages[batch.messages.length - 1].offset) + 1;
      emit('committed', { offsets: { [batch.partition]: next } });
      await heartbeat();
    },
  });
}

main().catch((error) => {
  emit('error', { message: String(error && error.stack) });
  process.exit(1);
});
