/* Transformer Anatomy's page code: Gradio's own words in the page's language.

   Gradio's frontend writes some words as fixed English whatever its locale: labels (an icon
   button's "Fullscreen" and "Copy table data", a slider's "number input for Layer", a table's
   "Open cell menu": aria-label, title, placeholder or alt) and its status line's "processing |"
   and "queue: 3/5 |". ui/zh_CN_gradio.json says them in Chinese; they reach the page as words
   of Gradio's dictionaries whose keys start with "gradio-" (ui/i18n.py). While the page is
   Chinese, each is said in Chinese as Gradio writes it (one MutationObserver, connected only
   then); back in English, Gradio's English returns. A word with one "{…}" is a pattern: the rest
   is Gradio's (a component's label, already in the page's language; a queue's place). Text is
   changed only in Gradio's status lines: elsewhere a page's text is its own. */
(() => {
  const ta = (window.ta = window.ta || {});
  const ATTRS = ['aria-label', 'title', 'placeholder', 'alt'];
  const STATUS = '[data-testid=status-tracker]';
  const SVG = 'http://www.w3.org/2000/svg';
  const escape = (s) => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
  let words = null, exact = {}, patterns = [], observer = null;

  /* Each label, in English and in Chinese, to its key; patterns as regular expressions. */
  const learn = () => {
    const all = window.gradio_config?.i18n_translations;
    if (!all?.en) return false;
    words = all;
    for (const lang of ['en', 'zh-CN']) {
      for (const [k, said] of Object.entries(all[lang] || {})) {
        if (!k.startsWith('gradio-')) continue;
        const slot = /\{\w+\}/.exec(said);
        if (!slot) { exact[said] = k; continue; }
        const before = said.slice(0, slot.index), after = said.slice(slot.index + slot[0].length);
        patterns.push({k, slot: slot[0],
                       re: new RegExp('^' + escape(before) + '(.+)' + escape(after) + '$')});
      }
    }
    return true;
  };

  /* `text` in `lang` when it is one of Gradio's words (said in either language), else null. */
  const say = (text, lang) => {
    if (exact[text]) return words[lang]?.[exact[text]] ?? null;
    for (const {k, slot, re} of patterns) {
      const m = re.exec(text);
      if (m && words[lang]?.[k]) return words[lang][k].replace(slot, m[1]);
    }
    return null;
  };
  /* A text node of a status line: said again, its spacing kept. */
  const fixText = (node, lang) => {
    const text = node.nodeValue.trim(), said = text && say(text, lang);
    if (said && said !== text) node.nodeValue = node.nodeValue.replace(text, said);
  };
  const statusText = (root, lang) => {
    const lines = root.matches?.(STATUS) ? [root] : [];
    for (const line of [...lines, ...(root.querySelectorAll?.(STATUS) || [])]) {
      const walk = document.createTreeWalker(line, NodeFilter.SHOW_TEXT);
      for (let node = walk.nextNode(); node; node = walk.nextNode()) fixText(node, lang);
    }
  };
  const fix = (el, lang) => {
    for (const name of ATTRS) {
      const text = el.getAttribute(name);
      const said = text && say(text, lang);
      if (said && said !== text) el.setAttribute(name, said);
    }
  };
  const sweep = (root, lang) => {
    if (root.nodeType === 3) {  /* a status line's new word */
      if (root.parentElement?.closest(STATUS)) fixText(root, lang);
      return;
    }
    if (root.nodeType !== 1 || root.namespaceURI === SVG) return;  /* figures: no labels */
    fix(root, lang);
    for (const el of root.querySelectorAll('[aria-label], [title], [placeholder], [alt]')) {
      fix(el, lang);
    }
    statusText(root.closest(STATUS) || root, lang);
  };

  /* The page's labels in <html lang>'s language (Gradio sets it on every locale change). */
  const follow = () => {
    if (!words && !learn()) return;
    const lang = (document.documentElement.lang || 'en').startsWith('zh') ? 'zh-CN' : 'en';
    sweep(document.body, lang);
    sayPlotly();
    retitle();
    if (lang === 'en') {
      observer?.disconnect();
      observer = null;
      return;
    }
    if (observer) return;
    observer = new MutationObserver((records) => {
      for (const r of records) {
        if (r.type === 'attributes') fix(r.target, 'zh-CN');
        else if (r.type === 'characterData') sweep(r.target, 'zh-CN');
        else for (const node of r.addedNodes) sweep(node, 'zh-CN');
      }
    });
    observer.observe(document.body, {subtree: true, childList: true, characterData: true,
                                     attributes: true, attributeFilter: ATTRS});
  };

  /* The figures' Plotly toolbar ("Zoom", "Reset axes": words with keys "plotly-…"), as a Plotly
     locale: Plotly's default config for every figure drawn from now on says the page's language
     (Plotly.setPlotConfig, as soon as Gradio has loaded Plotly); a figure drawn before the page
     changed language has its toolbar renamed in place (retitle). */
  let plotLocale = null;
  const toolbarWords = () => {
    if (plotLocale) return plotLocale;
    const all = window.gradio_config?.i18n_translations || {}, dictionary = {};
    for (const [k, english] of Object.entries(all.en || {})) {
      if (k.startsWith('plotly-') && all['zh-CN']?.[k]) dictionary[english] = all['zh-CN'][k];
    }
    return (plotLocale = {'zh-CN': {dictionary}});
  };
  const plotLang = () => (
    (document.documentElement.lang || '').startsWith('zh') ? 'zh-CN' : 'en-US');
  const sayPlotly = () => {
    const lang = plotLang();
    if (lang === 'en-US' && !plotLocale) return;  /* English, as Plotly is */
    ta.withPlotly((P) => P.setPlotConfig({locale: lang, locales: toolbarWords()}));
  };
  const retitle = () => {
    const lang = plotLang(), zh = toolbarWords()['zh-CN'].dictionary, en = {};
    for (const [english, chinese] of Object.entries(zh)) en[chinese] = english;
    for (const gd of document.querySelectorAll('.js-plotly-plot')) {
      if (gd._context) Object.assign(gd._context, {locale: lang, locales: plotLocale});
      for (const button of gd.querySelectorAll('.modebar-btn[data-title]')) {
        const title = button.getAttribute('data-title');
        const said = (lang === 'zh-CN' ? zh : en)[title];
        if (said) button.setAttribute('data-title', said);
      }
    }
  };

  /* As the page opens (ta.loadLocale): now, and whenever the language changes. */
  ta.sayGradio = () => {
    follow();
    if (ta._gradioWords) return;
    ta._gradioWords = new MutationObserver(follow);
    ta._gradioWords.observe(document.documentElement, {attributes: true,
                                                       attributeFilter: ['lang']});
  };
})();
