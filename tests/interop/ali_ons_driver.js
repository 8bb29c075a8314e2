'use strict';
// Drives ali-ons@3.12.0 against a NameServer and prints what it saw as one JSON line.
//
// Usage: node ali_ons_driver.js <namesrvAddr> <topic> <kvNamespace> <accessKey> <secretKey>
// NODE_PATH must point at the node_modules folder holding ali-ons.
//
// KV writes are admin requests: the NameServer's ACL wants them signed. ali-ons signs
// with its own code (channel.js beforeRequest: AccessKey, OnsChannel and the header
// fields sorted, then the body, HmacSHA1, Base64) when it is given an access key;
// one put is also sent through a client without a key, which must be refused.
//
// Everything goes through ali-ons' own code: MQClientAPI (its route query),
// RemotingCommand (its codec: language JAVA, version 121, opaque from 1) and its
// channel (framing, opaque matching). Bodies are parsed the way ali-ons parses
// them (JSON2, eval-based, accepts unquoted numeric keys) and also with the
// standard JSON.parse, so the test can tell which JSON style came back.

const JSON2 = require('JSON2');
const MQClientAPI = require('ali-ons/lib/mq_client_api');
const RemotingCommand = require('ali-ons/lib/protocol/command/remoting_command');

const TIMEOUT_MS = 5000;
const quietLogger = { info() {}, debug() {}, warn() {}, error() {} };

function parseBoth(body) {
  const text = body ? body.toString('utf8') : null;
  let standard = null;
  let standardError = null;
  try {
    standard = text === null ? null : JSON.parse(text);
  } catch (err) {
    standardError = err.message;
  }
  return { text, standard, standardError, lenient: text === null ? null : JSON2.parse(text) };
}

function answer(response) {
  return {
    code: response.code,
    remark: response.remark === undefined ? null : response.remark,
    extFields: response.extFields === undefined ? null : response.extFields,
    body: parseBoth(response.body),
  };
}

async function main() {
  const [addr, topic, namespace, accessKey, secretKey] = process.argv.slice(2);
  const options = { nameSrv: addr, httpclient: {}, logger: quietLogger, responseTimeout: TIMEOUT_MS };
  const api = new MQClientAPI({ ...options, accessKey, secretKey });
  const anonymous = new MQClientAPI(options);
  await api.ready();
  await anonymous.ready();
  const call = (code, header) => api.invoke(addr, RemotingCommand.createRequestCommand(code, header), TIMEOUT_MS)
    .then(answer);
  const result = {};
  // The client API a producer or consumer uses (sorts queueDatas and brokerDatas).
  result.route = await api.getTopicRouteInfoFromNameServer(topic, TIMEOUT_MS);
  // The same query through the raw codec, default style (v121: fastjson keys)...
  result.routeRaw = await call(105, { topic });
  // ... and asking for standard JSON explicitly.
  result.routeStandard = await call(105, { topic, acceptStandardJsonOnly: 'true' });
  result.routeMissing = await call(105, { topic: `${topic}-missing` });
  result.clusterInfo = await call(106, {});
  result.kvPutUnsigned = await anonymous.invoke(
    addr,
    RemotingCommand.createRequestCommand(100, { namespace, key: 'ali-ons-key', value: 'unsigned' }),
    TIMEOUT_MS,
  ).then(answer);
  result.kvPut = await call(100, { namespace, key: 'ali-ons-key', value: 'ali-ons-value' });
  result.kvGet = await call(101, { namespace, key: 'ali-ons-key' });
  result.kvDelete = await call(102, { namespace, key: 'ali-ons-key' });
  result.kvGetAfterDelete = await call(101, { namespace, key: 'ali-ons-key' });
  result.topicList = await call(206, {});
  await api.close();
  await anonymous.close();
  process.stdout.write(JSON.stringify(result) + '\n');
}

main().then(() => process.exit(0), err => {
  process.stderr.write(`ali-ons driver failed: ${err && err.stack ? err.stack : err}\n`);
  process.exit(1);
});
