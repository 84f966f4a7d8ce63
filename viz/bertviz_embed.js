/* bertviz's head view and model view offline (viz/bertviz_embed.py): the scripts its iframe
   runs besides the vendored d3 parts and bertviz's own view script. viz/bertviz_embed.py puts
   each section below into its own <script>, in this order: error, then d3 (assets/vendor/),
   shim, loader, bertviz's view, then fit. A section starts at its "==== name ====" line. */

/* ==== error ==== */
/* Any uncaught error becomes visible text instead of a silently blank frame. */
window.addEventListener("error", function (e) {
  var box = document.getElementById("bv-error");
  box.style.display = "block";
  box.textContent = "bertviz could not draw this view: " +
    (e && e.message ? e.message : "script error");
});

/* ==== shim ==== */
/* d3 names bertviz uses beyond d3-selection / d3-color, a jQuery subset covering every call in
   bertviz's head_view.js / model_view.js (append, val, text, change, on, empty, attr), and
   require / requirejs. */
(function () {
  var d3 = window.d3;
  d3.version = "5-offline-subset";  // d3 5 bundles d3-selection 1 and d3-color 1
  d3.schemeCategory10 = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                         "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"];
  // d3-scale's ordinal scale: the domain grows in first-seen order
  d3.scaleOrdinal = function (range) {
    var index = new Map(), r = (range || []).slice();
    return function (x) {
      var key = String(x);
      if (!index.has(key)) index.set(key, index.size);
      return r[index.get(key) % r.length];
    };
  };
  function Q(els) { this.els = els; this.length = els.length; }
  Q.prototype.each_ = function (f) { this.els.forEach(f); return this; };
  Q.prototype.append = function (q) {
    var parent = this.els[0];
    if (parent) (q instanceof Q ? q.els : [q]).forEach(function (c) { parent.appendChild(c); });
    return this;
  };
  Q.prototype.val = function (v) {
    if (v === undefined) return this.els.length ? this.els[0].value : undefined;
    return this.each_(function (e) { e.value = String(v); });
  };
  Q.prototype.text = function (t) {
    if (t === undefined) return this.els.map(function (e) { return e.textContent; }).join("");
    return this.each_(function (e) { e.textContent = String(t); });
  };
  Q.prototype.change = function () {
    return this.each_(function (e) { e.dispatchEvent(new Event("change", {bubbles: true})); });
  };
  Q.prototype.on = function (type, fn) {
    return this.each_(function (e) { e.addEventListener(type, fn); });
  };
  Q.prototype.empty = function () {
    return this.each_(function (e) { while (e.firstChild) e.removeChild(e.firstChild); });
  };
  Q.prototype.attr = function (k, v) {
    if (v === undefined) return this.els.length ? this.els[0].getAttribute(k) : undefined;
    return this.each_(function (e) { e.setAttribute(k, String(v)); });
  };
  window.jQuery = window.$ = function (s) {
    var tag = /^\s*<\s*([a-zA-Z][a-zA-Z0-9]*)/.exec(s);
    if (tag) return new Q([document.createElement(tag[1])]);
    return new Q(Array.prototype.slice.call(document.querySelectorAll(s)));
  };
  window.require = {config: function () {}};
  window.requirejs = function (deps, cb) {
    var mods = {jquery: window.jQuery, d3: window.d3};
    cb.apply(null, deps.map(function (d) { return mods[d]; }));
  };
})();

/* ==== loader ==== */
/* Decodes the once-embedded attention; builds bertviz's `params` as its Python wrapper would. */
(function () {
  var P = JSON.parse(document.getElementById("bv-params").textContent);
  var bin = atob(document.getElementById("bv-attn").textContent.replace(/\s+/g, ""));
  var L = P.shape[0], H = P.shape[1], T = P.shape[2], k = 0, attn = [];
  for (var l = 0; l < L; l++) {
    var layer = [];
    for (var h = 0; h < H; h++) {
      var head = [];
      for (var i = 0; i < T; i++) {
        var row = new Array(T);
        for (var j = 0; j < T; j++) row[j] = bin.charCodeAt(k++) / 255;
        head.push(row);
      }
      layer.push(head);
    }
    attn.push(layer);
  }
  function block(r0, r1, c0, c1) {
    return attn.map(function (layer) {
      return layer.map(function (head) {
        return head.slice(r0, r1).map(function (row) { return row.slice(c0, c1); });
      });
    });
  }
  var tok = P.tokens, data;
  if (P.sentence_b_start === null) {
    data = [{name: null, attn: attn, left_text: tok, right_text: tok}];
  } else {
    var b = P.sentence_b_start, a_ = tok.slice(0, b), b_ = tok.slice(b);
    data = [
      {name: "All", attn: attn, left_text: tok, right_text: tok},
      {name: "Sentence A -> Sentence A", attn: block(0, b, 0, b), left_text: a_, right_text: a_},
      {name: "Sentence B -> Sentence B", attn: block(b, T, b, T), left_text: b_, right_text: b_},
      {name: "Sentence A -> Sentence B", attn: block(0, b, b, T), left_text: a_, right_text: b_},
      {name: "Sentence B -> Sentence A", attn: block(b, T, 0, b), left_text: b_, right_text: a_}
    ];
  }
  var layers = [], heads = [];
  for (var x = 0; x < L; x++) layers.push(x);
  for (var y = 0; y < H; y++) heads.push(y);
  window.__bertvizParams = {
    attention: data, default_filter: "0", root_div_id: P.root_div_id,
    layer: P.layer, heads: P.heads, include_layers: layers,
    display_mode: P.display_mode, include_heads: heads, total_heads: H
  };
})();

/* ==== fit ==== */
/* bertviz draws at fixed sizes (the head view's right column of words starts 225 px in); in a
   frame narrower than the drawing (a phone's 326 px) its right column was cut mid-word. The
   drawing is scaled down to the frame's width, whole, each time bertviz draws it anew. */
(function () {
  var vis = document.getElementById("vis");
  function fit() {
    var svg = vis && vis.querySelector("svg");
    if (!svg) return;
    vis.style.zoom = "";  /* measured at bertviz's own size (laid out, not painted, between) */
    var left = vis.getBoundingClientRect().left, right = svg.getBoundingClientRect().right;
    svg.querySelectorAll("text").forEach(function (t) {  /* a long word passes its box */
      right = Math.max(right, t.getBoundingClientRect().right);
    });
    var room = document.documentElement.clientWidth - 12 - left;  /* a glyph passes its box */
    if (room > 0 && right - left > room) vis.style.zoom = String(room / (right - left));
  }
  /* Drawn again on a layer or filter choice; the frame is 0 px wide until its tab shows. */
  var queued = false;
  function soon() {
    if (queued) return;
    queued = true;
    setTimeout(function () { queued = false; fit(); }, 0);
  }
  if (vis) new MutationObserver(soon).observe(vis, {childList: true, subtree: true});
  window.addEventListener("resize", soon);
  soon();
})();
