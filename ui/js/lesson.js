/* Transformer Anatomy's page code: the Output tab opens where the lesson is. The step table marks
   the lesson's step with ▶ (the induction model's first step that can copy, the dates model's
   first digit: viz/output_facts.py) and the sentence above it carries that step's number
   (<span class="ta-lesson ta-lesson-n">: Gradio's sanitizer keeps classes, not data-). When a new table is drawn, or its tab is shown, the
   table scrolls inside itself — never the page — so that the row before ▶ is its first row in
   view. Gradio draws only the rows in view (a virtual table): the scroll is computed from the row
   height, not from the row, which may not exist yet. Once per table: a reader's own scrolling
   afterwards is left alone. */
(() => {
  const ta = (window.ta = window.ta || {});
  let done = '';  /* the table last scrolled to its lesson */

  ta.toLesson = () => {
    const mark = document.querySelector('#prediction .ta-lesson');
    const box = document.querySelector('#steps-table .virtual-table-viewport');
    if (!mark || !box || box.offsetParent === null) return;  /* not drawn, or its tab hidden */
    const row = box.querySelector('.virtual-body .virtual-row');
    const height = row?.getBoundingClientRect().height || 0;
    const step = Number(/ta-lesson-(\d+)/.exec(mark.className)?.[1]);
    const seen = `${step}|${document.querySelector('#prediction').textContent}`;
    if (!height || !(step >= 0) || seen === done) return;
    done = seen;
    box.scrollTop = Math.max(0, step - 1) * height;
  };

  /* Watch the page for the table (drawn when its tab is first shown) and its redraws. */
  let queued = false;
  const soon = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; ta.toLesson(); });
  };
  const watch = () => new MutationObserver(soon).observe(document.body, {
    subtree: true, childList: true, characterData: true,
  });
  if (document.body) watch(); else addEventListener('DOMContentLoaded', watch);
})();
