/* Transformer Anatomy's page code: the page's language, English or Simplified Chinese, through
   Gradio's own i18n dictionaries, which hold the words of our table (ui/zh_CN.json, keys "ta-…")
   that the page asked for, our Chinese once as "zh" (ui.i18n.page_i18n), and Gradio's own
   missing words (ui/zh_CN_gradio.json). */
(() => {
  const ta = (window.ta = window.ta || {});

  /* A word of Gradio's dictionaries in `lang` (with svelte-i18n's fallback: base, then en:
     our Chinese is under "zh" alone). */
  const wordsOf = () => window.gradio_config?.i18n_translations || {};
  const pick = (words, lang, k) => (words[lang] || {})[k]
    || (words[lang.split('-')[0]] || {})[k] || (words.en || {})[k];

  /* The in-page switch: Gradio's changeLocale lives in its hashed "core" chunk, which the page
     has already loaded; importing the same URL returns that very module. Without it (a future
     Gradio renamed the chunk or the export), the footer's Settings → Language still works.
     tests/test_language_and_screens.py pins this against the installed Gradio. */
  ta.setLocale = async (lang) => {
    if (lang !== 'en' && lang !== 'zh-CN') return;
    /* Said first, in the address too (it names the language of a view the page followed):
       what Gradio redraws while the switch loads asks ta.lang() (sayNotes below). */
    try { localStorage.setItem('ta-lang', lang); }
    catch (e) { ta.fault('keeping the language in this browser', e, true); }
    const query = new URLSearchParams(location.search);
    if (query.has('lang') && query.get('lang') !== lang) {
      query.set('lang', lang);
      history.replaceState(history.state, '', `${location.pathname}?${query}${location.hash}`);
    }
    const core = performance.getEntriesByType('resource').map((r) => r.name)
      .find((u) => /\/assets\/core-[\w-]+\.js$/.test(u));
    if (!core) return;
    const mod = await import(core);
    if (typeof mod.changeLocale !== 'function') return;
    mod.changeLocale(lang);
    /* Gradio relabels a tab's button only once that tab has been opened: name the others here,
       from the same dictionaries (a tab that opens later gets the same words from Gradio). */
    await new Promise((done) => setTimeout(done, 50));
    ta._tabLang = lang;
    relabelTabs();
    watchTabs();
    ta.deckRender?.();  /* the page's own parts (deck panel, presentation bar) say it too */
    ta.presentBar?.();
    sayNotes();
  };

  /* A note shown before a switch (the figures show the previous run) kept the other language:
     Gradio draws it again after a switch with the words it had. It is written from the one
     table of words (its **bold** as the server's table writes it, <b>) whenever its words are
     not the page's; writing the words it already has changes nothing, so the observer settles. */
  const sayNotes = () => {
    const stale = document.querySelector('#stale');
    const line = stale?.querySelector('.md p') || stale?.querySelector('.md');
    if (!line) return;
    if (!stale.taWatched) {
      stale.taWatched = true;
      new MutationObserver(sayNotes).observe(stale, {
        subtree: true, childList: true, characterData: true,
      });
    }
    const said = ta.t('⚠️ The figures below show the previous run: press **Run** to update them.')
      .replace(/\*\*(.+?)\*\*/g, '<b>$1</b>');
    const plain = said.replace(/<\/?b>/g, '');
    if (line.textContent.trim() !== plain) line.innerHTML = said;
  };

  /* Every tab button in the page's language. Gradio redraws the strip (a resize, a tab
     chosen) with its own words for tabs not yet opened: the strip is relabelled whenever it
     changes (a change made here changes nothing the second time, so the observer settles).
     Only the tabs' own words (ta._tabKeys, from ui.i18n.wire_language): the table says "token"
     with the Tokens tab's Chinese too. */
  const relabelTabs = () => {
    const lang = ta._tabLang;
    if (!lang) return;
    const words = wordsOf(), keyOf = {};
    for (const loc in words) {
      for (const k of ta._tabKeys || []) if (words[loc][k]) keyOf[words[loc][k]] = k;
    }
    for (const button of document.querySelectorAll('.tab-wrapper button')) {
      for (const node of button.childNodes) {
        const k = node.nodeType === 3 && keyOf[node.nodeValue.trim()];
        const said = k && pick(words, lang, k);
        if (said && node.nodeValue !== said) node.nodeValue = said;
      }
    }
  };
  const watchTabs = () => {
    const strip = document.querySelector('#tabs .tab-wrapper');
    if (!strip || strip.taWatched) return;
    strip.taWatched = true;
    new MutationObserver(relabelTabs).observe(strip, {
      subtree: true, childList: true, characterData: true,
    });
  };

  /* As the page opens: the switch shows the locale in use. The first view came with the page,
     drawn in English: a page that opens in Chinese with no view in its address (a linked view
     is drawn in the page's language anyway) asks the server to draw it again (#relang-go). */
  ta.loadLocale = async (tabKeys = []) => {
    ta._tabKeys = tabKeys;
    ta.sayGradio();  /* Gradio's own fixed labels (ui/js/gradio_words.js) */
    ta.relabelHeaders();
    const wanted = ta.wantedLang();
    if (wanted && wanted !== document.documentElement.lang) await ta.setLocale(wanted);
    const lang = ta.lang();
    const keys = [...new URLSearchParams(location.search).keys()];
    const link = keys.some((k) => !(ta.BROWSER_ONLY || ['lang', 'present']).includes(k));
    if (lang !== 'en' && !link) setTimeout(() => document.querySelector('#relang-go')?.click(), 0);
    return lang;
  };

  /* Text nodes of `box` that `say` knows are written as it says them (in <html lang>'s words:
     Gradio sets it on every locale change). Setting a node to the words it already has changes
     nothing, so an observer's own writes end its loop. */
  const relabel = (box, say) => {
    const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT);
    for (let node = walk.nextNode(); node; node = walk.nextNode()) {
      const text = node.nodeValue.trim(), want = say(text);
      if (want && want !== text) node.nodeValue = node.nodeValue.replace(text, want);
    }
  };
  /* An examples table (Gradio's Dataset never translates its headers or choice names): text
     nodes whose words are one of `keys`' translations, in any language, are said in the page's. */
  ta.relabelExamples = (elemId, keys) => {
    const words = wordsOf(), keyOf = {};
    for (const loc in words) for (const k of keys) if (words[loc]?.[k]) keyOf[words[loc][k]] = k;
    const say = (text) => keyOf[text] && pick(words, document.documentElement.lang || 'en',
                                              keyOf[text]);
    const start = (tries) => {
      const box = document.getElementById(elemId);
      if (!box) return tries > 0 && setTimeout(() => start(tries - 1), 200);
      const again = () => relabel(box, say);
      again();
      new MutationObserver(again).observe(box, {subtree: true, childList: true,
                                                characterData: true});
      new MutationObserver(again).observe(document.documentElement,
                                          {attributes: true, attributeFilter: ['lang']});
    };
    start(50);
  };

  /* The tables drawn on demand (ablation, corpus, a model's steps …) show their empty value's
     headers, English in the page's config (ui.i18n.empty_table). Each of those headers is said
     from the table of words: a word of its own ("layer"), or a pattern with one field holding
     such a word ("entropy_mean" is "{measure}_mean" with "entropy", as lang.tr says it).
     Returns {header in either language: {en, 'zh-CN'}}: only the config's headers, so a Chinese
     word that several English words share ("Layer", "layer") goes back to the header's own. */
  const headerWords = () => {
    const words = wordsOf(), en = words.en || {}, zh = {...words.zh, ...words['zh-CN']};
    const said = {}, patterns = [];
    for (const k in en) {
      if (!k.startsWith('ta-') || !zh[k]) continue;
      const slots = en[k].match(/\{[^}]*\}/g) || [], slot = slots[0];
      if (!slots.length) said[en[k]] = zh[k];
      else if (slots.length === 1 && /^\{\w+\}$/.test(slot) && zh[k].includes(slot)) {
        patterns.push([en[k], zh[k], slot]);
      }
    }
    const inChinese = (header) => {
      if (header in said) return said[header];
      for (const [english, chinese, slot] of patterns) {
        const [before, after] = english.split(slot);
        const inner = header.slice(before.length, header.length - after.length);
        if (header.startsWith(before) && header.endsWith(after) && inner in said
            && header === before + inner + after) return chinese.replace(slot, said[inner]);
      }
      return null;
    };
    const both = {};
    for (const c of window.gradio_config?.components || []) {
      for (const header of (c.type === 'dataframe' && c.props?.value?.headers) || []) {
        const chinese = typeof header === 'string' && inChinese(header);
        if (!chinese || chinese === header) continue;
        both[header] = both[chinese] = {en: header, 'zh-CN': chinese};
      }
    }
    return both;
  };

  /* A header of a table in the tabs said in another language is said in <html lang>'s, as a
     tab opens and mounts its tables, when a table redraws, and after a switch (a drawn table's
     headers too, where they are such words). Only <thead>: a table's cells are data. */
  ta.relabelHeaders = () => {
    const tabs = document.getElementById('tabs'), both = headerWords();
    if (!tabs || ta._headersWatched || !Object.keys(both).length) return;
    ta._headersWatched = true;
    const again = () => {
      const lang = (document.documentElement.lang || 'en').startsWith('zh') ? 'zh-CN' : 'en';
      const say = (text) => both[text]?.[lang];
      for (const head of tabs.querySelectorAll('thead')) {
        relabel(head, say);
        for (const th of head.querySelectorAll('th[title]')) {
          const want = say(th.title);
          if (want && want !== th.title) th.title = want;
        }
      }
    };
    again();
    new MutationObserver(again).observe(tabs, {subtree: true, childList: true,
                                                characterData: true});
    new MutationObserver(again).observe(document.documentElement,
                                        {attributes: true, attributeFilter: ['lang']});
  };
})();
