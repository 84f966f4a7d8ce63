/* Transformer Anatomy's page code: the Inside-a-layer tab's step switch, the browser's side (the
   server's side is ui/tabs/layer.py). With the tab the server sends every step's figure for the
   chosen token (#layer-data: {view, template, figures: [{data, layout}, …]}, StepFigures), each
   the figure the server draws for that step (its title, laid out for this page's screen, its
   meta naming the view and the step; the template, the same for every layout, sent once and
   put back where a layout says "shared"); a step change draws the chosen figure as it came and
   marks its card, with no request. It resolves
   false when it cannot (no data yet, or the figure or cards belong to another view): ta.gate then
   asks the server to draw the step. The status line's "Link to this view" (and with it the
   address bar) follows. */
(() => {
  const ta = (window.ta = window.ta || {});
  ta.switches = ta.switches || {};
  let lastSrc = null, lastData = null;
  const parsed = (src) => {
    if (src !== lastSrc) {
      lastSrc = src;
      try { lastData = src ? JSON.parse(src) : null; } catch (e) { lastData = null; }
    }
    return lastData;
  };
  const held = () => lastSrc;
  /* The figure's own layout and those in its meta (presented, slide) get the shared template. */
  const withTemplate = (node, template) => {
    if (!node || typeof node !== 'object') return;
    for (const [key, value] of Object.entries(node)) {
      if (key === 'template' && value === 'shared') node[key] = template;
      else withTemplate(value, template);
    }
  };

  ta.switchStep = async (step, src) => {
    try {
      const gd = document.querySelector('#layer-step-plot .js-plotly-plot');
      const cards = document.querySelector('#layer-cards .ta-steps[data-view]');
      const d = parsed(src ?? held());
      if (!d || !gd || !cards || !window.Plotly || !gd.layout || !gd.layout.meta) return false;
      const meta = gd.layout.meta;
      if (meta.step_view !== d.view || cards.dataset.view !== d.view) return false;
      const i = Math.min(Math.max(Math.round(+step) || 0, 0), d.figures.length - 1);
      /* The card first: in presentation mode the figure leaves room for it (present.js). */
      for (const card of cards.querySelectorAll('.ta-step')) {
        card.classList.toggle('ta-step-chosen', card.dataset.step === String(i));
      }
      const now = cards.querySelector('.ta-step-now');
      if (now) now.textContent = String(i);
      if (meta.step !== i) {
        const fig = structuredClone(d.figures[i]);  /* a copy: Plotly writes into what it draws */
        withTemplate(fig.layout, d.template);
        await ta.drawOwn(gd, fig.data, fig.layout);
      }
      ta.setViewLink({step: i});
      return true;
    } catch (e) { ta.fault('the step switch', e); return false; }
  };
  ta.switches.layer = ta.switchStep;

  /* After the server draws the step figure (a new token, layer or run), the slider's step is
     shown: a step chosen while the server was drawing stays. The payload (#layer-data, a hidden
     box) reaches the page through its change event; whichever of the two lands last switches. */
  const reswitch = () => {
    const step = document.querySelector('#step input[type=number]')?.value;
    const gd = document.querySelector('#layer-step-plot .js-plotly-plot');
    if (ta.tab === 'layer' && step !== undefined && gd?.layout?.meta
      && gd.layout.meta.step !== +step) ta.switchStep(step);
  };
  ta.drawHooks.push((gd) => { if (gd.closest('#layer-step-plot')) reswitch(); });
  ta.keepSteps = (src) => { parsed(src); reswitch(); };
})();
