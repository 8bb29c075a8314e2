// Live updates of the console: one websocket per tab, events listed as they
// arrive, and the page's [data-live] parts refreshed from the server (debounced).
(function () {
  "use strict";
  var EVENTS_SHOWN_MAX = 50;
  var REFRESH_DELAY_MS = 300;
  var RECONNECT_MAX_MS = 10000;
  var list = document.getElementById("event-list");
  var status = document.getElementById("live-status");
  var refreshTimer = null;
  var reconnectMs = 500;
  window.namesrvLive = { received: 0, connected: false, last: null };

  function describe(e) {
    switch (e.kind) {
      case "brokers": return "brokers changed on " + e.node_id + ": " + (e.broker_names.join(", ") || "liveness") + " (v" + e.applied_version + ")";
      case "topics": return "topics changed on " + e.node_id + ": " + e.topics.join(", ") + (e.topic_count > e.topics.length ? " …" : "") + " (v" + e.applied_version + ")";
      case "kv": return "KV changed on " + e.node_id + ": " + e.kv_namespaces.join(", ");
      case "leader": return "leader of term " + e.term + " is " + (e.leader || "unknown") + " (seen by " + e.node_id + ")";
      case "divergence": return "nodes disagree: " + e.nodes.map(function (n) { return n.node_id + "@" + n.applied_version; }).join(", ");
      case "rebuild": return e.node_id + " rebuilt its projection (v" + e.applied_version + ")";
      default: return e.kind + " on " + (e.node_id || "?");
    }
  }

  function show(e) {
    var item = document.createElement("li");
    item.className = "event " + e.kind;
    var when = new Date(e.at_ms || Date.now()).toLocaleTimeString();
    item.textContent = when + " " + describe(e);
    list.insertBefore(item, list.firstChild);
    while (list.children.length > EVENTS_SHOWN_MAX) { list.removeChild(list.lastChild); }
  }

  function refresh() {
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
      });
  }

  function scheduleRefresh() {
    if (refreshTimer) { clearTimeout(refreshTimer); }
    refreshTimer = setTimeout(refresh, REFRESH_DELAY_MS);
  }

  function connect() {
    var scheme = window.location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + window.location.host + "/ws/events/");
    socket.onopen = function () {
      reconnectMs = 500;
      window.namesrvLive.connected = true;
      status.className = "live on";
    };
    socket.onmessage = function (message) {
      var e = JSON.parse(message.data);
      if (e.kind === "hello" || e.kind === "pong") { return; }
      window.namesrvLive.received += 1;
      window.namesrvLive.last = e;
      show(e);
      scheduleRefresh();
    };
    socket.onclose = function () {
      window.namesrvLive.connected = false;
      status.className = "live off";
      setTimeout(connect, reconnectMs);
      reconnectMs = Math.min(reconnectMs * 2, RECONNECT_MAX_MS);
    };
  }

  if (list && status && "WebSocket" in window) { connect(); }
})();
