// rtrace HTML report. Reads the embedded JSON, draws the timeline on a canvas (only what is visible) and
// rebuilds each connection's state from the embedded deltas. All trace text is written with textContent.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("rtrace-data").textContent);
  var LANE_H = 20, META_H = 8, BAND_GAP = 10, AXIS_H = 22, LABEL_W = 64, BAND_H = 2 * LANE_H + META_H + BAND_GAP;
  var MAX_BANDS = 16;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined && text !== null) e.textContent = String(text);
    return e;
  }
  function clear(e) { while (e.firstChild) e.removeChild(e.firstChild); }
  function lowerBound(arr, v) { var lo = 0, hi = arr.length; while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] < v) lo = m + 1; else hi = m; } return lo; }
  function upperBound(arr, v) { var lo = 0, hi = arr.length; while (lo < hi) { var m = (lo + hi) >> 1; if (arr[m] <= v) lo = m + 1; else hi = m; } return lo; }
  function fmtT(s) {
    var a = Math.abs(s), sign = s < 0 ? "-" : "";
    return sign + (a < 10 ? a.toFixed(4) + " s" : a < 600 ? a.toFixed(2) + " s" : Math.floor(a / 60) + " min " + (a % 60).toFixed(1) + " s");
  }
  // -- page data: inflated when it came deflated ------------------------------------------------------------
  function loadData(tr) {
    if (tr.data === null || typeof tr.data.deflate !== "string") return Promise.resolve(tr.data);
    if (typeof DecompressionStream === "undefined") {
      return Promise.reject(new Error("this browser cannot inflate the embedded data (no DecompressionStream)"));
    }
    var bin = atob(tr.data.deflate), bytes = new Uint8Array(bin.length);
    for (var i = 0; i < bin.length; i++) bytes[i] = bin.charCodeAt(i);
    var stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("deflate"));
    return new Response(stream).text().then(function (text) { tr.data = JSON.parse(text); return tr.data; });
  }

  // -- decoding ------------------------------------------------------------------------------------------
  function decode(tr) {
    var d = tr.data, n = d.t.length, i, j;
    var T = new Float64Array(n), acc = 0;
    for (i = 0; i < n; i++) { acc += d.t[i]; T[i] = acc * d.unit; }
    var K = Int32Array.from(d.k);
    var C = new Int32Array(n);
    for (j = 0; j < d.connRuns.length; j++) {
      var end = j + 1 < d.connRuns.length ? d.connRuns[j + 1][0] : n;
      C.fill(d.connRuns[j][1], d.connRuns[j][0], end);
    }
    var L = new Int32Array(n), line = 0;
    for (i = 0, j = 0; i < n; i++) {
      if (j < d.lineJumps.length && d.lineJumps[j][0] === i) { line = d.lineJumps[j][1]; j++; } else { line += 1; }
      L[i] = line;
    }
    var S = new Map();
    for (i = 0, j = 0; j < d.summaryAt.length; j++) { i += d.summaryAt[j]; S.set(i, d.summary[j]); }  // gaps
    var quiet = d.kinds.map(function (k) { return /\.delta$/.test(k[1]) || k[1] === "input_audio_buffer.append"; });
    var lane = d.kinds.map(function (k) { return k[0] === "client" ? 0 : k[0] === "server" ? 1 : 2; });
    var isError = d.kinds.map(function (k) { return k[1] === "error"; });
    var connSet = {};
    for (j = 0; j < d.connRuns.length; j++) connSet[d.connRuns[j][1]] = true;
    var conns = Object.keys(connSet).map(Number).sort(function (a, b) { return a - b; });
    var slotOf = new Map(), B = new Int32Array(n);
    conns.forEach(function (c, k) { slotOf.set(c, k); });
    for (j = 0; j < d.connRuns.length; j++) {
      B.fill(slotOf.get(d.connRuns[j][1]), d.connRuns[j][0], j + 1 < d.connRuns.length ? d.connRuns[j + 1][0] : n);
    }
    // What changed, per connection; the states themselves are rebuilt on demand (stateAt).
    var perConn = {}, changeEv = [];
    for (j = 0; j < d.states.length; j++) {
      var e = d.states[j], c = e[1];
      var pc = perConn[c] || (perConn[c] = { ev: [], ops: [], cur: null, marks: [] });
      pc.ev.push(e[0]);
      pc.ops.push(e);
      changeEv.push(e[0]);
    }
    var witnessLines = {};
    tr.findings.forEach(function (f, fi) { f.witness.forEach(function (w) { (witnessLines[w.line] = witnessLines[w.line] || []).push(fi); }); });
    return { n: n, T: T, K: K, C: C, B: B, L: L, S: S, quiet: quiet, lane: lane, isError: isError, kinds: d.kinds,
             conns: conns, perConn: perConn,
             changeEv: changeEv, witnessLines: witnessLines, data: d };
  }

  // -- one connection's state, replayed from the operations (rtrace/report/html.py: INSERT ... PENDING) ------
  // The server conversation is a linked map (id -> [item, previous id, next id]); pending changes an ordered map.
  function newState() { return { nodes: new Map(), head: -1, tail: -1, pending: new Map(), local: null }; }
  function cloneState(s) {
    var nodes = new Map();
    s.nodes.forEach(function (v, id) { nodes.set(id, [v[0], v[1], v[2]]); });
    return { nodes: nodes, head: s.head, tail: s.tail, pending: new Map(s.pending), local: s.local };
  }
  function stateSize(s) { return s.nodes.size + s.pending.size + (s.local ? s.local.length : 0); }
  function linkAfter(nodes, st, id, value, after) {
    var next = after < 0 ? st.head : nodes.get(after)[2];
    nodes.set(id, [value, after, next]);
    if (after < 0) st.head = id; else nodes.get(after)[2] = id;
    if (next < 0) st.tail = id; else nodes.get(next)[1] = id;
  }
  function unlink(nodes, st, id) {
    var nd = nodes.get(id);
    if (!nd) return;
    nodes.delete(id);
    if (nd[1] < 0) st.head = nd[2]; else nodes.get(nd[1])[2] = nd[2];
    if (nd[2] < 0) st.tail = nd[1]; else nodes.get(nd[2])[1] = nd[1];
  }
  function applyOps(s, ops, items) {  // ops: [event index, connection, operations...]
    var i = 2, n, m;
    while (i < ops.length) {
      switch (ops[i]) {
        case 0: linkAfter(s.nodes, s, items[ops[i + 1]][0], ops[i + 1], ops[i + 2]); i += 3; break;
        case 1: unlink(s.nodes, s, ops[i + 1]); i += 2; break;
        case 2: s.nodes.get(items[ops[i + 1]][0])[0] = ops[i + 1]; i += 2; break;
        case 3: s.pending.set(ops[i + 1], true); i += 2; break;
        case 4: s.pending.delete(ops[i + 1]); i += 2; break;
        case 5: n = ops[i + 1]; s.local = ops.slice(i + 2, i + 2 + n); i += 2 + n; break;
        case 6: s.nodes = new Map(); s.head = s.tail = -1; s.pending = new Map(); s.local = null; i += 1; break;
        case 7:
          n = ops[i + 1]; s.nodes = new Map(); s.head = s.tail = -1;
          for (m = 0; m < n; m++) linkAfter(s.nodes, s, items[ops[i + 2 + m]][0], ops[i + 2 + m], s.tail);
          i += 2 + n; break;
        case 8:
          n = ops[i + 1]; s.pending = new Map();
          for (m = 0; m < n; m++) s.pending.set(ops[i + 2 + m], true);
          i += 2 + n; break;
        default: throw new Error("unknown operation " + ops[i]);
      }
    }
  }

  // The state after the j-th change of a connection. A cursor moves forward over the operations; a copy of the
  // state is kept whenever at least max(64, its size) operations were replayed since the last copy, so going back
  // costs a copy and at most that many operations, and all copies together cost no more than the replay.
  var MARK_MIN = 64;
  function stateAfter(dec, pc, j) {
    var items = dec.data.items;
    if (!pc.cur || pc.cur.j > j) {
      var lo = 0, hi = pc.marks.length;
      while (lo < hi) { var mid = (lo + hi) >> 1; if (pc.marks[mid].j <= j) lo = mid + 1; else hi = mid; }
      pc.cur = lo ? { j: pc.marks[lo - 1].j, s: cloneState(pc.marks[lo - 1].s), since: 0 } : { j: -1, s: newState(), since: 0 };
    }
    var cur = pc.cur;
    while (cur.j < j) {
      cur.j += 1;
      applyOps(cur.s, pc.ops[cur.j], items);
      app.replayed += 1;
      cur.since += 1;
      var lastMark = pc.marks.length ? pc.marks[pc.marks.length - 1].j : -1;
      if (cur.j > lastMark && cur.since >= Math.max(MARK_MIN, stateSize(cur.s))) {
        pc.marks.push({ j: cur.j, s: cloneState(cur.s) });
        cur.since = 0;
      }
    }
    return cur.s;
  }

  function serverOrder(s) {
    var out = [], id = s.head;
    while (id >= 0) { out.push(id); id = s.nodes.get(id)[2]; }
    return out;
  }

  // The client view, as rtrace.core.state.client_view: the latest local snapshot, else the server conversation
  // with every pending create and delete applied in order (Connection.expected_ids); each id shown as the local
  // item, else the item as pending changes leave it (Connection.expected_item), else the server's.
  function clientView(s, d) {
    var ids = [], entries = [], k, id;
    if (s.local) {
      var byId = new Map();
      for (k = 0; k < s.local.length; k++) { id = d.items[s.local[k]][0]; ids.push(id); byId.set(id, s.local[k]); }
      for (k = 0; k < ids.length; k++) entries.push(d.items[byId.get(ids[k])]);
      return { ids: ids, entries: entries };
    }
    var nodes = new Map(), st = { head: -1, tail: -1 }, last = new Map();
    id = s.head;
    while (id >= 0) { linkAfter(nodes, st, id, 0, st.tail); id = s.nodes.get(id)[2]; }
    s.pending.forEach(function (_, p) {
      var e = d.pending[p], kind = e[2], item = e[3], prev = e[4];
      if (item < 0) return;
      if (kind === 2) {
        unlink(nodes, st, item);
        last.set(item, -1);
      } else if (kind === 1) {
        if (!nodes.has(item)) {
          linkAfter(nodes, st, item, 0, prev === -2 ? -1 : prev >= 0 && nodes.has(prev) ? prev : st.tail);
        }
        if (e[5] >= 0) last.set(item, e[5]);
      }
    });
    id = st.head;
    while (id >= 0) {
      ids.push(id);
      var own = last.get(id), server = s.nodes.get(id);
      entries.push(own !== undefined && own >= 0 ? d.items[own] : server ? d.items[server[0]] : [id, d.ids[id], ""]);
      id = nodes.get(id)[2];
    }
    return { ids: ids, entries: entries };
  }

  // rtrace.core.state.divergence: [only in the client view, only on the server, reordered], or null.
  function divergence(cIds, sIds) {
    var cset = new Set(cIds), sset = new Set(sIds);
    var commonC = cIds.filter(function (i) { return sset.has(i); }), commonS = sIds.filter(function (i) { return cset.has(i); });
    var reordered = [], same = commonC.length === commonS.length;
    for (var k = 0; same && k < commonC.length; k++) same = commonC[k] === commonS[k];
    if (!same) {
      var pos = new Map();
      commonS.forEach(function (i, at) { pos.set(i, at); });
      var kept = new Set(longestIncreasing(commonC.map(function (i) { return pos.get(i); })).map(function (at) { return commonC[at]; }));
      reordered = commonC.filter(function (i) { return !kept.has(i); });
    }
    var out = [cIds.filter(function (i) { return !sset.has(i); }), sIds.filter(function (i) { return !cset.has(i); }), reordered];
    return out[0].length || out[1].length || out[2].length ? out : null;
  }
  function longestIncreasing(seq) {  // indexes of one longest strictly increasing subsequence (patience sorting)
    var tails = [], tailsIdx = [], parent = new Int32Array(seq.length), k;
    for (k = 0; k < seq.length; k++) {
      var j = lowerBound(tails, seq[k]);
      tails[j] = seq[k];
      tailsIdx[j] = k;
      parent[k] = j > 0 ? tailsIdx[j - 1] : -1;
    }
    var out = [];
    k = tailsIdx.length ? tailsIdx[tailsIdx.length - 1] : -1;
    while (k !== -1) { out.push(k); k = parent[k]; }
    return out.reverse();
  }

  function stateAt(dec, conn, idx) {
    var pc = dec.perConn[conn];
    if (!pc) return null;
    var j = upperBound(pc.ev, idx) - 1;
    if (j < 0) return null;
    var s = stateAfter(dec, pc, j), d = dec.data, server = serverOrder(s), client = clientView(s, d);
    return { serverIds: server, server: server.map(function (id) { return d.items[s.nodes.get(id)[0]]; }),
             clientIds: client.ids, client: client.entries, pending: Array.from(s.pending.keys()),
             div: divergence(client.ids, server), atEvent: pc.ev[j] };
  }

  function indexOfLine(dec, line) {
    var i = lowerBound(dec.L, line);
    return i < dec.n ? i : dec.n - 1;
  }

  // -- page ----------------------------------------------------------------------------------------------
  var app = { trace: null, dec: null, sel: 0, view: [0, 1], activeFinding: -1, skipQuiet: true, drawn: 0, band0: 0,
              replayed: 0 };
  var root = el("div");
  document.body.appendChild(root);

  function buildHeader() {
    var header = el("header");
    header.appendChild(el("h1", null, "rtrace report"));
    if (DATA.traces.length > 1) {
      var sel = el("select");
      sel.id = "trace-select";
      DATA.traces.forEach(function (t, k) { var o = el("option", null, t.name); o.value = String(k); sel.appendChild(o); });
      sel.addEventListener("change", function () { showTrace(Number(sel.value)); });
      var lab = el("label", null, "trace:");
      lab.appendChild(sel);
      header.appendChild(lab);
    }
    var summary = el("div", "summary");
    summary.id = "summary";
    header.appendChild(summary);
    return header;
  }

  var header = buildHeader();
  var main = el("main");
  root.appendChild(header);
  root.appendChild(main);

  var showing = 0;
  function showTrace(k) {
    var tr = DATA.traces[k], token = ++showing;
    app.trace = tr; app.activeFinding = -1; app.dec = null; app.band0 = 0; canvas = null;
    clear(main);
    var h = tr.header || {};
    var client = h.client || h.recorder;
    var parts = [tr.path, tr.events + " events", tr.connections + " connection" + (tr.connections === 1 ? "" : "s"),
                 fmtT(tr.duration), tr.findings.length + " finding" + (tr.findings.length === 1 ? "" : "s")];
    if (client) parts.push(String(typeof client === "string" ? client : JSON.stringify(client)));
    if (h.versions) parts.push(JSON.stringify(h.versions));
    if (tr.problemCount) parts.push(tr.problemCount + " input problems");
    document.getElementById("summary").textContent = parts.join(" · ");
    if (tr.unreadable || !tr.data) {
      main.appendChild(el("p", "divnote", tr.unreadable ? "Trace not readable: " + tr.unreadable : tr.missing || "No data."));
      return Promise.resolve();
    }
    main.appendChild(el("p", "hint", "Reading the trace data…"));
    return loadData(tr).then(function () {
      if (token !== showing) return;
      clear(main);
      app.dec = decode(tr);
      main.appendChild(buildFindings(tr));
      main.appendChild(buildTimeline());
      main.appendChild(buildStep());
      main.appendChild(buildEvents());
      fit();
      select(0, false);
      app.shownAt = performance.now();
    }, function (err) {
      if (token !== showing) return;
      clear(main);
      main.appendChild(el("p", "divnote", "Cannot read the embedded trace data: " + (err && err.message || err)));
    });
  }

  // -- findings --------------------------------------------------------------------------------------------
  function buildFindings(tr) {
    var sec = el("section");
    sec.appendChild(el("h2", null, "Findings (" + tr.findings.length + ")"));
    var grid = el("div", "findings");
    grid.id = "findings";
    if (!tr.findings.length) grid.appendChild(el("p", null, "No findings."));
    tr.findings.forEach(function (f, fi) {
      var card = el("article", "finding " + f.severity);
      card.id = "finding-" + fi;
      card.setAttribute("data-rule", f.rule);
      var head = el("div");
      head.appendChild(el("span", "sev " + f.severity, f.severity));
      head.appendChild(el("strong", null, f.rule + " " + f.slug));
      head.appendChild(el("span", "num", "  conn " + f.conn + " · lines " + f.lines.join(", ")));
      card.appendChild(head);
      card.appendChild(el("div", "msg", f.message));
      card.appendChild(el("div", "expl", f.explanation));
      var ul = el("ul", "witness");
      var t0 = f.witness.length ? f.witness[0].t : 0;
      f.witness.forEach(function (w) {
        var li = el("li"), b = el("button", "dir-" + w.dir);
        b.type = "button";
        b.setAttribute("data-line", String(w.line));
        b.textContent = "line " + w.line + "  +" + ((w.t - t0) * 1000).toFixed(1) + " ms  " +
          (w.dir === "client" ? "C→ " : w.dir === "server" ? "←S " : "·  ") + w.summary;
        b.addEventListener("click", function () { focusFinding(fi); select(indexOfLine(app.dec, w.line), true); });
        li.appendChild(b);
        ul.appendChild(li);
      });
      card.appendChild(ul);
      var show = el("button", null, "show on timeline");
      show.type = "button";
      show.className = "show-finding";
      show.addEventListener("click", function () { focusFinding(fi); zoomToFinding(fi); });
      card.appendChild(show);
      card.appendChild(el("div", "fix", "Fix: " + f.fix));
      grid.appendChild(card);
    });
    sec.appendChild(grid);
    return sec;
  }

  function focusFinding(fi) {
    app.activeFinding = fi;
    var cards = document.querySelectorAll(".finding");
    for (var i = 0; i < cards.length; i++) cards[i].classList.toggle("active", i === fi);
  }

  function zoomToFinding(fi) {
    var f = app.trace.findings[fi], dec = app.dec;
    if (!f.witness.length) return;
    var a = dec.T[indexOfLine(dec, f.witness[0].line)], b = dec.T[indexOfLine(dec, f.witness[f.witness.length - 1].line)];
    var pad = Math.max((b - a) * 0.15, 0.005);
    setView(a - pad, b + pad);
    select(indexOfLine(dec, f.at_line || f.witness[0].line), false);
  }

  // -- timeline ----------------------------------------------------------------------------------------
  var canvas, ctx, info;
  function buildTimeline() {
    var sec = el("section");
    sec.appendChild(el("h2", null, "Timeline"));
    var bar = el("div", "toolbar");
    [["fit", fit], ["+", function () { zoomBy(0.5, null); }], ["−", function () { zoomBy(2, null); }]].forEach(function (b) {
      var btn = el("button", null, b[0]); btn.type = "button"; btn.addEventListener("click", b[1]); bar.appendChild(btn);
    });
    var lab = el("label"), cb = el("input");
    cb.type = "checkbox"; cb.checked = app.skipQuiet; cb.id = "skip-quiet";
    cb.addEventListener("change", function () { app.skipQuiet = cb.checked; });
    lab.appendChild(cb);
    lab.appendChild(document.createTextNode(" arrow keys skip deltas/appends"));
    bar.appendChild(lab);
    info = el("span", "hint");
    info.id = "view-info";
    bar.appendChild(info);
    bar.appendChild(el("span", "hint", "wheel: zoom · drag: pan · click: pick an event · ←/→: step · shift+←/→: next state change"));
    sec.appendChild(bar);
    canvas = el("canvas");
    canvas.id = "timeline";
    canvas.tabIndex = 0;
    var bands = Math.min(app.dec.conns.length, MAX_BANDS);
    canvas.style.height = (AXIS_H + bands * BAND_H + 4) + "px";
    sec.appendChild(canvas);
    ctx = canvas.getContext("2d");
    installTimelineEvents();
    return sec;
  }

  // One band per connection, at most MAX_BANDS at once: a window of them that follows the selection.
  function bandY(slot) { return AXIS_H + (slot - app.band0) * BAND_H; }
  function shown(slot) { return slot >= app.band0 && slot < app.band0 + MAX_BANDS; }
  function laneY(slot, lane) { return bandY(slot) + (lane === 0 ? 0 : lane === 1 ? LANE_H + META_H : LANE_H); }
  function laneH(lane) { return lane === 2 ? META_H : LANE_H; }
  function follow(i) {
    var slot = app.dec.B[i], count = app.dec.conns.length;
    if (shown(slot)) return;
    app.band0 = Math.max(0, Math.min(count - MAX_BANDS, slot - (MAX_BANDS >> 1)));
  }
  function fit() {
    var dec = app.dec, a = dec.n ? dec.T[0] : 0, b = dec.n ? dec.T[dec.n - 1] : 1;
    var pad = Math.max((b - a) * 0.02, 0.001);
    setView(a - pad, b + pad);
  }
  function setView(a, b) {
    var span = Math.max(b - a, 1e-4);
    app.view = [a, a + span];
    draw();
  }
  function zoomBy(factor, atT) {
    var v = app.view, c = atT === null ? (v[0] + v[1]) / 2 : atT;
    setView(c - (c - v[0]) * factor, c + (v[1] - c) * factor);
  }
  function xOf(t, w) { return LABEL_W + (t - app.view[0]) / (app.view[1] - app.view[0]) * (w - LABEL_W); }
  function tOf(x, w) { return app.view[0] + (x - LABEL_W) / (w - LABEL_W) * (app.view[1] - app.view[0]); }

  function draw() {
    if (!canvas) return;
    var t0 = performance.now();
    var dpr = window.devicePixelRatio || 1, w = canvas.clientWidth || 1000, h = canvas.clientHeight || 200;
    if (canvas.width !== Math.round(w * dpr) || canvas.height !== Math.round(h * dpr)) {
      canvas.width = Math.round(w * dpr); canvas.height = Math.round(h * dpr);
    }
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.clearRect(0, 0, w, h);
    var dec = app.dec, v = app.view;
    // axis
    ctx.fillStyle = "#6b6b70"; ctx.font = "11px system-ui, sans-serif"; ctx.strokeStyle = "#ececf0";
    var span = v[1] - v[0], stepT = Math.pow(10, Math.floor(Math.log10(span / 8)));
    if (span / stepT > 16) stepT *= 5; else if (span / stepT > 8) stepT *= 2;
    for (var tt = Math.ceil(v[0] / stepT) * stepT; tt <= v[1]; tt += stepT) {
      var x = xOf(tt, w);
      ctx.beginPath(); ctx.moveTo(x, AXIS_H - 4); ctx.lineTo(x, h); ctx.stroke();
      ctx.fillText(stepT < 0.01 ? (tt * 1000).toFixed(1) + " ms" : tt.toFixed(stepT < 1 ? 2 : 0) + " s", x + 2, 12);
    }
    // bands
    dec.conns.slice(app.band0, app.band0 + MAX_BANDS).forEach(function (c, k) {
      var y = bandY(app.band0 + k);
      ctx.fillStyle = "#f3f6fd"; ctx.fillRect(LABEL_W, y, w - LABEL_W, LANE_H);
      ctx.fillStyle = "#f1f8f3"; ctx.fillRect(LABEL_W, y + LANE_H + META_H, w - LABEL_W, LANE_H);
      ctx.fillStyle = "#1d1d1f"; ctx.fillText("conn " + c, 4, y + LANE_H + 4);
      ctx.fillStyle = "#2f6fdb"; ctx.fillText("client", 4, y + 12);
      ctx.fillStyle = "#1f9d55"; ctx.fillText("server", 4, y + LANE_H + META_H + 13);
    });
    // events: one mark per pixel column and lane
    var i0 = lowerBound(dec.T, v[0]), i1 = upperBound(dec.T, v[1]), drawn = 0;
    var lastX = new Float64Array(MAX_BANDS * 6).fill(-1), scale = (w - LABEL_W) / (v[1] - v[0]);
    for (var i = i0; i < i1; i++) {
      var slot = dec.B[i] - app.band0;
      if (slot < 0 || slot >= MAX_BANDS) continue;
      var kk = dec.K[i], lane = dec.lane[kk], q = dec.quiet[kk], px = Math.floor(LABEL_W + (dec.T[i] - v[0]) * scale);
      var key = slot * 6 + lane * 2 + (q ? 1 : 0);
      if (lastX[key] === px) continue;
      lastX[key] = px;
      var y0 = laneY(dec.B[i], lane), lh = laneH(lane);
      ctx.fillStyle = dec.isError[kk] ? "#d62d20" : q ? "rgba(120,120,130,0.35)" : lane === 0 ? "#2f6fdb" : lane === 1 ? "#1f9d55" : "#888";
      if (q) ctx.fillRect(px, y0 + lh * 0.6, 1, lh * 0.4); else ctx.fillRect(px, y0 + 2, 2, lh - 4);
      drawn++;
    }
    app.drawn = drawn;
    // findings
    app.trace.findings.forEach(function (f, fi) {
      var active = fi === app.activeFinding;
      f.witness.forEach(function (wt) {
        var idx = indexOfLine(dec, wt.line), x = xOf(dec.T[idx], w);
        if (x < LABEL_W || x > w || !shown(dec.B[idx])) return;
        var y = laneY(dec.B[idx], dec.lane[dec.K[idx]]);
        ctx.fillStyle = f.severity === "error" ? "#d62d20" : f.severity === "warning" ? "#c98a00" : "#2a8fb8";
        var r = active ? 6 : 4;
        ctx.beginPath(); ctx.moveTo(x, y - r + 2); ctx.lineTo(x + r, y + 2); ctx.lineTo(x, y + r + 2); ctx.lineTo(x - r, y + 2); ctx.fill();
      });
    });
    // selection
    if (dec.n) {
      var sx = xOf(dec.T[app.sel], w);
      ctx.strokeStyle = "#ff7a00"; ctx.lineWidth = 2;
      ctx.beginPath(); ctx.moveTo(sx, AXIS_H - 6); ctx.lineTo(sx, h); ctx.stroke(); ctx.lineWidth = 1;
    }
    app.drawMs = performance.now() - t0;
    var more = dec.conns.length > MAX_BANDS ? " · connections " + dec.conns[app.band0] + "–" +
      dec.conns[Math.min(dec.conns.length, app.band0 + MAX_BANDS) - 1] + " of " + dec.conns.length + " shown (they follow the selection)" : "";
    if (info) info.textContent = "view " + fmtT(v[0]) + " – " + fmtT(v[1]) + " · " + (i1 - i0) + " events in view" + more;
  }

  function pick(x, y) {
    var dec = app.dec, w = canvas.clientWidth;
    var conn = null, dir = null;
    dec.conns.slice(app.band0, app.band0 + MAX_BANDS).forEach(function (c, k) {
      var b = bandY(app.band0 + k);
      if (y >= b && y < b + 2 * LANE_H + META_H) { conn = c; dir = y < b + LANE_H ? "client" : y < b + LANE_H + META_H ? "meta" : "server"; }
    });
    var a = lowerBound(dec.T, tOf(x - 6, w)), b2 = upperBound(dec.T, tOf(x + 6, w)), best = -1, bestD = Infinity, bestQ = true;
    for (var i = a; i < b2; i++) {
      if (conn !== null && dec.C[i] !== conn) continue;
      var kd = dec.kinds[dec.K[i]][0];
      if (dir !== null && dir !== "meta" && kd !== dir) continue;
      var q = dec.quiet[dec.K[i]], dd = Math.abs(xOf(dec.T[i], w) - x);
      if ((bestQ && !q) || ((q === bestQ) && dd < bestD)) { best = i; bestD = dd; bestQ = q; }
    }
    if (best >= 0) select(best, false);
  }

  function installTimelineEvents() {
    var dragging = null;
    canvas.addEventListener("wheel", function (ev) {
      ev.preventDefault();
      var r = canvas.getBoundingClientRect();
      zoomBy(Math.pow(1.0015, ev.deltaY), tOf(ev.clientX - r.left, canvas.clientWidth));
    }, { passive: false });
    canvas.addEventListener("mousedown", function (ev) { dragging = { x: ev.clientX, v: app.view.slice(), moved: false }; });
    window.addEventListener("mousemove", function (ev) {
      if (!dragging) return;
      var dx = ev.clientX - dragging.x;
      if (Math.abs(dx) > 3) dragging.moved = true;
      if (dragging.moved) {
        var dt = dx / (canvas.clientWidth - LABEL_W) * (dragging.v[1] - dragging.v[0]);
        setView(dragging.v[0] - dt, dragging.v[1] - dt);
      }
    });
    window.addEventListener("mouseup", function (ev) {
      if (!dragging) return;
      var wasDrag = dragging.moved;
      dragging = null;
      if (!wasDrag && ev.target === canvas) {
        var r = canvas.getBoundingClientRect();
        pick(ev.clientX - r.left, ev.clientY - r.top);
        canvas.focus();
      }
    });
    window.addEventListener("resize", draw);
  }

  document.addEventListener("keydown", function (ev) {
    if (!app.dec || ev.target && (ev.target.tagName === "INPUT" || ev.target.tagName === "SELECT")) return;
    var dec = app.dec, i = app.sel;
    if (ev.key === "ArrowRight" || ev.key === "ArrowLeft") {
      var dirn = ev.key === "ArrowRight" ? 1 : -1;
      if (ev.shiftKey) {
        var ce = dec.changeEv, j = dirn > 0 ? upperBound(ce, i) : lowerBound(ce, i) - 1;
        if (j >= 0 && j < ce.length) i = ce[j];
      } else {
        do { i += dirn; } while (i > 0 && i < dec.n - 1 && app.skipQuiet && dec.quiet[dec.K[i]]);
      }
      ev.preventDefault();
    } else if (ev.key === "Home") { i = 0; ev.preventDefault(); }
    else if (ev.key === "End") { i = dec.n - 1; ev.preventDefault(); }
    else return;
    select(Math.max(0, Math.min(dec.n - 1, i)), true);
  });

  // -- step view --------------------------------------------------------------------------------------
  var stepEls = {};
  function buildStep() {
    var sec = el("section");
    sec.id = "step";
    sec.appendChild(el("h2", null, "State after the selected event"));
    var cur = el("div", "current");
    cur.id = "current";
    sec.appendChild(cur);
    var note = el("div", "divnote");
    note.id = "divergence";
    sec.appendChild(note);
    var grid = el("div", "step");
    var mk = function (id, title, tag) {
      var p = el("div", "panel"); p.appendChild(el("h3", null, title));
      var l = el(tag); l.id = id; p.appendChild(l); grid.appendChild(p); return l;
    };
    stepEls.server = mk("server-list", "Server conversation", "ol");
    stepEls.client = mk("client-list", "Client view", "ol");
    stepEls.pending = mk("pending-list", "Pending client changes", "ul");
    sec.appendChild(grid);
    stepEls.current = cur; stepEls.note = note;
    return sec;
  }

  function itemLi(entry, ids, only, reordered, side) {
    var id = ids[entry[0]], li = el("li");
    li.setAttribute("data-id", id);
    li.appendChild(el("span", null, entry[1]));
    if (entry[2]) li.appendChild(el("span", "text", entry[2]));
    if (only && only.has(entry[0])) { li.classList.add("diverged"); li.title = "only in the " + side + " view"; }
    else if (reordered && reordered.has(entry[0])) { li.classList.add("reordered"); li.title = "in another order on the other side"; }
    return li;
  }

  function renderStep() {
    var dec = app.dec, d = app.trace.data, i = app.sel, conn = dec.C[i], kind = dec.kinds[dec.K[i]];
    clear(stepEls.current);
    var head = el("div");
    head.appendChild(el("strong", null, "line " + dec.L[i]));
    head.appendChild(el("span", "num", "  t=" + fmtT(dec.T[i]) + "  conn " + conn + "  "));
    head.appendChild(el("span", "dir-" + kind[0], kind[0] + " " + kind[1]));
    var s = dec.S.get(i);
    if (s) head.appendChild(el("span", null, "  " + s));
    stepEls.current.appendChild(head);
    var raw = app.trace.raw[String(dec.L[i])];
    if (raw) stepEls.current.appendChild(el("pre", null, raw));
    var st = stateAt(dec, conn, i);
    [stepEls.server, stepEls.client, stepEls.pending].forEach(clear);
    stepEls.note.textContent = "";
    if (!st) { stepEls.server.appendChild(el("li", null, "(connection not open yet)")); return; }
    var div = st.div, onlyC = div && new Set(div[0]), onlyS = div && new Set(div[1]), re = div && new Set(div[2]);
    var fs = document.createDocumentFragment(), fc = document.createDocumentFragment();
    st.server.forEach(function (e) { fs.appendChild(itemLi(e, d.ids, onlyS, re, "server")); });
    st.client.forEach(function (e) { fc.appendChild(itemLi(e, d.ids, onlyC, re, "client")); });
    stepEls.server.appendChild(fs);
    stepEls.client.appendChild(fc);
    st.pending.forEach(function (k) { var p = d.pending[k]; stepEls.pending.appendChild(el("li", null, "line " + p[0] + ": " + p[1])); });
    if (!st.server.length) stepEls.server.appendChild(el("li", "text", "(empty)"));
    if (!st.pending.length) stepEls.pending.appendChild(el("li", "text", "(none)"));
    if (div) {
      stepEls.note.textContent = "Client view and server differ: " + div[0].length + " only in the client view, " +
        div[1].length + " only on the server, " + div[2].length + " in another order.";
    }
  }

  // -- event list (a window around the selection) --------------------------------------------------------
  var eventsBody;
  function buildEvents() {
    var sec = el("section");
    sec.appendChild(el("h2", null, "Events around the selection"));
    var table = el("table", "events");
    eventsBody = el("tbody");
    eventsBody.id = "events-body";
    table.appendChild(eventsBody);
    sec.appendChild(table);
    return sec;
  }
  function renderEvents() {
    var dec = app.dec, a = Math.max(0, app.sel - 12), b = Math.min(dec.n, app.sel + 13);
    clear(eventsBody);
    var t0 = dec.T[app.sel];
    for (var i = a; i < b; i++) {
      var kind = dec.kinds[dec.K[i]], tr = el("tr");
      if (i === app.sel) tr.className = "sel";
      if (dec.witnessLines[dec.L[i]]) tr.classList.add("wit");
      if (dec.quiet[dec.K[i]]) tr.classList.add("quiet");
      tr.setAttribute("data-index", String(i));
      tr.appendChild(el("td", "num", dec.L[i]));
      tr.appendChild(el("td", "num", ((dec.T[i] - t0) * 1000).toFixed(1) + " ms"));
      tr.appendChild(el("td", "num", "conn " + dec.C[i]));
      tr.appendChild(el("td", "dir-" + kind[0], kind[0] === "client" ? "C→" : kind[0] === "server" ? "←S" : "·"));
      tr.appendChild(el("td", null, dec.S.get(i) || kind[1]));
      (function (idx) { tr.addEventListener("click", function () { select(idx, false); }); })(i);
      eventsBody.appendChild(tr);
    }
  }

  function select(i, reveal) {
    var dec = app.dec;
    if (!dec || !dec.n) return;
    app.sel = i;
    follow(i);
    if (reveal) {
      var t = dec.T[i], v = app.view;
      if (t < v[0] || t > v[1]) { var span = v[1] - v[0]; setView(t - span / 2, t + span / 2); }
    }
    renderStep();
    renderEvents();
    draw();
  }

  // -- start, then the self-check (#selftest) --------------------------------------------------------------
  var hash = location.hash.slice(1);
  var params = {};
  hash.split("&").forEach(function (kv) { var p = kv.split("="); params[p[0]] = p.length > 1 ? decodeURIComponent(p[1]) : ""; });
  var first = Number(params.trace) >= 0 && Number(params.trace) < DATA.traces.length ? Number(params.trace) : 0;
  var picker = document.getElementById("trace-select");
  if (picker) picker.value = String(first);
  showTrace(first).then(function () {
    if (params.finding !== undefined && app.dec && app.trace.findings[Number(params.finding)]) {
      focusFinding(Number(params.finding)); zoomToFinding(Number(params.finding));
    }
    if (params.line && app.dec) select(indexOfLine(app.dec, Number(params.line)), true);
    if (app.shownAt) document.body.setAttribute("data-shown-ms", app.shownAt.toFixed(1));  // since navigation start
    if ("selftest" in params) selftest(params);
  });

  function texts(sel) { return Array.prototype.map.call(document.querySelectorAll(sel), function (e) { return e.textContent; }); }
  function attrs(sel, name) { return Array.prototype.map.call(document.querySelectorAll(sel), function (e) { return e.getAttribute(name); }); }

  function selftest(params) {
    var out = { ok: true, errors: [] };
    try {
      out.trace = app.trace.name;
      out.trace_options = texts("#trace-select option");
      var dec = app.dec, tr = app.trace;
      out.findings_data = tr.findings.length;
      out.findings_rendered = document.querySelectorAll("#findings .finding").length;
      out.rules_rendered = attrs("#findings .finding", "data-rule");
      out.witness_buttons = document.querySelectorAll("#findings .witness button").length;
      out.witness_lines = tr.findings.map(function (f) { return f.witness.map(function (w) { return w.line; }); });
      if (tr.findings.length) {
        var btns = document.querySelectorAll("#finding-0 .witness button"), last = btns[btns.length - 1];
        last.click();
        out.witness_click = { wanted: Number(last.getAttribute("data-line")), selected: dec.L[app.sel],
                              active: document.querySelector(".finding.active") ? document.querySelector(".finding.active").id : null,
                              current: document.getElementById("current").textContent };
      }
      out.steps = (params.lines ? params.lines.split(",") : []).map(function (ln) {
        select(indexOfLine(dec, Number(ln)), true);
        return { line: dec.L[app.sel], conn: dec.C[app.sel],
                 server: attrs("#server-list li[data-id]", "data-id"), client: attrs("#client-list li[data-id]", "data-id"),
                 pending: texts("#pending-list li"), diverged: attrs("#step li.diverged", "data-id"),
                 reordered: attrs("#step li.reordered", "data-id"), note: document.getElementById("divergence").textContent,
                 server_text: texts("#server-list li"), client_text: texts("#client-list li") };
      });
      select(0, true);
      var keys = [];
      for (var k = 0; k < 4; k++) {
        document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", bubbles: true }));
        keys.push(dec.L[app.sel]);
      }
      document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowRight", shiftKey: true, bubbles: true }));
      keys.push(dec.L[app.sel]);
      document.dispatchEvent(new KeyboardEvent("keydown", { key: "ArrowLeft", bubbles: true }));
      keys.push(dec.L[app.sel]);
      out.keys = keys;
      fit();
      out.full_view = { drawn: app.drawn, ms: app.drawMs, events: dec.n, info: document.getElementById("view-info").textContent,
                        height: canvas.clientHeight };
      var worst = 0, tz = performance.now();
      for (var z = 0; z < 30; z++) { zoomBy(0.7, dec.T[Math.floor(dec.n / 2)]); worst = Math.max(worst, app.drawMs); }
      for (z = 0; z < 30; z++) { zoomBy(1 / 0.7, null); worst = Math.max(worst, app.drawMs); }
      out.zoom = { frames: 60, worst_ms: worst, total_ms: performance.now() - tz, span: app.view[1] - app.view[0] };
      out.event_rows = document.querySelectorAll("#events-body tr").length;
      // Going back one event from the end replays from the nearest copy, not from the start.
      select(dec.n - 1, true);
      var before = app.replayed, pc = dec.perConn[dec.C[dec.n - 2]];
      select(dec.n - 2, true);
      var st = stateAt(dec, dec.C[dec.n - 2], dec.n - 2);
      out.back_step = { replayed: app.replayed - before, changes: pc ? pc.ev.length : 0, marks: pc ? pc.marks.length : 0,
                        size: st ? st.server.length + st.pending.length : 0 };
      out.states = tr.data.states.length;
      out.dom_nodes = document.getElementsByTagName("*").length;
    } catch (e) {
      out.ok = false;
      out.errors.push(String(e && e.stack || e));
    }
    var rest = "states" in params ? everyState(out) : Promise.resolve();
    rest.then(null, function (e) { out.ok = false; out.errors.push(String(e && e.stack || e)); }).then(function () {
      out.pwned = document.body.getAttribute("data-pwned");
      out.title = document.title;
      var pre = el("pre", null, JSON.stringify(out));
      pre.id = "selftest-result";
      document.body.appendChild(pre);
      document.body.setAttribute("data-selftest", out.ok ? "pass" : "fail");
    });
  }

  // #selftest&states[=N]: for every trace and every event (every N-th, and the last), the state the step view shows
  // when that event is selected (its connection's): tests/test_report_html.py compares each with the fold's.
  function everyState(out) {
    var every = Math.max(1, Number(params.states) || 1);
    out.every_state = [];
    var chain = Promise.resolve();
    DATA.traces.forEach(function (tr, k) {
      chain = chain.then(function () { return loadData(tr); }).then(function () {
        var rows = [];
        out.every_state[k] = rows;
        if (!tr.data) return;
        var dec = decode(tr), d = tr.data, name = function (i) { return d.ids[i]; };
        for (var i = 0; i < dec.n; i++) {
          if (i % every && i !== dec.n - 1) continue;
          var st = stateAt(dec, dec.C[i], i);
          if (!st) { rows.push([i, dec.L[i], dec.C[i], null]); continue; }
          rows.push([i, dec.L[i], dec.C[i], st.serverIds.map(name), st.clientIds.map(name),
                     st.pending.map(function (p) { return d.pending[p][0]; }),
                     st.div ? st.div.map(function (side) { return side.map(name); }) : null,
                     st.server.map(function (e) { return e[1] + "|" + e[2]; }), st.client.map(function (e) { return e[1] + "|" + e[2]; })]);
        }
      });
    });
    return chain;
  }
})();
