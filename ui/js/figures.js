/* Transformer Anatomy's page code: what the page does with drawn figures — long titles wrap on a
   phone, and an overview tile opens its head. Every hook runs on ta.onDraw (fill.js), the moment
   Gradio has drawn a figure: no polling. */
(() => {
  const ta = (window.ta = window.ta || {});

  /* ---- long titles on a narrow screen ---------------------------------------------------------
     Plotly never wraps a title, and the part beyond the figure's width is cut. After each draw,
     every title line wider than the figure is broken at its last space, "·" or Chinese
     punctuation that fits (inside <sup> too), and the top margin grows by a line per break. The
     unwrapped title stays on the figure (gd.taTitle) for the head switch, which replaces the
     head's part of it. The measuring waits for the frame after the draw: measured at once, it
     forced a layout of the whole page inside every draw. */
  /* Each line of `parts` (a title split at its <br>) whose width (px) is over `room` broken
     at its last space, "·" or Chinese punctuation that fits, inside <sup> too: the new title. */
  const wrapParts = (parts, widths, room) => parts.map((part, i) => {
    const width = widths[i];
    if (width <= room) return part;
    const units = part.match(/<[^>]+>|&#?\w+;|[\s\S]/g) || [];
    const seen = units.filter((u) => !u.startsWith('<')).length;
    const budget = Math.max(8, Math.floor(seen * room / width));
    const pieces = []; let piece = [], count = 0, cut = -1, sup = false, supAtCut = false;
    for (const u of units) {
      piece.push(u);
      if (u.toLowerCase() === '<sup>') sup = true;
      if (u.toLowerCase() === '</sup>') sup = false;
      if (u.startsWith('<')) continue;
      count += 1;
      if (/[\s·，；：、—]/.test(u)) { cut = piece.length; supAtCut = sup; }
      if (count >= budget) {
        const at = cut > piece.length / 3 ? cut : piece.length;
        const inSup = at === cut ? supAtCut : sup;
        pieces.push(piece.slice(0, at).join('') + (inSup ? '</sup>' : ''));
        piece = (inSup ? ['<sup>'] : []).concat(piece.slice(at));
        count = piece.filter((v) => !v.startsWith('<')).length; cut = -1;
      }
    }
    pieces.push(piece.join(''));
    return pieces.join('<br>');
  }).join('<br>');
  const LINES = /<br\s*\/?>/i;
  /* px the title's lines take: a line of the title's own 15 px type 20, a <sup> line 15 */
  const linesHeight = (text) => text.split(LINES)
    .reduce((sum, line) => sum + (/^\s*<sup>/i.test(line) ? 15 : 20), 0);
  const roomOf = (gd) => gd.getBoundingClientRect().width * 0.98 - 12;

  /* After the draw, measured on the drawn title: a title wrapped before the draw (ta.prewrap,
     below) is checked once, and broken further only where its measured guess fell short. */
  const fits = (gd) => {
    const text = String(gd.layout?.title?.text ?? '');
    if (!text || (text === gd.taWrapped && gd.taChecked)) return;
    if (text !== gd.taWrapped) {
      gd.taTitle = text;
      gd.taBase = gd.taBase ?? gd.layout.margin?.t ?? 48;
    }
    gd.taChecked = true;
    /* Plotly writes a title of one line as the text itself, of several as tspan.line each. */
    let lines = [...gd.querySelectorAll('.gtitle tspan.line')];
    if (!lines.length && gd.querySelector('text.gtitle')) lines = [gd.querySelector('text.gtitle')];
    const room = roomOf(gd);
    const parts = text.split(LINES);
    if (!lines.length || lines.length !== parts.length || room < 100) return;
    const out = wrapParts(parts, lines.map((line) => line.getComputedTextLength()), room);
    if (out === text) return;
    gd.taWrapped = out;
    const top = gd.taBase + linesHeight(out) - linesHeight(gd.taTitle);
    window.Plotly.relayout(gd, {'title.text': gd.taWrapped, 'margin.t': top});
  };

  /* Before the draw (fill.js's Plotly.react wrapper): the title's lines measured on a canvas in
     the title's font (<sup> at Plotly's 70 %), wrapped the same way, and the top margin grown,
     so a phone draws each figure once: wrapped after its draw, every figure with a long title
     was laid out and drawn a second time (a third of an Attention tab switch on a phone).
     Returns [data, layout] with the wrapped title, or null. */
  const ruler = document.createElement('canvas').getContext('2d');  /* text measured */
  const plain = (text) => text.replace(/&lt;/g, '<').replace(/&gt;/g, '>').replace(/&quot;/g, '"')
    .replace(/&#(x[0-9a-f]+|\d+);/gi, (_, n) => String.fromCodePoint(+`0${n}`.replace(/^0x/i, '0x')))
    .replace(/&amp;/g, '&');
  const lineWidth = (part, size, family) => {
    let width = 0, sup = false;
    for (const piece of part.split(/(<[^>]+>)/)) {
      if (piece.startsWith('<')) {
        if (/^<sup>$/i.test(piece)) sup = true;
        if (/^<\/sup>$/i.test(piece)) sup = false;
        continue;
      }
      ruler.font = `${sup ? 0.7 * size : size}px ${family}`;
      width += ruler.measureText(plain(piece)).width;
    }
    return width;
  };
  /* The title's size as the page's style sets it (app.css: 12 px on a narrow screen), read
     from a probe title inside the figure's element (once per window width); else the
     layout's. */
  let probed = {width: -1, size: null};
  const styledSize = (el) => {
    if (probed.width !== window.innerWidth) {
      const svg = document.createElementNS('http://www.w3.org/2000/svg', 'svg');
      const text = document.createElementNS('http://www.w3.org/2000/svg', 'text');
      text.setAttribute('class', 'gtitle');
      text.style.fontSize = '1px';  /* a size the page's style does not replace stays this */
      const box = document.createElement('div');  /* a figure before its first draw has */
      box.className = 'js-plotly-plot';  /* not this class yet: the style asks for it */
      svg.append(text);
      box.append(svg);
      el.append(box);
      const size = parseFloat(getComputedStyle(text).fontSize);
      box.remove();
      probed = {width: window.innerWidth, size: size > 1 ? size : null};
    }
    return probed.size;
  };
  ta.prewrap = (gd, data, layout) => {
    const el = typeof gd === 'string' ? document.getElementById(gd) : gd;
    const text = String(layout?.title?.text ?? '');
    if (!el || !text || text === el.taWrapped || !el.closest('#tabs')) return null;
    const room = roomOf(el);  /* a canvas's measure: the drawn title is checked after */
    if (room < 100) return null;
    const font = {...layout.font, ...layout.title.font};
    const size = styledSize(el) || font.size || 1.4 * (layout.font?.size || 12);
    const family = font.family || '"Open Sans", verdana, arial, sans-serif';
    const parts = text.split(LINES);
    const out = wrapParts(parts, parts.map((part) => lineWidth(part, size, family)), room);
    if (out === text) return null;
    const base = layout.margin?.t ?? 48;
    Object.assign(el, {taTitle: text, taBase: base, taWrapped: out, taChecked: false});
    const margin = {...layout.margin, t: base + linesHeight(out) - linesHeight(text)};
    return [data, {...layout, title: {...layout.title, text: out}, margin}];
  };
  ta.drawHooks.push((gd) => {
    if (gd.taWrap || !gd.on || !gd.closest('#tabs') || ta.laidOut(gd)) return;
    gd.taWrap = true;
    gd.on('plotly_afterplot', () => requestAnimationFrame(() => setTimeout(() => fits(gd))));
    fits(gd);
  });

  /* ---- tick labels that never overlap ----------------------------------------------------------
     A category axis's labels (crowded on a phone or a tablet) are stood upright when they are
     closer than two lines apart at their slant, and thinned to every k-th when even upright ones
     would touch. Measured after the draw, from the axis Plotly laid out. An axis that places its
     own few labels (tickvals: the overview's heads and layers) keeps them: they are only stood
     upright where even those would touch (thinning them would show the categories instead). */
  const LINE = 13;  /* px a label needs across its direction */
  /* What a category axis whose labels are `gap` px apart needs: turned upright (an x axis,
     or one whose drawn labels touch) and/or shown every k-th; {} when nothing. An axis turned
     or thinned more already (before the draw) is kept as it is. */
  const crowded = (gap, x, placed, user, touch = false) => {
    const change = {};
    if (x && (gap < 2 * LINE || touch) && user.tickangle !== -90) {
      Object.assign(change, {tickangle: -90, automargin: true});  /* pushes the title down */
    }
    const every = Math.ceil(LINE / gap);
    if (gap > 0 && gap < LINE && !placed && !(user.dtick >= every)) {
      Object.assign(change, {dtick: every, tick0: 0});
    }
    return change;
  };
  const spaced = (gd) => {
    const full = gd._fullLayout;
    if (!full || !window.Plotly || gd.closest('[data-ta-shown]')) return;
    const update = {};
    for (const key of Object.keys(full)) {
      const axis = full[key];
      if (!/^[xy]axis\d*$/.test(key) || !axis || axis.type !== 'category' || !axis._length) continue;
      if (axis.showticklabels === false) continue;
      const placed = axis.tickmode === 'array';
      const n = placed ? (axis.tickvals || []).length : (axis._categories || []).length;
      if (n < 2) continue;
      const gap = axis._length / n;
      const user = gd.layout[key] || {};
      const x = key[0] === 'x';  /* y labels lie along their line: only thinned, never turned */
      /* ... or wherever two neighbouring labels, as drawn, touch (long words side by side) */
      const drawn = x ? [...gd.querySelectorAll(`.${axis._id}tick text`)]
        .map((t) => t.getBoundingClientRect()).filter((r) => r.width) : [];
      const touch = drawn.some((r, i) => i && r.left < drawn[i - 1].right + 2
        && r.top < drawn[i - 1].bottom && r.bottom > drawn[i - 1].top);
      const change = crowded(gap, x, placed, user, touch);
      for (const [name, value] of Object.entries(change)) update[`${key}.${name}`] = value;
      /* the value axis's lowest label ("0") stands clear of the first upright label */
      const y = 'yaxis' + String(axis.anchor || 'y').slice(1);
      if (change.tickangle && full[y]) update[`${y}.ticklabelstandoff`] = 6;
    }
    if (Object.keys(update).length) window.Plotly.relayout(gd, update);
  };
  ta.drawHooks.push((gd) => {
    if (!gd.closest('#tabs') || ta.laidOut(gd)) return;
    requestAnimationFrame(() => spaced(gd));
  });

  /* The same, before the draw (fill.js's Plotly.react wrapper), from the figure's width and
     height less its margins: a crowded axis (a head view of 128 tokens on any screen) was laid
     out and drawn a second time when `spaced` turned its labels after the draw. The guess takes
     each axis a tenth shorter (and less 60 px for a colour bar) than it can be drawn: it turns and
     thins at least as much as `spaced` would, which then finds nothing to change. Axes whose
     cells are square (scaleanchor) share the smaller step. Returns [data, layout] or null. */
  ta.prespace = (gd, data, layout) => {
    const el = typeof gd === 'string' ? document.getElementById(gd) : gd;
    if (!el || !layout || !Array.isArray(data) || !el.closest('#tabs')) return null;
    if (el.closest('[data-ta-shown]')) return null;
    const width = el.getBoundingClientRect().width, height = layout.height;
    if (!width || !height) return null;
    const m = {l: 80, r: 80, t: 100, b: 80, ...layout.margin};
    /* a colour bar pushes a narrow right margin out (the head view's holds its bar already) */
    const bar = m.r < 100 && data.some((t) => t && t.showscale !== false
      && (t.type === 'heatmap' || t.colorbar));
    const steps = {};
    for (const key of Object.keys(layout)) {
      const axis = layout[key];
      if (!/^[xy]axis\d*$/.test(key) || axis?.type !== 'category') continue;
      if (axis.showticklabels === false) continue;
      const id = key[0] + key.slice(5), x = key[0] === 'x';
      const placed = axis.tickmode === 'array';
      const n = placed ? (axis.tickvals || []).length : Math.max(0, ...data
        .filter((t) => (t?.[x ? 'xaxis' : 'yaxis'] || key[0]) === id)
        .map((t) => (Array.isArray(t[key[0]]) ? t[key[0]].length : 0)));
      if (n < 2) continue;
      const [d0, d1] = axis.domain || [0, 1];
      const span = x ? width - m.l - m.r - (bar ? 60 : 0) : height - m.t - m.b;
      if (span <= 0) continue;  /* no guess: `spaced` measures it after the draw */
      steps[key] = {n, placed, x, step: 0.9 * Math.max(0, span) * (d1 - d0) / n};
    }
    for (const [key, s] of Object.entries(steps)) {  /* square cells: the smaller step */
      const other = layout[key].scaleanchor;
      const partner = other && steps[other[0] + 'axis' + other.slice(1)];
      if (partner) s.step = partner.step = Math.min(s.step, partner.step);
    }
    const update = {};
    for (const [key, s] of Object.entries(steps)) {
      const user = layout[key], change = crowded(s.step, s.x, s.placed, user);
      if (!Object.keys(change).length) continue;
      update[key] = {...user, ...update[key], ...change};
      const y = 'yaxis' + String(user.anchor || 'y').slice(1);
      if (change.tickangle && layout[y]) {
        update[y] = {...layout[y], ...update[y], ticklabelstandoff: 6};
      }
    }
    return Object.keys(update).length ? [data, {...layout, ...update}] : null;
  };

  /* Where two number axes meet, the value axis's lowest label (centred on the plot's bottom
     edge) and the first label under the plot (centred on a tick near its left edge) can lie
     over each other: the Heads tab's map of heads on a phone, "−0.02" over "−0.02". The labels
     under the plot then stand as much lower as they overlapped, plus 2 px. Measured after every
     layout (a wrapped title or a resize moves the ticks); once clear, nothing changes. */
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

  /* ---- a figure laid out again for a narrow screen ---------------------------------------------
     A figure whose panels sit side by side can carry, in layout.meta.narrow, how to lay them out
     when it is drawn narrower than `below` px (a phone): `layout` (a Plotly.relayout update, e.g.
     the panels stacked) and `traces` ({trace index: restyle update}, e.g. a colour bar moved). */
  ta.drawHooks.push((gd) => {
    const narrow = gd.layout?.meta?.narrow;
    if (!narrow || gd.taNarrow === narrow || !window.Plotly) return;
    if (gd.getBoundingClientRect().width >= narrow.below) return;
    gd.taNarrow = narrow;
    const traces = Object.keys(narrow.traces || {}).map(Number);
    const restyle = {};
    for (const [i, change] of Object.entries(narrow.traces || {})) {
      for (const [key, value] of Object.entries(change)) {
        (restyle[key] = restyle[key] || traces.map(() => undefined))[traces.indexOf(+i)] = value;
      }
    }
    window.Plotly.update(gd, restyle, narrow.layout || {}, traces.length ? traces : undefined);
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

  /* ---- square cells on a narrow screen give back the height they cannot use --------------------
     A figure whose cells are square (the overview: layout.meta.fit_height) is laid out for the
     page's width; on a phone its plot shrinks with the width and left most of its height empty,
     with a colour bar as tall as the figure. Below `below` px wide it is made as tall as its plot
     and margins. */
  ta.drawHooks.push((gd) => {
    const fit = gd.layout?.meta?.fit_height;
    if (!fit || !window.Plotly || gd.closest('[data-ta-shown]')) return;
    requestAnimationFrame(() => {
      const full = gd._fullLayout, ya = full?.yaxis;
      if (!ya?._length || gd.getBoundingClientRect().width >= fit.below) return;
      const want = Math.ceil(full.margin.t + full.margin.b + ya._length + fit.pad);
      if (full.height - want > 2 * fit.pad) window.Plotly.relayout(gd, {height: want});
    });
  });

  /* ---- panels side by side stack on a narrow screen -------------------------------------------
     Two heads compared (A, B, A−B), the masking steps, the padding masks and the attention block
     put their panels side by side: on a phone each got a third of 326 px, their titles printed
     over each other, or the figure was cut at the screen's edge. Drawn narrower than STACK_BELOW
     px, a figure of several panel columns is laid out again in one column, in reading order:
     each panel as wide as the plot, as tall as its own shape asks (square cells stay square),
     its title above it at the left, its colour bar beside it, the figure as tall as it needs.
     A figure that brings its own narrow layout (layout.meta.narrow, above) keeps that. */
  const STACK_BELOW = 560;
  const near = (a, b) => Math.abs(a - b) < 0.02;
  /* Called by fill.js's Plotly.react wrapper before every draw (before Plotly lays the panels
     out at a third of a phone's width, which it cannot do for square cells: "Something went
     wrong with axis scaling"). Returns [data, layout] copies laid out in one column, or null. */
  ta.stackNarrow = (gd, data, layout) => {
    const el = typeof gd === 'string' ? document.getElementById(gd) : gd;
    if (!el || !layout || !Array.isArray(data) || layout.meta?.narrow) return null;
    if (!el.closest('#tabs') || el.closest('[data-ta-shown]')) return null;
    const width = el.getBoundingClientRect().width;
    if (!width || width >= STACK_BELOW) return null;
    const L = JSON.parse(JSON.stringify({...layout, meta: undefined}));
    L.meta = layout.meta;
    const cells = Object.keys(L).filter((k) => /^xaxis\d*$/.test(k) && L[k]?.domain).map((k) => {
      const y = 'yaxis' + String(L[k].anchor || 'y').slice(1);
      return {x: k, y, xd: L[k].domain, yd: (L[y] || {}).domain || [0, 1]};
    });
    const columns = new Set(cells.map((c) => c.xd[0].toFixed(2)));
    if (cells.length < 2 || columns.size < 2) return null;
    cells.sort((a, b) => (near(a.yd[1], b.yd[1]) ? a.xd[0] - b.xd[0] : b.yd[1] - a.yd[1]));
    const short = (key) => key.replace('axis', '');  /* "xaxis3" -> "x3" */
    const m = {l: 80, r: 80, t: 100, b: 80, ...(L.margin || {})};
    const plotW = Math.max(1, width - m.l - m.r), plotH = Math.max(1, (L.height || 450) - m.t - m.b);
    const room = 0.86;  /* the colour bars' strip at the right */
    const newW = Math.max(80, plotW * room);
    /* Between panels: the panel above's key labels (slanted or upright: about their length),
       its axis title, and this panel's title. */
    const chars = Math.max(1, ...data.flatMap((t) => (Array.isArray(t?.x) ? t.x : [])
      .slice(0, 400).map((v) => String(v).length)));
    const titled = cells.some((c) => L[c.x]?.title?.text);
    const gap = Math.round(Math.min(130, 7 * chars + 14) + (titled ? 26 : 0) + 26);
    const heights = cells.map((c) => {
      const w = (layout.width || 640) * (c.xd[1] - c.xd[0]), h = plotH * (c.yd[1] - c.yd[0]);
      return Math.min(1.3 * newW, Math.max(120, h * newW / Math.max(w * 0.8, 1)));
    });
    const inner = heights.reduce((a, b) => a + b, 0) + gap * (cells.length - 1);
    L.height = Math.ceil(m.t + m.b + inner);
    /* Panels that shared one y axis (three maps over the same queries) get a copy each, so
       each can have its own row; a copy keeps the axis's labels, order and square cells. */
    let free = 1 + Math.max(1, ...Object.keys(L).map((k) => +(/^[xy]axis(\d+)$/.exec(k)?.[1] || 1)));
    const seen = new Set(), traceAxis = {};
    for (const c of cells) {
      if (!seen.has(c.y)) { seen.add(c.y); continue; }
      const name = `yaxis${free++}`;
      L[name] = {...JSON.parse(JSON.stringify(L[c.y] || {})), anchor: short(c.x)};
      if (L[name].scaleanchor) L[name].scaleanchor = short(c.x);
      L[c.x].anchor = short(name);
      traceAxis[short(c.x)] = short(name);
      c.y = name;
    }
    let top = inner;
    const spans = cells.map((c, i) => {
      const span = [(top - heights[i]) / inner, top / inner];
      top -= heights[i] + gap;
      L[c.x].domain = [0, room];
      L[c.y] = {...(L[c.y] || {}), domain: span, showticklabels: true};  /* each row names its queries */
      return span;
    });
    for (const a of L.annotations || []) {  /* a panel's title sits on its top edge */
      if (a.xref !== 'paper' || a.yref !== 'paper') continue;
      const i = cells.findIndex((c) => a.x >= c.xd[0] - 0.01 && a.x <= c.xd[1] + 0.01
        && near(a.y, c.yd[1]));
      if (i >= 0) Object.assign(a, {x: 0, xanchor: 'left', y: spans[i][1], yanchor: 'bottom'});
    }
    /* Each colour bar upright beside its panels (a bar laid under a row of panels would sit
       in the next panel's title): a trace's own, or a colour axis's beside all it colours. */
    const upright = (bar, lo, hi) => ({...(bar || {}), y: (lo + hi) / 2, len: hi - lo,
      yanchor: 'middle', orientation: 'v', x: room + 0.02, xanchor: 'left', lenmode: 'fraction',
      yref: 'paper', thickness: 10});
    const axes = {};
    const traces = data.map((t) => {
      const i = t ? cells.findIndex((c) => c.x === 'xaxis' + String(t.xaxis || 'x').slice(1)) : -1;
      if (i < 0) return t;
      const out = {...t};
      if (traceAxis[short(cells[i].x)]) out.yaxis = traceAxis[short(cells[i].x)];
      if (t.coloraxis) {
        const span = axes[t.coloraxis] || [1, 0];
        axes[t.coloraxis] = [Math.min(span[0], spans[i][0]), Math.max(span[1], spans[i][1])];
      } else if (/heatmap/.test(t.type || '')) {
        out.colorbar = upright(t.colorbar, ...spans[i]);
      }
      return out;
    });
    for (const [axis, [lo, hi]] of Object.entries(axes)) {
      const key = axis.replace(/^coloraxis$/, 'coloraxis');
      L[key] = {...(L[key] || {}), colorbar: upright((L[key] || {}).colorbar, lo, hi)};
    }
    el.taStacked = true;
    return [traces, L];
  };

  /* ---- point labels and panel titles that would lie over each other -------------------------
     A map of heads (the Heads tab) labels every point "layer.head": where points crowd (a
     phone, or a dozen heads in one cluster) the labels piled into one blob. After each draw,
     a label that would cover one kept before it is left out (its point keeps its hover and
     click). A panel title (an annotation) wider than the figure is broken over lines, as the
     figure's own title is. */
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
  const wrapNotes = (gd) => {
    const notes = gd.layout?.annotations;
    if (!Array.isArray(notes) || !window.Plotly) return;
    /* within the plot's width: the colour bars stand to its right */
    const size = gd._fullLayout?._size;
    const right = size ? gd.getBoundingClientRect().left + size.l + size.w
      : gd.getBoundingClientRect().right - 4;
    const update = {};
    gd.querySelectorAll('.annotation').forEach((g, i) => {
      const text = g.querySelector('.annotation-text');
      const box = text?.getBoundingClientRect();
      const note = notes[i];
      if (!box || !note || typeof note.text !== 'string' || box.right <= right + 1) return;
      const room = right - box.left;
      if (room < 60) return;
      const cs = getComputedStyle(text);
      ruler.font = `${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      const wide = (s) => ruler.measureText(s.replace(/<[^>]+>/g, '')).width;
      /* Latin words whole, Chinese characters one by one (no spaces between them); the
         breaks the server wrote stay. */
      const lines = [];
      for (const part of note.text.split(/<br\s*\/?>/i)) {
        const units = part.match(/[\u3000-\u9fff\uff00-\uffef]|[^\s\u3000-\u9fff\uff00-\uffef]+|\s+/g) || [];
        let line = '';
        for (const unit of units) {
          if (line.trim() && unit.trim() && wide(line + unit) > room) {
            lines.push(line.trim()); line = unit;
          } else line += unit;
        }
        lines.push(line.trim());
      }
      const wrapped = lines.join('<br>');
      if (wrapped !== note.text) update[`annotations[${i}].text`] = wrapped;
    });
    if (Object.keys(update).length) window.Plotly.relayout(gd, update);
  };
  ta.drawHooks.push((gd) => {
    if (!gd.closest('#tabs')) return;
    requestAnimationFrame(() => { thinLabels(gd); wrapNotes(gd); });
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
