/* Transformer Anatomy's page code: figures the browser fills.

   The page's decoder of the wire format (docs/wire-format.md; written by viz/wire.py). The
   Attention tab sends every head of the stack once per run (viz.wire.switch_payload):
   three-decimal weights as uint16 byte planes, key-major, zlib, base64. A page that can decode
   it (DecompressionStream) says so in its stamp (ta.stamp); the server then sends the head and
   compare figures without z, and layout.meta.fill says which head each trace shows
   (viz.wire.without_z). ta.fill keeps the last few decoded payloads and fills such a
   figure's z just before Plotly draws it, so the figure is drawn once, complete, and Plotly's
   PNG/SVG downloads show the numbers. The head switch (head_switch.js) uses the same decoder.
   The same page gets the tab's overview and attention block with their own numbers packed the
   same way (viz.wire.packed, layout.meta.packed), unpacked here before Plotly draws them.

   ta.fill: add(json) -> Promise(decoded | null); get(id) waits for the data `id`;
   z(data, cells, hidden) -> the rows of one trace; held: the id of the data last added;
   ok(): the page can fill figures. A figure is filled only from the data whose id it names
   (which includes the run), so a late fill never paints another run's numbers. Data that never
   arrives or fails to decode draws the figure without numbers once and turns filling off for
   the page (the server sends complete figures from the next event on).

   Gradio draws every server figure with Plotly.react, and exposes Plotly only as window.Plotly:
   this file wraps that one function, which is also the page's one "a figure was drawn" event
   (ta.onDraw: titles wrap, tiles become clickable, the head switch re-applies the sliders). */
