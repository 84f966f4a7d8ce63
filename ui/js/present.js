/* Transformer Anatomy's page code: presentation mode (?present=1, or the deck's Present button).

   One figure of the visible tab fills the screen, drawn for a projector with the layout the
   server made for this window (layout.meta.present: viz/screen.py, viz/present.py); a bar at
   the bottom names the view, says the keys, and steps. Nothing is moved in the page: the chosen figure's block is fixed over it (data-ta-shown), and Esc (or
   the bar's button) shows the whole page again — controls, captions, the other figures.

   Keys, outside the text boxes: ←/→ head, ↑/↓ layer (through the sliders, so the head switch
   draws in the browser as it does for a slider), PageDown/PageUp the next/previous slide of a
   deck (deck.js) or, without a deck, the tab's next/previous figure (on the Inside-a-layer tab:
   its next/previous step). */
(() => {
  const ta = (window.ta = window.ta || {});
  const BAR = 48;  /* px: the bar at the bottom */
  const P = (ta.present = {on: false, paused: false, block: null, want: null});

  /* ---- which figure ------------------------------------------------------------------------ */
  /* The figure blocks of the visible tab, in page order (a figure's block: gr.Plot's element). */
  const figures = () => [...document.querySelectorAll(`#tab-${ta.tab} .js-plotly-plot`)]
    .map((gd) => gd.parentElement && gd.parentElement.closest('.block[id]'))
    .filter((b, i, all) => b && all.indexOf(b) === i && (b === P.block || b.offsetParent));
  const gdOf = (block) => block && block.querySelector('.js-plotly-plot');
  /* The figure a link or a slide names ("overview" = #overview-plot), else the tab's first. */
  P.choose = () => {
    if (!P.on) return;
    const all = figures();
    /* A tab without figures (tokens, tables) is presented whole, its text enlarged. */
    const panel = document.getElementById(`tab-${ta.tab}`);
    const wanted = all.find((b) => P.want && b.id === `${P.want}-plot`) || all[0]
      || (panel && panel.offsetParent ? panel : null);
    if (wanted !== P.block) show(wanted);
    bar();
  };
  const show = (block) => {
    const was = P.block;
    P.block = block;
    if (was) { was.removeAttribute('data-ta-shown'); redraw(gdOf(was)); }
    if (block) {
      block.setAttribute('data-ta-shown', block.querySelector('.js-plotly-plot') ? 'figure' : 'tab');
      redraw(gdOf(block));
    }
  };
  /* Draw a figure again as it should look now (presented or not), from what the server sent. */
  const redraw = (gd) => {
    if (!gd || !gd.taServer || !window.Plotly) return;
    const s = gd.taServer;
    const layout = {...s.layout, title: {...(s.layout.title || {}), text:
      gd.layout?.title?.text ?? s.layout.title?.text}, meta: gd.layout?.meta ?? s.layout.meta};
    const data = gd.data.map((trace, i) => ({...trace, ...(s.styles?.[i] || {}), colorbar: s.colorbars[i]}));
    const [d, l] = presentedNow(gd, data, layout) || [data, layout];
    window.Plotly.react(gd, d, l, ta.configOf(gd));
  };
  /* A figure the page draws itself (a step of Inside a layer switched in the browser): kept as
     the figure's own for the way back from presentation, and drawn presented where it is. */
  ta.drawOwn = (gd, data, layout) => {
    keep(gd, data, layout);
    const [d, l] = presentedNow(gd, data, layout) || [data, layout];
    return window.Plotly.react(gd, d, l, ta.configOf(gd));
  };
  /* What the server sent (or the page drew of its own), kept for the way back; a copy: Plotly
     writes into the layout it draws. */
  const keep = (gd, data, layout) => {
    gd.taServer = {layout: JSON.parse(JSON.stringify(layout)),
      colorbars: data.map((trace) => trace && trace.colorbar),
      /* the page's markers and names, which a room may grow (ta.restyled) */
      styles: data.map((trace) => trace && Object.fromEntries(['marker', 'textfont']
        .filter((key) => trace[key] !== undefined).map((key) => [key, trace[key]])))};
  };
  ta.figureStep = (delta) => {
    const all = figures();
    if (!all.length) return;
    const at = Math.max(0, all.indexOf(P.block));
    const next = all[(at + delta + all.length) % all.length];
    P.want = next.id.replace(/-plot$/, '');
    ta.setLinkParam?.('fig', P.want);
    P.choose();
  };

  /* ---- figures drawn for the room (the server's layout.meta.present) -------------------- */
  /* [data, layout] of a figure presented now, filling the room; null where it is not. The
     server laid the figure out for the window this page reported (viz/screen.py, viz/present.py:
     layout.meta.present); a figure drawn before presentation began has none (the server lays
     out for a projector only a presenting page's figures), and a window that has since changed
     size (F11, a projector plugged in) needs the new one's: the page asks, and draws what it
     has until the answer comes. */
  const presentedNow = (gd, data, layout) => {
    if (!P.on || P.paused || !P.block || !P.block.contains(gd)) return null;
    const laid = layout.meta && layout.meta.present;
    if (laid === null) return null;  /* a phone: drawn as on the page */
    if (!laid) { askLayout(40); return null; }
    const [w, h] = laid.window || [0, 0];  /* rounded down to 20 px by the server */
    if (Math.abs(window.innerWidth - w - 10) > 20 || Math.abs(window.innerHeight - h - 10) > 20) {
      askLayout();
    }
    return presented(data, layout, laid);
  };
  /* The visible tab drawn again for this window (the server reads its size and that the page
     presents from the stamp), once for each size in each presentation. */
  let asked = null, askedFor = '';
  const askLayout = (wait = 400) => {  /* a resize: once the window settles */
    const size = `${window.innerWidth}x${window.innerHeight}`;
    if (size === askedFor) return;
    clearTimeout(asked);
    asked = setTimeout(() => {
      askedFor = size;
      document.querySelector('#relang-go')?.click();
    }, wait);
  };

  /* The server's presented layout, with the title and colour bars' words drawn now (the head
     switch changes them in the browser). */
  const presented = (data, layout, laid) => {
    const big = JSON.parse(JSON.stringify(laid.layout));
    big.title = {...big.title, text: layout.title?.text ?? big.title?.text};
    big.meta = layout.meta;
    big.template = layout.template;  /* the page's: the server sends it once */
    big.taBig = true;
    return [ta.restyled(ta.withBars(data, laid.colorbars), laid.traces), big];
  };

  /* ---- the bar and the keys ---------------------------------------------------------------- */
  const number = (id) => document.querySelector(`#${id} input[type=range]`);
  const bar = () => {
    let el = document.getElementById('ta-bar');
    if (!P.on) { if (el) el.remove(); return; }
    if (!el) {
      el = document.createElement('div');
      el.id = 'ta-bar';
      el.innerHTML = '<span class="ta-bar-view"></span><span class="ta-bar-deck"></span>'
        + '<span class="ta-bar-keys"></span><button type="button" class="ta-bar-page"></button>';
      el.querySelector('.ta-bar-page').addEventListener('click', () => ta.pausePresent());
      document.body.appendChild(el);
    }
    document.body.classList.toggle('ta-paused', P.paused);
    const tab = document.querySelector('#tabs [role=tab][aria-selected=true]')?.textContent?.trim();
    const layer = number('layer'), head = number('head');
    const all = figures();
    const n = `${all.indexOf(P.block) + 1}/${all.length}`;
    const fig = all.length > 1 ? ` · ${ta.t('figure')} ${n}` : '';
    let where = layer && head
      ? ` · ${ta.t('layer')} ${layer.value} · ${ta.t('head')} ${head.value}` : '';
    const stepNow = number('step');
    if (ta.tab === 'layer' && stepNow) where += ` · ${ta.t('step')} ${stepNow.value}`;
    el.querySelector('.ta-bar-view').textContent = (tab || '') + fig + where;
    const keys = ta.t('←/→ head · ↑/↓ layer · PgDn/PgUp next/previous');
    el.querySelector('.ta-bar-keys').textContent = P.paused ? '' : keys;
    el.querySelector('.ta-bar-page').textContent =
      P.paused ? ta.t('Present (Esc)') : ta.t('Show the page (Esc)');
    ta.deckBar?.(el.querySelector('.ta-bar-deck'));
  };
  ta.presentBar = bar;
  /* A step of the layer, head or step slider (ta.stepSlider, phone.js: the head view's step
     buttons take the same one), then the bar says where the presentation is. */
  const step = (field, delta) => {
    ta.stepSlider(field, delta);
    setTimeout(bar, 0);
  };
  /* The Inside-a-layer tab has one figure: PageDown/PageUp go to its next/previous step (the
     step slider), up to the last card the server drew (its data-steps). */
  const stepLayer = (delta) => {
    const range = number('step');
    const cards = document.querySelector('#layer-cards .ta-steps[data-steps]');
    if (!range) return;
    const last = cards ? +cards.dataset.steps - 1 : +range.max;
    const v = Math.min(Math.max(+range.value + delta, 0), last, +range.max);
    if (v === +range.value) return;
    step('step', v - +range.value);
  };
  /* Keys typed into a text box are the box's. Any other control the presenter touched while
     the page showed (the language switch, a tab, a slider, the bar's button) keeps the focus
     after a click, and a radio button or a tab would take the arrows as its own; presenting,
     the page lies under the figure, so the keys are the presentation's wherever the focus is
     (and presentation takes the focus from such a control as it resumes: release). While the
     page shows, only Esc is the presentation's. */
  const TEXT = 'textarea, select, [contenteditable=true], '
    + 'input:not([type=radio]):not([type=checkbox]):not([type=button]):not([type=range])';
  const typing = (t) => t instanceof Element && t.closest(TEXT) !== null;
  const release = () => {
    const el = document.activeElement;
    if (el instanceof HTMLElement && el !== document.body && !typing(el)) el.blur();
  };
  document.addEventListener('keydown', (e) => {
    if (!P.on || e.altKey || e.ctrlKey || e.metaKey || typing(e.target)) return;
    if (e.key === 'Escape') { ta.pausePresent(); e.preventDefault(); return; }
    if (P.paused) return;
    const keys = {ArrowLeft: ['head', -1], ArrowRight: ['head', 1],
      ArrowUp: ['layer', 1], ArrowDown: ['layer', -1]};
    if (keys[e.key]) { e.preventDefault(); step(...keys[e.key]); return; }
    if (e.key === 'PageDown' || e.key === 'PageUp') {
      e.preventDefault();
      const delta = e.key === 'PageDown' ? 1 : -1;
      if (ta.deckStep && ta.deckStep(delta)) return;
      if (ta.tab === 'layer') stepLayer(delta); else ta.figureStep(delta);
    }
  });

  /* ---- on and off --------------------------------------------------------------------------- */
  ta.startPresent = (want) => {
    P.on = true; P.paused = false;
    release();
    if (want !== undefined) P.want = want;
    document.body.classList.add('ta-present');
    document.body.classList.remove('ta-paused');
    const block = P.block;
    P.block = null;
    if (block) block.removeAttribute('data-ta-shown');
    /* As a link opens, the tab appears when Gradio has mounted it: a few tries, then answers
       (ta.answered) and draws (ta.onDraw) choose again. */
    let tries = 0;
    const first = () => { P.choose(); if (!P.block && P.on && tries++ < 40) setTimeout(first, 150); };
    first();
  };
  ta.pausePresent = () => {
    if (!P.on) return;
    P.paused = !P.paused;
    if (!P.paused) release();
    document.body.classList.toggle('ta-paused', P.paused);
    redraw(gdOf(P.block));
    bar();
  };
  ta.stopPresent = () => {
    const block = P.block;
    P.on = false; P.block = null;
    askedFor = '';  /* figures drawn from now on come without a presented layout */
    document.body.classList.remove('ta-present', 'ta-paused');
    if (block) { block.removeAttribute('data-ta-shown'); redraw(gdOf(block)); }
    bar();
  };
  /* A figure Gradio drew is kept as the server sent it, and drawn presented where it is. */
  ta.drawHooks.push((gd) => {
    if (!gd.layout || gd.layout.taBig) return;
    keep(gd, gd.data, gd.layout);
    if (!P.on || P.paused || !P.block || !P.block.contains(gd)) return;
    const meta = gd.layout.meta || {};
    /* drawn before the page said its screen, or before it said it presents */
    if (!meta.laid_out || meta.present === undefined) askLayout(40);
    /* only a figure laid out for the room is drawn again (a phone's is drawn as it came: drawn
       again, it would come back here) */
    if (meta.present) redraw(gd);
  });
  /* A new figure, tab or head: the presented figure follows the visible tab. */
  ta.drawHooks.push(() => { if (P.on) P.choose(); });
  window.addEventListener('resize', () => { if (P.on && !P.paused) redraw(gdOf(P.block)); });
  document.addEventListener('input', (e) => {
    if (P.on && e.target instanceof Element && e.target.closest('#layer, #head, #step')) bar();
  });
})();
