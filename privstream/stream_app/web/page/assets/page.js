/* The page for people: privstream's streams and their private releases, drawn.
 *
 * Reads the public JSON endpoints of the worker (/streams, /streams/{id}/releases,
 * /streams/{id}/releases/latest) every few seconds and redraws when a new release arrives.
 * Hypotheses are drawn as inline SVG (a domain line, the decision regions of a 2-D model, a
 * halfspace's weights on the named features with a 2-D slice, a one-vs-rest model's classes over
 * the plane of its two most influential features); the stream page shows the best
 * release (/streams/{id}/releases/best: what the SDK subscribes to by default) beside the latest;
 * the time series with uPlot (assets/uPlot.iife.min.js, MIT).
 *
 * Every release shown is verified first (assets/verify.js: its Ed25519 signature against the
 * deployment's /keys, in the browser) and marked "verified" or, naming the reason, as not signed
 * by this deployment; document.body's data-best-verified / data-latest-verified say which.
 *
 * Lifetime accounting: the figures shown are the stream's lifetime budget per example (or per
 * user), what the release plan commits each example to (the sum of the levels' ε) and the largest
 * lifetime ε an example has spent so far (/streams/{id}/releases "lifetime"). A plan that commits
 * the whole budget is not an exhausted stream: examples of later windows start from 0. Releases
 * carry their `level` in the release tree. Releases made before the tree (no level, a draining
 * `epsilon_budget_remaining`) are drawn as windows, level 0.
 */
