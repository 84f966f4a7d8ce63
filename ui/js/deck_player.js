/* Transformer Anatomy's lecture deck, offline: the player inside deck_<date>.html (ui/deck.py
   writes this file into it, with Plotly and slides.js). Each slide's figure is drawn when it is
   shown, sized to the window as presentation mode draws it (ta.bigLayout); PageDown/PageUp,
   the arrow keys, space, Home/End and the buttons step; the slide's number is kept in the
   address's #fragment, so a reload stays on it. */
(() => {
  const figures = JSON.parse(document.getElementById('figures').textContent);
  const n = figures.length;
  let at = Math.min(Math.max((parseInt(location.hash.slice(1), 10) || 1) - 1, 0), n - 1);
  const draw = (i) => {
    const fig = figures[i], el = document.getElementById('f' + i);
    if (!fig || !el) return;
    const font = Math.max(18, Math.round(window.innerHeight / 54));
    /* a slide with text under its figure (a layer's step and its card) leaves room for it */
    const below = el.parentElement?.querySelector('.html')?.offsetHeight || 0;
    const height = window.innerHeight - 48 - 40 - (below ? below + 8 : 0), width = window.innerWidth - 32;
    const [data, layout] = ta.bigLayout(fig.data, fig.layout, width, height, font);
    Plotly.react(el, data, layout, {displaylogo: false, responsive: false})
      .then(() => ta.colorbarBeside(el));
  };
  const show = (i) => {
    at = Math.min(Math.max(i, 0), n - 1);
    document.querySelectorAll('.slide').forEach((s, j) => s.classList.toggle('on', j === at));
    document.getElementById('count').textContent = (at + 1) + ' / ' + n;
    history.replaceState(null, '', '#' + (at + 1));
    draw(at);
  };
  document.addEventListener('keydown', (e) => {
    const next = ['PageDown', 'ArrowRight', 'ArrowDown', ' '].includes(e.key);
    const prev = ['PageUp', 'ArrowLeft', 'ArrowUp'].includes(e.key);
    if (next || prev) { e.preventDefault(); show(at + (next ? 1 : -1)); }
    if (e.key === 'Home') show(0);
    if (e.key === 'End') show(n - 1);
  });
  document.getElementById('next').onclick = () => show(at + 1);
  document.getElementById('prev').onclick = () => show(at - 1);
  window.addEventListener('resize', () => draw(at));
  show(at);
})();
