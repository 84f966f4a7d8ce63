/* Transformer Anatomy's page code: the lecture deck.

   A deck is a list of views (each a "Link to this view" query and the figure presented), kept
   on this browser (localStorage "ta-deck") and written into one link: ?deck=<base64url JSON>
   &slide=<n>&present=1. Opening that link (or stepping: PageDown/PageUp, the bar's ◀ ▶) opens
   the slide's view as any link opens (#deeplink-go; its text through #deck-go, so the box is
   written by Gradio and no "typed" event fires), drawn in presentation mode (present.js).
   "Download" asks the server for one offline HTML file of every slide (ui/deck.py). */
(() => {
  const ta = (window.ta = window.ta || {});
  const MAX = 40, STORE = 'ta-deck';

  /* ---- the deck and its link ---------------------------------------------------------------- */
  const encode = (slides) => {
    const bytes = new TextEncoder().encode(JSON.stringify(slides.map((s) => [s.q, s.fig || ''])));
    let bin = '';
    for (const b of bytes) bin += String.fromCharCode(b);
    return btoa(bin).replace(/\+/g, '-').replace(/\//g, '_').replace(/=+$/, '');
  };
  const decode = (text) => {
    try {
      const bin = atob(String(text).replace(/-/g, '+').replace(/_/g, '/'));
      const bytes = Uint8Array.from(bin, (c) => c.charCodeAt(0));
      const list = JSON.parse(new TextDecoder().decode(bytes));
      if (!Array.isArray(list)) return null;
      return list.slice(0, MAX).filter((s) => Array.isArray(s) && typeof s[0] === 'string')
        .map((s) => ({q: s[0].replace(/^\?/, ''), fig: typeof s[1] === 'string' ? s[1] : ''}));
    } catch (e) { return null; }
  };
  const stored = () => {
    try { return decode(localStorage.getItem(STORE) || '') || []; } catch (e) { return []; }
  };
  const store = (slides) => {
    try { localStorage.setItem(STORE, encode(slides)); }
    catch (e) { ta.fault('keeping the deck in this browser', e, true); }
  };
  const D = (ta.deck = {slides: stored(), at: -1});

  /* The address of slide n of the deck: its view, the deck, the slide, presentation mode. */
  const address = (slides, n) => {
    const q = new URLSearchParams(slides[n].q);
    for (const k of ['deck', 'slide', 'present', 'fig']) q.delete(k);
    const lang = new URLSearchParams(location.search).get('lang');
    if (lang && !q.has('lang')) q.set('lang', lang);
    if (slides[n].fig) q.set('fig', slides[n].fig);
    q.set('deck', encode(slides)); q.set('slide', String(n + 1)); q.set('present', '1');
    return location.pathname + '?' + q.toString();
  };
  ta.deckLink = () => (D.slides.length ? location.origin + address(D.slides, 0) : '');

  /* A deck link opening: the address becomes the slide's view before the page reads it. */
  const opened = () => {
    const q = new URLSearchParams(location.search);
    if (!q.has('deck')) return;
    const slides = decode(q.get('deck'));
    if (!slides || !slides.length) return;
    const n = Math.min(Math.max((parseInt(q.get('slide'), 10) || 1) - 1, 0), slides.length - 1);
    D.shown = slides; D.at = n;
    history.replaceState(null, '', address(slides, n) + location.hash);
  };
  opened();

  /* ---- stepping ------------------------------------------------------------------------------ */
  ta.deckText = () => new URLSearchParams(location.search).get('text') ?? undefined;
  ta.deckStep = (delta) => {
    const slides = D.shown;
    if (!slides || D.at < 0) return false;
    const n = Math.min(Math.max(D.at + delta, 0), slides.length - 1);
    if (n === D.at) return true;
    D.at = n;
    history.replaceState(null, '', address(slides, n));
    const q = new URLSearchParams(slides[n].q);
    if (ta.tabs && ta.tabs.includes(q.get('tab'))) ta.tab = q.get('tab');
    if (ta.present) ta.present.want = slides[n].fig || null;
    ta.opening = true;
    document.querySelector('#deck-go')?.click();  /* the slide's text into the box */
    setTimeout(() => document.querySelector('#deeplink-go')?.click(), 80);
    ta.presentBar?.();
    return true;
  };
  /* The bar's part: ◀ n / N ▶ while a deck is shown. */
  ta.deckBar = (el) => {
    if (!el) return;
    if (!D.shown || D.at < 0) { el.textContent = ''; return; }
    if (!el.firstChild) {
      el.innerHTML = '<button type="button" data-step="-1">◀</button>'
        + '<span class="ta-deck-count"></span><button type="button" data-step="1">▶</button>';
      for (const b of el.querySelectorAll('button')) {
        b.addEventListener('click', () => ta.deckStep(+b.dataset.step));
      }
    }
    el.querySelector('.ta-deck-count').textContent = ` ${D.at + 1} / ${D.shown.length} `;
  };

  /* ---- editing: a small panel at the bottom left ---------------------------------------------- */
  const label = (slide) => {
    const q = new URLSearchParams(slide.q);
    const tab = q.get('tab') || 'tokens';
    const button = document.querySelector(`#tabs [role=tab][id$="-${tab}-button"]`)
      ?? [...document.querySelectorAll('#tabs [role=tab]')].find((b) => b.id.includes(tab));
    const name = button?.textContent?.trim() || tab;
    /* A layer and head only where the slide's figure shows one (the masks have neither). */
    const figs = (ta.figureFields || {})[tab] || {};
    const reads = figs[slide.fig || Object.keys(figs)[0]] || [];
    const where = (reads.includes('layer') ? ` · L${q.get('layer') ?? 0}` : '')
      + (reads.includes('head') ? ` H${q.get('head') ?? 0}` : '');
    const text = (q.get('text') || '').slice(0, 40);
    return `${name}${slide.fig ? ' (' + slide.fig + ')' : ''}${where} · ${q.get('model') || ''} · “${text}”`;
  };
  const panel = () => document.getElementById('ta-deck');
  const render = () => {
    const el = panel();
    const count = document.getElementById('ta-deck-open');
    if (count) {
      count.innerHTML = '▤ <span class="ta-deck-word"></span> (<span class="n"></span>)';
      count.querySelector('.ta-deck-word').textContent = ta.t('Lecture deck');
      count.querySelector('.n').textContent = D.slides.length;
      count.title = ta.t('Lecture deck');
    }
    if (!el || el.hidden) return;
    el.innerHTML = '';
    const h = document.createElement('strong');
    h.textContent = ta.t('Lecture deck');
    const close = button('✕', ta.t('Close'), () => { el.hidden = true; });
    close.className = 'ta-deck-close';
    el.append(h, close);
    const list = document.createElement('ol');
    D.slides.forEach((slide, i) => {
      const li = document.createElement('li');
      const text = document.createElement('span');
      text.textContent = label(slide);
      li.append(text,
        button('↑', ta.t('Move up'), () => move(i, -1), i === 0),
        button('↓', ta.t('Move down'), () => move(i, 1), i === D.slides.length - 1),
        button('✕', ta.t('Remove'), () => { D.slides.splice(i, 1); save(); }));
      list.append(li);
    });
    if (!D.slides.length) {
      const p = document.createElement('p');
      p.textContent = ta.t('No views yet: open a view, then "Add this view".');
      el.append(p);
    }
    el.append(list);
    const actions = document.createElement('div');
    actions.className = 'ta-deck-actions';
    const [adding, presenting, copying, downloading] = [ta.t('Add this view'),
      ta.t('Present the deck'), ta.t('Copy link'), ta.t('Download (offline HTML)')];
    actions.append(button(adding, adding, add, D.slides.length >= MAX),  /* text and title */
      button(presenting, presenting, () => { location.href = address(D.slides, 0); },
        !D.slides.length),
      button(copying, copying, copy, !D.slides.length),
      button(downloading, downloading, download, !D.slides.length));
    el.append(actions);
    const link = document.createElement('input');
    link.readOnly = true; link.value = ta.deckLink();
    link.setAttribute('aria-label', ta.t('The deck’s link'));
    link.className = 'ta-deck-link';
    el.append(link);
    const note = document.createElement('p');
    note.className = 'ta-deck-note';
    note.textContent = D.note || '';
    el.append(note);
  };
  const button = (text, title, onClick, disabled = false) => {
    const b = document.createElement('button');
    b.type = 'button'; b.textContent = text; b.title = title; b.disabled = !!disabled;
    b.setAttribute('aria-label', title);
    b.addEventListener('click', onClick);
    return b;
  };
  const save = () => { store(D.slides); D.note = ''; render(); };
  const move = (i, delta) => {
    const j = i + delta;
    if (j < 0 || j >= D.slides.length) return;
    [D.slides[i], D.slides[j]] = [D.slides[j], D.slides[i]];
    save();
  };
  /* The view on screen: the status line's link (which the head switch keeps current) and the
     figure presented (or the tab's first). */
  const add = () => {
    if (D.slides.length >= MAX) { D.note = ta.t('The deck holds 40 views.'); render(); return; }
    const href = ta.viewLink()?.getAttribute('href');
    if (!href) return;
    const q = new URLSearchParams(href.slice(1));
    q.delete('lang');
    const block = ta.present?.block;
    const fig = block && block.id ? block.id.replace(/-plot$/, '') : (ta.present?.want || '');
    D.slides.push({q: q.toString(), fig: block && block.id && block.id.startsWith('tab-') ? '' : fig});
    save();
  };
  const copy = async () => {
    try { await navigator.clipboard.writeText(ta.deckLink()); D.note = ta.t('Link copied'); } catch (e) {
      const input = panel()?.querySelector('.ta-deck-link');
      if (input) { input.select(); }
    }
    render();
  };
  /* The server makes the file (#deck-export; the deck goes as its first input, ta.deckArgs);
     the file arrives in #deck-file, whose link is then followed. */
  const download = () => {
    D.note = ta.t('Making the file…'); render();
    D.waiting = true;
    D.before = document.querySelector('#deck-file a[href]')?.getAttribute('href') || '';
    document.querySelector('#deck-export')?.click();
  };
  ta.deckArgs = (...args) => {
    args[0] = JSON.stringify((D.slides.length ? D.slides : D.shown || []).map((s) => [s.q, s.fig || '']));
    return ta.stampLang(...args);
  };
  /* After the answer: the file's link appears once Gradio has drawn the box (a few frames). */
  ta.deckSaved = (tries = 30) => {
    if (!D.waiting) return;
    const a = document.querySelector('#deck-file a[href]');
    if ((!a || a.getAttribute('href') === D.before) && tries > 0) {
      setTimeout(() => ta.deckSaved(tries - 1), 100);
      return;
    }
    D.waiting = false;
    D.note = '';
    if (a && a.getAttribute('href') !== D.before) a.click();  /* a new file, not the last one */
    render();
  };

  /* The deck's button sits in the page, at the end of the selection row (stack, layer, head),
     just above the tab strip: a floating one covered whatever scrolled under it (a figure's
     corner on a phone, a slider's maximum), and a row of its own pushed the tab strip down.
     Its panel is a dialog the user opened, fixed at the bottom right until closed. */
  const mount = () => {
    if (document.getElementById('ta-deck-open')) return;
    const row = document.getElementById('selection');
    if (!document.body || !row) { setTimeout(mount, 50); return; }
    const holder = document.createElement('div');
    holder.id = 'ta-deck-row';
    const open = document.createElement('button');
    open.id = 'ta-deck-open'; open.type = 'button';
    open.addEventListener('click', () => { const el = panel(); el.hidden = !el.hidden; render(); });
    holder.append(open);
    const el = document.createElement('div');
    el.id = 'ta-deck'; el.hidden = true; el.setAttribute('role', 'dialog');
    row.append(holder);
    document.body.append(el);
    render();
  };
  ta.deckRender = render;
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', mount);
  else mount();
})();
