// kafkajs over SASL_SSL with SCRAM-SHA-512: produce N messages to partition 0, consume them in a
// group, commit, and print {"values": [...]} on stdout. Usage: node sasl_round_trip.js '<json>'
// with bootstrap, topic, group, messages, username, password, ca (a PEM file).
'use strict';

const fs = require('fs');
const { Kafka, logLevel } = require('kafkajs');

async function main() {
  const config = JSON.parse(process.argv[2]);
  const kafka = new Kafka({
    clientId: 'kafkajs-sasl',
    brokers: [config.bootstrap],
    ssl: { ca: [fs.readFileSync(config.ca, 'utf-8')] },
    sasl: { mechanism: 'scram-sha-512', username: config.username, password: config.password },
    logLevel: logLevel.WARN,
  });
  const producer = kafka.producer();
  await producer.connect();
  const messages = [];
  for (let i = 0; i < config.messages; i++) {
    messages.push({ key: String(i), value: `value-${i}`, partition: 0 });
  }
  await producer.send({ topic: config.topic, messages });
  await producer.disconnect();

  const consumer = kafka.consumer({ groupId: config.group });
  await consumer.connect();
  await consumer.subscribe({ topic: config.topic, fromBeginning: true });
  const values = [];
  await new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('timed out consuming')), 60000);
    consumer
      .run({
        autoCommit: false,
        eachMessage: async ({ topic, partition, message }) => {
          values.push(message.value.toString());
          if (values.length === config.messages) {
            await consumer.commitOffsets([
              { topic, partition, offset: String(Number(message.offset) + 1) },
            ]);
            clearTimeout(timer);
            resolve();
          }
        },
      })
      .catch(reject);
  });
  await consumer.disconnect();
  process.stdout.write(JSON.stringify({ values }) + '\n');
}

main().catch((err) => {
  process.stderr.write(`${err.stack || err}\n`);
  process.exit(1);
});
