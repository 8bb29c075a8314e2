'use strict';
// Drives ali-ons@3.12.0's Producer and Consumer (MQPushConsumer) against our NameServers
// and broker_app brokers; prints one JSON line per event.
//
// Usage: node ali_ons_consume_driver.js '<scenario JSON>'
// NODE_PATH must point at the node_modules folder holding ali-ons.
//
// Scenario fields:
//   namesrv        NameServer addresses
//   topic, group   the topic to produce to and the consumer group
//   send           messages the Producer sends first (bodies "<prefix>-<i>", tag "TagA")
//   prefix         body prefix
//   consumers      instance names: one MQPushConsumer each (distinct client ids)
//   expect         distinct bodies to wait for before ending
//   timeoutMs      give up after this long
//   holdMs         keep consuming this long after the expectation is met (duplicates show)
//   retryOnce      bodies the handler answers ACTION_RETRY on their first delivery
//   alwaysRetry    bodies the handler always answers ACTION_RETRY (they end in the DLQ)
//   maxReconsumeTimes  the consumers' maxReconsumeTimes
//   leaveAfterMs   {instance: ms}: close that consumer after ms (its queues go to the others)
//   sendAfterMs    {ms: count}: the producer sends count more messages at ms
//
// Events: sent, received (instance, body, msgId, topic, queueId, brokerName,
// reconsumeTimes), allocation (instance, queues of the topic, every second),
// closed (instance), done (counts).

const { Producer, Consumer, Message } = require('ali-ons');

const quietLogger = { info() {}, debug() {}, warn() {}, error() {} };
const emit = event => process.stdout.write(JSON.stringify(event) + '\n');
const sleep = ms => new Promise(resolve => setTimeout(resolve, ms));

async function main() {
  const s = JSON.parse(process.argv[2]);
  const common = {
    nameSrv: s.namesrv, httpclient: {}, logger: quietLogger, pollNameServerInteval: 2000,
    heartbeatBrokerInterval: 2000, rebalanceInterval: 2000, persistConsumerOffsetInterval: 1000,
  };
  const started = Date.now();
  const producer = new Producer({ ...common, producerGroup: `${s.group}-producer`, instanceName: 'producer' });
  await producer.ready();
  let sent = 0;
  const sendSome = async count => {
    for (let i = 0; i < count; i++) {
      const body = `${s.prefix}-${sent}`;
      const result = await producer.send(new Message(s.topic, 'TagA', body));
      emit({ event: 'sent', body, msgId: result.msgId, status: result.sendStatus,
        queueId: result.messageQueue.queueId, brokerName: result.messageQueue.brokerName });
      sent++;
    }
  };
  await sendSome(s.send || 0);

  const received = new Set();
  const seenOnce = new Set();
  const consumers = new Map();
  const retryOnce = new Set(s.retryOnce || []);
  const alwaysRetry = new Set(s.alwaysRetry || []);
  for (const instance of s.consumers) {
    const consumer = new Consumer({
      ...common, consumerGroup: s.group, instanceName: instance,
      consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET', maxReconsumeTimes: s.maxReconsumeTimes ?? 16,
      brokerSuspendMaxTimeMillis: 5000, consumerTimeoutMillisWhenSuspend: 10000,
      pullTimeDelayMillsWhenException: 500,
    });
    consumer.on('error', err => emit({ event: 'error', instance, message: String(err && err.message) }));
    consumer.subscribe(s.topic, '*', async msg => {
      const body = msg.body.toString();
      emit({ event: 'received', instance, body, msgId: msg.msgId, topic: msg.topic,
        queueId: msg.queueId, brokerName: msg.brokerName || null, reconsumeTimes: msg.reconsumeTimes,
        storeHost: msg.storeHost });
      if (alwaysRetry.has(body)) {
        return Consumer.ACTION_RETRY;
      }
      if (retryOnce.has(body) && !seenOnce.has(body)) {
        seenOnce.add(body);
        return Consumer.ACTION_RETRY;
      }
      received.add(body);
    });
    await consumer.ready();
    consumers.set(instance, consumer);
  }

  const leave = s.leaveAfterMs || {};
  const sendLater = Object.entries(s.sendAfterMs || {}).map(([ms, count]) => [Number(ms), count]);
  let metAt = null;
  while (Date.now() - started < s.timeoutMs) {
    const elapsed = Date.now() - started;
    for (const [instance, consumer] of consumers) {
      const queues = [];
      for (const { messageQueue } of consumer.processQueueTable.values()) {
        if (messageQueue.topic === s.topic) {
          queues.push(`${messageQueue.brokerName}:${messageQueue.queueId}`);
        }
      }
      emit({ event: 'allocation', instance, queues: queues.sort(), elapsed });
      if (leave[instance] !== undefined && elapsed >= leave[instance]) {
        await consumer.close();
        consumers.delete(instance);
        emit({ event: 'closed', instance, elapsed });
      }
    }
    while (sendLater.length && sendLater[0][0] <= elapsed) {
      await sendSome(sendLater.shift()[1]);
    }
    if (metAt === null && received.size >= s.expect) {
      metAt = Date.now();
    }
    if (metAt !== null && Date.now() - metAt >= (s.holdMs || 0)) {
      break;
    }
    await sleep(1000);
  }
  emit({ event: 'done', sent, distinct: received.size, elapsed: Date.now() - started });
  for (const consumer of consumers.values()) {
    await consumer.close();
  }
  await producer.close();
}

main().then(() => process.exit(0), err => {
  process.stderr.write(`ali-ons consume driver failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
