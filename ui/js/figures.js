/* Transformer Anatomy's page code, part 3 of 4: what the page does with drawn figures —
   long titles wrap on a phone, an overview tile opens its head, and the head switch redraws the
   head view from the run's data with no request. Every hook runs on ta.onDraw (fill.js), the
   moment Gradio has drawn a figure: no polling. */
(() => {
  const ta = (window.ta = window.ta || {});
  ta.drawHooks = ta.drawHooks || [];

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
    const lines = [...gd.querySelectorAll('.gtitle tspan.line')];
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

  /* ---- a click on an overview tile selects that head -----------------------------------------
     gr.Plot has no click event: the tile's "layer,head,time" goes into a hidden gr.HTML
     (#overview-pick), whose change event selects the head on the server. */
  ta.tilePicker = (props) => { ta._tileProps = props; };
  ta.drawHooks.push((gd) => {
    if (gd.taPick || !gd.on || !gd.closest('#overview-plot')) return;
    gd.taPick = true;
    gd.on('plotly_click', (ev) => {
      const p = ev && ev.points && ev.points[0];
      if (!p || !ta._tileProps) return;
      const l = /^L(\d+)/.exec(String(p.y)), h = /^H(\d+)/.exec(String(p.x));
      if (l && h) ta._tileProps.value = `${l[1]},${h[1]},${Date.now()}`;
    });
  });

  /* ---- the head switch (the browser side; the server side is ui/tabs/attention.py) -----------
     Draws another head into the head view from the run's data (decoded once by ta.fill): no
     request. Resolves true when the figure shows that head, false when it cannot (no data yet,
     the figure is from another run, or no DecompressionStream): the server draws it then. The
     status line's "Link to this view" (and with it the address bar) follows the switch. */
  ta.switches = ta.switches || {};
  ta.switchHead = async (layer, head, data) => {
    try {
      const gd = document.querySelector('#head-plot .js-plotly-plot'), fill = ta.fill;
      if (!fill || !gd || !window.Plotly || !gd.layout || !gd.layout.meta) return false;
      const d = data ? await fill.add(data) : fill.held ? await fill.get(fill.held) : null;
      const meta = gd.layout.meta;
      if (!d || meta.run !== d.run || !Array.isArray(meta.head)) return false;
      const L = Math.min(Math.max(Math.round(+layer) || 0, 0), d.layers - 1);
      const H = Math.min(Math.max(Math.round(+head) || 0, 0), d.heads - 1);
      if (meta.head[0] !== L || meta.head[1] !== H) {
        const was = d.titles[meta.head[0]]?.[meta.head[1]];
        const shown = String(gd.layout.title.text ?? '');  /* maybe wrapped for a phone */
        const title = shown === gd.taWrapped ? gd.taTitle : shown;
        meta.head = [L, H];
        if (meta.fill) meta.fill = {...meta.fill, z: [[L, H]]};
        await window.Plotly.update(gd, {z: [fill.z(d, [L, H], null)], zmax: [d.zmax[L][H]]},
          {'title.text': was ? title.replace(was, d.titles[L][H]) : d.titles[L][H]}, [0]);
        const save = gd._context && gd._context.toImageButtonOptions;  /* the download's name */
        if (save && save.filename) save.filename = save.filename.replace(/_L\d+H\d+$/, `_L${L}H${H}`);
      }
      const link = document.querySelector('#status a[href^="?"]');
      if (link) {
        const q = new URLSearchParams(link.getAttribute('href').slice(1));
        q.set('layer', L); q.set('head', H);
        link.setAttribute('href', '?' + q.toString());
      }
      return true;
    } catch (e) { return false; }
  };
  ta.switches.attention = ta.switchHead;

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