(() => {
  const ta = (window.ta = window.ta || {});
  ta.drawHooks = ta.drawHooks || [];  /* the scripts loaded after this one push their hooks */
  /* Whether the server laid this layout out for the page's screen (viz/screen.py): the page
     draws it as it came, and measures nothing after (a Plotly element or a layout). */
  ta.laidOut = (x) => !!(x && (x.layout || x).meta && (x.layout || x).meta.laid_out);
  ta.onDraw = (gd) => {
    for (const hook of ta.drawHooks) {
      try { hook(gd); } catch (e) { ta.fault('a drawn figure\'s hook', e); }
    }
  };
  /* After Plotly.react's promise: the figure is on screen. */
  const drawn = (gd, result) => {
    Promise.resolve(result).then(() => {
      const el = typeof gd === 'string' ? document.getElementById(gd) : gd;
      if (el) ta.onDraw(el);
    });
    return result;
  };

  const NAN = 65535, KEEP = 4, WAIT_MS = 15000;
  const datas = new Map(), waiting = new Map();
  let lastSrc = null, lastReady = Promise.resolve(null), broken = false, trapped = false;
  let plotly = window.Plotly;

  /* base64 -> bytes: the browser's own decoder where it has one (5× faster than a loop). */
  function bytesOf(text) {
    if (typeof Uint8Array.fromBase64 === 'function') return Uint8Array.fromBase64(text);
    const bin = atob(text), packed = new Uint8Array(bin.length);
    for (let i = 0; i < bin.length; i++) packed[i] = bin.charCodeAt(i);
    return packed;
  }

  async function inflate(text) {
    const stream = new Blob([bytesOf(text)]).stream()
      .pipeThrough(new DecompressionStream('deflate'));
    return new Uint8Array(await new Response(stream).arrayBuffer());
  }

  async function decode(d) {
    d.codes = await inflate(d.data);
    if (d.codes.length !== 2 * d.layers * d.heads * d.rows * d.cols) throw new Error('size');
    delete d.data;
    return d;
  }

  const fill = {
    held: '',
    ok: () => !broken && typeof window.DecompressionStream === 'function'
      && (trapped || !!(plotly && plotly.__taFill)),
    add(src) {
      if (src === lastSrc) return lastReady;
      lastSrc = src;
      let d = null;
      try { d = src ? JSON.parse(src) : null; } catch (e) { d = null; }
      if (!d || !d.id) return (lastReady = Promise.resolve(null));
      if (!datas.has(d.id)) {
        const ready = decode(d).catch(() => { broken = true; return null; });
        datas.set(d.id, ready);
        while (datas.size > KEEP) datas.delete(datas.keys().next().value);
        for (const resolve of waiting.get(d.id) || []) resolve(ready);
        waiting.delete(d.id);
      }
      fill.held = d.id;
      return (lastReady = datas.get(d.id));
    },
    get(id) {
      if (datas.has(id)) return datas.get(id);
      return new Promise((resolve) => {
        waiting.set(id, [...(waiting.get(id) || []), resolve]);
        setTimeout(() => resolve(null), WAIT_MS);
      });
    },
    /* One trace's z as rows over one Float32Array (the server's figures send float32 too, and a
       float32 thousandth still prints as that thousandth): cells [layer, head] gives that head's
       shown numbers (a hidden cell: `hidden`, null = a gap); [la, ha, lb, hb] gives A - B of the
       shown numbers (a hidden cell counts as weight 0). The data stores each head key by key. */
    z(d, cells, hidden) {
      const rows = d.rows, cols = d.cols, n = rows * cols, low = d.layers * d.heads * n;
      const codes = d.codes, out = new Float32Array(n), gap = hidden == null ? NaN : hidden;
      const a = (cells[0] * d.heads + cells[1]) * n;
      if (cells.length === 2) {
        for (let k = 0, i = a; k < cols; k++) {
          for (let r = 0, o = k; r < rows; r++, i++, o += cols) {
            const c = (codes[i] << 8) | codes[low + i];
            out[o] = c === NAN ? gap : c / 1000;
          }
        }
      } else {
        const b = (cells[2] * d.heads + cells[3]) * n;
        for (let k = 0, i = 0; k < cols; k++) {
          for (let r = 0, o = k; r < rows; r++, i++, o += cols) {
            let ca = (codes[a + i] << 8) | codes[low + a + i];
            let cb = (codes[b + i] << 8) | codes[low + b + i];
            if (ca === NAN) ca = 0;
            if (cb === NAN) cb = 0;
            out[o] = (ca - cb) / 1000;
          }
        }
      }
      const z = new Array(rows);
      for (let r = 0; r < rows; r++) z[r] = out.subarray(r * cols, (r + 1) * cols);
      return z;
    },
  };

  /* A figure whose own numbers came packed (viz.wire.packed: layout.meta.packed): each
     [trace, field, rows, cols] of spec.cells as rows, in order, from one inflated stream; "milli"
     codes are two byte planes (high bytes, then low), shown as code / 1000 (65535: a gap), "byte"
     numbers are themselves. Kept by the packed text, so a figure Gradio draws again costs
     nothing. */
  const unpacked = new Map();
  function unpack(spec) {
    if (unpacked.has(spec.data)) return unpacked.get(spec.data);
    const ready = inflate(spec.data).then((bytes) => {
      const milli = spec.kind === 'milli';
      const total = spec.cells.reduce((n, c) => n + c[2] * c[3], 0);
      if (bytes.length !== (milli ? 2 : 1) * total) throw new Error('size');
      let at = 0;
      return spec.cells.map(([trace, field, rows, cols]) => {
        const n = rows * cols;
        let flat = bytes.subarray(at, at + n);
        if (milli) {
          flat = new Float32Array(n);
          for (let i = 0; i < n; i++) {
            const c = (bytes[at + i] << 8) | bytes[total + at + i];
            flat[i] = c === NAN ? NaN : c / 1000;
          }
        }
        at += n;
        const z = new Array(rows);
        for (let r = 0; r < rows; r++) z[r] = flat.subarray(r * cols, (r + 1) * cols);
        return [trace, field, z];
      });
    });
    unpacked.set(spec.data, ready);
    while (unpacked.size > KEEP) unpacked.delete(unpacked.keys().next().value);
    return ready;
  }
  function unpackInto(data, spec) {
    return unpack(spec).then((cells) => {
      for (const [trace, field, values] of cells) if (data[trace]) data[trace][field] = values;
      if (spec.same_xy) {
        const first = data[cells[0][0]];
        for (const [trace] of cells.slice(1)) {
          if (data[trace]) { data[trace].x = first.x; data[trace].y = first.y; }
        }
      }
    });
  }

  /* Gradio draws every figure with Plotly.react: a figure that names its data gets its z first. */
  function hook(P) {
    if (!P || P.__taFill || typeof P.react !== 'function') return;
    const react = P.react;
    P.react = function (gd, data, layout, ...rest) {
      const self = this;
      /* Drawn as the page wants it now (a presented figure fills the screen: present.js). */
      const draw = () => {
        let adjusted = null;
        try { adjusted = ta.adjust ? ta.adjust(gd, data, layout) : null; }
        catch (e) { ta.fault('presentation layout', e); }
        let [d, l] = adjusted || [data, layout];
        /* A figure the server laid out for this screen (viz/screen.py) is drawn as it came;
           the others are, on a phone, panels side by side laid out in one column, a long title
           wrapped and crowded labels turned upright and thinned (figures.js). */
        if (!ta.laidOut(layout)) {
          try { [d, l] = (ta.stackNarrow && ta.stackNarrow(gd, d, l)) || [d, l]; }
          catch (e) { ta.fault('narrow stacking', e); }
          try { [d, l] = (ta.prewrap && ta.prewrap(gd, d, l)) || [d, l]; }
          catch (e) { ta.fault('title wrapping', e); }
          try { [d, l] = (ta.prespace && ta.prespace(gd, d, l)) || [d, l]; }
          catch (e) { ta.fault('label spacing', e); }
        }
        /* A redraw in the page (presentation, the head switch) passes no config: the server's
           is kept, so the toolbar stays as it sent it and the camera's file keeps its view's
           name (Plotly's default config would bring back its camera saving "newplot.png"). */
        const el = typeof gd === 'string' ? document.getElementById(gd) : gd;
        const [given, ...more] = rest;
        if (el && given) el.taConfig = given;
        const config = given || (el && el.taConfig);
        const said = ta.plotConfig ? ta.plotConfig(config) : config;  /* its page's language */
        return drawn(gd, react.call(self, gd, d, l, said, ...more));
      };
      /* A figure that names the head switch data gets its heads' numbers from it. */
      const filled = () => {
        const spec = layout && layout.meta && layout.meta.fill;
        if (!spec || !Array.isArray(data)) return draw();
        return fill.get(spec.data).then((d) => {
          if (d && d.id === spec.data && d.run === layout.meta.run) {
            spec.z.forEach((cells, i) => {
              if (data[i]) data[i].z = fill.z(d, cells, spec.hidden);
            });
          } else {
            broken = true;
          }
          return draw();
        });
      };
      /* A figure whose numbers came packed is unpacked first. */
      const own = layout && layout.meta && layout.meta.packed;
      if (!own || !Array.isArray(data)) return filled();
      return unpackInto(data, own).catch(() => { broken = true; }).then(filled);
    };
    P.__taFill = true;
  }
  if (plotly) hook(plotly);
  else {
    try {
      Object.defineProperty(window, 'Plotly', {
        configurable: true, enumerable: true,
        get: () => plotly, set: (v) => { plotly = v; hook(v); },
      });
      trapped = true;
    } catch (e) { trapped = false; }
  }
  ta.fill = fill;
})();
