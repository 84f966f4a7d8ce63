/* Transformer Anatomy's page code: the namespace `window.ta`, the page's id and
   language, the view in the address bar, and the small helpers events call by name.
   Loaded once in the page's <head> (ui/js/__init__.py); Gradio events call `ta.<name>(...)`. */
(() => {
  const ta = (window.ta = window.ta || {});

  /* ---- a stage that fails says so -------------------------------------------------------- */
  /* A page script that catches an error (so that one failing stage leaves the figure drawn and
     the page working) reports it here: in the console, and in ta.faults, which the browser tests
     read after drawing every tab (tests/test_e2e_browser.py). `quiet`: what a browser may refuse
     without any fault of ours (storage in a private window), a warning only. */
  ta.faults = ta.faults || [];
  ta.fault = (stage, error, quiet = false) => {
    ta.faults.push({stage, message: String(error && error.message || error)});
    (quiet ? console.warn : console.error)(`Transformer Anatomy: ${stage} failed:`, error);
  };

  /* ---- the page's id and language -------------------------------------------------------- */
  /* Every Python event ends with this page's id (its turn on the server, serve/turns.py),
     followed by "|fill:<id>" when the page fills figures from head switch data it holds. */
  ta.pageId = () => {
    if (!ta._page) {
      ta._page = window.crypto && crypto.randomUUID
        ? crypto.randomUUID() : String(Math.random()).slice(2);
    }
    return ta._page;
  };
  /* Every Python event's inputs end with [...selection, tab, language, page] (ui/events.py):
     the browser says which tab is visible and which page asks. */
  ta.stamp = (...args) => {
    const fill = ta.fill && ta.fill.ok() ? '|fill:' + ta.fill.held : '';
    args[args.length - 1] = ta.pageId() + fill + '|screen:' + ta.screen();
    args[args.length - 3] = ta.tab;
    return args;
  };
  /* The screen the server lays figures out for (viz/screen.py): the width the tabs give a
     figure (a drawn figure's own, else the tabs', which a figure's block fills), the window's
     size, and "xp" in presentation mode: only then are figures sent with their presented
     layout (present.js asks for it as presentation starts). */
  ta.screen = () => {
    const drawn = [...document.querySelectorAll('#tabs .js-plotly-plot')]
      .find((gd) => gd.offsetParent !== null && !gd.closest('[data-ta-shown]'));
    const tabs = document.getElementById('tabs');
    const width = drawn ? drawn.clientWidth : tabs ? tabs.clientWidth : window.innerWidth;
    const presenting = ta.present && ta.present.on ? 'xp' : '';
    return `${Math.round(width)}x${window.innerWidth}x${window.innerHeight}${presenting}`;
  };
  /* ... with the language the page settled on (the switch may not show it yet). */
  ta.stampLang = (...args) => {
    args = ta.stamp(...args);
    args[args.length - 2] = ta.lang();
    return args;
  };
  /* The view in the address, to open (its first input is the query string). */
  ta.stampLink = (...args) => {
    args = ta.stampLang(...args);
    const q = new URLSearchParams(location.search);
    for (const k of ['fig', 'deck', 'slide']) q.delete(k);  /* the server needs the view only */
    args[0] = q.toString() ? '?' + q.toString() : '';
    return args;
  };

  const KNOWN = {en: 'en', 'en-us': 'en', 'en-gb': 'en', zh: 'zh-CN', 'zh-cn': 'zh-CN',
                 'zh-hans': 'zh-CN'};
  /* ?lang=… (a link), else the last choice on this browser; null when neither names one. */
  ta.wantedLang = () => {
    let wanted = new URLSearchParams(location.search).get('lang');
    if (!wanted) {
      try { wanted = localStorage.getItem('ta-lang'); } catch (e) { wanted = null; }
    }
    const key = String(wanted || '').toLowerCase();
    return Object.prototype.hasOwnProperty.call(KNOWN, key) ? KNOWN[key] : null;
  };
  /* The language the page speaks: wanted, else the browser's own as Gradio chose it. */
  ta.lang = () => ta.wantedLang()
    || ((document.documentElement.lang || 'en').toLowerCase().startsWith('zh') ? 'zh-CN' : 'en');
  /* A word these scripts write, in the page's language: the English is its key in the one table
     of words the server reads too (ui/zh_CN.json); ui/js/__init__.py sends the entries
     these files name (each call's English, written as one quoted literal) as ta.WORDS. */
  ta.t = (english) => (ta.WORDS?.[ta.lang()] || {})[english] || english;

  /* ---- the visible tab ------------------------------------------------------------------- */
  ta.tab = 'tokens';
  /* A tab click: its id (with a time, so the box changes) only when it differs from the
     visible one (a tab reports a select as the page mounts: that must cost no round trip). */
  ta.pickTab = (id) => {
    /* Gradio reports a select of its first tab as it mounts the tabs. That is usually before a
       link is read, but at times after: then it is no switch (the link's answer selects the tab
       the link names), and taken as one it drew the first tab's views for nothing and made the
       answer's own select a switch back, which drew the link's tab again without what its
       action had found (3 of 36 loads of a presented circuit link on a busy machine). */
    const mounting = !ta._tabsMounted;
    ta._tabsMounted = true;
    if (mounting && ta.opening && id === (ta.tabs || [])[0]) return undefined;
    if (ta.tab === id) return undefined;
    ta.tab = id;
    setTimeout(() => ta.present?.choose(), 50);  /* a tab drawn before: nothing draws */
    return id + '|' + Date.now();
  };

  /* ---- figures that show the previous run ------------------------------------------------ */
  ta.markStale = () => {
    document.body.classList.add('ta-stale');
    return {__type__: 'update', visible: true};
  };
  ta.syncStale = () => {
    const s = document.querySelector('#stale');
    document.body.classList.toggle('ta-stale', !!s && s.offsetParent !== null);
  };
  /* After every run (a deep link's too): the stale marker, and the address follows the view. */
  ta.answered = () => {
    ta.syncStale();
    ta.opening = false;
    ta.followLink();
    ta.present?.choose();
  };

  /* ---- the view in the address bar ------------------------------------------------------- */
  /* Read by the page alone (presentation, its figure, a deck and its slide; the language). */
  const BROWSER_ONLY = (ta.BROWSER_ONLY = ['lang', 'present', 'fig', 'deck', 'slide']);
  /* As the page opens: presentation mode, the tab a link names, and — when the address holds
     a view — its text at once and the server asked to open the rest (#deeplink-go). */
  ta.openLink = (tabs, corpora = [], figureFields = {}) => {
    ta.tabs = tabs || ta.tabs || ['tokens'];
    ta.figureFields = figureFields;  /* tab -> figure -> the layer / head it reads (deck.js) */
    /* Presentation opens on a figure: the Attention tab's head view unless the link names a
       tab (or a corpus, measured on Heads). Written into the address, it opens as a link does. */
    const asked = new URLSearchParams(location.search);
    if (asked.get('present') === '1' && !asked.has('tab') && !asked.has('corpus')
        && ta.tabs.includes('attention')) {
      asked.set('tab', 'attention');
      history.replaceState(null, '', location.pathname + '?' + asked + location.hash);
    }
    const q = new URLSearchParams(location.search);
    /* the tab a link names, else Heads for a shipped corpus (ui.state.link_inputs agrees) */
    const corpus = corpora.includes(q.get('corpus')) && ta.tabs.includes('heads');
    ta.tab = ta.tabs.includes(q.get('tab')) ? q.get('tab') : corpus ? 'heads' : 'tokens';
    if (q.get('present') === '1') ta.startPresent?.(q.get('fig'));
    ta.watchLink();
    ta.ready = true;  /* the page's load script has run */
    setTimeout(ta.warmPlotly, 0);
    if (![...q.keys()].filter((k) => !BROWSER_ONLY.includes(k)).length) {
      return [undefined, undefined];
    }
    ta.opening = true;  /* the address holds the view until the server has opened it */
    setTimeout(() => document.querySelector('#deeplink-go')?.click(), 0);
    return [q.get('text') ?? undefined, ta.t('⏳ Opening the linked view…')];
  };
  /* Gradio fetches and runs its Plotly chunk (4.6 MB of JavaScript) only when a figure first
     arrives: a new student's first figure waited ~0.75 s more for it. The page's HTML names it
     for the browser to fetch and compile beside Gradio's own files (serve/static.py); imported
     as soon as the page has opened (ta.plotlyChunk: its file name), it runs then, and Gradio's
     own import of the same address later finds it ready. */
  ta.warmPlotly = () => {
    const index = document.querySelector('script[type="module"][src*="/assets/index-"]');
    if (!ta.plotlyChunk || !index || ta._plotly) return ta._plotly;
    ta._plotly = import(new URL(ta.plotlyChunk, index.src).href).catch(() => null);
    return ta._plotly;
  };
  /* The status line's "Link to this view" names the view on screen (the server writes it with
     every answer; the head switch updates it in the browser). The address bar follows it:
     a new text or model is a new history entry (Back returns to the previous text), anything
     else replaces the current one. Reload therefore reopens exactly the view on screen. */
  /* Presentation mode stays in the address; the language is the link's own (a Chinese page's
     link names it; an English one needs none: the choice is also remembered on the browser). */
  const KEEP = ['present', 'fig', 'deck', 'slide'];
  /* The status line's "Link to this view", which the server writes with every answer. */
  ta.viewLink = () => document.querySelector('#status a[href^="?"]');
  /* A switch drawn in the browser names its view in that link: {layer, head} or {step}. */
  ta.setViewLink = (params) => {
    const link = ta.viewLink();
    if (!link) return;
    const q = new URLSearchParams(link.getAttribute('href').slice(1));
    for (const [key, value] of Object.entries(params)) q.set(key, value);
    link.setAttribute('href', '?' + q.toString());  /* the address follows (ta.watchLink) */
  };
  const same = (a, b, keys) => keys.every((k) => (a.get(k) || '') === (b.get(k) || ''));
  ta.followLink = () => {
    const link = ta.viewLink();
    if (!link || ta.opening || link.getAttribute('href') === ta._seen) return;
    ta._seen = link.getAttribute('href');
    const next = new URLSearchParams(link.getAttribute('href').slice(1));
    const now = new URLSearchParams(location.search);
    for (const k of KEEP) if (now.has(k) && !next.has(k)) next.set(k, now.get(k));
    if (next.toString() === now.toString()) return;
    const url = location.pathname + '?' + next.toString() + location.hash;
    const opened = [...now.keys()].some((k) => !BROWSER_ONLY.includes(k));
    if (opened && !same(now, next, ['text', 'model'])) history.pushState(null, '', url);
    else history.replaceState(null, '', url);
  };
  /* A parameter the page alone reads (the presented figure, the deck's slide): in the address
     at once (replacing the entry), and kept there as the view changes (KEEP). */
  ta.setLinkParam = (key, value) => {
    const q = new URLSearchParams(location.search);
    if (value === null || value === undefined || value === '') q.delete(key);
    else q.set(key, value);
    history.replaceState(null, '', location.pathname + (q.toString() ? '?' + q : '') + location.hash);
  };
  ta.watchLink = () => {
    if (ta._watching) return;
    const status = document.querySelector('#status');
    if (!status) { setTimeout(ta.watchLink, 100); return; }
    ta._watching = true;
    ta._seen = ta.viewLink()?.getAttribute('href');  /* the first view */
    /* After the frame, and once for a burst of changes: a head switch's frame stays its own. */
    let pending = 0;
    const later = () => {
      clearTimeout(pending);
      pending = setTimeout(ta.followLink, 150);
    };
    new MutationObserver(later).observe(status, {
      subtree: true, childList: true, attributes: true, attributeFilter: ['href'],
    });
  };
  /* Plotly names each figure's gradients (the colour bars) and clip paths by the page's full
     address, fixed when the figure is first drawn, because the page has a <base> element. Once
     the address changes, those names point at another document: the browser fetches the whole
     page again for every reference and the colour bars go blank. So after every change of the
     address, every figure's references, and the address Plotly uses for its next draw, follow. */
  const REFERS = ['fill', 'stroke', 'clip-path', 'mask', 'filter'];
  const ATTRS = REFERS.map((a) => `[${a}*="url("]`).join(',') + ',[style*="url("]';
  ta.rebase = (before) => {
    const now = location.href.split('#')[0];
    if (!before || before === now) return;
    const swap = (text) => text.split(before + '#').join(now + '#');
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      if (gd._context && gd._context._baseUrl) gd._context._baseUrl = now;
      for (const el of gd.querySelectorAll(ATTRS)) {
        for (const name of [...REFERS, 'style']) {
          const value = el.getAttribute(name);
          if (value && value.includes(before + '#')) el.setAttribute(name, swap(value));
        }
      }
    }
  };
  for (const method of ['pushState', 'replaceState']) {
    const change = history[method].bind(history);
    history[method] = (...args) => {
      const before = location.href.split('#')[0];
      const result = change(...args);
      ta.rebase(before);
      return result;
    };
  }
  /* Back or Forward: open the view that entry names, as a link opens (its text is put in the
     box at once by ta.openLink; the server never writes the box, so a late answer cannot
     replace what the user types meanwhile). */
  window.addEventListener('popstate', () => location.reload());

  /* ---- Enter runs -------------------------------------------------------------------------
     In the text boxes, Enter runs and Shift+Enter adds a line (Gradio's own multi-line box does
     the opposite). An input method's Enter (choosing Chinese characters) stays its own. Caught
     before Gradio's listeners on the box. */
  const RUN_BOXES = '#text textarea, #target textarea, #second textarea';
  const onEnter = (e) => {
    if (e.key !== 'Enter' || e.isComposing || e.keyCode === 229) return;
    if (!(e.target instanceof Element) || !e.target.matches(RUN_BOXES)) return;
    e.stopPropagation();  /* Gradio's own handler never sees it */
    if (e.shiftKey) return;  /* the browser adds the line */
    e.preventDefault();
    if (e.type === 'keydown') document.querySelector('#run')?.click();
  };
  document.addEventListener('keydown', onEnter, true);
  document.addEventListener('keypress', onEnter, true);

})();
