// rtrace HTML report. Reads the embedded JSON, draws the timeline on a canvas (only what is visible) and
// rebuilds each connection's state from the embedded deltas. All trace text is written with textContent.
"use strict";
(function () {
  var DATA = JSON.parse(document.getElementById("rtrace-data").textContent);
  var KEYFRAME = 64;
  var LANE_H = 20, META_H = 8, BAND_GAP = 10, AXIS_H = 22, LABEL_W = 64;

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
  function applyDelta(list, d) {
    if (d === 0) return list;
    return list.slice(0, d[0]).concat(d[2], list.slice(list.length - d[1]));
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
    for (j = 0; j < d.summaryAt.length; j++) S.set(d.summaryAt[j], d.summary[j]);
    var quiet = d.kinds.map(function (k) { return /\.delta$/.test(k[1]) || k[1] === "input_audio_buffer.append"; });
    var connSet = {};
    for (j = 0; j < d.connRuns.length; j++) connSet[d.connRuns[j][1]] = true;
    var conns = Object.keys(connSet).map(Number).sort(function (a, b) { return a - b; });
    // States per connection, with a full copy every KEYFRAME entries.
    var perConn = {}, changeEv = [];
    for (j = 0; j < d.states.length; j++) {
      var e = d.states[j], c = e[1];
      var pc = perConn[c] || (perConn[c] = { ev: [], entries: [], keys: [], cur: { s: [], c: [], p: [] } });
      pc.cur = { s: applyDelta(pc.cur.s, e[2]), c: applyDelta(pc.cur.c, e[3]), p: applyDelta(pc.cur.p, e[4]) };
      if (pc.entries.length % KEYFRAME === 0) pc.keys.push(pc.cur);
      pc.ev.push(e[0]);
      pc.entries.push(e);
      changeEv.push(e[0]);
    }
    var witnessLines = {};
    tr.findings.forEach(function (f, fi) { f.witness.forEach(function (w) { (witnessLines[w.line] = witnessLines[w.line] || []).push(fi); }); });
    return { n: n, T: T, K: K, C: C, L: L, S: S, quiet: quiet, kinds: d.kinds, conns: conns, perConn: perConn,
             changeEv: changeEv, witnessLines: witnessLines };
  }

  function stateAt(dec, conn, idx) {
    var pc = dec.perConn[conn];
    if (!pc) return null;
    var j = upperBound(pc.ev, idx) - 1;
    if (j < 0) return null;
    var k = Math.floor(j / KEYFRAME), st = pc.keys[k], s = st.s, c = st.c, p = st.p;
    for (var m = k * KEYFRAME + 1; m <= j; m++) {
      var e = pc.entries[m];
      s = applyDelta(s, e[2]); c = applyDelta(c, e[3]); p = applyDelta(p, e[4]);
    }
    return { server: s, client: c, pending: p, div: pc.entries[j][5], atEvent: pc.ev[j] };
  }

  function indexOfLine(dec, line) {
    var i = lowerBound(dec.L, line);
    return i < dec.n ? i : dec.n - 1;
  }

  // -- page ----------------------------------------------------------------------------------------------
  var app = { trace: null, dec: null, sel: 0, view: [0, 1], activeFinding: -1, skipQuiet: true, drawn: 0 };
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

  function showTrace(k) {
    var tr = DATA.traces[k];
    app.trace = tr; app.activeFinding = -1;
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
      return;
    }
    app.dec = decode(tr);
    main.appendChild(buildFindings(tr));
    main.appendChild(buildTimeline());
    main.appendChild(buildStep());
    main.appendChild(buildEvents());
    fit();
    select(0, false);
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
    var bands = app.dec.conns.length;
    canvas.style.height = (AXIS_H + bands * (2 * LANE_H + META_H + BAND_GAP) + 4) + "px";
    sec.appendChild(canvas);
    ctx = canvas.getContext("2d");
    installTimelineEvents();
    return sec;
  }

  function bandY(conn) { return AXIS_H + app.dec.conns.indexOf(conn) * (2 * LANE_H + META_H + BAND_GAP); }
  function laneY(conn, dir) {
    var y = bandY(conn);
    if (dir === "client") return y;
    if (dir === "server") return y + LANE_H + META_H;
    return y + LANE_H;
  }
  function laneH(dir) { return dir === "client" || dir === "server" ? LANE_H : META_H; }
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
    dec.conns.forEach(function (c) {
      var y = bandY(c);
      ctx.fillStyle = "#f3f6fd"; ctx.fillRect(LABEL_W, y, w - LABEL_W, LANE_H);
      ctx.fillStyle = "#f1f8f3"; ctx.fillRect(LABEL_W, y + LANE_H + META_H, w - LABEL_W, LANE_H);
      ctx.fillStyle = "#1d1d1f"; ctx.fillText("conn " + c, 4, y + LANE_H + 4);
      ctx.fillStyle = "#2f6fdb"; ctx.fillText("client", 4, y + 12);
      ctx.fillStyle = "#1f9d55"; ctx.fillText("server", 4, y + LANE_H + META_H + 13);
    });
    // events: one mark per pixel column and lane
    var i0 = lowerBound(dec.T, v[0]), i1 = upperBound(dec.T, v[1]), lastX = {}, drawn = 0;
    for (var i = i0; i < i1; i++) {
      var kind = dec.kinds[dec.K[i]], dir = kind[0], px = Math.floor(xOf(dec.T[i], w)), q = dec.quiet[dec.K[i]];
      var key = dec.C[i] + dir + (q ? "q" : "");
      if (lastX[key] === px) continue;
      lastX[key] = px;
      var y0 = laneY(dec.C[i], dir), lh = laneH(dir);
      ctx.fillStyle = kind[1] === "error" ? "#d62d20" : q ? "rgba(120,120,130,0.35)" : dir === "client" ? "#2f6fdb" : dir === "server" ? "#1f9d55" : "#888";
      if (q) ctx.fillRect(px, y0 + lh * 0.6, 1, lh * 0.4); else ctx.fillRect(px, y0 + 2, 2, lh - 4);
      drawn++;
    }
    app.drawn = drawn;
    // findings
    app.trace.findings.forEach(function (f, fi) {
      var active = fi === app.activeFinding;
      f.witness.forEach(function (wt) {
        var idx = indexOfLine(dec, wt.line), x = xOf(dec.T[idx], w);
        if (x < LABEL_W || x > w) return;
        var y = laneY(dec.C[idx], dec.kinds[dec.K[idx]][0]);
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
    if (info) info.textContent = "view " + fmtT(v[0]) + " – " + fmtT(v[1]) + " · " + (i1 - i0) + " events in view";
  }

  function pick(x, y) {
    var dec = app.dec, w = canvas.clientWidth;
    var conn = null, dir = null;
    dec.conns.forEach(function (c) {
      var b = bandY(c);
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

  function itemLi(entry, ids, div, side) {
    var id = ids[entry[0]], li = el("li");
    li.setAttribute("data-id", id);
    li.appendChild(el("span", null, entry[1]));
    if (entry[2]) li.appendChild(el("span", "text", entry[2]));
    if (div) {
      var only = side === "client" ? div[0] : div[1];
      if (only.indexOf(entry[0]) >= 0) { li.classList.add("diverged"); li.title = "only in the " + side + " view"; }
      else if (div[2].indexOf(entry[0]) >= 0) { li.classList.add("reordered"); li.title = "in another order on the other side"; }
    }
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
    var div = st.div || null;
    st.server.forEach(function (k) { stepEls.server.appendChild(itemLi(d.items[k], d.ids, div, "server")); });
    st.client.forEach(function (k) { stepEls.client.appendChild(itemLi(d.items[k], d.ids, div, "client")); });
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
  showTrace(first);
  if (params.finding !== undefined && app.trace.findings[Number(params.finding)]) {
    focusFinding(Number(params.finding)); zoomToFinding(Number(params.finding));
  }
  if (params.line && app.dec) select(indexOfLine(app.dec, Number(params.line)), true);
  if ("selftest" in params) selftest(params);

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
      out.full_view = { drawn: app.drawn, ms: app.drawMs, events: dec.n };
      var worst = 0, tz = performance.now();
      for (var z = 0; z < 30; z++) { zoomBy(0.7, dec.T[Math.floor(dec.n / 2)]); worst = Math.max(worst, app.drawMs); }
      for (z = 0; z < 30; z++) { zoomBy(1 / 0.7, null); worst = Math.max(worst, app.drawMs); }
      out.zoom = { frames: 60, worst_ms: worst, total_ms: performance.now() - tz, span: app.view[1] - app.view[0] };
      out.event_rows = document.querySelectorAll("#events-body tr").length;
      out.states = tr.data.states.length;
      out.dom_nodes = document.getElementsByTagName("*").length;
    } catch (e) {
      out.ok = false;
      out.errors.push(String(e && e.stack || e));
    }
    out.pwned = document.body.getAttribute("data-pwned");
    out.title = document.title;
    var pre = el("pre", null, JSON.stringify(out));
    pre.id = "selftest-result";
    document.body.appendChild(pre);
    document.body.setAttribute("data-selftest", out.ok ? "pass" : "fail");
  }
})();
