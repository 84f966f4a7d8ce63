/* Transformer Anatomy's page code: Gradio's own labels in the page's language.

   Gradio's frontend writes some labels as fixed English whatever its locale: an icon button's
   "Fullscreen" and "Copy table data", a slider's "number input for Layer", a table's "Open cell
   menu" (as aria-label, title or placeholder). ui/zh_CN_gradio.json says them in Chinese; they
   reach the page as words of Gradio's dictionaries whose keys start with "gradio-" (ui/i18n.py).
   While the page is Chinese, every such label is said in Chinese as Gradio draws it (one
   MutationObserver, connected only then); back in English, Gradio's English returns. A word
   with "{label}" is a pattern whose rest is the component's own label (already in the page's
   language: Gradio translates it). */
(() => {
  const ta = (window.ta = window.ta || {});
  const ATTRS = ['aria-label', 'title', 'placeholder'];
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
        if (!said.includes('{label}')) { exact[said] = k; continue; }
        const [before, after] = said.split('{label}');
        patterns.push({k, re: new RegExp('^' + escape(before) + '(.+)' + escape(after) + '$')});
      }
    }
    return true;
  };

  /* `text` in `lang` when it is one of Gradio's labels (said in either language), else null. */
  const say = (text, lang) => {
    if (exact[text]) return words[lang]?.[exact[text]] ?? null;
    for (const {k, re} of patterns) {
      const m = re.exec(text);
      if (m && words[lang]?.[k]) return words[lang][k].replace('{label}', m[1]);
    }
    return null;
  };
  const fix = (el, lang) => {
    for (const name of ATTRS) {
      const text = el.getAttribute(name);
      const said = text && say(text, lang);
      if (said && said !== text) el.setAttribute(name, said);
    }
  };
  const sweep = (root, lang) => {
    if (root.nodeType !== 1 || root.namespaceURI === SVG) return;  /* figures: no labels */
    fix(root, lang);
    for (const el of root.querySelectorAll('[aria-label], [title], [placeholder]')) fix(el, lang);
  };

  /* The page's labels in <html lang>'s language (Gradio sets it on every locale change). */
  const follow = () => {
    if (!words && !learn()) return;
    const lang = (document.documentElement.lang || 'en').startsWith('zh') ? 'zh-CN' : 'en';
    sweep(document.body, lang);
    if (lang === 'en') {
      observer?.disconnect();
      observer = null;
      return;
    }
    if (observer) return;
    observer = new MutationObserver((records) => {
      for (const r of records) {
        if (r.type === 'attributes') fix(r.target, 'zh-CN');
        else for (const node of r.addedNodes) sweep(node, 'zh-CN');
      }
    });
    observer.observe(document.body, {subtree: true, childList: true, attributes: true,
                                     attributeFilter: ATTRS});
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