(function () {
  "use strict";

  var POLL_MS = 2000;
  var SVG = "http://www.w3.org/2000/svg";

  // --- small helpers ----------------------------------------------------------------------
  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else if (k === "className") node.className = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    }
    return node;
  }

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (k === "text") node.textContent = attrs[k];
      else node.setAttribute(k, attrs[k]);
    });
    return node;
  }

  function getJSON(url) {
    // null for 404 (no such release yet); an error for anything else.
    return fetch(url, { cache: "no-store" }).then(function (r) {
      if (r.status === 404) return null;
      if (!r.ok) throw new Error(url + ": HTTP " + r.status);
      return r.json();
    });
  }

  // The latest hypothesis release, verified ({release, problem, keyId}: verify.js), asked for
  // only once the history has one (a 404 would be reported by the browser as an error).
  function latestOf(base, history) {
    var any = history && history.releases.some(function (r) { return r.product === "hypotheses"; });
    return any ? PrivstreamVerify.fetchRelease(base + "/releases/latest") : Promise.resolve(null);
  }

  // What the verification of a shown release says, for a person: "verified", or why not.
  function verification(checked) {
    if (!checked) return null;
    if (checked.problem === null) {
      return { state: "verified", text: "verified",
               title: "signed by key " + checked.keyId + " of this deployment's /keys (Ed25519, checked here)" };
    }
    var unchecked = {
      unverifiable: "this browser offers no Ed25519 here: open the page over HTTPS (or on this machine) " +
        "in a browser that implements it",
      keys_unavailable: "the deployment's keys (/keys) could not be read",
      invalid_keys: "the deployment's key statement (/keys) is malformed",
    };
    if (Object.prototype.hasOwnProperty.call(unchecked, checked.problem)) {
      return { state: checked.problem, text: "not verified", title: unchecked[checked.problem] };
    }
    if (checked.problem === "foreign_deployment") {
      return { state: checked.problem, text: "another deployment's release (foreign_deployment)",
               title: "signed by key " + checked.keyId + ", but its ledger id is not the one this " +
                 "deployment's /keys states: a deployment sharing the key published it" };
    }
    return { state: checked.problem, text: "not signed by this deployment (" + checked.problem + ")",
             title: "the release's signature does not verify against /keys: it may be forged" };
  }

  function verificationBadge(checked) {
    var v = verification(checked);
    if (!v) return null;
    var kind = v.state === "verified" ? "verified" : v.text === "not verified" ? "unchecked" : "forged";
    return el("span", { className: "badge verification " + kind,
                        "data-verified": v.state, title: v.title, text: v.text });
  }

  function fmt(x) {
    if (x === null || x === undefined) return "–";
    if (typeof x !== "number") return String(x);
    if (Number.isInteger(x)) return x.toLocaleString("en");
    return Number(x.toPrecision(4)).toLocaleString("en", { maximumFractionDigits: 6 });
  }

  function ago(seconds) {
    var s = Math.max(0, Date.now() / 1000 - seconds);
    if (s < 60) return Math.round(s) + " s ago";
    if (s < 3600) return Math.round(s / 60) + " min ago";
    if (s < 86400) return Math.round(s / 3600) + " h ago";
    return Math.round(s / 86400) + " days ago";
  }

  function stamp() {
    var node = document.getElementById("updated");
    if (node) node.textContent = "Last update " + new Date().toLocaleTimeString() + ".";
  }

  // The lifetime figures to show (the "lifetime" object of /streams/{id}/releases).
  function budgetFigures(lifetime) {
    if (!lifetime) return null;
    var total = lifetime.lifetime_epsilon_budget, used = lifetime.lifetime_epsilon_spent;
    var committed = lifetime.lifetime_epsilon_committed;
    var unit = lifetime.privacy_unit === "user" ? "user" : "example";
    return { total: total, used: used, committed: committed,
             share: total > 0 ? Math.min(1, committed / total) : 0,
             label: "lifetime ε per " + unit, exhausted: !!lifetime.exhausted,
             releases: (lifetime.releases || 0) + (lifetime.sanitized_releases || 0),
             perLevel: lifetime.releases_per_level || {} };
  }

  // "1 of 1 lifetime ε per example committed by the release plan; ..." (not "used up": the plan
  // is what each example will spend over its life, and examples of later windows start from 0)
  function budgetText(budget) {
    return fmt(budget.committed) + " of " + fmt(budget.total) + " " + budget.label +
      " committed by the release plan; the most any example has spent so far: " + fmt(budget.used) +
      (budget.exhausted ? ". The ledger has refused releases." : ".");
  }

  // "12 at level 0, 6 at level 1, ..." (releases per level of the release tree)
  function levelsText(perLevel) {
    var levels = Object.keys(perLevel).sort(function (a, b) { return a - b; });
    return levels.map(function (l) { return fmt(perLevel[l]) + " at level " + l; }).join(", ");
  }

  // --- hypotheses -------------------------------------------------------------------------
  function decodeBits(b64, n) {
    var raw = atob(b64), bits = new Uint8Array(n);
    for (var i = 0; i < n; i++) bits[i] = (raw.charCodeAt(i >> 3) >> (i & 7)) & 1;
    return bits;
  }

  // A 1-D hypothesis as runs: its value at 0 and the points where it changes.
  function runsOf(h) {
    if (h.kind === "runs") return { domain: h.domain, first: h.first, changes: h.changes };
    if (h.kind === "bits") {
      var bits = decodeBits(h.bits, h.domain), changes = [];
      for (var i = 1; i < bits.length; i++) if (bits[i] !== bits[i - 1]) changes.push(i);
      return { domain: h.domain, first: bits[0], changes: changes };
    }
    return null;
  }

  // The intervals [a, b) on which a runs hypothesis predicts 1.
  function ones(runs) {
    var out = [], value = runs.first, start = 0;
    runs.changes.concat([runs.domain]).forEach(function (c) {
      if (value === 1) out.push([start, c]);
      start = c;
      value = 1 - value;
    });
    return out;
  }

  function describeRuns(runs) {
    var parts = ones(runs), N = runs.domain;
    if (parts.length === 0) return "Predicts 0 everywhere on 0 … " + fmt(N - 1) + ".";
    if (parts.length === 1) {
      var a = parts[0][0], b = parts[0][1];
      if (a === 0 && b === N) return "Predicts 1 everywhere on 0 … " + fmt(N - 1) + ".";
      if (b === N) return "A threshold: predicts 1 for x ≥ " + fmt(a) + ", 0 below.";
      if (a === 0) return "Predicts 1 for x < " + fmt(b) + ", 0 from there on.";
      if (b === a + 1) return "A point: predicts 1 only at x = " + fmt(a) + ".";
      return "An interval: predicts 1 for " + fmt(a) + " ≤ x < " + fmt(b) + ", 0 elsewhere.";
    }
    var points = parts.every(function (p) { return p[1] === p[0] + 1; });
    if (points) return "Points: predicts 1 at " + parts.length + " points of the domain.";
    return "Predicts 1 on " + parts.length + " intervals of the domain 0 … " + fmt(N - 1) + ".";
  }

  function drawRuns(runs) {
    var W = 1000, H = 96, left = 30, right = 970, y = 46, N = runs.domain;
    var pos = function (x) { return left + (right - left) * (x / N); };
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "hypothesis", role: "img",
                            "aria-label": describeRuns(runs) });
    root.appendChild(svg("rect", { x: left, y: y - 12, width: right - left, height: 24, rx: 4,
                                   fill: "var(--zero)" }));
    var labels = [0, N];
    ones(runs).forEach(function (p) {
      var x0 = pos(p[0]), x1 = pos(p[1]);
      if (x1 - x0 < 3) {  // a point (or a sliver): a marker that stays visible
        root.appendChild(svg("circle", { cx: (x0 + x1) / 2, cy: y, r: 6, fill: "var(--one)" }));
      } else {
        root.appendChild(svg("rect", { x: x0, y: y - 12, width: x1 - x0, height: 24, rx: 4,
                                       fill: "var(--one)" }));
      }
      labels.push(p[0], p[1]);
    });
    // Tick labels: the ends of the domain and up to 8 change points, not overlapping.
    var placed = [];
    labels.filter(function (v, i, all) { return all.indexOf(v) === i; }).sort(function (a, b) {
      return a - b;
    }).forEach(function (v) {
      var x = pos(v);
      if (placed.length > 9 || placed.some(function (p) { return Math.abs(p - x) < 70; })) return;
      placed.push(x);
      root.appendChild(svg("line", { x1: x, x2: x, y1: y + 14, y2: y + 20, stroke: "var(--muted)" }));
      root.appendChild(svg("text", { x: x, y: y + 36, "text-anchor": "middle",
                                     text: fmt(v === N ? N - 1 : v) }));
    });
    root.appendChild(svg("text", { x: left, y: 18, text: "label 1" , fill: "var(--one)"}));
    return root;
  }

  // A 2-D model: its decision regions over the stream's public feature bounds.
  function drawPlane(h, bounds) {
    var W = 520, H = 420, L = 60, T = 20, S = 340;  // plot square of side S at (L, T)
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "hypothesis", role: "img" });
    var lo0 = bounds[0][0], hi0 = bounds[0][1], lo1 = bounds[1][0], hi1 = bounds[1][1];
    var X = function (v) { return L + S * (v - lo0) / (hi0 - lo0); };
    var Y = function (v) { return T + S - S * (v - lo1) / (hi1 - lo1); };
    root.appendChild(svg("rect", { x: L, y: T, width: S, height: S, fill: "var(--zero)" }));
    if (h.kind === "grid-labels") {
      var k = h.cells_per_axis, labels = decodeBits(h.labels, k * k), side = S / k;
      for (var c0 = 0; c0 < k; c0++) {
        for (var c1 = 0; c1 < k; c1++) {
          if (labels[c0 * k + c1] === 1) {
            root.appendChild(svg("rect", { x: L + c0 * side, y: T + S - (c1 + 1) * side,
                                           width: side + 0.5, height: side + 0.5, fill: "var(--one)" }));
          }
        }
      }
    } else if (h.kind === "stump") {
      if (h.constant === 1) {
        root.appendChild(svg("rect", { x: L, y: T, width: S, height: S, fill: "var(--one)" }));
      } else if (h.constant === undefined || h.constant === null) {
        var t = h.threshold, up = h.sign === 1;
        if (h.feature === 0) {
          var xt = Math.min(L + S, Math.max(L, X(t)));
          root.appendChild(svg("rect", up ? { x: xt, y: T, width: L + S - xt, height: S, fill: "var(--one)" }
                                          : { x: L, y: T, width: xt - L, height: S, fill: "var(--one)" }));
          root.appendChild(svg("line", { x1: xt, x2: xt, y1: T, y2: T + S, stroke: "var(--ink)",
                                         "stroke-width": 2 }));
        } else {
          var yt = Math.min(T + S, Math.max(T, Y(t)));
          root.appendChild(svg("rect", up ? { x: L, y: T, width: S, height: yt - T, fill: "var(--one)" }
                                          : { x: L, y: yt, width: S, height: T + S - yt, fill: "var(--one)" }));
          root.appendChild(svg("line", { x1: L, x2: L + S, y1: yt, y2: yt, stroke: "var(--ink)",
                                         "stroke-width": 2 }));
        }
      }
    }
    root.appendChild(svg("rect", { x: L, y: T, width: S, height: S, fill: "none", stroke: "var(--muted)" }));
    root.appendChild(svg("text", { x: L, y: T + S + 20, "text-anchor": "middle", text: fmt(lo0) }));
    root.appendChild(svg("text", { x: L + S, y: T + S + 20, "text-anchor": "middle", text: fmt(hi0) }));
    root.appendChild(svg("text", { x: L + S / 2, y: T + S + 38, "text-anchor": "middle", text: "feature 0" }));
    root.appendChild(svg("text", { x: L - 8, y: T + S, "text-anchor": "end", text: fmt(lo1) }));
    root.appendChild(svg("text", { x: L - 8, y: T + 10, "text-anchor": "end", text: fmt(hi1) }));
    root.appendChild(svg("text", { x: L + S + 16, y: T + 14, text: "label 1", fill: "var(--one)" }));
    root.appendChild(svg("text", { x: L + S + 16, y: T + 34, text: "label 0" }));
    return root;
  }

  // --- halfspaces in any dimension -----------------------------------------------------------
  // A released halfspace predicts 1 when sum_t w_t u_t >= b, u_t = (x_t - lo_t)/(hi_t - lo_t) with x
  // clipped to the public bounds. On the raw features: sum_t a_t x_t >= c, a_t = w_t/(hi_t - lo_t),
  // c = b + sum_t w_t lo_t/(hi_t - lo_t). w_t itself is how far the score moves across the
  // feature's whole range: its influence, comparable between features of any unit.
  function featureNames(stream, d) {
    var names = stream && stream.feature_names;
    if (names && names.length === d) return names;
    var out = [];
    for (var t = 0; t < d; t++) out.push("x" + (t + 1));
    return out;
  }

  function halfspaceRule(h, names) {
    var terms = [], c = h.offset;
    h.normal.forEach(function (w, t) {
      var lo = h.bounds[t][0], span = h.bounds[t][1] - lo;
      terms.push({ name: names[t], weight: w / span, influence: w, index: t });
      c += w * lo / span;
    });
    var ranked = terms.slice().sort(function (p, q) { return Math.abs(q.influence) - Math.abs(p.influence); });
    return { terms: terms, ranked: ranked, threshold: c };
  }

  function describeHalfspace(h, names) {
    var rule = halfspaceRule(h, names), d = h.normal.length;
    var active = rule.ranked.filter(function (t) { return t.influence !== 0; });
    if (!active.length) return "Predicts " + (h.offset <= 0 ? 1 : 0) + " everywhere (a constant halfspace).";
    var shown = active.slice(0, 4).map(function (t, i) {
      var sign = t.weight < 0 ? (i ? " − " : "−") : (i ? " + " : "");
      return sign + fmt(Math.abs(t.weight)) + "·" + t.name;
    }).join("");
    var more = active.length > 4 ? " + … (" + (active.length - 4) + " more)" : "";
    return "A halfspace on " + d + " feature" + (d === 1 ? "" : "s") + ": predicts 1 when " + shown + more +
      " ≥ " + fmt(rule.threshold) + " (features clipped to their bounds). Most influential: " +
      active.slice(0, 3).map(function (t) { return t.name; }).join(", ") + ".";
  }

  // The part of the rectangle [x0, x1] x [y0, y1] where f(p, q) = A p + B q - C >= 0 (a convex
  // polygon: the rectangle clipped by one half-plane), as data-coordinate points.
  function clipHalfPlane(x0, x1, y0, y1, A, B, C) {
    var corners = [[x0, y0], [x1, y0], [x1, y1], [x0, y1]], out = [];
    var f = function (p) { return A * p[0] + B * p[1] - C; };
    for (var i = 0; i < 4; i++) {
      var p = corners[i], q = corners[(i + 1) % 4], fp = f(p), fq = f(q);
      if (fp >= 0) out.push(p);
      if ((fp >= 0) !== (fq >= 0)) {
        var s = fp / (fp - fq);
        out.push([p[0] + s * (q[0] - p[0]), p[1] + s * (q[1] - p[1])]);
      }
    }
    return out;
  }

  // The weights as bars (influence: the score's change across each feature's range), and the
  // decision regions on the two most influential features, the others fixed at mid-range (all of
  // the model when d = 2).
  function drawHalfspace(h, names) {
    var rule = halfspaceRule(h, names), d = h.normal.length;
    var rows = rule.ranked.slice(0, 12), barTop = 34, rowH = 22;
    var W = 1000, H = Math.max(barTop + rows.length * rowH + 40, 440);
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "hypothesis", role: "img",
                            "aria-label": describeHalfspace(h, names) });
    root.appendChild(svg("text", { x: 0, y: 16, text: "influence of each feature (weight × range)" +
      (d > rows.length ? ", the " + rows.length + " largest of " + d : "") }));
    var maxAbs = Math.max.apply(null, rows.map(function (t) { return Math.abs(t.influence); }).concat([1e-12]));
    var mid = 300, half = 150;
    root.appendChild(svg("line", { x1: mid, x2: mid, y1: barTop - 4, y2: barTop + rows.length * rowH,
                                   stroke: "var(--muted)" }));
    rows.forEach(function (t, i) {
      var y = barTop + i * rowH, w = half * Math.abs(t.influence) / maxAbs;
      root.appendChild(svg("text", { x: mid - half - 10, y: y + 14, "text-anchor": "end", text: t.name,
                                     class: "feature" }));
      root.appendChild(svg("rect", { x: t.influence < 0 ? mid - w : mid, y: y + 3, width: Math.max(w, 1),
                                     height: rowH - 6, fill: t.influence < 0 ? "var(--warn)" : "var(--one)" }));
      root.appendChild(svg("text", { x: mid + half + 10, y: y + 14, text: fmt(t.weight) + " per unit" }));
    });
    // The plane: the two most influential features (or the only two).
    if (d >= 2) {
      var p = rule.ranked[0].index, q = rule.ranked[1].index, L = 645, T = 30, S = 340;
      var lp = h.bounds[p][0], hp = h.bounds[p][1], lq = h.bounds[q][0], hq = h.bounds[q][1];
      // sum_t w_t u_t >= b with u_t = 1/2 for the other features: a line in (u_p, u_q)
      var rest = 0;
      h.normal.forEach(function (w, t) { if (t !== p && t !== q) rest += w / 2; });
      var poly = clipHalfPlane(0, 1, 0, 1, h.normal[p], h.normal[q], h.offset - rest);
      var X = function (u) { return L + S * u; }, Y = function (u) { return T + S - S * u; };
      root.appendChild(svg("rect", { x: L, y: T, width: S, height: S, fill: "var(--zero)" }));
      if (poly.length >= 3) {
        root.appendChild(svg("polygon", { points: poly.map(function (pt) { return X(pt[0]) + "," + Y(pt[1]); })
          .join(" "), fill: "var(--one)", class: "region" }));
      }
      root.appendChild(svg("rect", { x: L, y: T, width: S, height: S, fill: "none", stroke: "var(--muted)" }));
      root.appendChild(svg("text", { x: L, y: T + S + 20, "text-anchor": "middle", text: fmt(lp) }));
      root.appendChild(svg("text", { x: L + S, y: T + S + 20, "text-anchor": "middle", text: fmt(hp) }));
      root.appendChild(svg("text", { x: L + S / 2, y: T + S + 38, "text-anchor": "middle", text: names[p] }));
      root.appendChild(svg("text", { x: L - 8, y: T + S, "text-anchor": "end", text: fmt(lq) }));
      root.appendChild(svg("text", { x: L - 8, y: T + 10, "text-anchor": "end", text: fmt(hq) }));
      root.appendChild(svg("text", { x: L - 8, y: T + S / 2, "text-anchor": "end", text: names[q] }));
      root.appendChild(svg("text", { x: L + S / 2, y: T + S + 58, "text-anchor": "middle",
        text: d > 2 ? "label 1 in blue; the other features at mid-range" : "label 1 in blue" }));
    }
    return root;
  }

  // <w, u> - b of a halfspace on one row of raw features (clipped to the bounds).
  function halfspaceScore(h, x) {
    var score = 0;
    h.normal.forEach(function (w, t) {
      var b = h.bounds[t];
      score += w * (Math.min(b[1], Math.max(b[0], x[t])) - b[0]) / (b[1] - b[0]);
    });
    return score - h.offset;
  }

  // The label a vector model gives one row of raw features (null for kinds the page cannot read):
  // a one-vs-rest model's is the class of the highest score (a tie to the smallest class).
  function predictVector(h, x) {
    if (h.kind === "halfspace") return halfspaceScore(h, x) >= 0 ? 1 : 0;
    if (h.kind === "one-vs-rest") {
      var best = 0, top = -Infinity;
      h.halfspaces.forEach(function (part, k) {
        var score = halfspaceScore(part, x);
        if (score > top) { top = score; best = k; }
      });
      return best;
    }
    return null;
  }

  // --- one-vs-rest: K classes --------------------------------------------------------------
  // A class's colour: K hues around the wheel, the same for a class on every figure.
  function classColour(k, K) { return "hsl(" + Math.round(360 * k / K) + ", 62%, 58%)"; }

  function describeOneVsRest(h, names) {
    var K = h.halfspaces.length, d = h.halfspaces[0].normal.length;
    var leads = h.halfspaces.map(function (part, k) {
      var top = halfspaceRule(part, names).ranked.filter(function (t) { return t.influence !== 0; })[0];
      return "class " + k + (top ? " (" + (top.influence < 0 ? "low " : "high ") + top.name + ")" : "");
    });
    return K + " classes on " + d + " feature" + (d === 1 ? "" : "s") + ", one halfspace per class against " +
      "the rest: predicts the class whose score is highest (features clipped to their bounds). " +
      "Each class's most influential feature: " + leads.slice(0, 6).join(", ") +
      (K > 6 ? ", … (" + (K - 6) + " more)" : "") + ".";
  }

  // The predicted class over the plane of the two most influential features (summed over the
  // classes), the others at mid-range: a square of G x G cells, one colour per class, and a legend.
  function drawOneVsRest(h, names) {
    var K = h.halfspaces.length, d = h.halfspaces[0].normal.length, bounds = h.halfspaces[0].bounds;
    var W = 1000, L = 60, T = 20, S = 380, G = 48, side = S / G;
    var H = Math.max(T + S + 70, T + 22 * K + 20);
    var root = svg("svg", { viewBox: "0 0 " + W + " " + H, class: "hypothesis", role: "img",
                            "aria-label": describeOneVsRest(h, names) });
    var total = [];
    for (var t = 0; t < d; t++) {
      total.push(h.halfspaces.reduce(function (acc, part) { return acc + Math.abs(part.normal[t]); }, 0));
    }
    var order = total.map(function (v, i) { return i; }).sort(function (a, b) { return total[b] - total[a]; });
    var p = order[0], q = d >= 2 ? order[1] : null;
    var mid = bounds.map(function (b) { return (b[0] + b[1]) / 2; });
    for (var i = 0; i < G; i++) {
      for (var j = 0; j < G; j++) {
        var x = mid.slice();
        x[p] = bounds[p][0] + (i + 0.5) / G * (bounds[p][1] - bounds[p][0]);
        if (q !== null) x[q] = bounds[q][0] + (j + 0.5) / G * (bounds[q][1] - bounds[q][0]);
        var k = predictVector(h, x);
        root.appendChild(svg("rect", { x: L + i * side, y: T + S - (j + 1) * side, width: side + 0.5,
                                       height: side + 0.5, fill: classColour(k, K), "data-class": k }));
      }
    }
    root.appendChild(svg("rect", { x: L, y: T, width: S, height: S, fill: "none", stroke: "var(--muted)" }));
    root.appendChild(svg("text", { x: L, y: T + S + 20, "text-anchor": "middle", text: fmt(bounds[p][0]) }));
    root.appendChild(svg("text", { x: L + S, y: T + S + 20, "text-anchor": "middle", text: fmt(bounds[p][1]) }));
    root.appendChild(svg("text", { x: L + S / 2, y: T + S + 38, "text-anchor": "middle", text: names[p] }));
    if (q !== null) {
      root.appendChild(svg("text", { x: L - 8, y: T + S, "text-anchor": "end", text: fmt(bounds[q][0]) }));
      root.appendChild(svg("text", { x: L - 8, y: T + 10, "text-anchor": "end", text: fmt(bounds[q][1]) }));
      root.appendChild(svg("text", { x: L - 8, y: T + S / 2, "text-anchor": "end", text: names[q] }));
    }
    root.appendChild(svg("text", { x: L + S / 2, y: T + S + 58, "text-anchor": "middle",
      text: d > 2 ? "the predicted class; the other features at mid-range" : "the predicted class" }));
    h.halfspaces.forEach(function (part, k) {
      var y = T + 22 * k;
      root.appendChild(svg("rect", { x: L + S + 40, y: y, width: 16, height: 16, fill: classColour(k, K) }));
      root.appendChild(svg("text", { x: L + S + 64, y: y + 13, text: "class " + k }));
    });
    return root;
  }

  // Accuracy of a release on CSV text with a header naming the stream's features and y (any column
  // order; -1/+1, 0/1 or true/false labels); computed here, nothing is sent anywhere.
  function accuracyOn(release, text, names) {
    var lines = text.split(/\r?\n/).filter(function (l) { return l.trim() !== ""; });
    if (!lines.length) return { error: "the file is empty" };
    var header = lines[0].split(",").map(function (c) { return c.trim(); });
    var iy = header.map(function (c) { return c.toLowerCase(); }).indexOf("y");
    if (iy < 0) return { error: "the header needs a label column y" };
    var idx = names.map(function (n) { return header.indexOf(n); });
    var missing = names.filter(function (n, t) { return idx[t] < 0; });
    if (missing.length) return { error: "the header lacks the features " + missing.join(", ") };
    var labels = { "1": 1, "+1": 1, "true": 1, "0": 0, "-1": 0, "false": 0 };
    var n = 0, correct = 0, h = release.hypothesis;
    if (h.kind === "one-vs-rest") {  // labels are the classes 0..K-1 (and true/false)
      labels = { "true": 1, "false": 0 };
      h.halfspaces.forEach(function (part, k) { labels[String(k)] = k; });
    }
    for (var i = 1; i < lines.length; i++) {
      var cells = lines[i].split(",");
      var y = labels[(cells[iy] || "").trim().toLowerCase()];
      if (y === undefined) continue;  // an unlabelled or unreadable row is not counted
      var x = idx.map(function (j) { return Number(cells[j]); });
      if (x.some(function (v) { return !isFinite(v); })) continue;
      var said = predictVector(h, x);
      if (said === null) return { error: "this page cannot evaluate a model of kind " + h.kind +
        "; use the SDK's Release.error_on" };
      n += 1;
      if (said === y) correct += 1;
    }
    return { n: n, correct: correct, accuracy: n ? correct / n : null };
  }

  function describeVector(h) {
    if (h.kind === "stump") {
      if (h.constant !== undefined && h.constant !== null) return "Predicts " + h.constant + " everywhere.";
      return "A decision stump: predicts 1 where feature " + h.feature + (h.sign === 1 ? " ≥ " : " < ") +
        fmt(h.threshold) + ".";
    }
    if (h.kind === "grid-labels") {
      return "A grid of " + fmt(h.cells_per_axis) + " cells per feature, each labelled privately.";
    }
    return "A model of kind " + h.kind + ".";
  }

  function drawHypothesis(release, stream) {
    var h = release.hypothesis, runs = runsOf(h), text, figure = null;
    if (runs) {
      text = describeRuns(runs);
      figure = drawRuns(runs);
    } else if (h.kind === "halfspace") {
      var names = featureNames(stream, h.normal.length);
      text = describeHalfspace(h, names);
      figure = drawHalfspace(h, names);
    } else if (h.kind === "one-vs-rest") {
      var classNames = featureNames(stream, h.halfspaces[0].normal.length);
      text = describeOneVsRest(h, classNames);
      figure = drawOneVsRest(h, classNames);
    } else {
      text = describeVector(h);
      var bounds = (stream && stream.feature_bounds) || h.bounds;
      if (bounds && bounds.length === 2) figure = drawPlane(h, bounds);
    }
    return { text: text, figure: figure };
  }

  // --- the list of streams ----------------------------------------------------------------
  function streamCard(stream, history, checked) {
    var latest = checked && checked.release;
    var budget = budgetFigures(history && history.lifetime);
    var releases = (history && history.releases) || [];
    var last = releases.length ? releases[releases.length - 1] : null;
    var card = el("article", { className: "card stream-card", "data-stream": stream.stream_id },
      el("h2", {}, el("a", { href: "/stream/" + encodeURIComponent(stream.stream_id),
                             text: stream.stream_id })),
      el("p", { className: "muted", text: stream.hypothesis_class ||
                (stream.features + " features" + (stream.classes > 2 ? ", " + stream.classes + " classes" : "")) }),
      el("p", {}, el("span", { className: "badge" + (budget && budget.exhausted ? " stopped" : ""),
                               text: stream.status })));
    if (!stream.release) {
      card.appendChild(el("p", { className: "muted", text: "Online learning only: no private releases." }));
      return card;
    }
    if (last && latest) {
      var drawn = drawHypothesis(latest, stream);
      card.appendChild(el("p", {}, "Latest release " + ago(last.published_at) + " (ε " + fmt(last.epsilon) +
        (last.level !== null && last.level !== undefined ? ", level " + last.level : "") + ") ",
        verificationBadge(checked), ": ", el("span", { text: drawn.text })));
      if (drawn.figure) card.appendChild(drawn.figure);
    } else {
      card.appendChild(el("p", { className: "muted", text: "No release yet." }));
    }
    if (budget) {
      var bar = el("div", { className: "bar" + (budget.exhausted ? " full" : "") }, el("span", {}));
      bar.firstChild.style.width = (100 * budget.share).toFixed(1) + "%";
      card.appendChild(bar);
      card.appendChild(el("p", { className: "muted", text: budgetText(budget) + " " + fmt(budget.releases) +
        " releases (" + levelsText(budget.perLevel) + ")." }));
    }
    return card;
  }

  function index() {
    var root = document.getElementById("streams");
    function refresh() {
      getJSON("/streams").then(function (answer) {
        return Promise.all(answer.streams.map(function (s) {
          if (!s.release) return [s, null, null];
          var base = "/streams/" + encodeURIComponent(s.stream_id);
          return getJSON(base + "/releases?limit=1000").then(function (history) {
            return Promise.all([s, history, latestOf(base, history)]);
          });
        }));
      }).then(function (rows) {
        var grid = el("div", { className: "streams" });
        rows.forEach(function (row) { grid.appendChild(streamCard(row[0], row[1], row[2])); });
        if (!rows.length) grid.appendChild(el("p", { className: "muted", text: "No streams are configured." }));
        root.replaceChildren(grid);
        stamp();
      }).catch(function (err) { console.warn("privstream: " + err); });
    }
    refresh();
    setInterval(refresh, POLL_MS * 2);
  }

  // --- one stream -------------------------------------------------------------------------
  function chartWidth(node) { return Math.max(320, node.clientWidth || 600); }

  // The time axis: the releases' span, or two minutes around a lone release (uPlot would
  // otherwise stretch one point over years).
  function timeScale(releases) {
    var first = releases[0].published_at, last = releases[releases.length - 1].published_at;
    return first === last ? { time: true, auto: false, min: first - 60, max: last + 60 } : { time: true };
  }

  function releasesChart(node, releases) {
    var products = ["hypotheses", "sanitized"].filter(function (p) {
      return releases.some(function (r) { return r.product === p; });
    });
    var withLevel = releases.some(function (r) { return r.level !== null && r.level !== undefined; });
    var data = [releases.map(function (r) { return r.published_at; })];
    var series = [{}];
    var colours = { hypotheses: "#2f6fdb", sanitized: "#0f8a5f" };
    products.forEach(function (p) {
      data.push(releases.map(function (r) { return r.product === p ? r.epsilon : null; }));
      series.push({ label: "ε of " + (p === "hypotheses" ? "hypothesis" : "sanitized") + " releases",
                    stroke: colours[p], width: 0, points: { show: true, size: 9, fill: colours[p] },
                    paths: function () { return null; } });
    });
    var axes = [{}, { label: "ε", scale: "eps" }];
    if (withLevel) {
      data.push(releases.map(function (r) { return r.level === undefined ? null : r.level; }));
      series.push({ label: "level", scale: "level", stroke: "#b5470b", width: 0,
                    points: { show: true, size: 7, fill: "#b5470b" }, paths: function () { return null; } });
      axes.push({ label: "level", scale: "level", side: 1, grid: { show: false } });
    }
    series.slice(1).forEach(function (s) { if (!s.scale) s.scale = "eps"; });
    return new uPlot({ width: chartWidth(node), height: 240, series: series, axes: axes,
                       scales: { x: timeScale(releases),
                                 eps: { range: function (u, lo, hi) { return [0, Math.max(hi * 1.2, 1e-9)]; } } },
                       legend: { live: false } }, data, node);
  }

  // The private accuracy series: for each release that carries estimates, at its publication
  // time, 1 - error and 1 - high (the interval's lower end) of the release scored, per level.
  function accuracySeries(releases) {
    var levels = [];
    releases.forEach(function (r) {
      (r.evaluations || []).forEach(function (e) { if (levels.indexOf(e.level) < 0) levels.push(e.level); });
    });
    levels.sort(function (a, b) { return a - b; });
    var carrying = releases.filter(function (r) { return (r.evaluations || []).length > 0; });
    var data = [carrying.map(function (r) { return r.published_at; })];
    levels.forEach(function (level) {
      [function (x) { return 1 - x.error; }, function (x) { return 1 - x.high; }].forEach(function (f) {
        data.push(carrying.map(function (r) {
          var found = r.evaluations.filter(function (e) { return e.level === level && e.estimate; })[0];
          return found ? f(found.estimate) : null;
        }));
      });
    });
    return { levels: levels, data: data };
  }

  function accuracyChart(node, releases) {
    var series = accuracySeries(releases), palette = ["#2f6fdb", "#b5470b", "#0f8a5f", "#7a3db8", "#555"];
    var lines = [{}];
    series.levels.forEach(function (level, i) {
      var colour = palette[i % palette.length];
      lines.push({ label: "accuracy, level " + level, stroke: colour, width: 2, spanGaps: true,
                   points: { show: true, size: 6, fill: colour } });
      lines.push({ label: "lower end, level " + level, stroke: colour, width: 1, dash: [4, 4], spanGaps: true,
                   points: { show: false } });
    });
    var times = series.data[0];
    return new uPlot({ width: chartWidth(node), height: 240, series: lines, axes: [{}, { label: "accuracy" }],
                       scales: { x: timeScale(times.map(function (t) { return { published_at: t }; })),
                                 y: { range: function () { return [0, 1]; } } },
                       legend: { live: false } }, series.data, node);
  }

  // The largest lifetime ε of an example after each release, from the published releases alone
  // (the ledger's rule): an example of window w pays the ε of every release whose node covers w;
  // a release without a node (made before the release tree) counts against every window. The
  // maximum over windows is reached at some node's first window, so only those are summed.
  function lifetimeSpent(releases) {
    var everywhere = 0, nodes = [], starts = [];
    return releases.map(function (r) {
      var first = r.first_window, last = r.last_window;
      // the quality estimates a release carries are charged to its own window's examples
      var epsilon = r.epsilon;
      (r.evaluations || []).forEach(function (e) { epsilon += e.epsilon || 0; });
      if (first === null || first === undefined || last === null || last === undefined) {
        everywhere += epsilon;
      } else {
        nodes.push([first, last, epsilon]);
        starts.push(first);
      }
      var worst = 0;
      starts.forEach(function (w) {
        var sum = 0;
        nodes.forEach(function (n) { if (n[0] <= w && w <= n[1]) sum += n[2]; });
        if (sum > worst) worst = sum;
      });
      return everywhere + worst;
    });
  }

  function budgetChart(node, releases, lifetime) {
    var figures = budgetFigures(lifetime);
    var times = releases.map(function (r) { return r.published_at; });
    var data = [times, lifetimeSpent(releases), times.map(function () { return figures.total; })];
    return new uPlot({
      width: chartWidth(node), height: 240,
      series: [{}, { label: figures.label + " spent", stroke: "#2f6fdb", width: 2, fill: "rgba(47,111,219,0.12)",
                     paths: uPlot.paths.stepped({ align: 1 }) },
               { label: "lifetime budget", stroke: "#b5470b", width: 1, dash: [6, 4], points: { show: false } }],
      axes: [{}, { label: figures.label }],
      scales: { x: timeScale(releases), y: { range: function () { return [0, figures.total * 1.05 || 1]; } } },
      legend: { live: false },
    }, data, node);
  }

  // Whether the release's accuracy theorem holds, in words: "n is private" only where it is.
  function theoremText(c) {
    if (c.accuracy_guarantee_holds === true) return "yes (n = " + fmt(c.sample_size) + " is public)";
    if (c.accuracy_guarantee_holds === false) {
      return "no: n = " + fmt(c.sample_size) + " is public and below the theorem's " + fmt(c.theorem_sample_size);
    }
    if (c.sample_size === null || c.sample_size === undefined) return "not published (n is private)";
    var needs = c.theorem_sample_size === null || c.theorem_sample_size === undefined
      ? "the theorem gives no finite sample size"
      : "the theorem needs " + fmt(c.theorem_sample_size) + " labelled examples, and how many of them are " +
        "labelled is private";
    return "not decided: n = " + fmt(c.sample_size) + " is public, but " + needs;
  }

  function certificateList(certificate, release) {
    var rows = [
      ["ledger entry", certificate.ledger_entry_id],
      ["mechanism", certificate.mechanism],
      ["ε, δ", fmt(certificate.epsilon) + ", " + fmt(certificate.delta)],
      ["level", certificate.level === undefined || certificate.level === null ? undefined
        : certificate.level + (certificate.window && typeof certificate.window.first_window === "number"
          ? " (windows " + fmt(certificate.window.first_window) + " … " + fmt(certificate.window.last_window) + ")"
          : "")],
      ["neighbours", certificate.neighbouring_relation + " (privacy unit: " + certificate.privacy_unit + ")"],
      ["window", certificate.window && certificate.window.window_id],
      ["sample size", certificate.sample_size === null ? "private" : fmt(certificate.sample_size)],
      ["proper", certificate.proper ? "yes (a member of the class)" : "no"],
      ["accuracy theorem holds", theoremText(certificate)],
      ["lifetime bound", certificate.lifetime ? "ε " + fmt(certificate.lifetime.epsilon) + " per " +
        certificate.privacy_unit + " for ever, within the budget " + fmt(certificate.lifetime.epsilon_budget) +
        " (" + certificate.lifetime.rule + ")" : undefined],
      // a release made before the release tree: its draining budget
      ["ε left after it", certificate.lifetime || typeof certificate.epsilon_budget_remaining !== "number"
        ? undefined : fmt(certificate.epsilon_budget_remaining)],
      ["randomness", certificate.randomness],
      ["library", certificate.library_version],
      ["class", release.hypothesis_class],
    ];
    var dl = document.createDocumentFragment();
    rows.forEach(function (row) {
      if (row[1] === undefined || row[1] === null) return;
      dl.appendChild(el("dt", { text: row[0] }));
      dl.appendChild(el("dd", { text: String(row[1]) }));
    });
    return dl;
  }

  function streamPage() {
    var id = decodeURIComponent(location.pathname.replace(/^\/stream\//, "").replace(/\/$/, ""));
    var base = "/streams/" + encodeURIComponent(id);
    var shown = null, charts = [], checkReleases = [], checkNames = [];
    var checkFile = document.getElementById("check-file");
    checkFile.addEventListener("change", function () {
      var file = checkFile.files && checkFile.files[0];
      if (!file) return;
      file.text().then(function (text) {
        var parts = checkReleases.filter(Boolean).map(function (release, i) {
          var r = accuracyOn(release, text, checkNames);
          if (r.error) return r.error;
          return (i ? "latest" : "best") + " release: " + (r.accuracy === null ? "no labelled rows" :
            (100 * r.accuracy).toFixed(2) + "% correct on " + fmt(r.n) + " rows");
        });
        document.getElementById("check-result").textContent = parts.join("; ") + ".";
      });
    });
    document.title = "privstream: " + id;
    document.getElementById("title").textContent = id;

    function showRelease(release, stream, ids) {
      var drawn = drawHypothesis(release, stream), node = document.getElementById(ids.figure);
      document.getElementById(ids.text).textContent = drawn.text;
      node.replaceChildren();
      if (drawn.figure) node.appendChild(drawn.figure);
      document.getElementById(ids.certificate).replaceChildren(certificateList(release.certificate, release));
    }

    function levelOf(release) {
      var c = release.certificate, w = c.window || {};
      var level = c.level === null || c.level === undefined ? "" : "level " + c.level;
      var span = typeof w.first_window === "number" ? " (windows " + fmt(w.first_window) + " … " +
        fmt(w.last_window) + ")" : "";
      return level + span;
    }

    function mark(id, checked) {
      var node = document.getElementById(id), v = verification(checked);
      node.replaceChildren();
      if (v) node.appendChild(verificationBadge(checked));
      return v ? v.state : "";
    }

    function draw(stream, history, latestChecked, bestChecked) {
      var latest = latestChecked && latestChecked.release, best = bestChecked && bestChecked.release;
      var budget = budgetFigures(history.lifetime), releases = history.releases;
      var last = releases.length ? releases[releases.length - 1] : null;
      document.getElementById("summary").textContent = (stream.hypothesis_class || (stream.features +
        " features" + (stream.classes > 2 ? ", " + stream.classes + " classes" : ""))) + " · " + stream.status + " · " + fmt(budget ? budget.releases : releases.length) + " releases" +
        (last ? ", the latest " + ago(last.published_at) : "");
      document.getElementById("budget-text").textContent = budget ? budgetText(budget) : "";
      document.getElementById("levels-text").textContent = budget ? "Releases: " +
        (levelsText(budget.perLevel) || "none yet") + "." : "";
      var entry = latest ? latest.certificate.ledger_entry_id : "";
      var bestEntry = best ? best.certificate.ledger_entry_id : entry;
      var states = [latestChecked && latestChecked.problem, bestChecked && bestChecked.problem];
      var key = entry + "/" + bestEntry + "/" + releases.length + "/" + states.join("/");
      if (key === shown) return;  // nothing new: keep the drawings
      var first = shown === null;
      shown = key;
      document.body.setAttribute("data-latest-entry", entry);
      document.body.setAttribute("data-best-entry", bestEntry);
      document.body.setAttribute("data-releases", String(releases.length));
      document.body.setAttribute("data-latest-verified", mark("latest-verified", latestChecked));
      document.body.setAttribute("data-best-verified", mark("best-verified", best ? bestChecked : latestChecked));
      var hypothesisNode = document.getElementById("hypothesis");
      var main = best || latest, latestCard = document.getElementById("latest-card");
      if (main) {
        showRelease(main, stream, { text: "hypothesis-text", figure: "hypothesis", certificate: "certificate" });
        document.getElementById("best-level").textContent = levelOf(main);
      } else {
        document.getElementById("hypothesis-text").textContent = "No release yet.";
      }
      // The latest release beside the best, when it is another one (a lower level, newer).
      latestCard.hidden = !(latest && main && entry !== bestEntry);
      if (!latestCard.hidden) {
        showRelease(latest, stream, { text: "latest-text", figure: "latest-hypothesis",
                                      certificate: "latest-certificate" });
        document.getElementById("latest-level").textContent = levelOf(latest);
      }
      var checkable = main && predictVector(main.hypothesis, main.hypothesis.normal || []) !== null;
      document.getElementById("check-card").hidden = !checkable;
      checkReleases = [main, latestCard.hidden ? null : latest];
      checkNames = checkable ? featureNames(stream, main.hypothesis.normal.length) : [];
      charts.forEach(function (c) { c.destroy(); });
      charts = [];
      if (releases.length) {
        var rNode = document.getElementById("releases-chart"), bNode = document.getElementById("budget-chart");
        rNode.replaceChildren();
        bNode.replaceChildren();
        charts.push(releasesChart(rNode, releases), budgetChart(bNode, releases, history.lifetime));
      }
      var scored = accuracySeries(releases), aCard = document.getElementById("accuracy-card");
      aCard.hidden = scored.data[0].length === 0;
      if (!aCard.hidden) {
        var aNode = document.getElementById("accuracy-chart"), lastAt = scored.data[1].length - 1;
        aNode.replaceChildren();
        charts.push(accuracyChart(aNode, releases));
        document.getElementById("accuracy-text").textContent = "Latest estimate: " +
          scored.levels.map(function (level, i) {
            var acc = scored.data[1 + 2 * i][lastAt];
            return acc === null ? null : (100 * acc).toFixed(1) + "% at level " + level;
          }).filter(Boolean).join(", ") + ".";
      }
      if (!first) {
        var card = hypothesisNode.closest(".card");
        card.classList.remove("new-release");
        void card.offsetWidth;  // restart the animation
        card.classList.add("new-release");
      }
    }

    function refresh() {
      Promise.all([getJSON("/streams"), getJSON(base + "/releases?limit=1000")])
        .then(function (answers) {
          var best = latestOf(base, answers[1]).then(function (latest) {
            return latest ? PrivstreamVerify.fetchRelease(base + "/releases/best") : null;
          });
          return Promise.all([answers[0], answers[1], latestOf(base, answers[1]), best]);
        })
        .then(function (answers) {
          var stream = answers[0].streams.filter(function (s) { return s.stream_id === id; })[0];
          if (!stream) {
            document.getElementById("summary").textContent = "There is no stream " + id + " here.";
            return;
          }
          if (!answers[1]) {
            document.getElementById("summary").textContent = "Online learning only: no private releases.";
            return;
          }
          draw(stream, answers[1], answers[2], answers[3]);
          stamp();
        }).catch(function (err) { console.warn("privstream: " + err); });
    }
    refresh();
    setInterval(refresh, POLL_MS);
    window.addEventListener("resize", function () {
      charts.forEach(function (c) { c.setSize({ width: chartWidth(c.root.parentNode), height: 240 }); });
    });
  }

  // For tests and the curious: what the page would say and draw for a release.
  window.PrivstreamPage = {
    draw: function (release, stream) {
      var drawn = drawHypothesis(release, stream || null);
      return { text: drawn.text, svg: drawn.figure ? drawn.figure.outerHTML : null };
    },
    lifetimeSpent: lifetimeSpent,
    accuracySeries: accuracySeries,
    accuracyOn: accuracyOn,
    predict: predictVector,
    theoremText: theoremText,
    verification: verification,
  };

  var page = document.body.getAttribute("data-page");
  if (page === "index") index();
  else if (page === "stream") streamPage();
})();
