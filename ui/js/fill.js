/* Transformer Anatomy's page code: figures the browser fills, and the page's one "a figure was
   drawn" event.

   The page's decoder of the wire format (docs/wire-format.md; written by viz/wire.py). The
   Attention tab sends every head of the stack once per run (viz.wire.switch_payload):
   three-decimal weights as uint16 byte planes, key-major, zlib, base64. A page that can decode
   it (DecompressionStream) says so in its stamp (ta.stamp); the server then sends the head and
   compare figures without z, and layout.meta.fill says which head each trace shows
   (viz.wire.without_z). ta.fill keeps the last few decoded payloads; as soon as Gradio has drawn
   such a figure its z is written in and Plotly draws it again, before the page paints, so
   Plotly's PNG/SVG downloads show the numbers. The head switch (head_switch.js) uses the same
   decoder. The same page gets the tab's overview and attention block with their own numbers
   packed the same way (viz.wire.packed, layout.meta.packed), unpacked here likewise.

   ta.fill: add(json) -> Promise(decoded | null); get(id) waits for the data `id`;
   z(data, cells, hidden) -> the rows of one trace; held: the id of the data last added;
   ok(): the page can fill figures. A figure is filled only from the data whose id it names
   (which includes the run), so a late fill never paints another run's numbers.

   ta.onDraw(gd) runs every hook of ta.drawHooks when a figure has been drawn (Plotly's own
   events on the figure's element: below): the head switch re-applies the sliders, presentation
   mode draws a presented figure for the room, tiles become clickable. Nothing here replaces a
   function of Plotly's. */
(() => {
  const ta = (window.ta = window.ta || {});
  ta.drawHooks = ta.drawHooks || [];  /* the scripts loaded after this one push their hooks */
  ta.onDraw = (gd) => {
    for (const hook of ta.drawHooks) {
      try { hook(gd); } catch (e) { ta.fault('a drawn figure\'s hook', e); }
    }
  };

  const NAN = 65535, KEEP = 4, WAIT_MS = 15000;
  const datas = new Map(), waiting = new Map();
  let lastSrc = null, lastReady = Promise.resolve(null), broken = false;
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
    ok: () => !broken && typeof window.DecompressionStream === 'function',
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

  /* ---- a figure was drawn --------------------------------------------------------------------
     Gradio draws each figure with Plotly.react into a new element of its gr.Plot (it mounts one
     for every value the server sends). Plotly says on the element when it has drawn:
     'plotly_afterplot' after a whole drawing, 'plotly_react' after a react that changed a drawn
     figure in place. An observer of the page finds each element as Plotly makes it a figure
     (its class js-plotly-plot), listens to it, and takes the drawing that made it (Plotly draws
     these figures in one go: it has ended by the observer's turn). */
  const listened = new WeakSet();
  const listen = (gd) => {
    if (listened.has(gd) || typeof gd.on !== 'function' || !gd._fullLayout) return;
    listened.add(gd);
    /* Plotly says so from inside the drawing, which may be inside Gradio's update of the page:
       the hooks run once that has ended (the sliders show the values that came with the figure) */
    const drawn = () => queueMicrotask(() => whenDrawn(gd));
    gd.on('plotly_afterplot', drawn);
    gd.on('plotly_react', drawn);
    whenDrawn(gd);
  };
  const look = (node) => {
    if (!(node instanceof Element)) return;
    if (node.classList.contains('js-plotly-plot')) listen(node);
    for (const gd of node.querySelectorAll('.js-plotly-plot')) listen(gd);
  };
  new MutationObserver((records) => {
    for (const r of records) {
      if (r.type !== 'attributes') for (const node of r.addedNodes) look(node);
      else if (r.target.classList?.contains('js-plotly-plot')) listen(r.target);
    }
  }).observe(document.documentElement, {subtree: true, childList: true, attributes: true,
                                         attributeFilter: ['class']});

  /* ---- numbers a drawn figure waits for -------------------------------------------------------
     A figure whose numbers came packed (layout.meta.packed) or that names the head switch data
     (layout.meta.fill) is drawn by Gradio without them. Once it is drawn they are written into
     its data and Plotly draws it again (Plotly.redraw), before the page paints: its hooks run
     on that drawing. Data that never arrives or fails to decode leaves the figure without
     numbers and turns filling off for the page (the server sends complete figures from the next
     event on). */
  const owes = (gd) => {
    const meta = gd.layout?.meta, data = gd.data;
    if (!meta || !Array.isArray(data)) return false;
    const own = meta.packed?.cells?.some(([t, f]) => data[t] && data[t][f] == null);
    return !!own || !!meta.fill?.z?.some((cells, i) => data[i] && data[i].z == null);
  };
  const filled = async (gd) => {
    const meta = gd.layout.meta, data = gd.data;
    if (meta.packed) await unpackInto(data, meta.packed).catch(() => { broken = true; });
    const spec = meta.fill;
    if (spec) {
      const d = await fill.get(spec.data);
      if (d && d.id === spec.data && d.run === meta.run) {
        spec.z.forEach((cells, i) => { if (data[i]) data[i].z = fill.z(d, cells, spec.hidden); });
      } else {
        broken = true;
      }
    }
    return !owes(gd);
  };
  const whenDrawn = (gd) => {
    if (gd.taFilled === gd.data || !owes(gd)) { ta.onDraw(gd); return; }
    if (gd.taFilling === gd.data) return;  /* its numbers are on their way */
    const data = (gd.taFilling = gd.data);
    filled(gd).then((complete) => {
      if (gd.data !== data || !gd.isConnected) return;  /* drawn anew meanwhile, or gone */
      gd.taFilled = data;  /* as complete as it gets: later drawings run the hooks at once */
      if (complete) return window.Plotly.redraw(gd);  /* a drawing: its hooks run then */
      ta.onDraw(gd);
    }).catch((e) => ta.fault('a figure\'s numbers', e));
  };

  /* ---- Plotly, as Gradio's chunk sets it --------------------------------------------------
     Gradio's Plotly chunk sets window.Plotly as it loads, just before it draws the first figure:
     ta.withPlotly(fn) runs fn(Plotly) then (the page's language for the toolbars:
     gradio_words.js), or at once where it is there already. */
  const ready = [];
  ta.withPlotly = (fn) => { if (plotly) fn(plotly); else ready.push(fn); };
  if (!plotly) {
    Object.defineProperty(window, 'Plotly', {
      configurable: true, enumerable: true,
      get: () => plotly,
      set: (v) => {
        plotly = v;
        for (const fn of ready.splice(0)) {
          try { fn(v); } catch (e) { ta.fault('a script waiting for Plotly', e); }
        }
      },
    });
  }
  /* The config Gradio drew a figure with (its toolbar, its download's name): a figure the page
     draws again passes it (Plotly.react without one would bring back Plotly's defaults, the
     camera saving "newplot.png"). */
  ta.configOf = (gd) => {
    const c = gd && gd._context;
    if (!c) return undefined;
    return {displaylogo: c.displaylogo, modeBarButtonsToRemove: c.modeBarButtonsToRemove,
            toImageButtonOptions: c.toImageButtonOptions, responsive: c.responsive};
  };
  fill.numbers = filled;  /* a drawn figure's numbers written into its data (tests call it) */
  fill.pending = (gd) => gd.taFilled !== gd.data && owes(gd);  /* its numbers on their way */
  ta.fill = fill;
})();
