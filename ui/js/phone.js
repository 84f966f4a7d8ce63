/* Transformer Anatomy's page code for small screens: the head view's step buttons, and a table
   wider than its box says so. Gradio's tables scroll
   sideways inside their own box (.virtual-table-viewport); on a phone the columns past the
   box's edge (the Output tab's ✓/✗, the Model tab's share) were there but nothing showed it.
   A box with more columns than it shows gets data-ta-swipe on its block, whose words
   assets/app.css writes above the table on a narrow screen ("← swipe for more columns →"). */
(() => {
  const ta = (window.ta = window.ta || {});

  ta.markSwipes = () => {
    const words = ta.t('← swipe sideways for more columns →');
    for (const box of document.querySelectorAll('#tabs .virtual-table-viewport')) {
      const block = box.closest('.block');
      if (!block || box.offsetParent === null) continue;  /* its tab hidden: measured when shown */
      const wider = box.scrollWidth > box.clientWidth + 2;
      if (wider && block.dataset.taSwipe !== words) block.dataset.taSwipe = words;
      else if (!wider && block.dataset.taSwipe) delete block.dataset.taSwipe;
    }
  };

  /* A step of one of the page's sliders (#layer, #head, #step) through its input and change
     events, as a drag of it would be: the head view's own layer and head buttons
     (ui/tabs/attention.py, on a phone) and presentation's keys (present.js) take this one. */
  ta.stepSlider = (field, delta) => {
    const range = document.querySelector(`#${field} input[type=range]`);
    if (!range) return;
    const v = Math.min(Math.max(+range.value + delta, +range.min || 0), +range.max);
    if (v === +range.value) return;
    range.value = v;
    range.dispatchEvent(new Event('input', {bubbles: true}));
    range.dispatchEvent(new Event('change', {bubbles: true}));
  };

  /* Tables are drawn when their tab is first shown, redrawn on every run, and sized by the
     window: checked on the frame after any change to the page and after a resize. */
  let queued = false;
  const soon = () => {
    if (queued) return;
    queued = true;
    requestAnimationFrame(() => { queued = false; ta.markSwipes(); });
  };
  const watch = () => new MutationObserver(soon).observe(document.body, {
    subtree: true, childList: true, attributes: true, attributeFilter: ['style', 'class'],
  });
  addEventListener('resize', soon);
  /* Gradio's footer (its settings) lies outside the app, where assets/app.css does not reach
     (Gradio scopes it): its buttons get a finger's 32 px here. */
  const footer = document.createElement('style');
  footer.textContent = '@media (max-width: 640px) { footer button, footer a { min-height: 32px; } }';
  document.head.append(footer);
  if (document.body) watch(); else addEventListener('DOMContentLoaded', watch);
})();
