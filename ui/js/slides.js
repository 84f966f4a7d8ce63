/* Transformer Anatomy's page code: a figure drawn for a room or a slide. Used by presentation
   mode (present.js), the slide exports (exports.js) and the deck's offline file (ui/deck.py
   embeds this file), so a figure looks the same on the projector, in a PNG and in the deck. */
(() => {
  const ta = (window.ta = window.ta || {});
  const deep = (v) => (v && typeof v === 'object' ? JSON.parse(JSON.stringify(v)) : v);
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
    out.title = {...title, font: {...(title.font || {}), size},
      yref: 'container', y: 1 - (8 + size) / height, yanchor: 'top'};
    let top = Math.round(font * 1.45 * lines + 14);
    for (const key of Object.keys(out)) {
      if (!/^[xy]axis\d*$/.test(key) || !out[key]) continue;
      const axis = out[key];
      axis.tickfont = {...(axis.tickfont || {}), size: font};
      axis.automargin = true;
      if (key.startsWith('x')) axis.tickangle = 'auto';  /* horizontal where the labels fit */
      if (key.startsWith('x') && axis.side === 'top') top = Math.max(top, Math.round(font * 1.45 * lines + 14 + font * 2));
      if (axis.title && typeof axis.title === 'object') {
        axis.title.font = {...(axis.title.font || {}), size: font};
      }
    }
    for (const note of out.annotations || []) {
      note.font = {...(note.font || {}), size: font};
      if ((note.yref || 'paper') === 'paper' && note.y >= 1) top = Math.max(top, lines * font * 1.45 + 14 + font * 2.2);
    }
    if (out.legend) out.legend.font = {...(out.legend.font || {}), size: font};
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
