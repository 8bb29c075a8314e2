// Live updates of the console: one websocket per tab, events listed as they
// arrive, and the page's [data-live] parts refreshed from the server (debounced).
// When the socket cannot connect or drops (Redis, the channel layer, is down; the
// web process restarts), a banner says so and the script keeps reconnecting; the
// page itself stays usable, it reads the database. A ping every PING_EVERY_MS makes
// a round trip through the channel layer: no pong in time and the socket is
// treated as dropped.
(function () {
  "use strict";
  var EVENTS_SHOWN_MAX = 50;
  var REFRESH_DELAY_MS = 300;
  var RECONNECT_MAX_MS = 10000;
  var PING_EVERY_MS = 20000;
  var PONG_TIMEOUT_MS = 10000;
  // Heartbeats (liveness-only batches, several a second with a few brokers on a few
  // nodes) are folded into one line per quiet period, redrawn at most this often, and
  // refresh the page at most this often too. Every other event keeps a line of its own.
  var LIVENESS_LINE_EVERY_MS = 5000;
  var LIVENESS_REFRESH_EVERY_MS = 5000;
  // Registrations and expiries (brokers), route changes (topics), leader changes,
  // divergence and rebuilds stand out from the rest.
  var NOTABLE = { brokers: true, topics: true, leader: true, divergence: true, rebuild: true };
  var list = document.getElementById("event-list");
  var status = document.getElementById("live-status");
  var banner = document.getElementById("live-banner");
  var refreshTimer = null;
  var lastRefreshAt = 0;
  var reconnectMs = 500;
  var heartbeats = { item: null, nodes: {}, updates: 0, since: 0, last: 0, drawnAt: 0, timer: null };
  window.namesrvLive = { received: 0, connected: false, last: null, paused: false, heartbeats: 0 };

  // "broker-a's master moved from A to B": a master address change says so by name.
  function masterMoves(e) {
    return (e.master_moves || []).map(function (m) {
      return m.broker_name + "'s master moved from " + m.from + " to " + m.to;
    });
  }

  function describe(e) {
    switch (e.kind) {
      case "brokers":
        if ((e.master_moves || []).length) {
          return masterMoves(e).join("; ") + " (on " + e.node_id + ", v" + e.applied_version + ")";
        }
        return "brokers changed on " + e.node_id + ": " + (e.broker_names.join(", ") || "liveness") + " (v" + e.applied_version + ")";
      case "topics": return "topics changed on " + e.node_id + ": " + e.topics.join(", ") + (e.topic_count > e.topics.length ? " …" : "") + " (v" + e.applied_version + ")";
      case "kv": return "KV changed on " + e.node_id + ": " + e.kv_namespaces.join(", ");
      case "leader": return "leader of term " + e.term + " is " + (e.leader || "unknown") + " (seen by " + e.node_id + ")";
      case "divergence":
        if (e.groups) {
          return "nodes disagree on what clients see: " + e.groups.map(function (g) { return "{" + g.join(", ") + "}"; }).join(" vs ");
        }
        return "nodes disagree: " + e.nodes.map(function (n) { return n.node_id + "@" + n.applied_version; }).join(", ");
      case "rebuild": return e.node_id + " rebuilt its projection (v" + e.applied_version + ")";
      default: return e.kind + " on " + (e.node_id || "?");
    }
  }

  // Only live-broker rows moved (heartbeats of known brokers); older servers do not
  // send the flag, so it is inferred from what the event touched.
  function livenessOnly(e) {
    if (typeof e.liveness_only === "boolean") { return e.liveness_only; }
    return e.kind === "brokers" && !(e.broker_names || []).length &&
      !(e.clusters || []).length && !(e.topics || []).length;
  }

  function clock(ms) { return new Date(ms || Date.now()).toLocaleTimeString(); }

  function trim() {
    while (list.children.length > EVENTS_SHOWN_MAX) { list.removeChild(list.lastChild); }
  }

  function show(e) {
    var item = document.createElement("li");
    item.className = "event " + e.kind + (NOTABLE[e.kind] ? " notable" : "") +
      ((e.master_moves || []).length ? " master-moved" : "");
    item.textContent = clock(e.at_ms) + " " + describe(e);
    list.insertBefore(item, list.firstChild);
    trim();
  }

  // The heartbeat line of the current period, drawn now (created on top if needed).
  function drawHeartbeats() {
    var h = heartbeats;
    if (h.timer) { clearTimeout(h.timer); h.timer = null; }
    if (!h.item) {
      h.item = document.createElement("li");
      h.item.className = "event liveness";
      list.insertBefore(h.item, list.firstChild);
      trim();
    }
    var span = h.since === h.last ? clock(h.since) : clock(h.since) + "\u2013" + clock(h.last);
    h.item.textContent = span + " brokers heartbeating on " + Object.keys(h.nodes).sort().join(", ") +
      " (" + h.updates + " liveness update" + (h.updates === 1 ? "" : "s") + ")";
    h.item.dataset.updates = String(h.updates);
    h.drawnAt = Date.now();
  }

  // One line per period: while the heartbeat line is the newest one it is updated in
  // place (at most every LIVENESS_LINE_EVERY_MS); a line of its own above it ends the
  // period and the next heartbeat opens a new line on top.
  function noteHeartbeat(e) {
    var h = heartbeats;
    if (h.item && h.item !== list.firstChild) {
      if (h.timer) { drawHeartbeats(); }
      h.item = null;
    }
    var at = e.at_ms || Date.now();
    if (!h.item) { h.nodes = {}; h.updates = 0; h.since = at; }
    h.nodes[e.node_id || "?"] = true;
    h.updates += 1;
    h.last = at;
    window.namesrvLive.heartbeats += 1;
    if (!h.item) { drawHeartbeats(); return; }
    if (!h.timer) {
      h.timer = setTimeout(drawHeartbeats, Math.max(0, h.drawnAt + LIVENESS_LINE_EVERY_MS - Date.now()));
    }
  }

  // Live or paused: the header's pill and the banner under it.
  function setLive(on) {
    window.namesrvLive.connected = on;
    window.namesrvLive.paused = !on;
    status.className = on ? "live on" : "live off";
    status.title = on ? "live updates" : "live updates paused: reconnecting";
    if (banner) { banner.hidden = on; }
  }

  function refresh() {
    refreshTimer = null;
    lastRefreshAt = Date.now();
    fetch(window.location.href, { credentials: "same-origin", headers: { "X-Live-Refresh": "1" } })
      .then(function (r) { return r.ok ? r.text() : null; })
      .then(function (html) {
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        document.querySelectorAll("[data-live][id]").forEach(function (old) {
          var next = fresh.getElementById(old.id);
          if (next) { old.replaceWith(next); }
        });
        var badge = fresh.getElementById("divergence-badge");
        var mine = document.getElementById("divergence-badge");
        if (badge && mine) { mine.replaceWith(badge); }
        document.body.dataset.refreshed = String(Date.now());
      })
      .catch(function () { /* the next event refreshes again */ });
  }

  function scheduleRefresh() {
    if (refreshTimer) { clearTimeout(refreshTimer); }
    refreshTimer = setTimeout(refresh, REFRESH_DELAY_MS);
  }

  // Heartbeats only move ages: refresh at most every LIVENESS_REFRESH_EVERY_MS, and
  // never postpone a refresh already coming.
  function scheduleLivenessRefresh() {
    if (refreshTimer) { return; }
    var wait = lastRefreshAt + LIVENESS_REFRESH_EVERY_MS - Date.now();
    refreshTimer = setTimeout(refresh, Math.max(REFRESH_DELAY_MS, wait));
  }

  function scheduleReconnect() {
    setTimeout(connect, reconnectMs);
    reconnectMs = Math.min(reconnectMs * 2, RECONNECT_MAX_MS);
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket;
    try {
      socket = new WebSocket(scheme + window.location.host + "/ws/events/");
    } catch (err) {
      setLive(false);
      scheduleReconnect();
      return;
    }
    var pingTimer = null;
    var pongTimer = null;

    function stopTimers() {
      if (pingTimer) { clearInterval(pingTimer); pingTimer = null; }
      if (pongTimer) { clearTimeout(pongTimer); pongTimer = null; }
    }

    socket.onopen = function () {
      reconnectMs = 500;
      // Back from a pause: what changed meanwhile was never announced.
      if (window.namesrvLive.paused) { scheduleRefresh(); }
      setLive(true);
      pingTimer = setInterval(function () {
        if (pongTimer || socket.readyState !== WebSocket.OPEN) { return; }
        socket.send(JSON.stringify({ kind: "ping" }));
        pongTimer = setTimeout(function () { socket.close(); }, PONG_TIMEOUT_MS);
      }, PING_EVERY_MS);
    };
    socket.onmessage = function (message) {
      var e;
      try { e = JSON.parse(message.data); } catch (err) { return; }
      if (e.kind === "pong") {
        if (pongTimer) { clearTimeout(pongTimer); pongTimer = null; }
        return;
      }
      if (e.kind === "hello") { return; }
      window.namesrvLive.received += 1;
      window.namesrvLive.last = e;
      if (livenessOnly(e)) {
        noteHeartbeat(e);
        scheduleLivenessRefresh();
        return;
      }
      show(e);
      scheduleRefresh();
    };
    socket.onerror = function () {
      setLive(false);
    };
    socket.onclose = function () {
      stopTimers();
      setLive(false);
      scheduleReconnect();
    };
  }

  if (list && status && "WebSocket" in window) { connect(); }
})();
