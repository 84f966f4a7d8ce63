/* Transformer Anatomy's page code: a figure drawn for a room or a slide. Used by presentation
   mode (present.js), the slide exports (exports.js) and the deck's offline file (ui/deck.py
   embeds this file), so a figure looks the same on the projector, in a PNG and in the deck. */
(() => {
  const ta = (window.ta = window.ta || {});
  const deep = (v) => (v && typeof v === 'object' ? JSON.parse(JSON.stringify(v)) : v);
  /* Panels in several rows (the padding masks of two texts): the gap between two rows must hold
     the upper row's key labels, standing upright at the room's font size, and the lower row's
     panel titles. The server spaced the rows for the page's small labels; drawn big, the titles
     of the lower row printed over the labels of the upper one. Rows keep their order and their
     share of the height; only the gaps grow, where they are too small. */
  const rowsApart = (data, out, height, top, font) => {
    const rows = new Map();  /* "d0,d1" of a y domain -> its y axes */
    for (const key of Object.keys(out)) {
      const domain = /^yaxis\d*$/.test(key) && out[key] && out[key].domain;
      if (domain) rows.set(String(domain), [...(rows.get(String(domain)) || []), key]);
    }
    if (rows.size < 2) return;
    const ordered = [...rows.entries()].map(([d, keys]) => ({d: d.split(',').map(Number), keys}))
      .sort((a, b) => b.d[1] - a.d[1]);
    const chars = (row) => Math.max(0, ...data
      .filter((t) => t && row.keys.includes('yaxis' + String(t.yaxis || 'y').slice(1)))
      .flatMap((t) => (Array.isArray(t.x) ? t.x : []).map((v) => String(v).length)));
    const plot = Math.max(100, height - top - font * 6);
    const need = ordered.slice(0, -1).map((row) => (chars(row) * 0.62 + 3.4) * font / plot);
    const gaps = ordered.slice(1).map((row, i) => ordered[i].d[0] - row.d[1]);
    if (gaps.every((g, i) => g >= need[i])) return;
    const want = gaps.map((g, i) => Math.max(g, need[i]));
    const spans = ordered.map((row) => row.d[1] - row.d[0]);
    const scale = (1 - want.reduce((a, b) => a + b, 0)) / spans.reduce((a, b) => a + b, 0);
    if (scale <= 0.2) return;  /* no room: leave the server's layout */
    let at = 1;
    ordered.forEach((row, i) => {
      const d = [at - spans[i] * scale, at];
      for (const key of row.keys) out[key].domain = d;
      for (const note of out.annotations || []) {  /* the row's panel titles ride on its top */
        if ((note.yref || 'paper') === 'paper' && Math.abs((note.y ?? -1) - row.d[1]) < 1e-6) note.y = d[1];
      }
      at = d[0] - (want[i] || 0);
    });
  };
  /* A figure's layout and traces redrawn at width × height with text of `font` px: axes, titles,
     annotations, legends and colour bars (the traces are new objects; their arrays are shared). */
  ta.bigLayout = (data, layout, width, height, font) => {
    const out = deep({...layout, meta: undefined});
    out.meta = layout.meta;
    Object.assign(out, {width, height, autosize: false});
    out.font = {...(out.font || {}), size: font};
    const title = typeof out.title === 'string' ? {text: out.title} : out.title || {};
    const lines = String(title.text || '').split(/<br\s*\/?>/i).length;
    const size = Math.round(font * 1.2);
    /* Plotly sets a multi-line title's first baseline (not its top) at y: one line lower. */
    /* The server's padding above the title (the page's toolbar band) is not the room's: kept,
       it pushed a three-line title's last line onto the panels under it. */
    out.title = {...title, font: {...(title.font || {}), size},
      yref: 'container', y: 1 - (8 + size) / height, yanchor: 'top', pad: {t: 0}};
    let top = Math.round(font * 1.45 * lines + 14);
    for (const key of Object.keys(out)) {
      if (!/^[xy]axis\d*$/.test(key) || !out[key]) continue;
      const axis = out[key];
      axis.tickfont = {...(axis.tickfont || {}), size: font};
      axis.automargin = true;
      if (key.startsWith('x')) axis.tickangle = 'auto';  /* horizontal where the labels fit */
      if (key.startsWith('x') && axis.side === 'top') {
        /* labels over the plot ("H0<br>kv0" under grouped-query attention: two lines each) */
        const rows = Math.max(1, ...(axis.ticktext || []).map((t) => String(t).split(/<br\s*\/?>/i).length));
        top = Math.max(top, Math.round(font * 1.45 * lines + 14 + font * (0.6 + 1.4 * rows)));
      }
      if (axis.title && typeof axis.title === 'object') {
        axis.title.font = {...(axis.title.font || {}), size: font};
      }
    }
    /* Panel titles over the top row (a line of `font` px, ~1.4 of it high) under the title's
       lines: 2.4 lines of room. The presented padding masks settle in one of two layouts,
       whichever Plotly's margins reach first (their x labels flat or slanted: 22 px of height
       apart); with 2.8 the slanted one gave the plot 430 of 720 px, under three fifths. */
    for (const note of out.annotations || []) {
      note.font = {...(note.font || {}), size: font};
      if ((note.yref || "paper") === "paper" && note.y >= 1) top = Math.max(top, lines * font * 1.45 + 14 + font * 2.4);
    }
    if (out.legend) out.legend.font = {...(out.legend.font || {}), size: font};
    /* A square map of tokens (the head view) is as tall as the screen lets it be: its x axis's
       title ("key") joins the y axis's beside the plot ("query ↓ · key →"), giving the plot the
       line it took under the key labels, which stand upright on a long sentence. */
    const xt = out.xaxis?.title?.text, yt = out.yaxis?.title?.text;
    if (out.yaxis?.scaleanchor === 'x' && !out.xaxis2 && xt && yt) {
      out.yaxis.title = {...out.yaxis.title, text: `${yt} ↓ · ${xt} →`};
      out.xaxis.title = {...out.xaxis.title, text: ''};
      /* The key labels without their positions ("because", not "9·because"): the rows,
         labelled with the same tokens in the same order, keep them. */
      const keys = data[0] && Array.isArray(data[0].x) ? data[0].x.map(String) : null;
      if (keys && out.xaxis.type === 'category' && out.xaxis.tickmode !== 'array'
          && keys.every((k) => /^\d+·/.test(k))) {
        Object.assign(out.xaxis, {tickmode: 'array', tickvals: keys,
          ticktext: keys.map((k) => k.replace(/^\d+·/, ''))});
      }
    }
    rowsApart(data, out, height, top, font);
    /* The title's lines (and ticks on top) set the top; the axes' labels push the other sides
       out (automargin). */
    out.margin = {...(out.margin || {}), t: Math.round(top), l: 16, r: 16, b: 16, pad: 0};
    const traces = data.map((trace) => {
      if (!trace || !(trace.colorbar || /heatmap|contour/.test(trace.type || ''))) return trace;
      const cb = deep(trace.colorbar || {});
      cb.tickfont = {...(cb.tickfont || {}), size: font};
      if (cb.title && typeof cb.title === 'object') {
        cb.title.font = {...(cb.title.font || {}), size: font};
      }
      return {...trace, colorbar: cb};
    });
    return [traces, out];
  };
  /* A square heatmap narrows to its height (scaleanchor): its colour bar moves beside it. */
  ta.colorbarBeside = (gd) => {
    const full = gd._fullLayout, xa = full && full.xaxis;
    if (!xa || !full.yaxis || full.yaxis.scaleanchor !== 'x' || !Array.isArray(gd.data)) return;
    const x = Math.min(1.02, xa.domain[1] + 0.02);
    const which = gd.data.map((t, i) => (t && t.colorbar && t.showscale !== false ? i : -1))
      .filter((i) => i >= 0 && Math.abs((gd.data[i].colorbar.x ?? 1.02) - x) > 0.005);
    if (which.length) {
      window.Plotly.restyle(gd, {'colorbar.x': x, 'colorbar.xanchor': 'left'}, which);
    }
  };
})();
