/* Transformer Anatomy's page code: the head switch, the browser's side of it (the server's side
   is ui/tabs/attention.py: the data every head is drawn from, and the figures). A layer or head
   change is drawn here from the run's data, with no request, whenever the browser can. */
(() => {
  const ta = (window.ta = window.ta || {});

  /* ---- the head switch (the browser side; the server side is ui/tabs/attention.py) -----------
     Draws another head into the head view from the run's data (decoded once by ta.fill): no
     request. Resolves true when the figure shows that head, false when it cannot (no data yet,
     the figure is from another run, or no DecompressionStream): the server draws it then. The
     status line's "Link to this view" (and with it the address bar) follows the switch. */
  ta.switches = ta.switches || {};

  /* A head's title and colour-bar labels differ from the last head's in their words and numbers
     only, most of the time: the same lines and <sup> parts, the same five labels at the same
     places (the bar's ticks sit at 0, ¼, ½, ¾ and all of its range: viz.attention.head_ticks).
     Then the text nodes Plotly drew are given the new words, which is what Plotly's own drawing
     of the new text makes of those elements (tests/test_classroom.py compares the two); a text
     of another shape is left to Plotly (false, nothing changed). `from` and `to` are Plotly's
     label HTML: tags, and text with entities. */
  const decoder = document.createElement('textarea');
  const decode = (text) => { decoder.innerHTML = text; return decoder.value; };
  const textNodes = (el) => {
    const out = [], walk = document.createTreeWalker(el, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (n.nodeValue && n.nodeValue !== '\u200b') out.push(n);  /* Plotly's spacers: no text */
    }
    return out;
  };
  const rewrite = (el, from, to, mark = true) => {
    const a = String(from ?? '').split(/(<[^>]*>)/), b = String(to ?? '').split(/(<[^>]*>)/);
    if (!el || a.length !== b.length) return null;
    if (a.some((part, i) => (i % 2 ? part !== b[i] : !part !== !b[i]))) return null;
    const nodes = textNodes(el), words = (parts) => parts.filter((p, i) => !(i % 2) && p);
    const was = words(a).map(decode);
    if (nodes.length !== was.length || nodes.some((n, i) => n.nodeValue !== was[i])) return null;
    const now = words(b).map(decode);
    return () => {
      nodes.forEach((n, i) => { n.nodeValue = now[i]; });
      if (mark) el.setAttribute('data-unformatted', to);
    };
  };
  /* A title with another number of lines (a faint head's has a line a strong head's has not):
     each new line is a copy of an old line of the same shape with its words rewritten, the
     lines stacked as Plotly stacks them (line i at i × 1.3 em below the first). null where a
     new line has no old line of its shape. */
  const LINE_EM = 1.3;
  const relines = (el, from, to) => {
    const was = String(from ?? '').split('<br>'), now = String(to ?? '').split('<br>');
    const lines = el ? [...el.children] : [];
    if (!lines.length || lines.length !== was.length) return null;
    if (lines.some((line) => !line.classList.contains('line'))) return null;
    const shape = (text) => text.split(/(<[^>]*>)/).map((p, i) => (i % 2 ? p : !!p)).join('|');
    const made = [];
    for (const line of now) {
      const k = was.findIndex((old) => shape(old) === shape(line));
      const copy = k < 0 ? null : lines[k].cloneNode(true);
      const write = copy && rewrite(copy, was[k], line, false);
      if (!write) return null;
      made.push([copy, write]);
    }
    return () => {
      made.forEach(([copy, write], i) => { write(); copy.setAttribute('dy', `${i * LINE_EM}em`); });
      el.replaceChildren(...made.map(([copy]) => copy));
      el.setAttribute('data-unformatted', to);
    };
  };
  /* A title's lines broken where they are wider than `room` px at `size` px: the twin of the
     server's viz.measure.wrap (tests/test_head_titles.py gives both the same titles), for the
     part of the head view's title that names the head, which the server wraps on a phone. */
  const WIDE = '\u3000-\u9fff\uff00-\uffef';  /* a line may break at each of these */
  const WORDS = new RegExp(`<[^>]+>|[${WIDE}]|[^<\\s·—${WIDE}]+[\\s·—]*|[\\s·—]+`, 'g');
  /* East Asian wide and fullwidth characters (Python's unicodedata W and F, in the blocks a
     title meets): a full em */
  const FULL = new RegExp(`[${['\u1100-\u115f', '\u2e80-\u303e', '\u3041-\u33ff', '\u3400-\u4dbf',
    '\u4e00-\u9fff', '\ua000-\ua4cf', '\uac00-\ud7a3', '\uf900-\ufaff', '\ufe30-\ufe4f',
    '\uff00-\uff60', '\uffe0-\uffe6', '\u{1f300}-\u{1f64f}', '\u{1f900}-\u{1f9ff}',
    '\u{20000}-\u{3fffd}'].join('')}]`, 'u');
  const em = (ch) => {  /* one character's width in ems, as viz.measure._em */
    if (FULL.test(ch)) return 1.0;
    if ((ch !== ch.toLowerCase() && ch === ch.toUpperCase()) || /\p{Nd}/u.test(ch)) return 0.7;
    return " ·.,:;|il'".includes(ch) ? 0.4 : 0.62;
  };
  ta.wrapTitle = (text, room, size) => {
    const out = [];
    for (const line of String(text ?? '').split(/<br\s*\/?>/i)) {
      const low = line.toLowerCase(), sup = low.startsWith('<sup>') && low.endsWith('</sup>');
      const body = sup ? line.slice(5, -6) : line, scale = sup ? 0.7 : 1.0;
      const pieces = [];
      let current = '', width = 0.0, inner = false;
      for (const word of body.match(WORDS) || []) {
        const tag = word.toLowerCase();
        let now = tag === '<sup>' ? true : tag === '</sup>' ? false : inner;
        const px = word.startsWith('<') ? 0.0
          : [...decode(word)].reduce((sum, ch) => sum + em(ch), 0) * size;
        if (current && width + px * scale * (now ? 0.7 : 1.0) > room) {
          pieces.push(current.trimEnd());
          now = tag === '<sup>';  /* the new line's own tags */
          current = word;
          width = px * scale * (now ? 0.7 : 1.0);
        } else {
          current += word;
          width += px * scale * (now ? 0.7 : 1.0);
        }
        inner = now;
      }
      pieces.push(current.trimEnd());
      for (const piece of pieces) if (piece) out.push(sup ? `<sup>${piece}</sup>` : piece);
    }
    return out.join('<br>');
  };
  /* A head's title as the server would draw it on this page: the part that names the head (the
     payload's title of that head) wrapped as the page's title is, then the rest of the title as
     drawn (notes, the slide's line: viz.screen.head_titles). Built from the head, never by
     replacing words in the title shown: a phone breaks that over lines, where the old head's
     words no longer stand together. null when the figure does not say its rest. */
  const titleOf = (meta, part) => {
    if (typeof meta.title_rest !== 'string' || typeof part !== 'string') return null;
    return (meta.title_wrap ? ta.wrapTitle(part, ...meta.title_wrap) : part) + meta.title_rest;
  };
  /* The title, the colour bar's labels and its title in place: all of them, or none (false). */
  const textsInPlace = (gd, before, title, cb) => {
    const was = before.colorbar || {};
    const el = gd.querySelector('.gtitle'), drawn = gd._fullLayout.title?.text;
    const writes = [rewrite(el, drawn, title) || relines(el, drawn, title)];
    if (cb.ticktext !== was.ticktext || cb.title?.text !== was.title?.text) {
      const labels = [...gd.querySelectorAll('.colorbar .cbaxis text')];
      const old = was.tickmode === 'array' ? was.ticktext || [] : [];
      if (labels.length !== old.length || old.length !== (cb.ticktext || []).length) return false;
      labels.forEach((el, i) => writes.push(rewrite(el, old[i], cb.ticktext[i])));
      writes.push(rewrite(gd.querySelector('.colorbar .cbtitle text'), was.title?.text,
        cb.title?.text));
    }
    if (writes.some((write) => !write)) return false;
    writes.forEach((write) => write());
    return true;
  };

  /* Another head of the same text changes the heatmap's cells, the title, and where the head's
     colour range differs (scale "auto" or "this head's max") the colour bar's labels and title:
     only those are drawn again. A full Plotly.update also redraws both axes, and at 128 tokens
     their 256 tick labels were most of a switch (bench/bench_switch.py). The figure's data is
     changed first; the texts are written in place (textsInPlace) or, where they change shape,
     drawn by one Plotly update (which also brings Plotly's own copy of the trace up to date);
     then Plotly's own heatmap code computes and paints the cells (its calc, then its plot, as a
     full replot does). The figure stays whole: hover, the PNG/SVG downloads and any later redraw
     show the new head. False (nothing changed) when the figure is not one heatmap on one
     subplot: the caller updates it whole. ta.switchTexts says how the texts were drawn. */
  const redrawHead = async (gd, z, zmax, bar, ticks, title) => {
    const before = gd._fullData?.[0], module = before?._module;
    if (gd._fullData.length !== 1 || gd.data.length !== 1 || before.type !== 'heatmap') return false;
    if (typeof module?.calc !== 'function' || typeof module.plot !== 'function') return false;
    const plotinfo = gd._fullLayout?._plots?.[before.xaxis + before.yaxis];
    if (!plotinfo?.plot || !Array.isArray(gd.calcdata)) return false;
    const data = gd.data[0], cb = barOf(data.colorbar, zmax, bar, ticks);
    const recolour = before.zmax !== zmax || cb.title?.text !== before.colorbar?.title?.text
      || cb.ticktext !== before.colorbar?.ticktext;
    data.z = z;
    data.zmax = zmax;
    data.colorbar = cb;
    const server = gd.taServer?.colorbars;  /* what exports and the presented figure draw from */
    if (server?.[0]) server[0] = barOf(server[0], zmax, bar, ticks);
    if (textsInPlace(gd, before, title, cb)) {
      ta.switchTexts = 'in place';
      gd.layout.title.text = gd._fullLayout.title.text = title;
      keep(before, {z, zmax}, cb);  /* Plotly's copy of the trace, as an update makes it */
    } else if (recolour) {
      /* The colour bar is drawn from the trace of the figure's cell data (Plotly's calcdata),
         which is the one before this switch until the cells are computed below: it is given
         the new range, ticks and title first, so one update draws bar and title together. */
      ta.switchTexts = 'plotly';
      keep(before, {zmax}, cb);
      await window.Plotly.update(gd, {'colorbar.title.text': [cb.title?.text]},
        {'title.text': title}, [0]);  /* (an update of the ticks' arrays would compute it all) */
    } else {
      ta.switchTexts = 'plotly';
      await window.Plotly.relayout(gd, {'title.text': title});  /* and the trace's defaults */
    }
    const trace = gd._fullData[0];
    const cells = module.calc(gd, trace);  /* what Plots.doCalcdata does for one trace */
    cells[0].t = cells[0].t || {};
    cells[0].trace = trace;
    gd.calcdata[0] = cells;
    gd._hmpixcount = 0;  /* the heatmap's mean colour, counted afresh as a replot does */
    gd._hmlumcount = 0;
    module.plot(gd, plotinfo, [cells], plotinfo.plot.select('.heatmaplayer'));
    return true;
  };
  /* Plotly's copy of the trace given the new values and colour bar (its ticks and title). */
  const keep = (trace, values, cb) => {
    Object.assign(trace, values);
    Object.assign(trace.colorbar, {tickvals: cb.tickvals, ticktext: cb.ticktext});
    trace.colorbar.title = {...trace.colorbar.title, text: cb.title?.text};
  };
  /* A head's colour bar: its title ("auto": per head) and its ticks at fractions of its range. */
  const FRACTIONS = [0, 0.25, 0.5, 0.75, 1];
  const barOf = (cb, zmax, bar, ticks) => {
    const out = {...cb, title: {...cb?.title}};
    if (bar !== undefined) out.title.text = bar;
    if (ticks) Object.assign(out, {tickmode: 'array', ticktext: ticks,
      tickvals: FRACTIONS.map((f) => f * zmax)});
    return out;
  };
  ta.switchHead = async (layer, head, data) => {
    try {
      const gd = document.querySelector('#head-plot .js-plotly-plot'), fill = ta.fill;
      if (!fill || !gd || !window.Plotly || !gd.layout || !gd.layout.meta) return false;
      const d = data ? await fill.add(data) : fill.held ? await fill.get(fill.held) : null;
      /* A figure Gradio has just drawn without its numbers gets them first (fill.js); its
         drawing then re-applies the sliders (reswitch, below). */
      if (fill.pending(gd)) return true;
      const meta = gd.layout.meta;
      if (!d || meta.run !== d.run || !Array.isArray(meta.head)) return false;
      const L = Math.min(Math.max(Math.round(+layer) || 0, 0), d.layers - 1);
      const H = Math.min(Math.max(Math.round(+head) || 0, 0), d.heads - 1);
      if (meta.head[0] !== L || meta.head[1] !== H) {
        const text = titleOf(meta, d.titles[L]?.[H]);
        if (text === null) return false;
        meta.head = [L, H];
        if (meta.fill) meta.fill = {...meta.fill, z: [[L, H]]};
        const z = fill.z(d, [L, H], null), zmax = d.zmax[L][H];
        const bar = d.bars ? d.bars[L][H] : undefined;  /* "auto": per head */
        const ticks = d.ticks?.[L]?.[H];
        ta.switchDrew = await redrawHead(gd, z, zmax, bar, ticks, text) ? 'cells' : 'figure';
        if (ta.switchDrew === 'figure') {  /* (ta.switchDrew: for benches and tests) */
          const cb = barOf(gd.data[0]?.colorbar, zmax, bar, ticks);
          await window.Plotly.update(gd, {z: [z], zmax: [zmax], colorbar: [cb]},
            {'title.text': text}, [0]);
        }
        const save = gd._context && gd._context.toImageButtonOptions;  /* the download's name */
        if (save && save.filename) save.filename = save.filename.replace(/_L\d+H\d+$/, `_L${L}H${H}`);
      }
      ta.setViewLink({layer: L, head: H});
      return true;
    } catch (e) { return false; }
  };
  ta.switches.attention = ta.switchHead;

  /* A key or a drag on the layer or head slider draws the head from the slider's own input
     event, at once: Gradio's event for it (ta.gate, below) comes 4-12 ms later (measured,
     bench/bench_switch.py) and then finds that head shown, so it draws nothing and asks
     nothing. Where the browser cannot draw the head, the gate asks the server as before. */
  ta.directSwitch = true;
  document.addEventListener('input', (e) => {
    const range = e.target;
    if (!ta.directSwitch || ta.tab !== 'attention' || range?.type !== 'range') return;
    const box = range.closest('#layer, #head');
    const other = box && document.querySelector(
      `#${box.id === 'head' ? 'layer' : 'head'} input[type=range]`);
    if (!other) return;
    if (box.id === 'head') ta.switchHead(other.value, range.value);
    else ta.switchHead(range.value, other.value);
  }, true);

  /* After the server draws the head view (a new run, or a head the browser could not draw), the
     sliders' head is shown: a head chosen while the server was drawing an older one stays. */
  const slider = (id) => document.querySelector(`#${id} input[type=number]`)?.value;
  const reswitch = () => {
    const layer = slider('layer'), head = slider('head');
    if (ta.tab === 'attention' && layer !== undefined && head !== undefined) {
      ta.switchHead(layer, head);
    }
  };
  ta.drawHooks.push((gd) => { if (gd.closest('#head-plot')) reswitch(); });
  /* The run's data arrives (#head-data): decoded at once, so the figures that come with it can
     be filled; whichever of the two lands last re-applies the sliders. */
  ta.keepData = (data) => { ta.fill?.add(data).then(reswitch); };

  /* A layer or head change: the visible tab redraws what it can in the browser; the server is
     asked only when that tab has an output it must draw (the field's gate box then changes,
     and its change event redraws from the cached trace). plan: {field, server: [tab ids],
     browser: {tab id: [indexes of the arguments its switch takes]}}. */
  ta.gate = async (plan, ...args) => {
    const tab = ta.tab;
    let drawn = true;
    const take = plan.browser[tab];
    if (take && ta.switches[tab]) drawn = await ta.switches[tab](...take.map((i) => args[i]));
    return plan.server.includes(tab) || !drawn ? plan.field + '|' + Date.now() : undefined;
  };
})();
