/* Transformer Anatomy's page code: what the page does with drawn figures — labels that the
   drawn figure shows lying over each other are moved or left out, and a clicked tile or point
   opens its head. A figure's layout (margins, titles, tick labels, panels on a phone) is the
   server's, for the screen the page reports (viz/screen.py, viz/fit.py): nothing here lays a
   figure out again. Every hook runs on ta.onDraw (fill.js), the moment Gradio has drawn a
   figure: no polling. */
(() => {
  const ta = (window.ta = window.ta || {});

  /* ---- number labels where two axes meet --------------------------------------------------
     Where two number axes meet, the value axis's lowest label (centred on the plot's bottom
     edge) and the first label under the plot (centred on a tick near its left edge) can lie
     over each other: the Heads tab's map of heads on a phone, "−0.02" over "−0.02". The labels
     under the plot then stand as much lower as they overlapped, plus 2 px. Measured after every
     layout (a resize moves the ticks); once clear, nothing changes. */
  const boxesOf = (gd, id) => [...gd.querySelectorAll(`.${id}tick text`)]
    .map((t) => t.getBoundingClientRect()).filter((r) => r.width);
  const clearCorner = (gd) => {
    const full = gd._fullLayout;
    if (!full || !window.Plotly || gd.closest('[data-ta-shown]')) return;
    const update = {};
    for (const key of Object.keys(full)) {
      const x = full[key];
      if (!/^xaxis\d*$/.test(key) || !x?._id || x.type === 'category') continue;
      const y = full['yaxis' + String(x.anchor || 'y').slice(1)];
      if (!y?._id || y.type === 'category' || !x.showticklabels || !y.showticklabels) continue;
      const ys = boxesOf(gd, y._id);
      let down = 0;
      for (const a of boxesOf(gd, x._id)) {
        for (const b of ys) {
          const h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
          if (h > 0 && Math.min(a.right, b.right) - Math.max(a.left, b.left) > 0) {
            down = Math.max(down, h);
          }
        }
      }
      if (down) update[`${key}.ticklabelstandoff`] = (x.ticklabelstandoff || 0) + Math.ceil(down) + 2;
    }
    if (Object.keys(update).length) window.Plotly.relayout(gd, update);
  };
  ta.drawHooks.push((gd) => {
    if (!gd.closest('#tabs')) return;
    if (!gd.taCorner && gd.on) {
      gd.taCorner = true;
      gd.on('plotly_afterplot', () => requestAnimationFrame(() => clearCorner(gd)));
    }
    requestAnimationFrame(() => clearCorner(gd));
  });

  /* ---- cell text too small to read is left out -----------------------------------------------
     A heatmap whose layout.meta.min_cell_font is set (the logit lens) keeps its cell text only
     where Plotly's own fitting gives it that many px or more at the width it is drawn or resized
     to: narrower (a laptop, a phone), its cells keep their colour and hover. The server leaves
     the text out already where a 1920 px page could not fit it (viz/logit_lens.py). */
  const dropSmallText = (gd) => {
    const least = gd.layout?.meta?.min_cell_font;
    const label = gd.querySelector('.heatmap-label text');
    if (!least || !label || parseFloat(getComputedStyle(label).fontSize) >= least) return;
    window.Plotly.restyle(gd, {texttemplate: ''}, [0]);
  };
  ta.drawHooks.push((gd) => {
    if (!gd.layout?.meta?.min_cell_font || !window.Plotly || gd.closest('[data-ta-shown]')) return;
    if (!gd.taCellText && gd.on) {  /* Plotly fits the text again on every resize: check again */
      gd.taCellText = true;
      gd.on('plotly_afterplot', () => dropSmallText(gd));
    }
    requestAnimationFrame(() => dropSmallText(gd));
  });

  /* ---- point labels that would lie over each other ------------------------------------------
     A map of heads (the Heads tab) labels every point "layer.head": where points crowd (a
     phone, or a dozen heads in one cluster) the labels piled into one blob. After each draw,
     a label that would cover one kept before it is left out (its point keeps its hover and
     click). */
  const overlap = (a, b) => Math.min(a.right, b.right) - Math.max(a.left, b.left) > 1
    && Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top) > 1;
  const thinLabels = (gd) => {
    if (!window.Plotly || !Array.isArray(gd.data)) return;
    const kept = [], texts = {};
    gd.querySelectorAll('.scatterlayer .trace').forEach((layer, i) => {
      const trace = gd.data[i];
      if (!trace || !Array.isArray(trace.text) || !/text/.test(trace.mode || '')) return;
      layer.querySelectorAll('.textpoint').forEach((point, j) => {
        const box = point.getBoundingClientRect();
        if (!box.width || !String(trace.text[j] ?? '').trim()) return;
        if (kept.some((k) => overlap(k, box))) {
          (texts[i] = texts[i] || [...trace.text])[j] = '';
        } else {
          kept.push(box);
        }
      });
    });
    const traces = Object.keys(texts).map(Number);
    if (!traces.length) return;
    gd.taThinned = true;  /* the full labels stay on the server's figure, for a redraw */
    window.Plotly.restyle(gd, {text: traces.map((i) => texts[i])}, traces);
  };
  ta.drawHooks.push((gd) => {
    if (!gd.closest('#tabs')) return;
    requestAnimationFrame(() => thinLabels(gd));
  });

  /* ---- a click on an overview tile selects that head -----------------------------------------
     gr.Plot has no click event: the tile's "layer,head,time" goes into a hidden gr.HTML
     (#overview-pick), whose change event selects the head on the server. */
  ta.tilePicker = (props, id = 'overview') => { (ta._pickers = ta._pickers || {})[id] = props; };
  ta.drawHooks.push((gd) => {
    if (gd.taPick || !gd.on || !gd.closest('#overview-plot')) return;
    gd.taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0], props = ta._pickers?.overview;
      if (!p || !props) return;
      const l = /^L(\d+)/.exec(String(p.y)), h = /^H(\d+)/.exec(String(p.x));
      if (!l || !h) return;
      props.value = `${l[1]},${h[1]},${Date.now()}`;
      /* The head opens in the head view above: bring it into sight. */
      document.querySelector('#head-plot')?.scrollIntoView({behavior: 'smooth', block: 'start'});
    });
  });
  /* ... and a head of the Heads tab's distance maps, one text's and the corpus's (their points
     carry [layer, head]; each map has its own picker, named after it). */
  const MAPS = {'distance-plot': 'distance', 'corpus-distance-plot': 'corpus-distance'};
  ta.drawHooks.push((gd) => {
    const map = gd.on && !gd.taPick && gd.closest('#distance-plot, #corpus-distance-plot');
    if (!map) return;
    gd.taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0], props = ta._pickers?.[MAPS[map.id]];
      const cell = p && p.customdata;
      if (!props || !cell || cell.length < 2) return;
      props.value = `${+cell[0]},${+cell[1]},${Date.now()}`;
    });
  });
  /* ... and a layer of the Attention tab's block figure (each tile's trace is named "L<layer>"):
     that layer, with the head the page shows now. */
  ta.drawHooks.push((gd) => {
    if (gd.taPick || !gd.on || !gd.closest('#block-plot')) return;
    gd.taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0], props = ta._pickers?.block;
      const layer = p && /^L(\d+)$/.exec(String(p.data?.name ?? ''));
      const head = document.querySelector('#head input[type=number]')?.value ?? '0';
      if (!props || !layer) return;
      props.value = `${layer[1]},${+head || 0},${Date.now()}`;
    });
  });

})();
