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
  const fits = (gd) => {
    const text = String(gd.layout?.title?.text ?? '');
    if (!text || text === gd.taWrapped) return;
    gd.taTitle = text;
    gd.taBase = gd.taBase ?? gd.layout.margin?.t ?? 48;
    /* Plotly writes a title of one line as the text itself, of several as tspan.line each. */
    let lines = [...gd.querySelectorAll('.gtitle tspan.line')];
    if (!lines.length && gd.querySelector('text.gtitle')) lines = [gd.querySelector('text.gtitle')];
    const room = gd.getBoundingClientRect().width * 0.98 - 12;
    const parts = text.split(/<br\s*\/?>/i);
    if (!lines.length || lines.length !== parts.length || room < 100) return;
    let added = 0;
    const out = parts.map((part, i) => {
      const width = lines[i].getComputedTextLength();
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
      added += pieces.length - 1;
      return pieces.join('<br>');
    });
    if (!added) return;
    gd.taWrapped = out.join('<br>');
    const top = gd.taBase + 15 * added;
    window.Plotly.relayout(gd, {'title.text': gd.taWrapped, 'margin.t': top});
  };
  ta.drawHooks.push((gd) => {
    if (gd.taWrap || !gd.on || !gd.closest('#tabs')) return;
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
      if (x && gap < 2 * LINE && user.tickangle !== -90) update[`${key}.tickangle`] = -90;
      if (gap < LINE && !placed) {
        const every = Math.ceil(LINE / gap);
        if (user.dtick !== every) Object.assign(update, {[`${key}.dtick`]: every, [`${key}.tick0`]: 0});
      }
    }
    if (Object.keys(update).length) window.Plotly.relayout(gd, update);
  };
  ta.drawHooks.push((gd) => {
    if (!gd.closest('#tabs')) return;
    requestAnimationFrame(() => spaced(gd));
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

  /* ---- a figure wider than the screen says that it scrolls -------------------------------------
     Three panels side by side need ~640 px: on a phone they scroll sideways inside their own box
     (assets/app.css), which hid their right side and colour bar with no sign. A line above such a
     box says so while the box is wider than the screen and not scrolled to its end. */
  const SCROLLS = '#compare-plot, #score-steps-plot, #padding-mask-plot, #embedding-plot';
  const hinted = (box) => {
    let hint = box.previousElementSibling;
    if (!hint || !hint.classList.contains('ta-scroll-hint')) {
      hint = document.createElement('div');
      hint.className = 'ta-scroll-hint';
      box.before(hint);
      box.addEventListener('scroll', () => hinted(box), {passive: true});
    }
    hint.textContent = ta.t('⇆ Wider than the screen: swipe the figure sideways to see all of it.');
    hint.hidden = box.scrollWidth <= box.clientWidth + 4
      || box.scrollLeft + box.clientWidth >= box.scrollWidth - 4;
  };
  ta.drawHooks.push((gd) => {
    const box = gd.closest(SCROLLS);
    if (box) requestAnimationFrame(() => hinted(box));
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
